"""An optimizer as a setting: built for TFF's rounds (client and server) or for
Keras (centralized training), with the same defaults."""

import dataclasses

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import fused_adam
from tff_rec.training import lazy_adam

OPTIMIZERS = ('sgd', 'adam', 'adagrad', 'lazy_adam')


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """An optimizer; `adaptivity` (adagrad, adam) is Reddi et al.'s tau, the
  floor of the denominator (Adagrad: also sqrt of the starting accumulator;
  Adam: its epsilon, under TFF's bias correction).
  None keeps TFF's defaults (Adagrad starts its accumulator at 0.1, which
  damps the first steps of small updates; the FedAdagrad of Reddi et al. and
  MetaUA start near 0)."""
  name: str = 'sgd'
  learning_rate: float = 0.01
  adaptivity: float | None = None

  def __post_init__(self):
    if self.name not in OPTIMIZERS:
      raise ValueError(f'unknown optimizer {self.name!r}; choose one of {OPTIMIZERS}')
    if not self.learning_rate > 0:
      raise ValueError(f'learning rate must be > 0, got {self.learning_rate}')
    if self.adaptivity is not None and self.name in ('sgd', 'lazy_adam'):
      raise ValueError(f'adaptivity applies to adagrad and adam, not {self.name}')
    if self.adaptivity is not None and not self.adaptivity > 0:
      raise ValueError(f'adaptivity must be > 0, got {self.adaptivity}')

  def build(self) -> tff.learning.optimizers.Optimizer:
    tau = self.adaptivity
    if self.name == 'lazy_adam':
      return lazy_adam.LazyAdam(self.learning_rate)
    if self.name == 'adam':  # TFF's Adam; its client loops in TF's fused kernel
      return (fused_adam.Adam(self.learning_rate, epsilon=tau) if tau
              else fused_adam.Adam(self.learning_rate))
    if self.name == 'adagrad':
      # TFF's Adagrad adds epsilon inside the root: sqrt(v + tau^2) ~ sqrt(v) + tau.
      return (tff.learning.optimizers.build_adagrad(
          self.learning_rate, initial_preconditioner_value=tau**2, epsilon=tau**2) if tau
              else tff.learning.optimizers.build_adagrad(self.learning_rate))
    return tff.learning.optimizers.build_sgdm(self.learning_rate)

  def settings(self) -> dict:
    """Its fields that are set, for a run's config (unset ones leave older runs' alone)."""
    return {k: v for k, v in vars(self).items() if v is not None}

  def keras(self) -> tf.keras.optimizers.Optimizer:
    """The same optimizer for centralized Keras training (TFF's defaults match)."""
    if self.name == 'lazy_adam':
      raise ValueError('lazy_adam is a client optimizer for weight-table models '
                       '(the FAIR family, table forms); Keras has none')
    return {'adam': tf.keras.optimizers.Adam, 'adagrad': tf.keras.optimizers.Adagrad,
            'sgd': tf.keras.optimizers.SGD}[self.name](self.learning_rate)
