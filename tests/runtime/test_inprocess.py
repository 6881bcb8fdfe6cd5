"""The in-process runtime against TFF's native runtime: same rounds, same numbers."""


import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks import next_item as task_lib
from tff_rec.aggregators import inner
from tff_rec.algorithms import baselines
from tff_rec.models import hashed_embedding
from tff_rec.runtime import inprocess
from tff_rec.training import loop
from tff_rec.training import optimizers


def _assert_same(native_output, inprocess_output):
  """Equal to float rounding: clients are summed in another order (threads),
  which server Adam's 1/sqrt(v) amplifies for near-zero gradients."""
  for a, b in zip(tf.nest.flatten(native_output.state), tf.nest.flatten(inprocess_output.state),
                  strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  for a, b in zip(tf.nest.flatten(native_output.metrics),
                  tf.nest.flatten(inprocess_output.metrics), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5)


def _rounds(process, cohorts):
  state = process.initialize()
  output = None
  for cohort in cohorts:
    output = process.next(state, cohort)
    state = output.state
  return output


# FedSGD's computations, two threads; FedAvg's on the same task run through the trainer
# (tests/launch/test_train.py::test_inprocess_runtime_trains_to_the_native_numbers).
@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['fedsgd'])
def test_dual_encoder_rounds_match_native(ml100k_dir, tff_runtime, algorithm):
  task = task_lib.Task(task_lib.Config(
      data_dir=str(ml100k_dir), loss='hinge_spreadout', batch_size=4))
  process = tff.simulation.compose_dataset_computation_with_learning_process(
      task.dataset_computation,
      baselines.build_fedsgd_process(
          task.model_fn, server_optimizer=optimizers.OptimizerConfig('adam', 0.05)))
  ids = task.train_client_ids
  cohorts = [[task.client_arguments(c, loop.client_seed(0, r, c))
              for c in loop.sample_cohort(ids, 5, seed=0, round_num=r)] for r in (1, 2, 3)]
  native = _rounds(process, cohorts)
  local = _rounds(inprocess.InProcessLearningProcess(process, threads=2), cohorts)
  _assert_same(native, local)
  assert native.metrics['client_work']['train']['num_examples'] > 0


def _hashed_process(impl, model_aggregator=None):
  spec = (tf.TensorSpec([None, 2], tf.int32), tf.TensorSpec([None, 1], tf.float32))

  def model_fn():
    model = tf.keras.Sequential([
        tf.keras.Input([2], dtype=tf.int32),
        hashed_embedding.HashedEmbedding(
            1000, 4, memory_size=97, impl=impl, seed=3,
            embeddings_initializer=tf.keras.initializers.RandomUniform(seed=1)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))])
    return tff.learning.models.from_keras_model(
        model, loss=tf.keras.losses.BinaryCrossentropy(from_logits=True), input_spec=spec)

  return baselines.build_process(model_fn,
                                 client_optimizer=optimizers.OptimizerConfig('sgd', 0.5),
                                 server_optimizer=optimizers.OptimizerConfig('sgd', 1.0),
                                 model_aggregator=model_aggregator)


def _hashed_clients(sizes, seed: int) -> list[tf.data.Dataset]:
  """Clients of `_hashed_process`'s model with these many random examples."""
  rng = np.random.default_rng(seed)
  return [tf.data.Dataset.from_tensor_slices(
      (rng.integers(0, 1000, size=(n, 2)).astype(np.int32),
       rng.integers(0, 2, size=(n, 1)).astype(np.float32))).batch(4) for n in sizes]


def _composite_native_and_op_in_process(cohorts):
  """The same rounds: the composite lookup on TFF's native worker, the op in-process."""
  native = _rounds(_hashed_process('composite'), cohorts)
  local = _rounds(inprocess.InProcessLearningProcess(_hashed_process('op'), threads=2),
                  cohorts)
  _assert_same(native, local)
  return native


def test_hashed_embedding_composite_on_native_equals_op_in_process(tff_runtime):
  clients = _hashed_clients([12] * 3, seed=0)
  native = _composite_native_and_op_in_process([clients, clients])
  process = _hashed_process('composite')
  initial = process.get_model_weights(process.initialize()).trainable[0]
  moved = np.abs(native.state.global_model_weights.trainable[0] - initial).max()
  assert moved > 1e-3  # the rounds trained the hashed memory both runtimes agree on


def test_an_empty_client_inside_a_chunk_counts_zero_examples(tff_runtime):
  clients = _hashed_clients([5, 0, 7], seed=1)
  native = _rounds(_hashed_process('composite'), [clients])
  with inprocess.Parallelism(threads=1, clients_per_call=3):
    local = _rounds(inprocess.InProcessLearningProcess(_hashed_process('op')), [clients])
  _assert_same(native, local)
  assert local.metrics['client_work']['train']['num_examples'] == 12


def test_the_secure_mean_is_the_weighted_mean_of_signed_updates_and_shows_both_sums(
    tff_runtime):
  """TFF's secure sum under the weighted mean, of the weighted values and of the
  weights: with a bound above every weighted value (an update times its client's
  examples) the round is the plain mean's, to quantization, negative parts and all."""
  clients = _hashed_clients([3, 9], seed=3)
  processes = [inprocess.InProcessLearningProcess(_hashed_process('composite', aggregator))
               for aggregator in (None, inner.InnerAggregator('secure', secure_bound=100.0)
                                  .mean(2))]
  initial = processes[0].get_model_weights(processes[0].initialize()).trainable
  plain, secure = (_rounds(process, [clients]) for process in processes)
  deltas = [[np.asarray(w) - i for w, i in zip(output.state.global_model_weights.trainable,
                                               initial, strict=True)]
            for output in (plain, secure)]
  for a, b in zip(*deltas, strict=True):
    np.testing.assert_allclose(b, a, atol=1e-5)
  assert min(d.min() for d in deltas[0]) < -1e-3  # signed: a sum clipped at 0 would differ
  measured = secure.metrics['aggregator']
  assert (measured['mean_value']['secure_lower_threshold'],
          measured['mean_value']['secure_upper_threshold']) == (-100.0, 100.0)
  assert measured['mean_weight']['secure_upper_threshold'] == inner.SECURE_WEIGHT_BOUND
  assert measured['mean_value']['secure_lower_clipped_count'] == 0


def test_parallelism_refuses_settings_a_cohort_cannot_fill():
  with pytest.raises(ValueError, match='clients_per_call must be >= 1, got 0'):
    inprocess.Parallelism(clients_per_call=0)
  with pytest.raises(ValueError, match='threads=3 is more than the 2 clients per round; '
                     'use at most 2'):
    inprocess.Parallelism(threads=3).check_cohort(2)
  with inprocess.Parallelism(threads=1):
    assert inprocess.parallelism(clients_per_call=2) == inprocess.Parallelism(1, 2)
  assert inprocess.parallelism() == inprocess.Parallelism()


GPU = tf.config.list_physical_devices('GPU')


@pytest.mark.skipif(not GPU, reason='TF sees no GPU here')
def test_with_a_gpu_in_process_work_runs_the_cuda_op_and_equals_native_cpu(tff_runtime):
  """In-process sessions place the op on the GPU (its CUDA kernel); TFF's native
  worker runs on the CPU: the rounds agree to float rounding."""
  with tf.Graph().as_default() as graph:
    lookup = hashed_embedding.hashed_embedding_lookup(
        tf.random.uniform([997]), tf.constant([3, 5, 8], tf.int64), dim=4, seed=1, impl='op')
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(lookup, options=tf.compat.v1.RunOptions(
          trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=metadata)
  devices = {node.node_name: device.device for device in metadata.step_stats.dev_stats
             for node in device.node_stats}
  assert any('GPU' in d for n, d in devices.items() if 'HashedEmbeddingLookup' in n), devices
  clients = _hashed_clients([12] * 3, seed=2)
  _composite_native_and_op_in_process([clients, clients])


def test_native_runtime_cannot_run_the_custom_op(tff_runtime):
  """Why the in-process runtime exists: TFF's worker has no op libraries."""
  process = _hashed_process('op')
  dataset = tf.data.Dataset.from_tensor_slices(
      (np.zeros((4, 2), np.int32), np.zeros((4, 1), np.float32))).batch(4)
  with pytest.raises(Exception, match='HashedEmbeddingLookup'):
    process.next(process.initialize(), [dataset])


@pytest.mark.parametrize('threads', [0, -2])
def test_a_thread_count_below_one_is_refused_naming_it(threads):
  with pytest.raises(ValueError, match=f'threads must be >= 1, got {threads}'):
    inprocess.InProcessRound(object(), object(), threads=threads)


def test_a_two_phase_round_is_refused_with_a_clear_error():
  @tff.federated_computation(tff.FederatedType(np.float32, tff.SERVER),
                             tff.FederatedType(np.float32, tff.CLIENTS))
  def two_phase(state, values):
    mean = tff.federated_mean(values)
    again = tff.federated_mean(tff.federated_map(
        tff.tensorflow.computation(lambda v, m: v - m),
        (values, tff.federated_broadcast(mean))))
    return state, again

  with pytest.raises(inprocess.NotMapReduceCompatibleError,
                     match='not MapReduce-compatible.*Use --runtime=native'):
    inprocess.map_reduce_form(two_phase)


def test_secure_sums_are_exact_sums_of_bounded_inputs():
  assert inprocess._bitwidth_sum(3, np.array([[5], [6]], np.int32)).tolist() == [11]
  with pytest.raises(ValueError, match=r'outside \[0, 7\]'):
    inprocess._bitwidth_sum(3, np.array([[5], [8]], np.int32))
  assert inprocess._modular_sum(7, np.array([[5, 1], [6, 1]], np.int64)).tolist() == [4, 2]
  assert inprocess._capped_sum(10, np.array([4, 6], np.int32)) == 10
  with pytest.raises(ValueError, match=r'outside \[0, 10\]'):
    inprocess._capped_sum(10, np.array([4, 11], np.int32))
