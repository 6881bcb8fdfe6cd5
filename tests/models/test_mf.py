"""Matrix factorization: frequency-scaled lookups, the loss, batched user gradients."""

import numpy as np
import tensorflow as tf

from tff_rec.models import mf


def test_each_row_moves_by_the_mean_gradient_of_its_occurrences():
  table = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
  ids = tf.constant([2, 0, 2, 2])
  weights = tf.constant([[1.0], [2.0], [3.0], [5.0]])
  with tf.GradientTape() as tape:
    tape.watch(table)
    loss = tf.reduce_mean(tf.reduce_sum(weights * mf.frequency_scaled_gather(table, ids), 1))
  grad = tf.convert_to_tensor(tape.gradient(loss, table)).numpy()
  # Occurrence j's own gradient is weights[j] / 4 per entry; row 2 takes the
  # mean of its three (x 4 / 3 each), row 0 its single one (x 4).
  np.testing.assert_allclose(grad[2], np.full(3, (1 + 3 + 5) / 3), rtol=1e-6)
  np.testing.assert_allclose(grad[0], np.full(3, 2.0), rtol=1e-6)
  np.testing.assert_array_equal(grad[[1, 3]], 0)


def test_scale_gradient_is_the_identity_with_a_scaled_gradient():
  x = tf.constant([1.0, -2.0])
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = mf.scale_gradient(x, 0.25)
    total = tf.reduce_sum(3 * y)
  np.testing.assert_array_equal(y.numpy(), x.numpy())
  np.testing.assert_allclose(tape.gradient(total, x).numpy(), [0.75, 0.75])


def test_loss_of_one_user_vector_equals_the_loss_of_its_rows():
  rng = np.random.default_rng(0)
  user, items = rng.normal(size=4).astype(np.float32), rng.normal(size=(6, 4)).astype(np.float32)
  labels = np.array([1, 0, 0, 1, 0, 0], np.float32)
  logits = items @ user
  bce = np.mean(np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-abs(logits))))
  expected = bce + 0.1 * ((items ** 2).sum() + 6 * (user ** 2).sum()) / 6
  np.testing.assert_allclose(mf.loss(user, items, labels, 0.1).numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(mf.loss(np.tile(user, [6, 1]), items, labels, 0.1).numpy(),
                             expected, rtol=1e-5)


def test_batched_user_gradients_equal_autodiff_of_each_users_loss():
  rng = np.random.default_rng(1)
  users = rng.normal(size=(3, 4)).astype(np.float32)
  rows = rng.normal(size=(3, 5, 4)).astype(np.float32)
  labels = rng.integers(0, 2, size=(3, 5)).astype(np.float32)
  mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], np.float32)
  got = mf.user_gradients(users, rows, labels, mask, 0.01).numpy()
  for n in range(2):
    real = mask[n] > 0
    user = tf.constant(users[n])
    with tf.GradientTape() as tape:
      tape.watch(user)
      loss = mf.loss(user, rows[n][real], labels[n][real], 0.01)
    np.testing.assert_allclose(got[n], tape.gradient(loss, user).numpy(), rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(got[2], 0)  # no rows this step: no move


def test_initial_user_vectors_are_fixed_by_seed_and_user():
  np.testing.assert_array_equal(mf.initial_user(5, 8, seed=1), mf.initial_user(5, 8, seed=1))
  assert not np.array_equal(mf.initial_user(5, 8, seed=1), mf.initial_user(6, 8, seed=1))
  table = mf.initial_table(2000, 16, seed=0)
  assert abs(table.std() - 0.25) < 0.01  # N(0, 1/d)


def test_an_initial_table_drawn_block_by_block_is_the_one_draw_of_every_record(monkeypatch):
  monkeypatch.setattr(mf, 'INITIAL_BLOCK', 3)  # 3 rows at a time: 4 blocks, the last short
  rng = np.random.default_rng(7)
  once = (rng.standard_normal((11, 5)) / np.sqrt(5)).astype(np.float32)
  np.testing.assert_array_equal(mf.initial_table(11, 5, seed=7), once)
