"""FedAvg, FedSGD and FedProx learning processes, straight from tff.learning."""

import dataclasses
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

ALGORITHMS = ('fedavg', 'fedsgd', 'fedprox')
OPTIMIZERS = ('sgd', 'adam', 'adagrad')

# Clients loop over their batches with a dataset iterator, not TFF's default
# Dataset.reduce: a ReduceDataset op instantiates (and graph-optimizes) its
# body function on every call, ~150 ms per client for the dual encoder on
# either runtime, against ~25 ms for the whole iterator loop.
CLIENT_LOOP = tff.learning.LoopImplementation.DATASET_ITERATOR


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
    if self.adaptivity is not None and (self.name == 'sgd' or not self.adaptivity > 0):
      raise ValueError(f'adaptivity applies to adagrad and adam and must be > 0; got '
                       f'{self.adaptivity} for {self.name}')

  def build(self) -> tff.learning.optimizers.Optimizer:
    tau = self.adaptivity
    if self.name == 'adam':
      return (tff.learning.optimizers.build_adam(self.learning_rate, epsilon=tau) if tau
              else tff.learning.optimizers.build_adam(self.learning_rate))
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
    return {'adam': tf.keras.optimizers.Adam, 'adagrad': tf.keras.optimizers.Adagrad,
            'sgd': tf.keras.optimizers.SGD}[self.name](self.learning_rate)


def build_process(algorithm: str, model_fn: Callable[[], tff.learning.models.VariableModel],
                  *, client_optimizer: OptimizerConfig,
                  server_optimizer: OptimizerConfig,
                  client_loop: tff.learning.LoopImplementation = CLIENT_LOOP,
                  model_aggregator: tff.aggregators.WeightedAggregationFactory | None = None,
                  client_weighting: tff.learning.ClientWeighting = (
                      tff.learning.ClientWeighting.NUM_EXAMPLES),
                  proximal_strength: float = 0.01
                  ) -> tff.learning.templates.LearningProcess:
  """FedAvg (client optimizer, E local epochs), FedSGD (one gradient per client)
  or FedProx (FedAvg with a proximal term of `proximal_strength` at the clients).

  FedSGD ignores the client optimizer: each client returns the gradient of its
  loss over all its examples at the broadcast model.
  """
  shared = dict(server_optimizer_fn=server_optimizer.build(), loop_implementation=client_loop,
                model_aggregator=model_aggregator)
  if algorithm == 'fedavg':
    return tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, client_optimizer_fn=client_optimizer.build(),
        client_weighting=client_weighting, **shared)
  if algorithm == 'fedprox':
    return tff.learning.algorithms.build_weighted_fed_prox(
        model_fn, proximal_strength=proximal_strength,
        client_optimizer_fn=client_optimizer.build(), client_weighting=client_weighting,
        **shared)
  if algorithm == 'fedsgd':
    return tff.learning.algorithms.build_fed_sgd(model_fn, **shared)
  raise ValueError(f'unknown algorithm {algorithm!r}; choose one of {ALGORITHMS}')
