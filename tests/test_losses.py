import math

import numpy as np
import pytest
import tensorflow as tf

from tff_rec import losses

# Two contexts scored against V = 3 items; labels are items 1 and 2.
SIMS = tf.constant([[0.5, 0.1, -0.2], [0.3, 0.8, 0.0]])
LABELS = tf.constant([1, 2])


def test_batch_softmax_uses_only_in_batch_labels_as_negatives():
  # In-batch scores [[0.5, 0.1], [0.3, 0.8]], positives on the diagonal.
  expected = (math.log(1 + math.exp(0.1 - 0.5)) + math.log(1 + math.exp(0.3 - 0.8))) / 2
  assert losses.BatchSoftmax()(LABELS, SIMS).numpy() == pytest.approx(expected, rel=1e-6)


def test_global_softmax_uses_every_item():
  row0 = -0.5 + math.log(math.exp(0.5) + math.exp(0.1) + math.exp(-0.2))
  row1 = -0.8 + math.log(math.exp(0.3) + math.exp(0.8) + math.exp(0.0))
  assert losses.GlobalSoftmax()(LABELS, SIMS).numpy() == pytest.approx((row0 + row1) / 2, rel=1e-6)


def test_squared_hinge_on_positives_with_margin_0_9():
  expected = ((0.9 - 0.5) ** 2 + (0.9 - 0.8) ** 2) / 2
  assert losses.SquaredHinge()(LABELS, SIMS).numpy() == pytest.approx(expected, rel=1e-6)
  above_margin = tf.constant([[0.95, 0.0, 0.0]])
  assert losses.SquaredHinge()(tf.constant([1]), above_margin).numpy() == 0.0


def test_spreadout_is_frobenius_norm_of_off_diagonal_cosines():
  # Row 0 is padding (skipped); rows [1,0], [0,2], [3,3] normalise to
  # e1, e2, (e1+e2)/sqrt2: off-diagonal cosines 0, 1/sqrt2, 1/sqrt2 (twice each).
  table = tf.constant([[9.0, 9.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
  assert losses.Spreadout(0.5)(table).numpy() == pytest.approx(0.5 * math.sqrt(2), rel=1e-6)


def test_spreadout_matches_the_direct_v_by_v_formula_and_its_gradient():
  table = tf.Variable(tf.random.stateless_normal([60, 8], seed=[3, 4]))

  def direct(t):
    rows = tf.math.l2_normalize(t[1:], axis=1)
    sims = tf.matmul(rows, rows, transpose_b=True)
    return 0.3 * tf.norm(tf.linalg.set_diag(sims, tf.zeros(59)))

  with tf.GradientTape(persistent=True) as tape:
    fast, slow = losses.Spreadout(0.3)(table), direct(table)
  assert fast.numpy() == pytest.approx(slow.numpy(), rel=1e-5)
  np.testing.assert_allclose(tape.gradient(fast, table), tape.gradient(slow, table),
                             rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize('name', ['global_softmax', 'hinge_spreadout'])
def test_batch_insensitive_losses_are_means_of_single_example_losses(name):
  loss = losses.RETRIEVAL_LOSSES[name][0]()
  sims = tf.random.stateless_uniform([8, 20], seed=[1, 2], minval=-1, maxval=1)
  labels = tf.constant([3, 1, 20, 7, 7, 2, 9, 11])
  singles = [loss(labels[i:i + 1], sims[i:i + 1]).numpy() for i in range(8)]
  assert loss(labels, sims).numpy() == pytest.approx(np.mean(singles), rel=1e-6)


def test_batch_softmax_is_batch_sensitive():
  loss = losses.BatchSoftmax()
  sims = tf.random.stateless_uniform([8, 20], seed=[1, 2], minval=-1, maxval=1)
  labels = tf.constant([3, 1, 20, 7, 5, 2, 9, 11])
  halves = (loss(labels[:4], sims[:4]).numpy() + loss(labels[4:], sims[4:]).numpy()) / 2
  assert loss(labels, sims).numpy() != pytest.approx(halves, rel=1e-3)


def test_loss_names_map_to_spreadout_use():
  assert {n: s for n, (_, s) in losses.RETRIEVAL_LOSSES.items()} == {
      'batch_softmax': False, 'batch_softmax_spreadout': True,
      'hinge_spreadout': True, 'global_softmax': False}


def test_batch_softmax_can_mask_a_negative_that_repeats_the_rows_label():
  # Labels [1, 1, 2]: in row 0, column 1 is item 1 again, not a negative.
  sims = tf.constant([[0.5, 0.1, -0.2], [0.3, 0.8, 0.0], [0.2, 0.4, 0.6]])
  labels = tf.constant([1, 1, 2])
  in_batch = tf.gather(sims, [0, 0, 1], axis=1).numpy()
  rows = [[0, 2], [1, 2], [0, 1, 2]]  # the columns left in each row
  expected = np.mean([-in_batch[i, i] + math.log(sum(math.exp(in_batch[i, j]) for j in r))
                      for i, r in enumerate(rows)])
  masked = losses.BatchSoftmax(remove_accidental_hits=True)(labels, sims).numpy()
  assert masked == pytest.approx(expected, rel=1e-5)
  assert losses.BatchSoftmax()(labels, sims).numpy() > masked


def test_batch_softmax_log_q_correction_subtracts_each_columns_log_frequency():
  frequency = [0.5, 0.25, 0.25]
  corrected = tf.gather(SIMS, [0, 1], axis=1).numpy() - np.log([0.5, 0.25])
  expected = np.mean([-corrected[i, i] + math.log(np.exp(corrected[i]).sum())
                      for i in range(2)])
  loss = losses.BatchSoftmax(label_frequency=frequency)
  assert loss(LABELS, SIMS).numpy() == pytest.approx(expected, rel=1e-6)
  again = losses.BatchSoftmax.from_config(loss.get_config())
  assert again(LABELS, SIMS).numpy() == pytest.approx(expected, rel=1e-6)
