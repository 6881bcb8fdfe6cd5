"""FedAvg and FedSGD learning processes, straight from tff.learning."""

import dataclasses
from typing import Callable

import tensorflow_federated as tff

ALGORITHMS = ('fedavg', 'fedsgd')
OPTIMIZERS = ('sgd', 'adam')

# Clients loop over their batches with a dataset iterator, not TFF's default
# Dataset.reduce: a ReduceDataset op instantiates (and graph-optimizes) its
# body function on every call, ~150 ms per client for the dual encoder on
# either runtime, against ~25 ms for the whole iterator loop.
CLIENT_LOOP = tff.learning.LoopImplementation.DATASET_ITERATOR


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  name: str = 'sgd'
  learning_rate: float = 0.01

  def __post_init__(self):
    if self.name not in OPTIMIZERS:
      raise ValueError(f'unknown optimizer {self.name!r}; choose one of {OPTIMIZERS}')
    if not self.learning_rate > 0:
      raise ValueError(f'learning rate must be > 0, got {self.learning_rate}')

  def build(self) -> tff.learning.optimizers.Optimizer:
    if self.name == 'adam':
      return tff.learning.optimizers.build_adam(self.learning_rate)
    return tff.learning.optimizers.build_sgdm(self.learning_rate)


def build_process(algorithm: str, model_fn: Callable[[], tff.learning.models.VariableModel],
                  *, client_optimizer: OptimizerConfig,
                  server_optimizer: OptimizerConfig,
                  client_loop: tff.learning.LoopImplementation = CLIENT_LOOP
                  ) -> tff.learning.templates.LearningProcess:
  """FedAvg (client optimizer, E local epochs) or FedSGD (one gradient per client).

  FedSGD ignores the client optimizer: each client returns the gradient of its
  loss over all its examples at the broadcast model.
  """
  if algorithm == 'fedavg':
    return tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, client_optimizer_fn=client_optimizer.build(),
        server_optimizer_fn=server_optimizer.build(), loop_implementation=client_loop)
  if algorithm == 'fedsgd':
    return tff.learning.algorithms.build_fed_sgd(
        model_fn, server_optimizer_fn=server_optimizer.build(),
        loop_implementation=client_loop)
  raise ValueError(f'unknown algorithm {algorithm!r}; choose one of {ALGORITHMS}')
