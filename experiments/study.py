"""A study's cells and what each method chooses, decided from its records alone.

Each method runs seed 0 over its grid; where the best point sits at an edge of a
rate's axis (a float setting with two or more values), the axis is extended one
rate past that edge along the 1, 3, 10, 30, ... ladder (experiments.rate_sweep),
up to `selection.extend` rates, or until the rate past the edge diverges; then
every seed runs at the chosen point. A point's score is the mean of its run's
last `selection.last` evaluations of the selection metric, never a test metric;
a run that diverged scores worst. `plan` reads what has finished and says which
cells can run now, so a study resumes by planning again, and cells that do not
wait on each other run side by side.
"""

import dataclasses
import json
import math
import pathlib
import tomllib
from typing import Any, Callable, Mapping

import numpy as np

from experiments import files
from experiments import rate_sweep
from experiments import run_records
from experiments import spec as spec_lib
from experiments import study_file

RUNS, RECORDS = 'runs', 'cells'  # a study folder's run folders and cell records


@dataclasses.dataclass(frozen=True)
class Cell:
  name: str
  method: str
  point: Mapping[str, Any]
  seed: int
  spec: spec_lib.RunSpec | spec_lib.CentralSpec


def cell_name(method: str, point: Mapping[str, Any], seed: int) -> str:
  """method-setting=value-...-sSEED: one folder name per cell."""
  return '-'.join([method, *(f'{k}={v:g}' if isinstance(v, float) else f'{k}={v}'
                             for k, v in point.items()), f's{seed}'])


def grid_cell_name(method: study_file.Method, point: Mapping[str, Any]) -> str:
  """The grid's run of `point` (seed: the method's first): the seed's cell, or, where
  the selection runs shorter grid runs, SWEEP + that name."""
  name = cell_name(method.name, point, method.seeds[0])
  return SWEEP + name if method.selection.rounds else name


SWEEP = 'sweep-'


@dataclasses.dataclass
class MethodPlan:
  tried: dict  # frozen point -> score (None: not run yet; NaN: diverged)
  chosen: dict | None  # None until the grid (and its extensions) decided
  waiting: list  # points whose seed-0 cell must run before anything is chosen


@dataclasses.dataclass
class Plan:
  methods: dict[str, MethodPlan]
  ready: list[Cell]  # cells with no record that can run now

  @property
  def done(self) -> bool:
    return not self.ready and all(m.chosen is not None for m in self.methods.values())


class Records:
  """A study folder's finished cells: their scores and curves."""

  def __init__(self, folder: str | pathlib.Path):
    self.folder = pathlib.Path(folder)

  def path(self, cell: str) -> pathlib.Path:
    return self.folder / RECORDS / cell

  def finished(self, cell: str) -> bool:
    return (self.path(cell) / 'summary.json').exists()

  def summary(self, cell: str) -> dict:
    """A finished cell's summary.json."""
    return files.read_summary(self.path(cell) / 'summary.json')

  def last_means(self, cell: str, metrics, last: int) -> dict:
    """{'summary': its summary, 'diverged': bool, metric: mean of its `last` finite
    evaluations (a run that diverged: those before it did; NaN: none)}."""
    summary = self.summary(cell)
    values = {'summary': summary, 'diverged': run_records.diverged(summary)}
    for metric in metrics:
      curve = run_records.read_curve('', cell, metric, str(self.folder / RECORDS))
      finite = ([] if curve is None else
                [v for v in curve[metric] if math.isfinite(v)][-last:])
      values[metric] = float(np.mean(finite)) if finite else math.nan
    return values

  def score(self, cell: str, selection: study_file.Selection) -> float | None:
    """The selection score of a finished cell (None: not finished)."""
    if not self.finished(cell):
      return None
    means = self.last_means(cell, (selection.metric,), selection.last)
    return math.nan if means['diverged'] else means[selection.metric]  # diverged: the worst


def _key(point: Mapping[str, Any]) -> tuple:
  return tuple(sorted(point.items()))


def _extendable(values) -> bool:
  """A rate's axis: floats, all positive, two or more of them."""
  return len(values) > 1 and all(isinstance(v, float) and v > 0 for v in values)


def _choose(method: study_file.Method, records: Records) -> MethodPlan:
  """The method's grid (and extensions) so far, and its choice once decided."""
  selection = method.selection
  sign = -1 if selection.goal == 'max' else 1
  points = {_key(p): dict(p) for p in method.points()}
  tried = {k: records.score(grid_cell_name(method, p), selection) for k, p in points.items()}
  axes = [a for a, values in method.grid.items() if _extendable(values)]
  while True:
    waiting = [points[k] for k, s in tried.items() if s is None]
    if waiting:
      return MethodPlan(tried, None, waiting)
    finite = {k: s for k, s in tried.items() if math.isfinite(s)}
    if not finite:  # every point diverged: the first of the grid, shown as diverged
      return MethodPlan(tried, points[next(iter(tried))], [])
    best = min(finite, key=lambda k: sign * finite[k])
    extension = _past_an_edge(points[best], points, axes, method, selection.extend)
    if extension is None:
      return MethodPlan(tried, points[best], [])
    points[_key(extension)] = extension
    tried[_key(extension)] = records.score(grid_cell_name(method, extension), selection)


def _past_an_edge(best: dict, points: dict, axes, method, limit: int) -> dict | None:
  """The next point past an edge of a rate's axis where `best` sits, or None."""
  for axis in axes:
    line = [p[axis] for p in points.values()
            if all(p[a] == best[a] for a in p if a != axis)]
    grid = method.grid[axis]
    for up, end in ((True, max(line)), (False, min(line))):
      added = [v for v in line if (v > max(grid) if up else v < min(grid))]
      if best[axis] == end and len(added) < limit:
        return {**best, axis: rate_sweep.beyond(end, up)}
  return None


def plan(study: study_file.Study, records: Records) -> Plan:
  """Every method's state, and the cells that can run now."""
  methods, ready = {}, []
  for name, method in sorted(study.methods.items(), key=lambda item: bool(item[1].choice_of)):
    state = (_choose(method, records) if method.choice_of is None
             else MethodPlan({}, methods[method.choice_of].chosen, []))
    methods[name] = state
    if state.chosen is None:
      wanted = [Cell(grid_cell_name(method, p), name, p, method.seeds[0],
                     study.spec(name, p, method.seeds[0], grid=True)) for p in state.waiting]
    else:
      wanted = [Cell(cell_name(name, state.chosen, s), name, state.chosen, s,
                     study.spec(name, state.chosen, s)) for s in method.seeds]
    ready += [cell for cell in wanted if not records.finished(cell.name)]
  return Plan({name: methods[name] for name in study.methods}, ready)


SPEC_FILE = 'study.toml'  # the study a folder holds, as it first ran (overrides applied)
# Fields a study may change under a folder that holds it: they shape the report,
# not a cell; `seeds` and `methods` may grow.
REPORT_FIELDS = ('report', 'floors', 'floor_item', 'baseline')


class StudyFolderError(ValueError):
  """The folder holds another study, or a cell's record is of another run."""


def check_folder(study: study_file.Study, folder: pathlib.Path) -> None:
  """Keeps the study in `folder` (SPEC_FILE), or refuses one that changed what its
  cells are, naming the fields: only added seeds and methods, and the report's
  fields, may change."""
  saved = folder / SPEC_FILE
  if not saved.exists():
    folder.mkdir(parents=True, exist_ok=True)
    files.write_text(saved, _toml(study.raw))
    return
  before = tomllib.loads(saved.read_text())
  changed = [f for f in _changed(before, dict(study.raw), '')
             if f.split('.')[0] not in REPORT_FIELDS]
  if changed:
    raise StudyFolderError(
        f'{folder} holds a study whose {", ".join(changed)} differ from {study.path}\'s; '
        'only seeds and methods may be added (and the report changed) under a folder: '
        'run the changed study in a new --output_dir')
  files.write_text(saved, _toml(study.raw))


def _changed(before, after, prefix: str) -> list[str]:
  if isinstance(before, dict) and isinstance(after, dict):
    fields = []
    for key in sorted(set(before) | set(after)):
      if prefix == 'methods.' and key not in before:
        continue  # an added method
      fields += _changed(before.get(key), after.get(key), f'{prefix}{key}.')
    return fields
  if (prefix.endswith('seeds.') and prefix.count('.') in (1, 3)  # the study's or a method's
      and isinstance(after, list) and set(before or [0]) <= set(after)):
    return []
  return [] if before == after else [prefix.rstrip('.')]


def _toml(value, prefix: str = '') -> str:
  """A study's dict as TOML (tables after values)."""
  lines = [f'{k} = {_toml_value(v)}' for k, v in value.items() if not isinstance(v, dict)]
  for key, table in ((k, v) for k, v in value.items() if isinstance(v, dict)):
    name = f'{prefix}{key}'
    lines += ['', f'[{name}]', _toml(table, f'{name}.').strip('\n')]
  return '\n'.join(line for line in lines if line is not None) + '\n'


def _toml_value(value) -> str:
  if isinstance(value, bool):
    return 'true' if value else 'false'
  if isinstance(value, (int, float)):
    return repr(value)
  if isinstance(value, list):
    return '[' + ', '.join(_toml_value(v) for v in value) + ']'
  return json.dumps(value)  # a TOML basic string


class CellFailed(RuntimeError):
  """A cell's run failed twice; the message holds its log's end."""


def run(study: study_file.Study, folder: pathlib.Path, pool, *,
        on_cell: Callable[[Cell, float | None, Plan], None] | None = None) -> Plan:
  """Runs the cells the plan allows, `pool.free` at once, recording each finished
  one, until every method has chosen and run its seeds. `on_cell(cell, its
  selection score (NaN: diverged), the plan after it)` follows each cell. A cell
  whose run fails is retried once, then CellFailed."""
  records = Records(folder)
  failures, running = {}, {}
  while True:
    current = plan(study, records)
    # cells whose launcher has a worker waiting first: another launcher's replaces one
    for cell in sorted(current.ready, key=lambda c: not pool.has_idle(c.spec.module)):
      if cell.name in running or not pool.free:
        continue
      out = folder / RUNS / cell.name
      pool.submit(cell.name, [*cell.spec.to_flags(), f'--output_dir={out}'],
                  folder / RUNS / f'{cell.name}.log', cell.spec.module)
      running[cell.name] = cell
    if not running:
      return current
    name, code = pool.wait()
    cell = running.pop(name)
    out = folder / RUNS / name
    if (out / 'summary.json').exists():  # finished, or stopped where it diverged
      config = json.loads((out / 'config.json').read_text())
      mismatch = cell.spec.differences(config)
      if mismatch:
        raise StudyFolderError(f'{out} holds a run of other settings ({"; ".join(mismatch)})')
      run_records.record(out, records.path(name))
      if on_cell:
        on_cell(cell, records.score(name, study.methods[cell.method].selection),
                plan(study, records))
      continue
    failures[name] = failures.get(name, 0) + 1
    if failures[name] > 1:
      log = (folder / RUNS / f'{name}.log')
      tail = log.read_text()[-3000:] if log.exists() else ''
      raise CellFailed(f'cell {name} failed twice (exit {code}); the end of {log}:\n{tail}')
