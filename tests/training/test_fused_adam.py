"""fused_adam.Adam: TFF's Adam, bit for bit, with the client loop's steps in TF's
fused kernel on variables of the loop's own."""

import collections
import threading

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import sliced
from tff_rec.training import functional
from tff_rec.training import fused_adam

LR = 0.05
RNG = np.random.default_rng(3)
TABLE = RNG.normal(size=(12, 4)).astype(np.float32)
DENSE = RNG.normal(size=(4,)).astype(np.float32)
IDS = RNG.integers(0, 12, size=(23,)).astype(np.int32)
TARGETS = RNG.normal(size=(23,)).astype(np.float32)


def _loss(weights, batch):
  # An embedding lookup (a sparse gradient, densified), as FAIR's and FedMF's tables.
  rows = tf.gather(weights['table'], batch['ids'])
  return tf.reduce_mean((tf.linalg.matvec(rows, weights['dense']) - batch['y'])**2)


def _weights():
  return collections.OrderedDict(table=tf.constant(TABLE), dense=tf.constant(DENSE))


def _train(optimizer, batches):
  trained = functional.train(_loss, optimizer, _weights(), batches)
  return tf.nest.map_structure(lambda t: np.asarray(t), trained._asdict())


def _sliced():
  return sliced.in_order(collections.OrderedDict(ids=IDS, y=TARGETS), batch_size=5)


def _dataset():
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(ids=IDS, y=TARGETS)).batch(5)


def test_the_client_loop_takes_tffs_adam_steps_bit_for_bit():
  for batches in (_sliced(), _dataset()):
    fused = _train(fused_adam.Adam(LR), batches)
    tffs = _train(tff.learning.optimizers.build_adam(LR), batches)
    tf.nest.map_structure(np.testing.assert_array_equal, fused, tffs)
    assert int(fused['steps']) == 5 and int(fused['optimizer_state']['step']) == 5
    assert not np.array_equal(fused['weights']['table'], TABLE)  # it trained


def test_a_keras_models_loop_takes_tffs_adam_steps_bit_for_bit():
  """The clients of SCAFFOLD, MetaUA and FedNova: a model's variables take the
  held weights' values, then its forward pass is differentiated."""
  def model():
    ids = tf.keras.Input((), dtype=tf.int32, name='ids')
    rows = tf.keras.layers.Embedding(12, 4)(ids)
    keras = tf.keras.Model(ids, tf.keras.layers.Dense(1)(rows)[:, 0])
    return tff.learning.models.from_keras_model(
        keras, loss=tf.keras.losses.MeanSquaredError(),
        input_spec=(tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.float32)))

  start = [TABLE, DENSE[:, None], np.zeros(1, np.float32)]
  batches = _dataset().map(lambda b: (b['ids'], b['y']))
  fused, tffs = (functional.train(model(), optimizer, start, batches).weights
                 for optimizer in (fused_adam.Adam(LR), tff.learning.optimizers.build_adam(LR)))
  tf.nest.map_structure(np.testing.assert_array_equal, fused, tffs)
  assert not np.array_equal(fused[0], TABLE)


def test_the_callers_weights_never_change():
  weights = _weights()

  @tf.function
  def train_twice():
    first = functional.train(_loss, fused_adam.Adam(LR), weights, _sliced())
    second = functional.train(_loss, fused_adam.Adam(LR), weights, _sliced())
    return first.weights['table'], second.weights['table'], weights['table'] + 0.0

  first, second, after = train_twice()
  np.testing.assert_array_equal(after, TABLE)
  np.testing.assert_array_equal(first, second)


def test_clients_training_at_once_hold_variables_of_their_own():
  """Two threads call one traced loop at once (as the in-process runtime runs a
  cohort's clients): each gets the numbers it gets alone."""
  optimizer = fused_adam.Adam(LR)
  train = tf.function(lambda table: functional.train(
      _loss, optimizer, collections.OrderedDict(table=table, dense=tf.constant(DENSE)),
      _sliced()).weights['table'])
  starts = [TABLE, TABLE * -2.0]
  alone = [train(tf.constant(s)).numpy() for s in starts]
  together = [None] * len(starts)

  def run(i):
    for _ in range(20):
      together[i] = train(tf.constant(starts[i])).numpy()
      np.testing.assert_array_equal(together[i], alone[i])

  threads = [threading.Thread(target=run, args=(i,)) for i in range(len(starts))]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  for i, result in enumerate(together):
    np.testing.assert_array_equal(result, alone[i])


def test_next_outside_the_loop_is_tffs_adam():
  optimizer, tffs = fused_adam.Adam(LR, epsilon=0.3), tff.learning.optimizers.build_adam(
      LR, epsilon=0.3)
  specs = collections.OrderedDict(w=tf.TensorSpec([3]))
  state = optimizer.initialize(specs)
  tf.nest.map_structure(np.testing.assert_array_equal, state, tffs.initialize(specs))
  weights, gradient = {'w': tf.constant([1.0, -1.0, 0.5])}, {'w': tf.constant([0.1, 0.2, -3.0])}
  tf.nest.map_structure(np.testing.assert_array_equal,
                        optimizer.next(state, weights, gradient),
                        tffs.next(tffs.initialize(specs), weights, gradient))
