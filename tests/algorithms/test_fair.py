"""FAIR on the real TFF runtimes: FedAvg when everyone is 1x, runtime equivalence,
and the round's bookkeeping (tier counts, bytes)."""

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks import ranking
from tff_rec import registry
from tff_rec.algorithms import capacities
from tff_rec.algorithms import fair
from tff_rec.models import neumf
from tff_rec.runtime import inprocess
from tff_rec.training import optimizers

TRAINING = registry.Training(optimizers.OptimizerConfig('adam', 0.05),
                             optimizers.OptimizerConfig('sgd', 1.0))


def _task(data_dir, **overrides):
  config = dict(data_dir=str(data_dir), factors=4, batch_size=4, local_epochs=2, seed=1)
  return ranking.Task(ranking.Config(**{**config, **overrides}))


def _run(process, client_input, cohorts):
  state = process.initialize()
  outputs = []
  for r, cohort in enumerate(cohorts):
    output = process.next(state, [client_input(c, r) for c in cohort])
    state = output.state
    outputs.append(output)
  return process.get_model_weights(state), outputs


def _build(task, name, runtime='native', **options):
  built = registry.build(name, task, dataclasses.replace(TRAINING, runtime=runtime), **options)
  return built.process, built.client_ids, built.client_input


def _one_native_round(task, name, scheme, cohort_slice):
  """One round of `name` at `scheme` (composite lookup) over ids[cohort_slice]."""
  process, ids, client_input = _build(task, name, capacities=scheme)
  weights, outputs = _run(process, client_input, [ids[cohort_slice]])
  return weights, outputs[0].metrics, ids


def _tff_fedavg(task):
  """tff.learning's own FedAvg on NeuMF: client Adam from scratch, server SGD 1."""
  model = task.functional_model()
  names = list(model.initial_weights)

  @tf.function
  def predict_on_batch(model_weights, x, training=True):
    del training
    w = collections.OrderedDict(zip(names, model_weights[0], strict=True))
    loss = model.loss(w, x, neumf.full_item_rows(w))
    return tf.fill([tf.shape(x['user'])[0]], loss)  # one row per example: weights by count

  x_spec = task.table_dataset_computation.type_signature.result.columns
  functional_model = tff.learning.models.FunctionalModel(
      initial_weights=(tuple(model.initial_weights.values()), ()),
      predict_on_batch_fn=predict_on_batch,
      loss_fn=tf.function(lambda output, label, sample_weight=None: tf.reduce_mean(output)),
      input_spec=(x_spec, tf.TensorSpec([None], tf.float32)))
  process = tff.learning.algorithms.build_weighted_fed_avg(
      functional_model, client_optimizer_fn=TRAINING.client_optimizer.build(),
      server_optimizer_fn=TRAINING.server_optimizer.build(),
      loop_implementation=tff.learning.LoopImplementation.DATASET_ITERATOR)

  @tff.tensorflow.computation(task.table_dataset_computation.type_signature.parameter)
  def with_labels(args):
    return task.table_dataset_computation(args).as_dataset().map(
        lambda b: (b, tf.zeros([tf.shape(b['user'])[0]])))

  return tff.simulation.compose_dataset_computation_with_learning_process(
      with_labels, process), names


@pytest.mark.slow
def test_fair_with_every_client_at_1x_is_tff_fedavg(user_items_dir, tff_runtime):
  task = _task(user_items_dir)
  process, ids, client_input = _build(task, 'fedavg')
  cohorts = [ids[:3], ids[2:6]]
  weights, outputs = _run(process, client_input, cohorts)

  reference, names = _tff_fedavg(task)
  state = reference.initialize()
  for r, cohort in enumerate(cohorts):
    state = reference.next(state, [task.table_client_arguments(c, r) for c in cohort]).state
  expected = reference.get_model_weights(state).trainable
  moved = max(np.abs(weights[n] - task.functional_model().initial_weights[n]).max() for n in names)
  assert moved > 1e-2
  for name, value in zip(names, expected, strict=True):
    np.testing.assert_allclose(weights[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
  assert outputs[0].metrics['client_work']['clients']['1x'] == 3


@pytest.mark.slow
def test_native_composite_equals_inprocess_op(user_items_dir, tff_runtime):
  task = _task(user_items_dir)
  cohorts = [task.train_client_ids[:4], task.train_client_ids[3:8]]
  results = []
  for runtime in ('native', 'inprocess'):
    process, _, client_input = _build(task, 'fair', runtime, capacities='1x-2x')
    if runtime == 'inprocess':
      process = inprocess.InProcessLearningProcess(process, threads=2)
    results.append(_run(process, client_input, cohorts))
  (native_weights, native_out), (local_weights, local_out) = results
  # The op sums colliding gradients in another order than the composite;
  # client Adam's 1/sqrt(v) amplifies that rounding for near-zero gradients.
  for name in native_weights:
    np.testing.assert_allclose(local_weights[name], native_weights[name], rtol=1e-4,
                               atol=1e-5, err_msg=name)
  native_work, local_work = (out[-1].metrics['client_work'] for out in (native_out, local_out))
  assert native_work['clients'] == local_work['clients']
  np.testing.assert_allclose(local_work['train']['loss'], native_work['train']['loss'],
                             rtol=1e-5)


def test_tier_metrics_count_clients_and_bytes(user_items_dir, tff_runtime):
  task = _task(user_items_dir, local_epochs=1)
  _, metrics, ids = _one_native_round(task, 'fair', '1x-4x', slice(2, 7))  # tiers 0,0,1,1,1
  assert dict(metrics['client_work']['clients']) == {'1x': 2, '4x': 3}
  n, f = task.shape.num_items, task.shape.factors
  dense = (2 * f * f + f) + (2 * f + 1) + 2 * f  # MLP, output, one row of each user table
  full, quarter = 2 * n * f, 2 * (n * f // 4)
  assert metrics['aggregator']['bytes_down'] == 4 * (2 * (full + dense) + 3 * (quarter + dense))
  assert metrics['aggregator']['bytes_up'] == metrics['aggregator']['bytes_down']
  assert dict(metrics['aggregator']['bytes_per_client']) == {'1x': 4 * (full + dense),
                                               '4x': 4 * (quarter + dense)}
  examples = [len(task.table_client_arguments(c, 0)[1]) for c in ids[2:7]]
  assert metrics['client_work']['train']['num_examples'] == sum(examples)
  assert dict(metrics['client_work']['examples']) == {'1x': sum(examples[:2]),
                                                      '4x': sum(examples[2:])}


def test_fair_hom_keeps_the_model_in_the_subspace(user_items_dir, tff_runtime):
  """Everyone at 2x: the new tables are S psi, so reducing and recovering them is exact."""
  task = _task(user_items_dir, local_epochs=1)
  weights, _, _ = _one_native_round(task, 'fair_hom', '1x-2x', slice(0, 3))
  form = capacities.hashed_tiers(task.shape.table_shapes(), [2],
                                 seed=task.config.seed + 1)['2x']['item_gmf']
  table = tf.constant(weights['item_gmf'])
  np.testing.assert_allclose(form.recover(form.reduce(table)), table, atol=1e-6)


def test_tiers_must_cover_the_model_tables(user_items_dir):
  task = _task(user_items_dir)
  with pytest.raises(ValueError, match="tier 1x has forms for .'item_gmf'., expected"):
    fair.build_round(
        task.functional_model(), {'1x': {'item_gmf': None}},
        dataset_computation=task.table_dataset_computation,
        client_optimizer=TRAINING.client_optimizer.build())
