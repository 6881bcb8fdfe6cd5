"""A federated run as one typed spec: what launch.train parses its flags into,
writes as config.json and resumes from, and what records and studies key on.

A RunSpec holds the settings as given (the task's, the algorithm's options, the
training settings, the aggregation, the schedule) and resolves them the one way
the trainer does: the task's Config, the algorithm's Training (task defaults,
then the algorithm's, then the given settings), the round loop's Schedule. Its
config (`to_config`) is the config.json every run has written, so run folders
and committed records made before it stay resumable and comparable; its flags
(`to_flags`) are the command that runs it.
"""

import dataclasses
import functools
import json
import math
import pathlib
from typing import Any, Mapping

import tasks
from tff_rec import registry
from tff_rec.aggregators import inner
from tff_rec.training import loop
from tff_rec.training import optimizers

# Aggregation flags by the aggregator they belong to.
AGGREGATOR_SETTINGS = {'secure_bound': 'secure', 'dp_noise_multiplier': 'dp', 'dp_clip': 'dp'}
# How a run is executed, not what it computes (both runtimes, and lockstep, give the same
# numbers to float rounding; checkpoints do not change a run): not compared between a spec
# and a record.
EXECUTION = ('runtime', 'threads', 'clients_per_call', 'lockstep', 'checkpoint_every')
SCHEDULE = ('rounds', 'eval_every', 'checkpoint_every')


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One launch.train run. Settings are as given (None and absent: the default);
  the resolved ones are properties."""
  task: str
  algorithm: str | None = None  # None: the task's default
  task_settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # registry.Settings'
  aggregator: str = 'mean'
  aggregator_settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  stack: tuple[str, ...] = ()
  rounds: int = 100
  eval_every: int = 10
  checkpoint_every: int = 10
  runtime: str = 'auto'
  # How it runs where that may change its numbers or needs a place (client_data_dir),
  # and in-process parallelism (threads, clients_per_call).
  execution: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  module = 'launch.train'  # the launcher that runs it (not a field)

  def __post_init__(self):
    object.__setattr__(self, 'task', tasks.canonical(self.task))
    object.__setattr__(self, 'stack', tuple(self.stack))
    for name in ('task_settings', 'options', 'settings', 'aggregator_settings', 'execution'):
      object.__setattr__(self, name, {k: v for k, v in dict(getattr(self, name)).items()
                                      if v is not None})

  # What it resolves to -----------------------------------------------------------

  @property
  def task_module(self):
    return tasks.module(self.task)

  @property
  def name(self) -> str:
    """The algorithm it runs."""
    return self.algorithm or self.task_module.Task.DEFAULT_ALGORITHM

  @functools.cached_property
  def task_config(self):
    """The task's Config (ValueError naming a bad setting)."""
    return self.task_module.make_config(**dict(self.task_settings))

  @property
  def seed(self) -> int:
    return getattr(self.task_config, 'seed', 0)

  @functools.cached_property
  def inner_aggregator(self) -> inner.InnerAggregator:
    for name, needs in AGGREGATOR_SETTINGS.items():
      if name in self.aggregator_settings and self.aggregator != needs:
        raise ValueError(f'{name} applies to aggregator={needs}')
    return inner.InnerAggregator(self.aggregator, noise_seed=self.seed,
                                 **self.aggregator_settings)

  @functools.cached_property
  def training(self) -> registry.Training:
    """The algorithm's Training: the task's defaults, the algorithm's, the given
    settings; its options and composition checked (NotApplicable, a ValueError)."""
    registry.check_options(self.name, self.options)
    try:
      registry.get(self.name).options(**self.options)  # their values, as registry.build
    except ValueError as e:
      raise registry.NotApplicable(f'--algorithm={self.name}: {e}') from None
    training = registry.training(
        self.task_module.Task, self.name, aggregator=self.inner_aggregator,
        stack=self.stack, runtime='native' if self.runtime == 'remote' else self.runtime,
        **self.settings)
    registry.check_composition(self.name, training)
    return training

  @functools.cached_property
  def schedule(self) -> loop.Schedule:
    return loop.Schedule(rounds=self.rounds, clients_per_round=self.training.clients_per_round,
                         eval_every=self.eval_every, checkpoint_every=self.checkpoint_every,
                         seed=self.seed)

  def option_defaults(self) -> dict:
    """The algorithm's options at their defaults, as a config records them."""
    return json.loads(json.dumps({
        f.name: f.default for f in dataclasses.fields(registry.get(self.name).options)
        if f.default is not dataclasses.MISSING}))

  # As written and as given ---------------------------------------------------------

  def to_config(self, runtime: str | None = None) -> dict:
    """config.json: the task and its resolved Config, the algorithm and the options
    given, the runtime (`runtime`: the one the run resolved), the execution settings,
    the optimizers, the aggregation unless the plain mean, the stack if any, the
    schedule. As JSON reads it back (tuples as lists)."""
    training = self.training
    aggregation = self.inner_aggregator
    config = {'task': self.task, **dataclasses.asdict(self.task_config),
              'algorithm': self.name, **self.options,
              'runtime': runtime or self.runtime, **self.execution,
              'client_optimizer': training.client_optimizer.settings(),
              'server_optimizer': training.server_optimizer.settings(),
              **(aggregation.settings() if aggregation.name != 'mean' else {}),
              **({'stack': list(training.stack)} if training.stack else {}),
              **vars(self.schedule)}
    return json.loads(json.dumps(config))

  def to_flags(self) -> list[str]:
    """launch.train's flags that give this spec (not --output_dir)."""
    values = {'task': self.task, **({'algorithm': self.algorithm} if self.algorithm else {}),
              **self.task_settings, **self.options, **self.settings,
              **({'aggregator': self.aggregator} if self.aggregator != 'mean' else {}),
              **self.aggregator_settings,
              **({'stack': self.stack} if self.stack else {}),
              'rounds': self.rounds, 'eval_every': self.eval_every,
              'checkpoint_every': self.checkpoint_every,
              **({'runtime': self.runtime} if self.runtime != 'auto' else {}),
              **self.execution}
    return [_flag(name, value) for name, value in values.items()]

  def differences(self, config: Mapping[str, Any]) -> list[str]:
    """What a run's config.json (a record's) holds otherwise than this spec, by
    setting: 'name: recorded -> this'. Execution settings are not compared; an
    option either leaves out reads as its default; a dataset is its folder's name
    (records are read from other checkouts); a setting a record predates reads as
    its default."""
    return _differences(self.to_config(), config, RunSpec(self.task, self.algorithm),
                        self.option_defaults())


@dataclasses.dataclass(frozen=True)
class CentralSpec:
  """One launch.centralized run: the task's data pooled, one optimizer on it, an
  epoch a round (the centralized baseline a study compares against). The task
  settings of federated training only (e.g. local_steps) do not apply and are
  left out."""
  task: str
  task_settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # CENTRAL_SETTINGS'
  rounds: int = 5  # epochs
  eval_every: int = 1
  module = 'launch.centralized'

  def __post_init__(self):
    object.__setattr__(self, 'task', tasks.canonical(self.task))
    federated = {f.name for f in dataclasses.fields(self.task_module.Config)
                 if f.metadata.get('training') == 'federated'}
    object.__setattr__(self, 'task_settings', {
        k: v for k, v in dict(self.task_settings).items() if v is not None and k not in federated})
    unknown = sorted(set(self.settings) - set(CENTRAL_SETTINGS))
    if unknown:
      raise ValueError(f'{unknown[0]} is not a setting of the centralized baseline (its '
                       f'settings: {", ".join(CENTRAL_SETTINGS)})')

  @property
  def task_module(self):
    return tasks.module(self.task)

  @functools.cached_property
  def task_config(self):
    return self.task_module.make_config(**dict(self.task_settings))

  @property
  def optimizer(self) -> optimizers.OptimizerConfig:
    return optimizers.OptimizerConfig(
        *(self.settings.get(k, CENTRAL_SETTINGS[k]) for k in ('optimizer', 'learning_rate')))

  def to_config(self) -> dict:
    """config.json as launch.centralized writes it."""
    steps = self.settings.get('steps_per_epoch', 0)
    return json.loads(json.dumps({
        'task': self.task, **dataclasses.asdict(self.task_config), 'epochs': self.rounds,
        'optimizer': self.optimizer.settings(), 'eval_every': self.eval_every,
        **({'steps_per_epoch': steps} if steps else {})}))

  def to_flags(self) -> list[str]:
    values = {'task': self.task, **self.task_settings, **self.settings,
              'epochs': self.rounds, 'eval_every': self.eval_every}
    return [_flag(name, value) for name, value in values.items()]

  def differences(self, config: Mapping[str, Any]) -> list[str]:
    """As RunSpec.differences."""
    return _differences(self.to_config(), config, CentralSpec(self.task), {})


# The centralized baseline's settings and their defaults (launch.centralized's flags).
CENTRAL_SETTINGS = {'optimizer': 'adam', 'learning_rate': 0.01, 'steps_per_epoch': 0}


def _differences(mine: dict, config: Mapping[str, Any], bare, defaults: dict) -> list[str]:
  """'name: recorded -> this' for each setting `config` (a record's) holds otherwise
  than `mine`; `bare`: the spec at every default (for settings a record predates)."""
  theirs = _canonical(config)
  predated = {k: v for k, v in bare.to_config().items() if k not in theirs}
  mine, theirs = {**defaults, **mine}, {**defaults, **predated, **theirs}
  changed = []
  for key in sorted(set(mine) | set(theirs)):
    if key in EXECUTION:
      continue
    a, b = theirs.get(key), mine.get(key)
    if key == 'data_dir' and a is not None and b is not None:
      a, b = pathlib.Path(a).name, pathlib.Path(b).name
    if not _same(a, b):
      changed.append(f'{key}: {_shown(a)} -> {_shown(b)}')
  return changed


def _canonical(config: Mapping[str, Any]) -> dict:
  config = dict(config)
  if 'task' in config:  # records made before the tasks took their family names
    config['task'] = tasks.canonical(config['task'])
  return config


def _same(a, b) -> bool:
  if isinstance(a, float) and isinstance(b, float):
    return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
  if isinstance(a, dict) and isinstance(b, dict):  # a field set to null reads as left out
    a, b = ({k: v for k, v in d.items() if v is not None} for d in (a, b))
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
  return a == b


def _shown(value) -> str:
  return 'unset' if value is None else json.dumps(value, sort_keys=True)


def _flag(name: str, value) -> str:
  if isinstance(value, bool):
    return f'--{name}' if value else f'--no{name}'
  if isinstance(value, (tuple, list)):
    return f'--{name}={",".join(map(str, value))}'
  return f'--{name}={value}'
