"""The centralized baseline's one loop: the task's model and loss on its data
pooled, epoch by epoch, evaluated on a schedule.

What an epoch trains is the task's: a Keras model fitted by Keras
(`KerasEpochs`), or a weight-table model's tensors stepped by a TFF optimizer
(`FunctionalEpochs`, the same client loop federated training uses).
"""

from typing import Any, Callable, Mapping

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import functional
from tff_rec.training import loop

Metrics = dict[str, float]


def train(train_epoch: Callable[[int], float], *, epochs: int,
          evaluate: Callable[[], Metrics], eval_every: int = 1,
          final_evaluate: Callable[[], Metrics] | None = None,
          on_epoch: Callable[[int, Metrics], None] | None = None) -> Metrics:
  """Runs `train_epoch(epoch)` (-> its mean train loss) for epochs 1..`epochs`.

  `evaluate` runs every `eval_every` epochs (0: never) and after the last, and
  `final_evaluate` after the last; `on_epoch(epoch, metrics)` sees every
  epoch's metrics ('train/loss' and the evaluations'). Returns the last's. An
  epoch whose training or evaluated loss is not finite raises loop.Diverged
  (after on_epoch has seen it), with the last finite evaluation.
  """
  if epochs < 1:
    raise ValueError(f'epochs must be >= 1, got {epochs}')
  metrics, evaluated, evaluated_epoch = {}, {}, None
  for epoch in range(1, epochs + 1):
    metrics = {'train/loss': float(train_epoch(epoch))}
    evaluating = epoch == epochs or (eval_every and epoch % eval_every == 0)
    if evaluating:
      metrics.update(evaluate())
    if epoch == epochs and final_evaluate:
      metrics.update(final_evaluate())
    if on_epoch:
      on_epoch(epoch, metrics)
    losses = loop.non_finite_losses(metrics)
    if losses:
      raise loop.Diverged(epoch, losses, metrics, evaluated, evaluated_epoch, unit='epoch')
    if evaluating:
      evaluated = {k: v for k, v in metrics.items() if k != 'train/loss'}
      evaluated_epoch = epoch
  return metrics


class KerasEpochs:
  """Epochs of Keras fit over `epoch_dataset(epoch)` ((x, y) batches). The
  model's regularization losses (spreadout) are added by Keras, as TFF adds
  them in federated training."""

  def __init__(self, model: tf.keras.Model, *, loss: tf.keras.losses.Loss,
               optimizer: tf.keras.optimizers.Optimizer,
               epoch_dataset: Callable[[int], tf.data.Dataset]):
    model.compile(optimizer=optimizer, loss=loss)
    self.model = model
    self._epoch_dataset = epoch_dataset

  def __call__(self, epoch: int) -> float:
    history = self.model.fit(self._epoch_dataset(epoch), epochs=1, verbose=0)
    return history.history['loss'][-1]


class FunctionalEpochs:
  """Epochs of functional.train on a dict of weight tensors, one optimizer
  throughout; `weights` holds the current ones (numpy)."""

  def __init__(self, loss_fn: functional.LossFn,
               optimizer: tff.learning.optimizers.Optimizer,
               weights: Mapping[str, Any], epoch_dataset: Callable[[int], tf.data.Dataset]):
    self._loss_fn, self._optimizer = loss_fn, optimizer
    self._weights = {k: tf.constant(v) for k, v in weights.items()}
    self._epoch_dataset = epoch_dataset
    self._state = None

  def __call__(self, epoch: int) -> float:
    self._weights, self._state, loss_sum, count, _ = functional.train(
        self._loss_fn, self._optimizer, self._weights, self._epoch_dataset(epoch), self._state)
    return float(loss_sum) / max(int(count), 1)

  @property
  def weights(self) -> dict[str, Any]:
    return {k: v.numpy() for k, v in self._weights.items()}
