"""A study as one TOML file: the task, the methods, each one's grid, the seeds, the
selection rule and the floors. Read with the standard library's tomllib, checked
whole before any cell runs: a bad field is named with the file (a syntax error
with its line).

  [task]                      # launch.train's task and its settings
  name = "ctr"
  data_dir = "../shared/data/ml-100k"
  validation_fraction = 0.1

  rounds = 40                 # top level: the schedule, seeds, baseline, floors
  eval_every = 5
  seeds = [0, 1, 2]
  baseline = "fedavg"
  floors = ["click_rate"]

  [selection]                 # chosen on a validation part, never on test
  metric = "eval/validation_auc"
  goal = "max"
  last = 3                    # a curve reads as the mean of its last 3 evaluations
  extend = 2                  # rates past a winning edge of a grid, at most

  [report]
  metrics = ["eval/test_auc", "eval/test_logloss"]
  # renderer = "experiments.papers.colr_movielens"   # a paper's own table instead

  [methods.fedavg]
  algorithm = "fedavg"
  grid = { client_learning_rate = [0.03, 0.1, 0.3] }

  [methods.fedavg_secure]      # no grid: runs at fedavg's choice
  algorithm = "fedavg"
  aggregator = "secure"
  choice_of = "fedavg"

  [methods.central]            # launch.centralized: the data pooled, a round an epoch
  algorithm = "central"
  settings = { optimizer = "sgd" }
  grid = { learning_rate = [0.3, 1.0, 3.0] }
  rounds = 200                 # a method's own schedule, seeds and selection
  selection = { metric = "eval/train_loss", goal = "min", last = 1, rounds = 40 }
"""

import dataclasses
import importlib
import itertools
import math
import pathlib
import tomllib
from typing import Any, Mapping

import tasks
from experiments import spec as spec_lib
from tff_rec import registry
from tff_rec.aggregators import inner

TOP = ('task', 'imports', 'rounds', 'eval_every', 'seeds', 'baseline', 'floors', 'floor_item',
       'selection', 'report', 'methods')
METHOD = ('algorithm', 'options', 'settings', 'task', 'aggregator', 'stack', 'grid', 'choice_of',
          'rounds', 'eval_every', 'seeds', 'selection')
REPORT = ('metrics', 'renderer')
GOALS = ('max', 'min')
SETTINGS = tuple(f.name for f in dataclasses.fields(registry.Settings))
# The centralized baseline (launch.centralized) as a method: `algorithm = "central"`,
# its settings spec.CENTRAL_SETTINGS', a round one epoch.
CENTRAL = 'central'


class StudyError(ValueError):
  """A study file that cannot run; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Method:
  name: str
  algorithm: str
  options: Mapping[str, Any]
  settings: Mapping[str, Any]  # training settings (registry.Settings)
  task_settings: Mapping[str, Any]  # beyond the study's
  aggregator: Mapping[str, Any]  # {'name': ..., its settings}
  stack: tuple[str, ...]
  grid: Mapping[str, tuple]  # setting -> values; the grid is their product
  # Another method whose chosen settings this one runs at, with no grid of its own
  # (e.g. a secure sum at the plain sum's rate, so that only the sum differs).
  choice_of: str | None
  # The study's schedule, seeds and selection, or the method's own.
  rounds: int
  eval_every: int
  seeds: tuple[int, ...]
  selection: 'Selection'

  def points(self) -> list[dict]:
    """Every combination of the grid's values, in the file's order."""
    return [dict(zip(self.grid, values)) for values in itertools.product(*self.grid.values())]


@dataclasses.dataclass(frozen=True)
class Selection:
  metric: str
  goal: str = 'max'
  last: int = 3
  extend: int = 2
  # The grid's runs' own length (each evaluated once, at its end), shorter than the
  # seeds' runs at the choice; None: the grid's seed runs are the full runs.
  rounds: int | None = None


@dataclasses.dataclass(frozen=True)
class Study:
  path: str
  raw: Mapping[str, Any]  # the file's contents (overrides applied): what a folder keeps
  task: str
  task_settings: Mapping[str, Any]
  imports: tuple[str, ...]
  rounds: int
  eval_every: int
  seeds: tuple[int, ...]
  baseline: str | None
  floors: tuple[str, ...]
  floor_item: str | None
  selection: Selection
  report: tuple[str, ...]
  methods: Mapping[str, Method]
  # A module whose render(study, folder, plan, task) writes the outputs in place of
  # the study's table (a paper's own figure or table over the study's records).
  renderer: str | None = None

  def spec(self, method: str, point: Mapping[str, Any], seed: int, *, grid: bool = False):
    """The run of `method` at grid `point` with `seed` (a RunSpec, or a CentralSpec);
    `grid`: its grid's run, of the selection's rounds where it sets them."""
    m = self.methods[method]
    task_settings = {**self.task_settings, **m.task_settings, 'seed': seed}
    options, settings = dict(m.options), dict(m.settings)
    own = _setting_names(m.algorithm)
    for name, value in point.items():
      target = (settings if name in own else options if name in _option_names(m.algorithm)
                else task_settings)
      target[name] = value
    rounds, eval_every = ((m.selection.rounds,) * 2 if grid and m.selection.rounds
                          else (m.rounds, m.eval_every))
    if m.algorithm == CENTRAL:
      return spec_lib.CentralSpec(task=self.task, task_settings=task_settings,
                                  settings=settings, rounds=rounds, eval_every=eval_every)
    aggregator = dict(m.aggregator)
    return spec_lib.RunSpec(
        task=self.task, algorithm=m.algorithm, task_settings=task_settings, options=options,
        settings=settings, aggregator=aggregator.pop('name', 'mean'),
        aggregator_settings=aggregator, stack=m.stack, rounds=rounds,
        eval_every=eval_every, checkpoint_every=eval_every)


def read(path: str | pathlib.Path, overrides: Mapping[str, Any] | None = None) -> dict:
  """The file's TOML (`overrides`: dotted paths -> values, set over it)."""
  path = pathlib.Path(path)
  try:
    raw = tomllib.loads(path.read_text())
  except OSError as e:
    raise StudyError(f'{path}: {e.strerror}') from None
  except tomllib.TOMLDecodeError as e:
    raise StudyError(f'{path}: not TOML: {e}') from None
  for dotted, value in (overrides or {}).items():
    _set(raw, dotted.split('.'), value, f'{path}: override {dotted}')
  return raw


def _set(table: dict, parts: list[str], value, where: str) -> None:
  """table[a][b]... = value along `parts`; a part '*' is every entry of its table."""
  first, rest = parts[0], parts[1:]
  if first == '*':
    for key in table:
      _set(table, [key, *rest], value, where)
    return
  if not rest:
    table[first] = value
    return
  inner = table.setdefault(first, {})
  if not isinstance(inner, dict):
    raise StudyError(f'{where}: {first} is not a table')
  _set(inner, rest, value, where)


def parse_value(text: str):
  """A value as TOML writes it (3, 0.1, "sgd", [0.1, 0.3], true); a bare word is a string."""
  try:
    return tomllib.loads(f'v = {text}')['v']
  except tomllib.TOMLDecodeError:
    return text


def load(path: str | pathlib.Path, overrides: Mapping[str, Any] | None = None) -> Study:
  """The study in `path`, checked whole (StudyError names the file and the field).
  The modules it imports must be loaded already (the launcher loads `imports`)."""
  raw = read(path, overrides)
  where = str(path)

  def fail(field: str, message: str):
    raise StudyError(f'{where}: {field}: {message}')

  unknown = sorted(set(raw) - set(TOP))
  if unknown:
    fail(unknown[0], f'not a study field (fields: {", ".join(TOP)})')
  task_table = dict(_table(raw, 'task', fail))
  task = task_table.pop('name', None)
  if task is None:
    fail('task.name', 'missing: the task to run (one of ' + ', '.join(sorted(tasks.TASKS)) + ')')
  if tasks.canonical(task) not in tasks.TASKS:
    fail('task.name', f'unknown task {task!r}; tasks: {", ".join(sorted(tasks.TASKS))}')
  task = tasks.canonical(task)
  _check_task_settings(task, task_table, 'task', fail)
  if 'seed' in task_table:
    fail('task.seed', 'the seeds are the study\'s `seeds`')
  schedule = _schedule(raw, '', {'rounds': 100, 'eval_every': 10, 'seeds': [0]}, fail)
  seeds, rounds, eval_every = schedule['seeds'], schedule['rounds'], schedule['eval_every']
  selection = _selection(_table(raw, 'selection', fail), fail)
  _check_reading(selection, rounds, eval_every, '', fail)
  report_table = _table(raw, 'report', fail)
  unknown = sorted(set(report_table) - set(REPORT))
  if unknown:
    fail(f'report.{unknown[0]}', f'not a report field ({", ".join(REPORT)})')
  report = report_table.get('metrics')
  if not isinstance(report, list) or not report or not all(isinstance(m, str) for m in report):
    fail('report.metrics', f'a list of the metrics the table shows, the first its headline; '
         f'got {report!r}')
  methods_table = raw.get('methods')
  if not isinstance(methods_table, dict) or not methods_table:
    fail('methods', 'a table of one or more methods ([methods.NAME] with algorithm = ...)')
  methods = {name: _method(name, table, task, schedule, selection, fail)
             for name, table in methods_table.items()}
  for name, method in methods.items():
    other = methods.get(method.choice_of)
    if method.choice_of is not None and (other is None or other.choice_of is not None):
      fail(f'methods.{name}.choice_of', f'{method.choice_of!r} is not a method that chooses '
           f'its own settings ({", ".join(m for m in methods if not methods[m].choice_of)})')
  renderer = report_table.get('renderer')
  if renderer is not None:
    _check_renderer(renderer, fail)
  baseline = raw.get('baseline')
  if baseline is not None and baseline not in methods:
    fail('baseline', f'{baseline!r} is not one of the methods ({", ".join(methods)})')
  floors = raw.get('floors', [])
  known = getattr(tasks.module(task).Task, 'FLOORS', ())
  for floor in floors:
    if floor not in known:
      fail('floors', f'{floor!r} is not a floor of task {task} (its floors: '
           f'{", ".join(known) or "none"})')
  floor_item = raw.get('floor_item')
  if floor_item is not None and not getattr(tasks.module(task).Task, 'FLOOR_ITEM', False):
    fail('floor_item', f'task {task}\'s floors score no item column: leave it out')
  imports = raw.get('imports', [])
  if not isinstance(imports, list) or not all(isinstance(i, str) and i for i in imports):
    fail('imports', f'a list of module names or .py files, got {imports!r}')
  study = Study(path=where, raw=raw, task=task, task_settings=task_table,
                imports=tuple(imports), rounds=rounds, eval_every=eval_every,
                seeds=tuple(seeds), baseline=baseline, floors=tuple(floors),
                floor_item=floor_item, selection=selection,
                report=tuple(report), methods=methods, renderer=renderer)
  for name, method in methods.items():  # every cell resolves, as the trainer would
    for point in methods[method.choice_of or name].points():
      try:
        study.spec(name, point, method.seeds[0]).to_config()
      except ValueError as e:
        shown = ', '.join(f'{k} = {v!r}' for k, v in point.items())
        fail(f'methods.{name}', f'{e}' + (f' (at {shown})' if shown else ''))
  return study


def _table(raw, name, fail) -> dict:
  value = raw.get(name, {})
  if not isinstance(value, dict):
    fail(name, 'must be a table')
  return value


def _schedule(table, prefix: str, defaults: Mapping[str, Any], fail) -> dict:
  """rounds, eval_every and seeds of the study (or a method: its own, else the study's)."""
  values = {name: table.get(name, default) for name, default in defaults.items()}
  seeds = values['seeds']
  if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
      or not all(isinstance(s, int) and s >= 0 for s in seeds)):
    fail(f'{prefix}seeds', f'a list of one or more distinct seeds >= 0, got {seeds!r}')
  for name in ('rounds', 'eval_every'):
    if not isinstance(values[name], int) or values[name] < 1:
      fail(f'{prefix}{name}', f'must be an integer >= 1, got {values[name]!r}')
  return values


def _selection(table, fail, prefix: str = 'selection', base: Selection | None = None
               ) -> Selection:
  """The selection rule (a method's: its own fields over the study's `base`)."""
  fields = [f.name for f in dataclasses.fields(Selection)]
  unknown = sorted(set(table) - set(fields))
  if unknown:
    fail(f'{prefix}.{unknown[0]}', f'not a selection field ({", ".join(fields)})')
  metric = table.get('metric', base and base.metric)
  if not isinstance(metric, str) or not metric:
    fail(f'{prefix}.metric', 'the validation metric that chooses each method\'s settings, '
         'e.g. "eval/validation_auc" or "validation/hr_at_10"')
  if 'test' in metric.split('/')[-1].split('_') or metric.split('/')[0] == 'test':
    fail(f'{prefix}.metric', f'{metric} is a test metric: choosing on test data would '
         'report its own choice; choose on a validation part (e.g. a task\'s '
         'validation_fraction or held_out setting) or the training loss')
  selection = dataclasses.replace(base or Selection(metric), **table)
  if selection.goal not in GOALS:
    fail(f'{prefix}.goal', f'max or min, got {selection.goal!r}')
  for name, least in (('last', 1), ('extend', 0), ('rounds', 1)):
    value = getattr(selection, name)
    if not (name == 'rounds' and value is None) and (not isinstance(value, int)
                                                     or value < least):
      fail(f'{prefix}.{name}', f'must be an integer >= {least}, got {value!r}')
  return selection


def _check_reading(selection: Selection, rounds: int, eval_every: int, prefix: str,
                   fail) -> None:
  """A curve holds the evaluations the selection reads."""
  if selection.rounds is not None:
    if selection.rounds >= rounds:
      fail(f'{prefix}selection.rounds', f'{selection.rounds}: the grid\'s runs must be '
           f'shorter than the {rounds} rounds of the runs at the choice (or leave it out: '
           'the grid\'s runs are then full runs)')
    if selection.last != 1:
      fail(f'{prefix}selection.last', 'a grid run of selection.rounds is evaluated once, at '
           f'its end: last must be 1, got {selection.last}')
    return
  evaluations = math.ceil(rounds / eval_every)
  if selection.last > evaluations:
    fail(f'{prefix}selection.last', f'{selection.last} evaluations, but a run of {rounds} '
         f'rounds evaluated every {eval_every} has {evaluations}')


def _method(name: str, table, task: str, schedule: Mapping[str, Any], selection: Selection,
            fail) -> Method:
  field = f'methods.{name}'
  if not isinstance(table, dict):
    fail(field, 'must be a table')
  unknown = sorted(set(table) - set(METHOD))
  if unknown:
    fail(f'{field}.{unknown[0]}', f'not a method field ({", ".join(METHOD)})')
  algorithm = table.get('algorithm')
  if algorithm != CENTRAL and algorithm not in registry.algorithms():
    fail(f'{field}.algorithm', f'unknown algorithm {algorithm!r}; choose one of '
         f'{", ".join(registry.algorithms())}, or "{CENTRAL}" (the centralized baseline), or '
         'import the module that registers it')
  if algorithm == CENTRAL:
    for federated in ('options', 'aggregator', 'stack'):
      if federated in table:
        fail(f'{field}.{federated}', 'the centralized baseline has no options, aggregator or '
             f'stack (its settings: {", ".join(spec_lib.CENTRAL_SETTINGS)})')
  options = _table(table, 'options', lambda f, m: fail(f'{field}.{f}', m))
  unknown = sorted(set(options) - _option_names(algorithm))
  if unknown:
    fail(f'{field}.options.{unknown[0]}', f'not an option of {algorithm} (its options: '
         f'{", ".join(sorted(_option_names(algorithm))) or "none"})')
  settings = _table(table, 'settings', lambda f, m: fail(f'{field}.{f}', m))
  unknown = sorted(set(settings) - set(_setting_names(algorithm)))
  if unknown:
    fail(f'{field}.settings.{unknown[0]}', f'not a training setting of {algorithm} '
         f'({", ".join(_setting_names(algorithm))})')
  task_settings = _table(table, 'task', lambda f, m: fail(f'{field}.{f}', m))
  _check_task_settings(task, task_settings, f'{field}.task', fail)
  aggregator = table.get('aggregator', {'name': 'mean'})
  if isinstance(aggregator, str):
    aggregator = {'name': aggregator}
  if not isinstance(aggregator, dict) or aggregator.get('name', 'mean') not in inner.NAMES:
    fail(f'{field}.aggregator', f'one of {", ".join(inner.NAMES)} (or a table with its name '
         'and settings), got ' + repr(aggregator))
  stack = table.get('stack', [])
  if not isinstance(stack, list):
    fail(f'{field}.stack', f'a list of methods stacked on it, got {stack!r}')
  grid = _table(table, 'grid', lambda f, m: fail(f'{field}.{f}', m))
  takes = set(_setting_names(algorithm)) | _option_names(algorithm) | set(
      _task_setting_names(task))
  for setting, values in grid.items():
    if setting not in takes:
      fail(f'{field}.grid.{setting}', f'{algorithm} on task {task} takes no setting '
           f'{setting!r} (training settings, its options, the task\'s settings)')
    if not isinstance(values, list) or not values:
      fail(f'{field}.grid.{setting}', f'a non-empty list of values, got {values!r}')
    if len(set(map(repr, values))) != len(values):
      fail(f'{field}.grid.{setting}', f'repeats a value: {values!r}')
    if setting in options or setting in settings or setting in task_settings:
      fail(f'{field}.grid.{setting}', 'is also set outside the grid; set it in one place')
  choice_of = table.get('choice_of')
  if choice_of is not None and not isinstance(choice_of, str):
    fail(f'{field}.choice_of', f'the name of another method, got {choice_of!r}')
  if choice_of is not None and grid:
    fail(f'{field}.grid', f'a method that runs at {choice_of!r}\'s choice has no grid')
  own = _schedule(table, f'{field}.', schedule, fail)
  chooses = _selection(_table(table, 'selection', lambda f, m: fail(f'{field}.{f}', m)), fail,
                       f'{field}.selection', selection)
  _check_reading(chooses, own['rounds'], own['eval_every'], f'{field}.', fail)
  return Method(name, algorithm, options, settings, task_settings, aggregator, tuple(stack),
                {k: tuple(v) for k, v in grid.items()}, choice_of, own['rounds'],
                own['eval_every'], tuple(own['seeds']), chooses)


def _setting_names(algorithm: str) -> tuple[str, ...]:
  return tuple(spec_lib.CENTRAL_SETTINGS) if algorithm == CENTRAL else SETTINGS


def _check_renderer(module: str, fail) -> None:
  try:
    render = getattr(importlib.import_module(module), 'render', None)
  except ImportError as e:
    fail('report.renderer', f'{module} could not be imported: {e}')
  if not callable(render):
    fail('report.renderer', f'{module} has no render(study, folder, plan, task)')


def _option_names(algorithm: str) -> set[str]:
  if algorithm == CENTRAL:
    return set()
  return {f.name for f in dataclasses.fields(registry.get(algorithm).options)}


def _task_setting_names(task: str) -> list[str]:
  from tasks import setting  # pylint: disable=g-import-not-at-top
  return [f.name for f in setting.described(tasks.module(task).Config)]


def _check_task_settings(task: str, values: Mapping[str, Any], field: str, fail) -> None:
  own = _task_setting_names(task)
  for name in values:
    if name not in own:
      fail(f'{field}.{name}', f'not a setting of task {task} (its settings: '
           f'{", ".join(sorted(own))})')
