"""Every algorithm by name: its builder, its options, and what it needs of a task.

An algorithm is one module with a `build(task, options, training, *, name)
-> Built` (`name`: the registered name, as one builder may serve a family)
and, if it has options of its own, a frozen dataclass of them (each field's
`metadata['help']` is its flag's help). Adding one is that module, its test
and one line in _algorithms(). A builder asks the task for what it needs (a
Keras model, declared tables, a functional model with item tables, ...) and
raises NotApplicable, naming the algorithm, the task and why, when the task
cannot give it; the launchers, the matrix and the Python API all go through
`build` here.
"""

import dataclasses
from typing import Any, Callable, Mapping

from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import baselines
from tff_rec.algorithms import fair
from tff_rec.algorithms import fedmf
from tff_rec.algorithms import fedsubavg
from tff_rec.algorithms import metaua
from tff_rec.algorithms import scaffold
from tff_rec.algorithms import table_updates

# The builders' vocabulary (algorithms.api), for callers of the registry.
Built = api.Built
NotApplicable = api.NotApplicable
require = api.require


@dataclasses.dataclass(frozen=True)
class Training:
  """What every algorithm takes besides its own options."""
  client_optimizer: baselines.OptimizerConfig = baselines.OptimizerConfig('sgd', 0.1)
  server_optimizer: baselines.OptimizerConfig = baselines.OptimizerConfig('sgd', 1.0)
  aggregator: inner.InnerAggregator = inner.InnerAggregator()
  runtime: str = 'native'
  clients_per_round: int = 10
  # Other methods' aggregation stacked on the algorithm's own: 'fedsubavg' scales
  # each table row's aggregate by N / its heat (FAIR, CoLR, the FedAvg family).
  stack: tuple[str, ...] = ()

  def __post_init__(self):
    unknown = sorted(set(self.stack) - set(STACKABLE))
    if unknown:
      raise ValueError(f'cannot stack {unknown}; stackable: {", ".join(STACKABLE)}')


STACKABLE = ('fedsubavg',)


@dataclasses.dataclass(frozen=True)
class NoOptions:
  pass


@dataclasses.dataclass(frozen=True)
class Algorithm:
  build: Callable[..., Built]  # (task, options, training, *, name)
  summary: str
  options: type = NoOptions
  # Training settings it implies (e.g. FedAdam's server optimizer); flags override them.
  defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  stackable: bool = True  # takes Training.stack (its aggregate is a factory)
  # (task, Training) -> the runtime that runs it fastest here, both
  # runtimes giving the same numbers (tested).
  fastest_runtime: Callable[[Any, 'Training'], str] = lambda *unused: 'native'


def _algorithms() -> dict[str, Algorithm]:
  return {
      'fedavg': Algorithm(baselines.build_fedavg, 'FedAvg: client optimizer for the local '
                          'epochs, server optimizer on the mean update',
                          baselines.WeightingOptions, fastest_runtime=baselines.fastest_runtime),
      'fedsgd': Algorithm(baselines.build_fedsgd, 'FedSGD: one gradient per client per round'),
      'fedprox': Algorithm(baselines.build_fedprox, 'FedProx: FedAvg with a proximal term',
                           baselines.FedProxOptions),
      'fedadam': Algorithm(baselines.build_fedavg, 'FedAvg with an Adam server (Reddi et '
                           'al.)', baselines.WeightingOptions,
                           dict(server_optimizer='adam', server_learning_rate=0.01),
                           fastest_runtime=baselines.fastest_runtime),
      'fedadagrad': Algorithm(baselines.build_fedavg, 'FedAvg with an Adagrad server '
                              '(Reddi et al.)', baselines.WeightingOptions,
                              dict(server_optimizer='adagrad', server_learning_rate=0.1),
                              fastest_runtime=baselines.fastest_runtime),
      'fedsubavg': Algorithm(fedsubavg.build, "FedSubAvg: each table row's mean update "
                             'scaled by N / its feature heat', baselines.WeightingOptions,
                             fastest_runtime=baselines.fastest_runtime),
      'scaffold': Algorithm(scaffold.build, 'SCAFFOLD, exact, with client control variates',
                            stackable=False),
      'metaua': Algorithm(metaua.build, 'MetaUA: client weights and server step learned '
                          'online', metaua.Options,
                          dict(server_optimizer='adagrad', server_learning_rate=0.1,
                               server_adaptivity=1e-3), stackable=False),
      'fednova': Algorithm(metaua.build_fednova, 'FedNova: updates normalised by local '
                           'steps', stackable=False),
      'fair': Algorithm(fair.build, 'FAIR-HET: each capacity tier trains a consistent '
                        'hashed subspace of the item tables', fair.Options),
      'fair_hom': Algorithm(fair.build, 'FAIR-HOM: everyone at the smallest capacity',
                            fair.Options),
      'full_trn': Algorithm(fair.build, 'FULL-TRN: only the clients of the 1x tier train',
                            fair.Options),
      'fedhm': Algorithm(fair.build, 'FedHM: item tables factored at a low rank per tier',
                         fair.Options),
      'fair_inconsistent': Algorithm(fair.build, 'FAIR with a hash seed per tier (the '
                                     "paper's ablation)", fair.Options),
      'fedmf': Algorithm(fedmf.build, 'FedMF: full item-table updates, private user vectors',
                         fedmf.Options, fastest_runtime=fedmf.fastest_runtime),
      'colr': Algorithm(table_updates.build, 'CoLR: item update A B, B a shared random basis, '
                        'A summed', fedmf.Options, fastest_runtime=fedmf.fastest_runtime),
      'scolr': Algorithm(table_updates.build, 'SCoLR: CoLR with a local rank per client',
                         fedmf.Options, fastest_runtime=fedmf.fastest_runtime),
      'svd': Algorithm(table_updates.build, 'item update compressed by truncated SVD',
                       fedmf.Options, fastest_runtime=fedmf.fastest_runtime),
      'topk': Algorithm(table_updates.build, 'item update compressed to its largest entries',
                        fedmf.Options, fastest_runtime=fedmf.fastest_runtime),
  }


_REGISTRY = _algorithms()


def algorithms() -> dict[str, Algorithm]:
  """Name -> Algorithm, for every registered algorithm."""
  return _REGISTRY


def register(name: str, algorithm: Algorithm) -> None:
  """Adds an algorithm from outside this package (in the package: a line in
  _algorithms). Its options become trainer flags when registered before the
  trainer's flags are defined."""
  if name in algorithms():
    raise ValueError(f'an algorithm named {name!r} is registered already')
  algorithms()[name] = algorithm


def get(name: str) -> Algorithm:
  if name not in algorithms():
    raise ValueError(f'unknown algorithm {name!r}; choose one of {sorted(algorithms())}')
  return algorithms()[name]


def option_fields() -> dict[str, dataclasses.Field]:
  """Every option of every algorithm, by name (one flag each; shared names agree)."""
  fields = {}
  for algorithm in algorithms().values():
    for field in dataclasses.fields(algorithm.options):
      fields.setdefault(field.name, field)
  return fields


def check_options(name: str, options) -> None:
  """Raises NotApplicable naming an option the algorithm `name` does not take."""
  known = {f.name for f in dataclasses.fields(get(name).options)}
  unknown = sorted(set(options) - known)
  if unknown:
    raise NotApplicable(f'--{unknown[0]} does not apply to --algorithm={name} (its options: '
                        f'{", ".join(sorted(known)) or "none"})')


def build(name: str, task, training: Training = Training(), **options) -> Built:
  """The algorithm `name` on `task`: a NotApplicable error says why it cannot run."""
  algorithm = get(name)
  check_options(name, options)
  if training.stack and not algorithm.stackable:
    raise NotApplicable(f'--stack={",".join(training.stack)}: --algorithm={name} does not '
                        'aggregate through a factory another method can wrap')
  if training.aggregator.needs_inprocess and training.runtime != 'inprocess':
    raise NotApplicable(f'--aggregator={training.aggregator.name}: TFF\'s native worker '
                        'has no secure sum; use --runtime=inprocess')
  try:
    chosen = algorithm.options(**options)
  except ValueError as e:
    raise NotApplicable(f'--algorithm={name}: {e}') from None
  return algorithm.build(task, chosen, training, name=name)


def fastest_runtime(name: str, task, training: Training) -> str:
  """The runtime that runs algorithm `name` on `task` fastest here:
  in-process where the aggregator needs it (secure sums)."""
  if training.aggregator.needs_inprocess:
    return 'inprocess'
  return get(name).fastest_runtime(task, training)


def training(task, name: str, *, aggregator: inner.InnerAggregator = inner.InnerAggregator(),
             runtime: str = 'native', stack: tuple[str, ...] = (), **overrides) -> Training:
  """The settings of algorithm `name` on `task`: the task's TRAIN_DEFAULTS, then the
  algorithm's defaults, then `overrides` (clients_per_round, client_optimizer,
  client_learning_rate, server_optimizer, server_learning_rate, server_adaptivity)."""
  setting = {**task.TRAIN_DEFAULTS, **get(name).defaults, **overrides}
  adaptivity = setting.get('server_adaptivity')
  if 'server_adaptivity' not in overrides and setting['server_optimizer'] == 'sgd':
    adaptivity = None  # a default tau of an adaptive server the overrides replaced by SGD
  return Training(
      client_optimizer=baselines.OptimizerConfig(setting['client_optimizer'],
                                                 setting['client_learning_rate']),
      server_optimizer=baselines.OptimizerConfig(setting['server_optimizer'],
                                                 setting['server_learning_rate'], adaptivity),
      aggregator=aggregator, runtime=runtime, clients_per_round=setting['clients_per_round'],
      stack=tuple(stack))
