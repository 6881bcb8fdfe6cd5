"""NeuMF as functions of a weights dict: shapes, scores by hand, BPR, all-item scoring."""

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.models import neumf

SHAPE = neumf.NeuMFShape(num_users=5, num_items=11, factors=4, mlp_layers=2)


def _weights(shape=SHAPE):
  return {k: tf.constant(v) for k, v in neumf.initial_weights(shape, seed=3).items()}


def test_initial_weights_shapes_and_scales():
  w = neumf.initial_weights(SHAPE, seed=0)
  assert w['user_gmf'].shape == (5, 4) and w['item_mlp'].shape == (11, 8)  # 4 * 2^(2-1)
  assert w['mlp_0/kernel'].shape == (16, 8) and w['mlp_1/kernel'].shape == (8, 4)
  assert w['output/kernel'].shape == (8, 1)  # GMF 4 + MLP 4
  big = neumf.initial_weights(neumf.NeuMFShape(2000, 2000, 8, 1), seed=0)
  assert big['item_gmf'].std() == pytest.approx(0.01, rel=0.05)
  assert np.abs(big['output/kernel']).max() <= np.sqrt(3 / 16)


def test_scores_by_hand():
  w = _weights()
  u, i = 2, 7
  gmf = w['user_gmf'][u] * w['item_gmf'][i]
  h = tf.concat([w['user_mlp'][u], w['item_mlp'][i]], 0)
  for layer in range(2):
    h = tf.nn.relu(tf.linalg.matvec(w[f'mlp_{layer}/kernel'], h, transpose_a=True)
                   + w[f'mlp_{layer}/bias'])
  expected = tf.reduce_sum(tf.concat([gmf, h], 0) * w['output/kernel'][:, 0]) + w['output/bias'][0]
  got = neumf.scores(w, tf.constant([u]), tf.constant([i]), neumf.full_item_rows(w))
  np.testing.assert_allclose(got, [expected], rtol=1e-6)


def test_score_all_items_equals_pairwise_scores():
  w = _weights()
  for k in ('mlp_0/bias', 'mlp_1/bias', 'output/bias'):  # non-zero biases too
    w[k] = w[k] + 0.3
  users = tf.constant([0, 4, 2])
  all_items = neumf.score_all_items(w, users)
  pairs = neumf.scores(w, tf.repeat(users, 11), tf.tile(tf.range(11), [3]),
                       neumf.full_item_rows(w))
  np.testing.assert_allclose(all_items, tf.reshape(pairs, [3, 11]), rtol=1e-5, atol=1e-7)


def test_bpr_loss_by_hand_with_two_negatives():
  w = _weights()
  rows = neumf.full_item_rows(w)
  batch = {'user': tf.constant([1, 3]), 'positive': tf.constant([2, 5]),
           'negatives': tf.constant([[0, 9], [4, 4]])}
  s = lambda u, i: float(neumf.scores(w, tf.constant([u]), tf.constant([i]), rows)[0])
  ranking = -np.mean([np.log(1 / (1 + np.exp(-(s(1, 2) - (s(1, 0) + s(1, 9)) / 2)))),
                      np.log(1 / (1 + np.exp(-(s(3, 5) - (s(3, 4) + s(3, 4)) / 2))))])
  squares = sum(float(tf.reduce_sum(w[t][u] ** 2)) for t in ('user_gmf', 'user_mlp')
                for u in (1, 3))
  squares += sum(float(tf.reduce_sum(w[t][i] ** 2)) for t in ('item_gmf', 'item_mlp')
                 for i in (2, 5, 0, 9, 4, 4))
  got = neumf.bpr_loss(w, batch, rows, l2=0.5)
  assert float(got) == pytest.approx(ranking + 0.5 * squares / 2 / 2, rel=1e-5)


def test_bad_shape():
  with pytest.raises(ValueError, match='factors must be >= 1'):
    neumf.NeuMFShape(3, 3, factors=0)
