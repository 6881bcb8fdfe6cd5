"""A cohort of Keras clients trained side by side (keras_lockstep) against the
same clients trained one by one: DCN (embeddings, cross and dense layers) on a
small CTR file whose clients hold 1 to 5 batches an epoch, FedProx around client
Adam (a scalar step count and per-weight moments), and NeuMF (BPR, two negatives
a positive) on a small ranking and the dual encoder (the global softmax over every
item) on a small MovieLens, FedProx around client SGD; two rounds each."""

import collections
import re

import numpy as np
import pytest
import tensorflow as tf

from tasks import ctr
from tasks import next_item
from tasks import ranking
from tests import fixtures
from tff_rec import composer
from tff_rec import losses
from tff_rec import registry
from tff_rec.data import sliced
from tff_rec.runtime import inprocess
from tff_rec.training import keras_lockstep
from tff_rec.training import loop

COUNTS = (3, 17, 6, 10, 4, 9, 13)  # training examples per client
BATCH, COHORT = 4, 5


def _task(tmp_path, model='dcn', user_items_dir=None, ml100k_dir=None):
  if model == 'dual_encoder':  # 30 users, 40 items; clients of 1 to 6 batches
    return next_item.Task(next_item.Config(data_dir=str(ml100k_dir), batch_size=BATCH,
                                           drop_remainder=False, seed=3))
  if model == 'neumf':  # 8 users of 10 positives, batches of 4
    return ranking.Task(ranking.make_config(data_dir=str(user_items_dir), batch_size=BATCH,
                                            local_epochs=2, num_negatives=2, factors=4))
  path = fixtures.write_ctr_file(tmp_path / 'clicks.csv', COUNTS)
  return ctr.Task(ctr.make_config(
      data_dir=str(path), model='dcn', client_column='user', feature_columns=('item', 'genre'),
      test_column='test', batch_size=BATCH, local_epochs=2, seed=3))


def _fedprox(task, client_optimizer='adam'):
  """FedProx around the client optimizer, as the registry builds it for the in-process
  runtime."""
  training = registry.training(task, 'fedprox', runtime='inprocess', clients_per_round=COHORT,
                               client_optimizer=client_optimizer, client_learning_rate=0.05)
  return registry.build('fedprox', task, training, proximal_strength=0.5).process


def _rounds(task, built, lockstep: str):
  """(each round's trainable weights, each round's metrics) of two in-process
  rounds of the `built` process, cohorts of COHORT drawn as the loop draws them."""
  with inprocess.Parallelism(lockstep=lockstep):
    process = inprocess.for_runtime(built, 'inprocess')
  state, weights, metrics = process.initialize(), [], []
  for r in (1, 2):
    cohort = loop.sample_cohort(sorted(task.train_client_ids), COHORT, seed=0, round_num=r)
    output = process.next(state, [task.client_batches(c, loop.client_seed(0, r, c))
                                  for c in cohort])
    state = output.state
    weights.append([np.asarray(w) for w in process.get_model_weights(state).trainable])
    metrics.append(output.metrics['client_work']['train'])
  return weights, metrics


@pytest.mark.parametrize('model', ['dcn', 'neumf', 'dual_encoder'])
def test_a_lockstep_round_is_the_round_its_clients_train_one_by_one(model, tmp_path,
                                                                    user_items_dir, ml100k_dir):
  task = _task(tmp_path, model, user_items_dir, ml100k_dir)
  # BPR's margins cancel NeuMF's output bias: its gradient is rounding noise, which
  # Adam's normalization turns into steps of its rate, another in each order of sums.
  built = _fedprox(task, 'adam' if model == 'dcn' else 'sgd')
  assert composer.round_of(built).lockstep is not None
  (one_by_one, metrics), (side_by_side, lockstep_metrics) = (_rounds(task, built, 'off'),
                                                             _rounds(task, built, 'on'))
  first = one_by_one[0]
  assert any(np.abs(a - b).max() > 1e-3 for a, b in zip(first, one_by_one[1]))  # it trains
  for got_round, want_round in zip(side_by_side, one_by_one, strict=True):
    for got, want in zip(got_round, want_round, strict=True):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  for got, want in zip(lockstep_metrics, metrics, strict=True):
    assert got['num_examples'] == want['num_examples']
    assert got['loss'] == pytest.approx(want['loss'], rel=1e-5)


def test_stack_puts_each_clients_batch_s_at_step_s_longest_first_and_masks_the_padding():
  plan = sliced.Plan(3, epochs=2)
  clients = [plan.batches((collections.OrderedDict(x=np.arange(n) + 100 * k),
                           np.arange(n, dtype=np.float32)), seed=k)
             for k, n in enumerate((7, 4, 1))]
  with pytest.raises(ValueError, match=re.escape('longest first; their steps are [3, 5, 1]')):
    keras_lockstep.stack([clients[1], clients[0], clients[2]])
  (x, y), mask = keras_lockstep.stack(clients)
  assert mask.shape == (5, 3, 3)  # the longest client's 2 x 7 rows in batches of 3
  for n, client in enumerate(clients):
    for s in range(mask.shape[0]):
      rows = int(mask[s, n].sum())
      if s >= int(client.steps()):
        assert rows == 0
        continue
      want_x, want_y = client.batch(s)
      np.testing.assert_array_equal(mask[s, n], np.arange(3) < len(want_y))
      np.testing.assert_array_equal(x['x'][s, n, :rows], want_x['x'])
      np.testing.assert_array_equal(y[s, n, :rows], want_y)
      # padded with the batch's last row: a label read as an index stays valid
      np.testing.assert_array_equal(x['x'][s, n, rows:], want_x['x'][-1])


def _refusal(keras_model, loss):
  return keras_lockstep.KerasModel(keras_model, loss, input_spec=None).refusal()


def test_a_loss_not_of_keras_or_a_model_with_state_of_its_own_is_refused_naming_why():
  def dense():
    return tf.keras.Sequential([tf.keras.Input([2]), tf.keras.layers.Dense(1)])

  def normalized():
    return tf.keras.Sequential([tf.keras.Input([2]), tf.keras.layers.BatchNormalization()])

  assert _refusal(dense, tf.keras.losses.BinaryCrossentropy()) is None
  assert _refusal(dense, losses.GlobalSoftmax()) is None  # it says it is per example
  assert _refusal(dense, losses.BatchSoftmax()) == (
      "its loss (BatchSoftmax) is not one of Keras's per-example losses, so padding a batch "
      'could change it')
  assert _refusal(normalized, tf.keras.losses.MeanSquaredError()) == (
      'its Keras model has non-trainable state (e.g. batch normalization)')
