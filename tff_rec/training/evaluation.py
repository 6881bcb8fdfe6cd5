"""Centralized evaluation of a Keras model with Keras metrics."""

from typing import Sequence

import tensorflow as tf


class Evaluator:
  """Runs a model over (x, y) batches and returns {metric name: value}.

  The metrics must be per-example means (recall@k is), so results do not
  depend on the batch size. The step is traced once and reused, so repeated
  evaluations neither retrace nor grow TF's function library.
  """

  def __init__(self, model: tf.keras.Model,
               metrics: Sequence[tf.keras.metrics.Metric]):
    self.model = model
    self.metrics = list(metrics)
    self._step = tf.function(self._update)

  def _update(self, x, y):
    predictions = self.model(x, training=False)
    for metric in self.metrics:
      metric.update_state(y, predictions)

  def __call__(self, dataset: tf.data.Dataset) -> dict[str, float]:
    for metric in self.metrics:
      metric.reset_state()
    for x, y in dataset:
      self._step(x, y)
    return {metric.name: float(metric.result()) for metric in self.metrics}
