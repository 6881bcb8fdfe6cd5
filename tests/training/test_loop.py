import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import losses
from tff_rec.algorithms import baselines
from tff_rec.models import dual_encoder
from tff_rec.training import checkpoints
from tff_rec.training import loop
from tff_rec.training import optimizers


def test_cohort_depends_only_on_seed_and_round():
  ids = [f'c{i}' for i in range(50)]
  a = loop.sample_cohort(ids, 10, seed=3, round_num=7)
  assert a == loop.sample_cohort(ids, 10, seed=3, round_num=7)
  assert len(set(a)) == 10
  assert a != loop.sample_cohort(ids, 10, seed=3, round_num=8)
  assert a != loop.sample_cohort(ids, 10, seed=4, round_num=7)


def test_client_seed_is_stable_and_distinct():
  assert loop.client_seed(1, 2, 'u9') == loop.client_seed(1, 2, 'u9')
  assert len({loop.client_seed(1, r, c) for r in range(5) for c in 'abc'}) == 15


def test_flatten_metrics_joins_paths_and_drops_empty_branches():
  nested = collections.OrderedDict(
      distributor=(), client_work=collections.OrderedDict(
          train=collections.OrderedDict(loss=np.float32(0.5), num_examples=np.int64(7))),
      finalizer=collections.OrderedDict(update_non_finite=0))
  assert loop.flatten_metrics(nested, 'train/') == {
      'train/client_work/train/loss': 0.5,
      'train/client_work/train/num_examples': 7.0,
      'train/finalizer/update_non_finite': 0.0}


@pytest.mark.parametrize('kwargs, message', [
    ({'rounds': 0}, 'rounds must be >= 1'),
    ({'clients_per_round': 0}, 'clients_per_round must be >= 1'),
    ({'clients_per_round': 9}, 'larger than the 8 training clients; use at most 8'),
    ({'eval_every': -1}, 'eval_every must be >= 0'),
])
def test_schedule_validation_names_the_setting(kwargs, message):
  settings = dict(rounds=2, clients_per_round=2) | kwargs
  with pytest.raises(ValueError, match=message):
    loop.Schedule(**settings).validate(8)


VOCAB, LENGTH = 20, 3
SPEC = (collections.OrderedDict(context=tf.TensorSpec([None, LENGTH], tf.int32)),
        tf.TensorSpec([None], tf.int32))


def _process():
  def model_fn():
    model = dual_encoder.build_dual_encoder(
        vocab_size=VOCAB, context_length=LENGTH, embedding_dim=4,
        context_hidden_dims=(4,), seed=1)
    return tff.learning.models.from_keras_model(
        model, loss=losses.GlobalSoftmax(), input_spec=SPEC)
  return baselines.build_process(
      model_fn, client_optimizer=optimizers.OptimizerConfig('sgd', 0.5),
      server_optimizer=optimizers.OptimizerConfig('adam', 0.05))


def _client_dataset(client_id, seed):
  rng = np.random.default_rng(int(client_id))
  context = rng.integers(1, VOCAB + 1, size=(12, LENGTH)).astype(np.int32)
  label = rng.integers(1, VOCAB + 1, size=12).astype(np.int32)
  return (tf.data.Dataset.from_tensor_slices((collections.OrderedDict(context=context), label))
          .shuffle(12, seed=seed).batch(4))


def _run(process, rounds, checkpoint_dir, releases=(), eval_every=2):
  seen = []
  state, metrics = loop.run(
      process, client_ids=[str(i) for i in range(6)], client_input=_client_dataset,
      schedule=loop.Schedule(rounds=rounds, clients_per_round=3, eval_every=eval_every,
                             checkpoint_every=1, seed=5),
      evaluate=lambda w: {'validation/norm': float(np.linalg.norm(w.trainable[0]))},
      final_evaluate=lambda w: {'test/marker': 1.0},
      checkpointing=loop.Checkpointing(
          checkpoints.NumpyProgramStateManager(checkpoint_dir)),
      release_managers=releases,
      on_round=lambda r, m: seen.append((r, m) if eval_every is None else r))
  return state, metrics, seen


def test_a_schedule_without_evaluation_evaluates_no_round(tff_runtime, tmp_path):
  _, _, seen = _run(_process(), 2, tmp_path, eval_every=None)
  assert [r for r, _ in seen] == [1, 2]
  assert not [k for _, m in seen for k in m if k.startswith(('validation/', 'test/'))]


def test_resumed_run_reaches_the_same_state_as_an_uninterrupted_one(tff_runtime, tmp_path):
  process = _process()
  full_state, full_metrics, seen = _run(process, 4, tmp_path / 'a')
  assert seen == [1, 2, 3, 4]
  assert 'validation/norm' in full_metrics and full_metrics['test/marker'] == 1.0

  _run(process, 2, tmp_path / 'b')  # "interrupted" after round 2
  memory = tff.program.MemoryReleaseManager()
  resumed_state, resumed_metrics, seen = _run(process, 4, tmp_path / 'b', [memory])
  assert seen == [3, 4]  # rounds 1-2 came from the checkpoint
  assert [key for key, _ in memory.values().items()] == [3, 4]
  for a, b in zip(process.get_model_weights(full_state).trainable,
                  process.get_model_weights(resumed_state).trainable, strict=True):
    np.testing.assert_array_equal(a, b)
  assert full_metrics['train/client_work/train/loss'] == (
      resumed_metrics['train/client_work/train/loss'])
  assert resumed_metrics['memory/rss_mb'] > 100


@pytest.mark.parametrize('metrics, weights, what', [
    ({loop.TRAIN_LOSS: 0.5, loop.TRAIN_EXAMPLES: 12.0}, [np.ones(3)], None),
    ({loop.TRAIN_LOSS: float('nan'), loop.TRAIN_EXAMPLES: 12.0}, None, 'training loss is nan'),
    ({loop.TRAIN_LOSS: float('inf')}, None, 'training loss is inf'),
    ({loop.TRAIN_LOSS: 0.0, loop.TRAIN_EXAMPLES: 0.0}, [np.ones(3)], None),  # an empty cohort
    ({loop.TRAIN_LOSS: 0.0, loop.TRAIN_EXAMPLES: 0.0}, [np.asarray([np.nan])],
     'weights are not finite'),
    ({loop.TRAIN_LOSS: 0.5}, {'items': np.asarray([1.0, np.inf])}, 'weights are not finite'),
    ({loop.TRAIN_LOSS: 0.5}, tff.learning.models.ModelWeights([np.ones(2)], [np.asarray(np.nan)]),
     'weights are not finite'),
])
def test_divergence_is_a_non_finite_loss_or_model(
    metrics, weights, what):
  found = loop._divergence(metrics, weights)  # pylint: disable=protected-access
  assert (found is None) if what is None else (what in found)


def _empty_first_round(seed):
  """Client input whose round-1 clients (of 6, seeded `seed`) hold no example."""
  round_1 = {loop.client_seed(seed, 1, c) for c in map(str, range(6))}
  return lambda c, s: _client_dataset(c, s).take(0 if s in round_1 else -1)


def test_a_round_that_trained_nothing_is_no_divergence_the_run_goes_on(tff_runtime):
  """Round 1's clients hold no example (an empty cohort); evaluated every 3 rounds."""
  memory = tff.program.MemoryReleaseManager()
  seen = []
  loop.run(_process(), client_ids=[str(i) for i in range(6)],
           client_input=_empty_first_round(5),
           schedule=loop.Schedule(rounds=3, clients_per_round=3, eval_every=3, seed=5),
           evaluate=lambda w: {'validation/norm': 1.0}, release_managers=[memory],
           on_round=lambda r, m: seen.append((r, m[loop.TRAIN_EXAMPLES])))
  assert [r for r, _ in seen] == [1, 2, 3] and seen[0][1] == 0 and seen[1][1] > 0


class _NonFiniteModel:
  """A process whose model reads as non-finite (the rest is the process's)."""

  def __init__(self, process):
    self.process = process
    self.initialize, self.next = process.initialize, process.next

  def get_model_weights(self, state):
    weights = self.process.get_model_weights(state)
    return tf.nest.map_structure(lambda w: np.full_like(w, np.nan), weights)


def test_a_round_that_trained_nothing_has_its_model_checked_though_not_evaluated(
    tff_runtime):
  """A non-finite model is what tff.learning's clients may show only by training no
  example: the run stops at round 1, releases it, and reports no round as done."""
  memory = tff.program.MemoryReleaseManager()
  seen = []
  with pytest.raises(loop.Diverged, match="diverged at round 1: the model's weights") as stop:
    loop.run(_NonFiniteModel(_process()), client_ids=[str(i) for i in range(6)],
             client_input=_empty_first_round(5),
             schedule=loop.Schedule(rounds=3, clients_per_round=3, eval_every=3, seed=5),
             evaluate=lambda w: {'validation/norm': 1.0}, release_managers=[memory],
             on_round=lambda r, m: seen.append(r))
  assert (stop.value.last_evaluation, stop.value.last_evaluated_round) == ({}, None)
  assert seen == [] and [key for key, _ in memory.values().items()] == [1]
  assert stop.value.metrics[loop.TRAIN_EXAMPLES] == 0