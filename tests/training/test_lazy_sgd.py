"""LazySGD: the very weights of TFF's SGD, the untouched rows never written."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import functional
from tff_rec.training import lazy_sgd

LR = 0.3


def _train(optimizer, table, dense):
  ids = np.array([3, 7, 3, 9, 3, 11, 7, 40], np.int32)  # rows repeated within a batch
  dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      ids=ids, target=np.linspace(-1, 2, len(ids)).astype(np.float32))).batch(4)

  def loss(weights, batch):
    rows = tf.gather(weights['t'], batch['ids'])
    return tf.reduce_mean(tf.square(rows @ weights['d'] - batch['target'][:, None]))

  return functional.train(loss, optimizer, {'t': table, 'd': dense}, dataset).weights


def test_weights_are_tffs_sgd_to_the_bit_and_the_callers_table_is_untouched():
  rng = np.random.default_rng(0)
  table = tf.constant(rng.normal(size=(50, 4)).astype(np.float32))
  dense = tf.constant(rng.normal(size=(4, 1)).astype(np.float32))  # a dense gradient too
  original = table.numpy().copy()
  lazy = _train(lazy_sgd.LazySGD(LR), table, dense)
  tffs = _train(tff.learning.optimizers.build_sgdm(LR), table, dense)
  for name in ('t', 'd'):
    np.testing.assert_array_equal(lazy[name].numpy(), tffs[name].numpy())
  np.testing.assert_array_equal(table.numpy(), original)  # rows written into a copy
  moved = np.flatnonzero(np.any(lazy['t'].numpy() != original, axis=1))
  assert list(moved) == [3, 7, 9, 11, 40]


def test_copying_steps_equal_in_place_steps():
  optimizer = lazy_sgd.LazySGD(LR)
  grad = tf.IndexedSlices(tf.constant([[0.5, -1.0], [2.0, 0.1], [0.3, 0.3]]),
                          tf.constant([5, 1, 5]), tf.constant([8, 2]))
  table = np.arange(16, dtype=np.float32).reshape(8, 2)

  @tf.function
  def step(next_fn):
    state = optimizer.initialize({'t': tf.TensorSpec([8, 2])})
    weights = {'t': tf.raw_ops.DeepCopy(x=tf.constant(table))}
    return next_fn(state, weights, {'t': grad})[1]['t']

  np.testing.assert_array_equal(step(optimizer.next).numpy(),
                                step(optimizer.next_in_place).numpy())


def test_a_learning_rate_of_zero_is_refused():
  with pytest.raises(ValueError, match='learning_rate must be > 0'):
    lazy_sgd.LazySGD(0.0)
