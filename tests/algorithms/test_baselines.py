"""FedSGD and FedAvg from tff.learning on the native runtime, and FedAvg as the
project's round on sliced batches.

Proposition 1 of Ning et al.: with a batch-insensitive loss, one FedSGD round
over a cohort equals one centralized SGD step on the union of the cohort's
examples; with batch softmax it does not.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import composer
from tff_rec import losses
from tff_rec.aggregators import inner
from tff_rec.algorithms import baselines
from tff_rec.data import sliced
from tff_rec.models import dual_encoder
from tff_rec.runtime import inprocess
from tff_rec.training import optimizers

VOCAB, LENGTH, DIM, BATCH = 30, 4, 4, 4
LEARNING_RATE = 0.5
INPUT_SPEC = (collections.OrderedDict(context=tf.TensorSpec([None, LENGTH], tf.int32)),
              tf.TensorSpec([None], tf.int32))


def _client_examples(seed, count):
  rng = np.random.default_rng(seed)
  context = rng.integers(0, VOCAB + 1, size=(count, LENGTH)).astype(np.int32)
  context[:, 0] = rng.integers(1, VOCAB + 1, size=count)  # never all padding
  # Non-IID: each client's labels come from its own third of the vocabulary.
  label = (rng.integers(0, VOCAB // 3, size=count) + seed * (VOCAB // 3) + 1).astype(np.int32)
  return context, label


CLIENTS = [_client_examples(seed, count) for seed, count in enumerate((4, 8, 12))]


def _keras_model(loss_name):
  _, spreadout = losses.RETRIEVAL_LOSSES[loss_name]
  return dual_encoder.build_dual_encoder(
      vocab_size=VOCAB, context_length=LENGTH, embedding_dim=DIM,
      context_hidden_dims=(DIM,), spreadout_weight=0.05 if spreadout else 0.0,
      seed=7)


def _fedsgd_round(loss_name):
  def model_fn():
    return tff.learning.models.from_keras_model(
        _keras_model(loss_name), loss=losses.RETRIEVAL_LOSSES[loss_name][0](),
        input_spec=INPUT_SPEC)

  process = baselines.build_fedsgd_process(
      model_fn, server_optimizer=optimizers.OptimizerConfig('sgd', LEARNING_RATE))
  datasets = [tf.data.Dataset.from_tensor_slices(
      (collections.OrderedDict(context=c), l)).batch(BATCH) for c, l in CLIENTS]
  state = process.next(process.initialize(), datasets).state
  return [np.asarray(w) for w in process.get_model_weights(state).trainable]


def _centralized_sgd_step(loss_name):
  model = _keras_model(loss_name)
  context = np.concatenate([c for c, _ in CLIENTS])
  label = np.concatenate([l for _, l in CLIENTS])
  loss_fn = losses.RETRIEVAL_LOSSES[loss_name][0]()
  with tf.GradientTape() as tape:
    loss = loss_fn(label, model({'context': context}, training=True))
    loss += tf.add_n(model.losses) if model.losses else 0.0
  grads = tape.gradient(loss, model.trainable_weights)
  return [(w - LEARNING_RATE * tf.convert_to_tensor(g)).numpy()
          for w, g in zip(model.trainable_weights, grads, strict=True)]


@pytest.mark.parametrize('loss_name', ['global_softmax', 'hinge_spreadout'])
def test_fedsgd_round_equals_centralized_step_for_batch_insensitive_loss(
    tff_runtime, loss_name):
  initial = _keras_model(loss_name).get_weights()
  federated = _fedsgd_round(loss_name)
  central = _centralized_sgd_step(loss_name)
  moved = max(np.abs(f - i).max() for f, i in zip(federated, initial, strict=True))
  assert moved > 1e-3  # the step is not trivially zero
  for f, c in zip(federated, central, strict=True):
    np.testing.assert_allclose(f, c, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('loss_name', ['batch_softmax', 'batch_softmax_spreadout'])
def test_fedsgd_round_differs_from_centralized_step_for_batch_softmax(
    tff_runtime, loss_name):
  federated = _fedsgd_round(loss_name)
  central = _centralized_sgd_step(loss_name)
  gap = max(np.abs(f - c).max() for f, c in zip(federated, central, strict=True))
  assert gap > 1e-3


def test_one_client_fedavg_with_unit_server_sgd_is_local_sgd(tff_runtime):
  """FedAvg on one client, one batch, server SGD lr 1: the client's SGD step."""
  loss_name = 'global_softmax'

  def model_fn():
    return tff.learning.models.from_keras_model(
        _keras_model(loss_name), loss=losses.GlobalSoftmax(), input_spec=INPUT_SPEC)

  process = baselines.build_process(
      model_fn,
      client_optimizer=optimizers.OptimizerConfig('sgd', LEARNING_RATE),
      server_optimizer=optimizers.OptimizerConfig('sgd', 1.0))
  context, label = CLIENTS[2]
  dataset = tf.data.Dataset.from_tensor_slices(
      (collections.OrderedDict(context=context), label)).batch(len(label))
  state = process.next(process.initialize(), [dataset]).state
  federated = [np.asarray(w) for w in process.get_model_weights(state).trainable]

  model = _keras_model(loss_name)
  with tf.GradientTape() as tape:
    loss = losses.GlobalSoftmax()(label, model({'context': context}, training=True))
  grads = tape.gradient(loss, model.trainable_weights)
  # The server adds (client - model) back to the model: float32 rounding of the
  # largest weights (|w| ~ 5) is a few 1e-7.
  for f, w, g in zip(federated, model.trainable_weights, grads, strict=True):
    np.testing.assert_allclose(f, w - LEARNING_RATE * tf.convert_to_tensor(g), rtol=1e-6,
                               atol=1e-6)


def test_fedprox_client_steps_carry_the_proximal_term_of_its_strength(tff_runtime):
  """One client, two batches, server SGD 1: FedProx's second step adds mu (w1 - w0)
  to the gradient (the first is plain SGD: the term is zero at the broadcast
  model). mu = 0 would give FedAvg's steps, which the reference tells apart, and
  TFF 0.87's own FedProx equals the reference with the sign of the term flipped."""
  mu = 2.0

  def model_fn():
    return tff.learning.models.from_keras_model(
        _keras_model('global_softmax'), loss=losses.GlobalSoftmax(), input_spec=INPUT_SPEC)

  process = baselines.build_process(
      model_fn, client_optimizer=optimizers.OptimizerConfig('sgd', LEARNING_RATE),
      server_optimizer=optimizers.OptimizerConfig('sgd', 1.0), proximal_strength=mu)
  context, label = CLIENTS[2]
  half = len(label) // 2
  dataset = tf.data.Dataset.from_tensor_slices(
      (collections.OrderedDict(context=context), label)).batch(half)
  state = process.next(process.initialize(), [dataset]).state
  federated = [np.asarray(w) for w in process.get_model_weights(state).trainable]

  model = _keras_model('global_softmax')
  start = [w.numpy() for w in model.trainable_weights]
  for rows in (slice(0, half), slice(half, None)):
    with tf.GradientTape() as tape:
      loss = losses.GlobalSoftmax()(label[rows], model({'context': context[rows]},
                                                       training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    for w, g, w0 in zip(model.trainable_weights, grads, start, strict=True):
      w.assign(w - LEARNING_RATE * (tf.convert_to_tensor(g) + mu * (w - w0)))
  for f, w in zip(federated, model.trainable_weights, strict=True):
    np.testing.assert_allclose(f, w.numpy(), rtol=1e-5, atol=1e-5)


def test_iterator_client_loop_matches_tff_default_reduce_loop(tff_runtime):
  """Our client loop (chosen for speed) trains exactly like TFF's default."""
  def model_fn():
    return tff.learning.models.from_keras_model(
        _keras_model('global_softmax'), loss=losses.GlobalSoftmax(), input_spec=INPUT_SPEC)

  datasets = [tf.data.Dataset.from_tensor_slices(
      (collections.OrderedDict(context=c), l)).batch(BATCH) for c, l in CLIENTS]
  weights = {}
  for loop in tff.learning.LoopImplementation:
    process = baselines.build_process(
        model_fn, client_optimizer=optimizers.OptimizerConfig('sgd', LEARNING_RATE),
        server_optimizer=optimizers.OptimizerConfig('adam', 0.01), client_loop=loop)
    state = process.initialize()
    for _ in range(2):
      state = process.next(state, datasets).state
    weights[loop] = [np.asarray(w) for w in process.get_model_weights(state).trainable]
  reduce = weights[tff.learning.LoopImplementation.DATASET_REDUCE]
  iterator = weights[tff.learning.LoopImplementation.DATASET_ITERATOR]
  for r, i in zip(reduce, iterator, strict=True):
    np.testing.assert_allclose(i, r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('kwargs, message', [
    ({'name': 'rmsprop'}, "unknown optimizer 'rmsprop'"),
    ({'learning_rate': 0.0}, 'learning rate must be > 0'),
])
def test_bad_optimizer_config(kwargs, message):
  with pytest.raises(ValueError, match=message):
    optimizers.OptimizerConfig(**kwargs)


@pytest.mark.parametrize('side', ['client', 'server'])
def test_lazy_adam_on_a_keras_models_dense_updates_is_refused(side):
  lazy = {f'{side}_optimizer': optimizers.OptimizerConfig('lazy_adam', 0.01)}
  with pytest.raises(ValueError, match='lazy_adam would be plain Adam'):
    baselines.build_process(None, **{
        'client_optimizer': optimizers.OptimizerConfig(),
        'server_optimizer': optimizers.OptimizerConfig(), **lazy})


def test_adaptive_servers_with_tau_take_reddi_sized_first_steps():
  """FedAdagrad with tau: the first step of an update u is lr u / sqrt(u^2 + 2 tau^2)
  (the accumulator starts at tau^2 and tau^2 is added inside the root), about
  lr u / (|u| + tau), Reddi et al.'s; Adam's, lr u / (|u| + tau / sqrt(1 - beta_2))."""
  update = np.array([1e-4, -1e-2], np.float32)
  for name, expected in (
      ('adagrad', 0.1 * update / np.sqrt(update**2 + 2e-6)),
      ('adam', 0.1 * update / (np.abs(update) + 1e-3 / np.sqrt(1 - 0.999)))):
    optimizer = optimizers.OptimizerConfig(name, 0.1, adaptivity=1e-3).build()
    state = optimizer.initialize([tf.TensorSpec([2], tf.float32)])
    _, (moved,) = optimizer.next(state, [tf.zeros([2])], [-update])
    np.testing.assert_allclose(moved.numpy(), expected, rtol=1e-5)
  with pytest.raises(ValueError, match='adaptivity applies to adagrad and adam'):
    optimizers.OptimizerConfig('sgd', 0.1, adaptivity=1e-3)


@pytest.mark.parametrize('uniform, server', [(True, optimizers.OptimizerConfig('adam', 0.01))])
def test_the_projects_fedavg_round_trains_as_tff_learnings_on_the_same_batches(
    uniform, server, tff_runtime):
  """The round of build_round (the project's client loop on sliced batches) and
  tff.learning's FedAvg on those batches as datasets end two rounds of the dual
  encoder with the same model and loss. Each is also held to the maths in numpy
  (tests/algorithms/test_maths_fedavg.py, test_maths_keras.py: weights by examples
  or equal, FedProx's term, the servers' steps); this one case keeps the two
  implementations level on the paper's own model."""
  def model_fn():
    return tff.learning.models.from_keras_model(
        _keras_model('global_softmax'), loss=losses.GlobalSoftmax(), input_spec=INPUT_SPEC)

  plan = sliced.Plan(BATCH, epochs=2)
  cohorts = [[plan.batches((collections.OrderedDict(context=c), l), seed=10 * r + k)
              for k, (c, l) in enumerate(CLIENTS)] for r in range(2)]
  client = optimizers.OptimizerConfig('sgd', LEARNING_RATE)
  tff_process = baselines.build_process(
      model_fn, client_optimizer=client, server_optimizer=server,
      client_weighting=(tff.learning.ClientWeighting.UNIFORM if uniform
                        else tff.learning.ClientWeighting.NUM_EXAMPLES))
  project = composer.compose_parts(baselines.build_round(
      model_fn, sliced.tff_type(cohorts[0][0]), client_optimizer=client.build(),
      server_optimizer=server.build(), uniform=uniform), tff.aggregators.MeanFactory())
  trained, losses_ = [], []
  datasets = [[tf.nest.map_structure(tf.constant, b).as_dataset() for b in c] for c in cohorts]
  for process, data in ((tff_process, datasets),
                        (project, cohorts)):
    state = process.initialize()
    for cohort in data:
      output = process.next(state, cohort)
      state = output.state
    trained.append(process.get_model_weights(state).trainable)
    losses_.append(output.metrics['client_work']['train']['loss'])
  start = process.get_model_weights(process.initialize()).trainable
  for tff_weights, own, initial in zip(*trained, start, strict=True):
    assert not np.allclose(own, initial)  # it trained
    np.testing.assert_allclose(own, tff_weights, rtol=1e-5, atol=1e-6)
  assert losses_[0] == pytest.approx(losses_[1], rel=1e-5)


@pytest.mark.parametrize('aggregator', ['mean', 'secure'])
def test_the_projects_round_keeps_a_finite_model_when_its_cohort_trained_no_example(
    aggregator, tff_runtime):
  """The weights sum to 0: the inner mean is 0, not 0 / 0 (tff.learning's finalizer
  drops a NaN update; the project's round has none to drop)."""
  def model_fn():
    return tff.learning.models.from_keras_model(
        _keras_model('global_softmax'), loss=losses.GlobalSoftmax(), input_spec=INPUT_SPEC)

  plan = sliced.Plan(BATCH, epochs=1)
  empty = [plan.batches((collections.OrderedDict(context=c[:0]), l[:0]), seed=k)
           for k, (c, l) in enumerate(CLIENTS)]
  sgd = optimizers.OptimizerConfig('sgd', 1.0)
  parts = baselines.build_round(model_fn, sliced.tff_type(empty[0]),
                                client_optimizer=sgd.build(), server_optimizer=sgd.build())
  process = inprocess.InProcessLearningProcess(composer.compose_parts(
      parts, inner.InnerAggregator(aggregator, secure_bound=100.0).mean(3)))
  state = process.initialize()
  output = process.next(state, empty)
  assert output.metrics['client_work']['train']['num_examples'] == 0
  for before, after in zip(process.get_model_weights(state).trainable,
                           process.get_model_weights(output.state).trainable, strict=True):
    np.testing.assert_array_equal(after, before)  # SGD on a zero mean: unchanged
