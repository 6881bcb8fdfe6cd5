"""The centralized baseline: the same Keras model and loss, trained with Keras."""

from typing import Callable

import tensorflow as tf


def train(model: tf.keras.Model, *, loss: tf.keras.losses.Loss,
          optimizer: tf.keras.optimizers.Optimizer,
          epoch_dataset: Callable[[int], tf.data.Dataset], epochs: int,
          evaluate: Callable[[tf.keras.Model], dict[str, float]],
          eval_every: int = 1,
          on_epoch: Callable[[int, dict[str, float]], None] | None = None
          ) -> dict[str, float]:
  """Trains for `epochs` passes over `epoch_dataset(epoch)` ((x, y) batches).

  `evaluate` runs every `eval_every` epochs and after the last; returns the
  last epoch's metrics. The model's regularization losses (spreadout) are
  added by Keras, as TFF adds them in federated training.
  """
  if epochs < 1:
    raise ValueError(f'epochs must be >= 1, got {epochs}')
  model.compile(optimizer=optimizer, loss=loss)
  metrics = {}
  for epoch in range(1, epochs + 1):
    history = model.fit(epoch_dataset(epoch), epochs=1, verbose=0)
    metrics = {'train/loss': float(history.history['loss'][-1])}
    if epoch == epochs or (eval_every and epoch % eval_every == 0):
      metrics.update(evaluate(model))
    if on_epoch:
      on_epoch(epoch, metrics)
  return metrics
