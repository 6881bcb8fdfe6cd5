import numpy as np
import pytest
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
  # Nor does a diverged one (NaN scores).
  nan = tf.fill([2, 3], float('nan'))
  np.testing.assert_array_equal(metrics.recall_at_k(tf.constant([1, 2]), nan, 2), [0, 0])
  # Also where the evaluation runs it, inside tf.function (Grappler's rewrites).
  graph_recall = tf.function(metrics.recall_at_k)
  np.testing.assert_array_equal(graph_recall(tf.constant([1, 2]), nan, 2), [0, 0])
  np.testing.assert_array_equal(graph_recall(labels, sims, 2), [1, 1, 0])


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


def test_top_k_metrics_by_hand():
  top = np.array([[5, 1, 9], [2, 3, 4], [7, 8, 6]])
  relevant = [np.array([1, 9, 0]), np.array([6]), np.array([], np.int64)]
  got = metrics.top_k_metrics(top, relevant, 3)
  d = 1 / np.log2(np.arange(3) + 2)
  np.testing.assert_allclose(got['ndcg_at_3'][:2], [(d[1] + d[2]) / d.sum(), 0.0])
  np.testing.assert_allclose(got['recall_at_3'][:2], [2 / 3, 0.0])
  np.testing.assert_allclose(got['hr_at_3'][:2], [1.0, 0.0])
  assert np.isnan(got['ndcg_at_3'][2])  # no test items: left out of means


def test_top_k_metrics_ideal_dcg_caps_at_k():
  # 5 relevant items, k = 2, both top items relevant: NDCG 1, recall 2/5.
  got = metrics.top_k_metrics(np.array([[0, 1]]), [np.arange(5)], 2)
  np.testing.assert_allclose([got['ndcg_at_2'][0], got['recall_at_2'][0]], [1.0, 0.4])


def test_top_k_ndcg_matches_the_textbook_definition_on_random_lists():
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(6, 30))
  relevant = [rng.choice(30, size=rng.integers(1, 8), replace=False) for _ in range(6)]
  top = np.argsort(-scores, axis=1)
  got = metrics.top_k_metrics(top, relevant, 10)['ndcg_at_10']
  for u in range(6):  # the textbook definition, item by item
    gains = np.isin(top[u, :10], relevant[u]).astype(float)
    dcg = (gains / np.log2(np.arange(2, 12))).sum()
    idcg = (1 / np.log2(np.arange(2, 2 + min(10, len(relevant[u]))))).sum()
    assert got[u] == pytest.approx(dcg / idcg)


def test_auc_is_the_share_of_correctly_ordered_pairs_ties_half():
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, 200)
  scores = rng.integers(0, 10, 200).astype(float)  # many ties
  pos, neg = scores[labels == 1], scores[labels == 0]
  pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
  assert metrics.auc(labels, scores) == pytest.approx(pairs, rel=1e-12)
  assert np.isnan(metrics.auc(np.ones(3), np.arange(3.0)))


def test_logloss_is_stable_binary_cross_entropy_of_logits():
  logits = np.array([-800.0, -1.0, 0.0, 2.0, 800.0])
  labels = np.array([0, 1, 1, 0, 1])
  expected = np.mean([0.0, np.log1p(np.e), np.log(2), 2 + np.log1p(np.exp(-2)), 0.0])
  assert metrics.logloss(labels, logits) == pytest.approx(expected)


def test_sampled_rank_metrics_count_ties_against_the_held_out_item():
  positive = np.array([5.0, 1.0, 1.0, 0.0])
  negatives = np.array([[1.0, 2.0, 3.0],    # rank 0: HR 1, NDCG 1
                        [0.0, 2.0, 0.5],    # rank 1: NDCG 1 / log2(3)
                        [1.0, 0.0, 0.0],    # a tie: rank 1
                        [3.0, 2.0, 1.0]])   # rank 3: outside the top 2
  got = metrics.sampled_rank_metrics(positive, negatives, 2)
  assert got['hr_at_2'] == pytest.approx(3 / 4)
  assert got['ndcg_at_2'] == pytest.approx((1 + 2 / np.log2(3)) / 4)
  constant = metrics.sampled_rank_metrics(np.zeros(3), np.zeros((3, 99)), 10)
  assert constant == {'hr_at_10': 0.0, 'ndcg_at_10': 0.0}
  diverged = metrics.sampled_rank_metrics(np.full(3, np.nan), np.full((3, 99), np.nan), 10)
  assert diverged == {'hr_at_10': 0.0, 'ndcg_at_10': 0.0}


# Boundaries, by hand: a hit is a rank below k (0-based), never at k; ties count
# against the item; one positive; every score equal.

@pytest.mark.parametrize('k', [1, 3, 10])
def test_rank_metrics_count_rank_k_minus_1_and_not_rank_k(k):
  got = metrics.rank_metrics(np.array([k - 1, k]), k)
  assert got == {f'hr_at_{k}': 0.5, f'ndcg_at_{k}': pytest.approx(0.5 / np.log2(k + 1))}


@pytest.mark.parametrize('k', [1, 2, 5])
def test_sampled_rank_metrics_at_k_negatives_above_and_a_tie_at_the_kth(k):
  negatives = np.zeros((3, 2 * k + 1))
  negatives[0, :k - 1] = 2.0  # k - 1 above: rank k - 1, a hit
  negatives[1, :k] = 2.0      # k above: rank k, no hit
  negatives[2, :k - 1] = 2.0  # k - 1 above and one tie: rank k, no hit
  negatives[2, k - 1] = 1.0
  got = metrics.sampled_rank_metrics(np.ones(3), negatives, k)
  np.testing.assert_array_equal(metrics.sampled_ranks(np.ones(3), negatives), [k - 1, k, k])
  assert got == {f'hr_at_{k}': pytest.approx(1 / 3),
                 f'ndcg_at_{k}': pytest.approx(1 / np.log2(k + 1) / 3)}


@pytest.mark.parametrize('k', [1, 2, 4])
def test_recall_at_k_with_k_items_above_the_label_or_a_tie_at_the_kth(k):
  scores = np.zeros((3, 2 * k + 2), np.float32)
  scores[:, -1] = 1.0  # the label's column (item 2k + 2)
  scores[0, :k - 1] = 2.0  # k - 1 above: rank k - 1
  scores[1, :k] = 2.0      # k above: rank k
  scores[2, :k - 1] = 2.0  # k - 1 above, one tie: rank k
  scores[2, k - 1] = 1.0
  labels = tf.fill([3], 2 * k + 2)
  np.testing.assert_array_equal(metrics.label_rank(labels, scores), [k - 1, k, k])
  np.testing.assert_array_equal(metrics.recall_at_k(labels, scores, k), [1, 0, 0])


def test_top_k_metrics_count_the_kth_place_and_not_the_k_plus_first():
  k = 3
  top = np.array([[9, 8, 1, 2, 3],   # its one relevant item at place k (1-based)
                  [9, 8, 7, 1, 2],   # its one relevant item at place k + 1: outside
                  [1, 9, 8, 7, 6]])  # a single relevant item first
  got = metrics.top_k_metrics(top, [np.array([1]), np.array([1]), np.array([1])], k)
  np.testing.assert_allclose(got[f'ndcg_at_{k}'], [1 / np.log2(k + 1), 0.0, 1.0])
  np.testing.assert_array_equal(got[f'hr_at_{k}'], [1.0, 0.0, 1.0])
  np.testing.assert_array_equal(got[f'recall_at_{k}'], [1.0, 0.0, 1.0])


def test_auc_with_one_positive_all_ties_and_perfect_or_reversed_order():
  # One positive above 2 of 4 negatives, tied with one: (2 + 0.5) / 4.
  assert metrics.auc([1, 0, 0, 0, 0], [2.0, 1.0, 1.0, 2.0, 3.0]) == pytest.approx(0.625)
  assert metrics.auc([1, 0, 1, 0], np.zeros(4)) == 0.5  # every score equal
  assert metrics.auc([1, 1, 0, 0], [4.0, 3.0, 2.0, 1.0]) == 1.0
  assert metrics.auc([1, 1, 0, 0], [1.0, 2.0, 3.0, 4.0]) == 0.0


def test_logloss_of_all_equal_logits_is_the_constant_predictors():
  labels = np.array([1, 0, 0, 0])
  assert metrics.logloss(labels, np.zeros(4)) == pytest.approx(np.log(2))
  rate = labels.mean()  # the training click rate's logit: its binary entropy
  entropy = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))
  assert metrics.logloss(labels, np.full(4, np.log(rate / (1 - rate)))) == pytest.approx(entropy)
