"""Ranking metrics over global similarities, exact and vectorised.

`y_pred` is [B, V] (column j scores item j + 1), `y_true` the label ids [B].
The label's rank is the number of *other* items scoring at least as high, so
ties count against the label: a collapsed model that scores every item the
same gets recall 0, never 1. (tfrs.metrics.FactorizedTopK uses top-k, whose
tie order is arbitrary, so it is not used here.)
"""

import tensorflow as tf


def label_rank(y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
  """0-based rank of each label among all V items, ties counted against it."""
  columns = tf.cast(tf.reshape(y_true, [-1]), tf.int32) - 1
  positive = tf.gather(y_pred, columns, axis=1, batch_dims=1)
  at_least = tf.reduce_sum(tf.cast(y_pred >= positive[:, None], tf.int32), axis=1)
  return at_least - 1


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
