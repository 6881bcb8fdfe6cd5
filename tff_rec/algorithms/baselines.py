"""FedAvg, FedSGD and FedProx (and FedAdam / FedAdagrad: FedAvg with that server
optimizer), straight from tff.learning, on any task with a Keras model."""

import dataclasses
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.aggregators import fedsubavg
from tff_rec.algorithms import api
from tff_rec.algorithms import fair
from tff_rec.algorithms import fedmf
from tff_rec.algorithms import heat as heat_lib
from tff_rec.training import lazy_adam

ALGORITHMS = ('fedavg', 'fedsgd', 'fedprox')
HEAT = ('clients', 'examples')
OPTIMIZERS = ('sgd', 'adam', 'adagrad', 'lazy_adam')

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
    if self.adaptivity is not None and (self.name in ('sgd', 'lazy_adam')
                                        or not self.adaptivity > 0):
      raise ValueError(f'adaptivity applies to adagrad and adam and must be > 0; got '
                       f'{self.adaptivity} for {self.name}')

  def build(self) -> tff.learning.optimizers.Optimizer:
    tau = self.adaptivity
    if self.name == 'lazy_adam':
      return lazy_adam.LazyAdam(self.learning_rate)
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
    if self.name == 'lazy_adam':
      raise ValueError('lazy_adam is a client optimizer for weight-table models '
                       '(the FAIR family, table forms); Keras has none')
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
  if client_optimizer.name == 'lazy_adam' and algorithm != 'fedsgd':
    raise api.NotApplicable(
        f"--algorithm={algorithm} trains a Keras model with tff.learning's client work, "
        'which densifies sparse gradients, so lazy_adam would be plain Adam: use adam '
        '(lazy_adam is for the FAIR family and the table forms)')
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


@dataclasses.dataclass(frozen=True)
class WeightingOptions:
  heat: str | None = dataclasses.field(default=None, metadata={
      'choices': HEAT, 'help': (
      "Client weights: 'clients' weighs clients equally (FedSubAvg's paper: its heat "
      "counts clients), 'examples' by their training examples (its official code: heat "
      "counts examples) (default: the task's CLIENT_WEIGHTING; examples unless set).")})

  def __post_init__(self):
    if self.heat not in (None, *HEAT):
      raise ValueError(f'unknown heat {self.heat!r}; choose one of {HEAT}')

  def resolved_heat(self, task) -> str:
    return self.heat or getattr(task, 'CLIENT_WEIGHTING', 'examples')


@dataclasses.dataclass(frozen=True)
class FedProxOptions(WeightingOptions):
  proximal_strength: float = dataclasses.field(default=0.01, metadata={
      'help': 'FedProx mu (default 0.01).'})

  def __post_init__(self):
    super().__post_init__()
    if self.proximal_strength < 0:
      raise ValueError(f'proximal_strength must be >= 0, got {self.proximal_strength}')


def model_aggregator_for(task, training, name: str, heat: str):
  """The inner mean; around it FedSubAvg's correction when stacked, or (tasks with
  tables) a FedSubAvgFactory that only reports the submodel bytes of the tables."""
  inner = training.aggregator.mean(training.clients_per_round)
  tables = api.table_of_variable(task)
  if tables is None:
    if 'fedsubavg' in training.stack:
      raise api.not_applicable(name, task, heat_lib.TABLES_WHY)
    return inner
  if 'fedsubavg' not in training.stack:
    return fedsubavg.FedSubAvgFactory.measuring_only([t is not None for t in tables],
                                                     inner=inner)
  scales = heat_lib.row_scales(task, name, heat)
  return fedsubavg.FedSubAvgFactory([None if t is None else scales[t] for t in tables],
                                    inner=inner)


def build_keras(task, name: str, training, *, algorithm: str = 'fedavg',
                model_aggregator=None, heat: str = 'examples',
                proximal_strength: float = 0.01):
  """A tff.learning process on the task's Keras model, fed by its dataset computation."""
  api.require(task, name, api.KERAS, api.KERAS_WHY)
  weighting = (tff.learning.ClientWeighting.UNIFORM if heat == 'clients'
               else tff.learning.ClientWeighting.NUM_EXAMPLES)
  process = build_process(
      algorithm, task.model_fn, client_optimizer=training.client_optimizer,
      server_optimizer=training.server_optimizer,
      model_aggregator=model_aggregator or model_aggregator_for(task, training, name, heat),
      client_weighting=weighting, proximal_strength=proximal_strength)
  process = tff.simulation.compose_dataset_computation_with_learning_process(
      api.keras_dataset_computation(task), process)
  return api.Built(process, list(task.train_client_ids), task.client_arguments)


# FedAdam / FedAdagrad are FedAvg with that server optimizer (Reddi et al.).
SERVER_OPTIMIZER_OF = {'fedadam': 'adam', 'fedadagrad': 'adagrad'}


def _is_fedmf(task, training) -> bool:
  """Whether the FedAvg family on `task` is FedMF's round."""
  return (not hasattr(task, 'functional_model') and fedmf.is_mf(task)
          and (training.server_optimizer.name == 'sgd' or not hasattr(task, 'model_fn')))


def fastest_runtime(task, training) -> str:
  """FedMF's where the FedAvg family is FedMF's round; else TFF's native worker,
  as fast as in-process or faster on the Keras workloads
  (results/benchmarks_runtimes.md)."""
  return fedmf.fastest_runtime(task, training) if _is_fedmf(task, training) else 'native'


def build_fedavg(task, options: WeightingOptions, training, *, name: str):
  wanted = SERVER_OPTIMIZER_OF.get(name)
  if wanted and training.server_optimizer.name != wanted:
    raise api.NotApplicable(f'--algorithm={name} is FedAvg with a {wanted} server '
                            f'optimizer, got --server_optimizer='
                            f'{training.server_optimizer.name}')
  # FedAvg on a model of weight tables (NeuMF) is the FAIR round with one full
  # tier, and with an SGD server on matrix factorization with private users it
  # is FedMF (adaptive servers train the task's Keras MF instead).
  functional = hasattr(task, 'functional_model')
  mf = _is_fedmf(task, training)
  if options.heat and (functional or mf or not hasattr(task, 'model_fn')):
    raise api.NotApplicable(f'--heat applies to Keras-model tasks; --algorithm={name} on '
                            f'--task={task.NAME} weighs clients by their training examples')
  if functional:
    return fair.build(task, fair.Options(capacities='1x'), training, name=name)
  if mf:
    return fedmf.build(task, fedmf.Options(), training, name=name)
  return build_keras(task, name, training, heat=options.resolved_heat(task))


def build_fedprox(task, options: FedProxOptions, training, *, name: str):
  return build_keras(task, name, training, algorithm='fedprox',
                     heat=options.resolved_heat(task),
                     proximal_strength=options.proximal_strength)


def build_fedsgd(task, options, training, *, name: str):
  del options  # none
  return build_keras(task, name, training, algorithm='fedsgd')
