"""Ranking metrics, exact and vectorised.

Retrieval of one label among all items (the dual encoder):

`y_pred` is [B, V] (column j scores item j + 1), `y_true` the label ids [B].
The label's rank is the number of *other* items scoring at least as high, so
ties (and NaN scores) count against the label: a collapsed or diverged model
gets recall 0, never 1. (tfrs.metrics.FactorizedTopK uses top-k, whose
tie order is arbitrary, so it is not used here.)

Top-k lists against sets of relevant items (ranking tasks): top_k_metrics.
One held-out item among sampled negatives (leave-one-out): sampled_rank_metrics.
Click prediction: auc, logloss.
"""

from typing import Sequence

import numpy as np
import pandas as pd
import tensorflow as tf


def label_rank(y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
  """0-based rank of each label among all V items, ties counted against it."""
  columns = tf.cast(tf.reshape(y_true, [-1]), tf.int32) - 1
  positive = tf.gather(y_pred, columns, axis=1, batch_dims=1)
  # Items not strictly below the label count against it, NaN scores too (any
  # comparison with NaN is false). Counted as "all but those below": a
  # logical_not of `<` is rewritten by Grappler into `>=`, false for NaN, which
  # ranked a diverged model's labels first (recall 1) inside tf.function.
  below = tf.reduce_sum(tf.cast(y_pred < positive[:, None], tf.int32), axis=1)
  return tf.shape(y_pred)[1] - 1 - below


def recall_at_k(y_true: tf.Tensor, y_pred: tf.Tensor, k: int) -> tf.Tensor:
  """Per-example 1.0 if the label is among the top k of all items, else 0.0."""
  return tf.cast(label_rank(y_true, y_pred) < k, tf.float32)


@tf.keras.utils.register_keras_serializable('tff_rec')
class GlobalRecall(tf.keras.metrics.Mean):
  """Mean recall@k over examples; its sum/count state aggregates in TFF."""

  def __init__(self, k: int, name: str | None = None, **kwargs):
    super().__init__(name=name or f'recall_at_{k}', **kwargs)
    self.k = k

  def update_state(self, y_true, y_pred, sample_weight=None):
    return super().update_state(recall_at_k(y_true, y_pred, self.k), sample_weight)

  def get_config(self):
    return {**super().get_config(), 'k': self.k}


def top_k_metrics(top_items: np.ndarray, relevant: Sequence[np.ndarray], k: int
                  ) -> dict[str, np.ndarray]:
  """Per-user NDCG@k, recall@k and HR@k of ranked lists against relevant sets.

  top_items: [users, >= k] item ids, best first (already excluding items the
  user trained on); relevant: each user's set of relevant (test) items.
  NDCG@k = DCG / ideal DCG with binary gains and 1 / log2(rank + 2) discounts
  (sklearn.metrics.ndcg_score's definition for binary relevance);
  recall@k = hits / |relevant|; HR@k = 1 if any hit. Users with no relevant
  item get NaN (callers average with nanmean).
  """
  top = np.asarray(top_items)[:, :k]
  users = np.repeat(np.arange(len(relevant)), [len(r) for r in relevant])
  keys = users.astype(np.int64) * (1 << 32) + np.concatenate(
      [np.asarray(r, np.int64) for r in relevant] or [np.zeros(0, np.int64)])
  top_keys = np.arange(len(top), dtype=np.int64)[:, None] * (1 << 32) + top
  hits = np.isin(top_keys, keys).astype(np.float64)
  discounts = 1.0 / np.log2(np.arange(k) + 2.0)
  counts = np.array([len(r) for r in relevant], np.float64)
  ideal = np.cumsum(discounts)[np.minimum(counts, k).astype(int) - 1]
  with np.errstate(invalid='ignore', divide='ignore'):
    empty = counts == 0
    return {
        f'ndcg_at_{k}': np.where(empty, np.nan, hits @ discounts / np.where(empty, 1, ideal)),
        f'recall_at_{k}': np.where(empty, np.nan, hits.sum(1) / np.maximum(counts, 1)),
        f'hr_at_{k}': np.where(empty, np.nan, (hits.sum(1) > 0).astype(np.float64)),
    }


def sampled_rank_metrics(positive: np.ndarray, negatives: np.ndarray, k: int
                         ) -> dict[str, float]:
  """Mean HR@k and NDCG@k of each user's held-out item among its negatives.

  positive: [users] the held-out item's score; negatives: [users, C] the
  sampled items' scores (rank_metrics of sampled_ranks).
  """
  return rank_metrics(sampled_ranks(positive, negatives), k)


def sampled_ranks(positive: np.ndarray, negatives: np.ndarray) -> np.ndarray:
  """[users] each held-out item's 0-based rank: the number of its negatives
  scoring at least as high (ties and NaN scores count against it, so a
  constant or diverged model gets HR 0, not 1)."""
  # "not below" rather than ">=": a NaN score counts against the item, too.
  return (~(np.asarray(negatives) < np.asarray(positive)[:, None])).sum(axis=1)


def rank_metrics(rank: np.ndarray, k: int) -> dict[str, float]:
  """Mean HR@k (rank < k) and NDCG@k (1 / log2(rank + 2) within the top k) of
  0-based ranks."""
  hit = rank < k
  return {f'hr_at_{k}': float(hit.mean()),
          f'ndcg_at_{k}': float(np.where(hit, 1.0 / np.log2(rank + 2.0), 0.0).mean())}


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
  """Exact ROC AUC: P(a positive outscores a negative), ties counting half.

  The Mann-Whitney statistic over average ranks (what sklearn's roc_auc_score
  computes), vectorised with pandas; NaN when one class is absent.
  """
  labels = np.asarray(labels).reshape(-1) > 0
  positives, negatives = labels.sum(), (~labels).sum()
  if not positives or not negatives:
    return float('nan')
  ranks = pd.Series(np.asarray(scores, np.float64).reshape(-1)).rank().to_numpy()
  return float((ranks[labels].sum() - positives * (positives + 1) / 2)
               / (positives * negatives))


def logloss(labels: np.ndarray, logits: np.ndarray) -> float:
  """Mean binary cross-entropy of click logits, computed stably; NaN, without a
  warning, where a logit is infinite (a diverged model, which the loop reports)."""
  y = np.asarray(labels, np.float64).reshape(-1)
  z = np.asarray(logits, np.float64).reshape(-1)
  with np.errstate(invalid='ignore'):
    return float(np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))))
