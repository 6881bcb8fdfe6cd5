"""LazyAdam: touched rows move as Adam moves them, the other rows and their
moments stay; dense gradients get plain Adam (TFF's)."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import functional
from tff_rec.training import lazy_adam

LR, B1, B2, EPS = 0.1, 0.9, 0.999, 1e-7


def _adam_rows(w, m, v, g, t):
  m = B1 * m + (1 - B1) * g
  v = B2 * v + (1 - B2) * g**2
  lr = LR * np.sqrt(1 - B2**t) / (1 - B1**t)
  return w - lr * m / (np.sqrt(v) + EPS), m, v


def test_only_touched_rows_and_their_moments_move_as_adam_moves_them():
  table = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
  optimizer = lazy_adam.LazyAdam(LR)
  state = optimizer.initialize({'t': tf.TensorSpec([6, 3])})
  weights = {'t': tf.constant(table)}
  w, m, v = table.astype(np.float64), np.zeros((6, 3)), np.zeros((6, 3))
  for t, ids in enumerate(([1, 4, 1], [4, 2]), start=1):  # row 1 twice: its rows summed
    values = np.arange(len(ids) * 3, dtype=np.float32).reshape(len(ids), 3) / 10 - 0.2
    grad = tf.IndexedSlices(tf.constant(values), tf.constant(ids), tf.constant([6, 3]))
    state, weights = optimizer.next(state, weights, {'t': grad})
    dense = np.zeros((6, 3))
    np.add.at(dense, ids, values)
    rows = sorted(set(ids))
    w[rows], m[rows], v[rows] = _adam_rows(w[rows], m[rows], v[rows], dense[rows], t)
  np.testing.assert_allclose(weights['t'], w, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(state['accumulator']['t'], m, rtol=1e-5, atol=1e-8)
  np.testing.assert_array_equal(weights['t'].numpy()[[0, 3, 5]], table[[0, 3, 5]])
  assert np.all(state['preconditioner']['t'].numpy()[[0, 3, 5]] == 0)
  assert int(state['step']) == 2


def test_dense_gradients_get_tffs_adam():
  weights = {'k': tf.constant([[1.0, -2.0], [0.5, 0.0]])}
  grads = {'k': tf.constant([[0.3, 0.0], [-1.0, 2.0]])}
  results = []
  for optimizer in (lazy_adam.LazyAdam(LR), tff.learning.optimizers.build_adam(LR)):
    state = optimizer.initialize({'k': tf.TensorSpec([2, 2])})
    w = weights
    for _ in range(3):
      state, w = optimizer.next(state, w, grads)
    results.append(w['k'].numpy())
  np.testing.assert_allclose(results[0], results[1], rtol=1e-5)


def test_functional_training_hands_lazy_adam_the_sparse_gradient():
  """Through training.functional: rows no batch reads keep their values, and a
  row a later batch skips keeps still (dense Adam moves it by its momentum)."""
  table = tf.constant(np.random.default_rng(1).normal(size=(50, 4)).astype(np.float32))
  dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      ids=np.array([3, 7, 3, 9, 11, 7], np.int32))).batch(2)

  def loss(weights, batch):
    return tf.reduce_sum(tf.square(tf.gather(weights['t'], batch['ids']) - 1.0))

  original = table.numpy().copy()
  lazy, _, _, count, _ = functional.train(loss, lazy_adam.LazyAdam(LR), {'t': table},
                                          dataset)
  # Rows are written in place into the loop's own copies: the caller's table and
  # the optimizer's zero state are untouched, so a second client trains alike.
  np.testing.assert_array_equal(table.numpy(), original)
  again = functional.train(loss, lazy_adam.LazyAdam(LR), {'t': table}, dataset).weights
  np.testing.assert_array_equal(again['t'].numpy(), lazy['t'].numpy())
  dense = functional.train(loss, tff.learning.optimizers.build_adam(LR), {'t': table},
                           dataset).weights
  untouched = [i for i in range(50) if i not in (3, 7, 9, 11)]
  np.testing.assert_array_equal(lazy['t'].numpy()[untouched], table.numpy()[untouched])
  assert int(count) == 6
  # Row 9, read at step 2 only, moves on at step 3 under dense Adam's momentum
  # and stays under LazyAdam; row 11, read only at the last step, moves the same.
  assert not np.allclose(lazy['t'].numpy()[9], dense['t'].numpy()[9])
  np.testing.assert_allclose(lazy['t'].numpy()[11], dense['t'].numpy()[11], rtol=1e-5)


def test_in_place_steps_equal_the_copying_steps():
  table = np.random.default_rng(2).normal(size=(8, 2)).astype(np.float32)
  optimizer = lazy_adam.LazyAdam(LR)
  grads = [tf.IndexedSlices(tf.constant([[0.5, -1.0], [2.0, 0.1], [0.3, 0.3]]),
                            tf.constant([5, 1, 5]), tf.constant([8, 2])),
           tf.IndexedSlices(tf.constant([[1.0, 1.0]]), tf.constant([1]), tf.constant([8, 2]))]

  @tf.function
  def steps(next_fn):
    state = optimizer.initialize({'t': tf.TensorSpec([8, 2])})
    state, weights = tf.nest.map_structure(lambda t: tf.raw_ops.DeepCopy(x=t),
                                           (state, {'t': tf.constant(table)}))
    for grad in grads:
      state, weights = next_fn(state, weights, {'t': grad})
    return weights['t'], state['accumulator']['t'], state['preconditioner']['t']

  for copying, in_place in zip(steps(optimizer.next), steps(optimizer.next_in_place),
                               strict=True):
    np.testing.assert_array_equal(in_place.numpy(), copying.numpy())


def test_bad_hyperparameters_are_refused():
  with pytest.raises(ValueError, match='learning_rate must be > 0'):
    lazy_adam.LazyAdam(0.0)
