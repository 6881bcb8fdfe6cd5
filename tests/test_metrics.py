import numpy as np
import tensorflow as tf

from tff_rec import metrics


def test_label_rank_counts_ties_against_the_label():
  sims = tf.constant([[0.5, 0.5, 0.1], [0.9, 0.2, 0.3], [0.0, 0.0, 0.0]])
  labels = tf.constant([1, 1, 3])
  np.testing.assert_array_equal(metrics.label_rank(labels, sims), [1, 0, 2])
  np.testing.assert_array_equal(metrics.recall_at_k(labels, sims, 1), [0, 1, 0])
  np.testing.assert_array_equal(metrics.recall_at_k(labels, sims, 2), [1, 1, 0])
  # A collapsed model (all scores equal) never gets credit.
  np.testing.assert_array_equal(metrics.recall_at_k(labels, sims, 3), [1, 1, 1])


def test_recall_matches_a_sort_based_reference():
  rng = np.random.default_rng(0)
  sims = rng.normal(size=(500, 300)).astype(np.float32)
  labels = rng.integers(1, 301, size=500)
  order = np.argsort(-sims, axis=1)
  reference_rank = np.argmax(order == (labels - 1)[:, None], axis=1)
  np.testing.assert_array_equal(metrics.label_rank(labels, sims), reference_rank)
  for k in (1, 5, 10):
    hits = metrics.recall_at_k(labels, sims, k).numpy()
    assert hits.sum() == np.sum(reference_rank < k)


def test_keras_metric_averages_over_all_examples_of_all_batches():
  metric = metrics.GlobalRecall(1)
  assert metric.name == 'recall_at_1'
  metric.update_state(tf.constant([1, 1]), tf.constant([[0.9, 0.1], [0.1, 0.9]]))  # 1 hit
  metric.update_state(tf.constant([2]), tf.constant([[0.1, 0.9]]))  # 1 hit
  assert metric.result().numpy() == np.float32(2 / 3)
