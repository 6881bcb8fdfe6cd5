"""tensorflow_runner: one TFF TensorFlow computation called in-process, and
ClientChain's several clients per call against calling work and accumulate per
client."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.runtime import tensorflow_runner

DATA = tff.SequenceType(tff.TensorType(np.float32, [None]))


@tff.tensorflow.computation(DATA, np.float32)
def _work(dataset, scale):
  # A variable and a loop in each client's graph: copies in one graph must keep
  # their own (a shared variable or loop frame would mix clients).
  total = tf.Variable(0.0)

  @tf.function
  def run():
    for batch in dataset:
      total.assign_add(tf.reduce_sum(batch) * scale)
    return total.read_value()

  value = run()
  return collections.OrderedDict(update=value, count=tf.constant(1)), value * 2.0


@tff.tensorflow.computation(collections.OrderedDict(update=np.float32, count=np.int32),
                            collections.OrderedDict(update=np.float32, count=np.int32))
def _accumulate(accumulator, update):
  # Not a sum: the order of clients shows.
  return collections.OrderedDict(update=accumulator['update'] * 0.5 + update['update'],
                                 count=accumulator['count'] + update['count'])


def _datasets():
  return [tf.data.Dataset.from_tensor_slices(np.arange(k + 1, dtype=np.float32)).batch(2)
          for k in range(7)]


@pytest.mark.parametrize('clients_per_call', [1, 3, 8])
def test_a_chain_equals_work_and_accumulate_called_per_client(clients_per_call):
  datasets = _datasets()
  work, accumulate = (tensorflow_runner.TensorFlowRunner(c) for c in (_work, _accumulate))
  expected = {'update': np.float32(0.0), 'count': np.int32(0)}
  secure = []
  for dataset in datasets:
    update, doubled = work([dataset, 3.0])
    expected = accumulate([expected, update])
    secure.append(doubled)
  chain = tensorflow_runner.ClientChain(_work, _accumulate, clients_per_call=clients_per_call)
  accumulator, chained_secure = chain({'update': 0.0, 'count': 0}, 3.0, datasets)
  assert accumulator.update == pytest.approx(expected['update'])
  assert accumulator.count == 7
  assert [s[0] for s in chained_secure] == pytest.approx(secure)
  assert secure[-1] == pytest.approx(2 * 3.0 * sum(range(7)))


def test_a_chain_refuses_fewer_than_one_client_per_call():
  with pytest.raises(ValueError, match='clients_per_call must be >= 1, got 0'):
    tensorflow_runner.ClientChain(_work, _accumulate, clients_per_call=0)


def test_memory_bytes_counts_the_variables_and_five_results():
  @tff.tensorflow.computation
  def two_tables():
    a, b = tf.Variable(tf.zeros([100, 8])), tf.Variable(tf.zeros([3], tf.float64))
    return a.read_value()[0], tf.cast(b.read_value()[0], tf.float32)

  assert tensorflow_runner.memory_bytes(two_tables) == (100 * 8 * 4 + 3 * 8
                                                        + 5 * (8 * 4 + 4))
