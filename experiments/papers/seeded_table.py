"""A table of methods over seeds, rebuilt from cell records, with a popularity row.

The shape of the cross-paper combinations and of the second-dataset headline
tables: each row is one launch.train configuration, run once per seed, and
shown as mean ± std (sample std) of its metrics with the per-seed values.
"""

import dataclasses
import math
import pathlib
from typing import Callable, Sequence

from absl import flags
import numpy as np

from experiments import files
from experiments import rate_sweep
from experiments import run_records
from experiments import seed_stats
from experiments.papers import cell_records
from launch import common
import tasks


def define_flags(runs_dir: str, results_dir: str) -> None:
  """The flags of a script made of seeded tables (e.g. launch.reproduce_beauty)."""
  flags.DEFINE_string('runs_dir', runs_dir, 'Where the individual runs go.')
  flags.DEFINE_string('results_dir', results_dir, 'Where the results go.')
  flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds of the headline rows.')
  flags.DEFINE_enum('only', 'all', ['all', 'none'], 'none: tabulate the records, run nothing.')


@dataclasses.dataclass(frozen=True)
class Table:
  task: str
  title: str
  metrics: tuple[str, ...]  # the first is the headline
  rows: dict  # cell -> (label, launcher args, the paper reproduction's record: NAME_sS, or
  #               NAME for seed 0)
  args: tuple[str, ...]
  # The task's popularity() part ('' for its default, test; None: no popularity row).
  popularity: str | None
  # Task settings (name -> value) beyond the defaults, e.g. another data_dir:
  # given to every run of the table and to the popularity row's task.
  task_settings: tuple[tuple[str, object], ...] = ()
  # Rows (e.g. 'popularity') every row is held against on the headline metric:
  # a column each, read by seed_stats.versus (the one rule).
  versus: tuple[str, ...] = ()
  # k > 0: the headline's mean over each run's last k evaluations, beside its final
  # value, and what the versus columns hold (for a metric that swings between
  # evaluations, one evaluation decides nothing).
  last_k: int = 0

  def caption(self) -> str:
    settings = ' '.join(f'--{name}={value}' for name, value in self.task_settings)
    return ' '.join(filter(None, (f'`--task={self.task}`', settings, *self.args)))


LAST_MEAN = 'mean of the last evaluations'  # the key `last_k` adds to a cell's results


def _cell(table: Table, row: str, seed: int, runs_dir: str, records_dir: pathlib.Path,
          wanted: bool) -> dict | str:
  """A row's run of one seed (run now if `wanted` and not recorded yet)."""
  _, args, paper_record = table.rows[row]
  settings = [f'--{name}={value}' for name, value in table.task_settings]
  args = (*settings, *args, *table.args, f'--seed={seed}')
  runs, name, records = f'{runs_dir}/{table.task}', f'{row}_s{seed}', str(records_dir / table.task)
  if paper_record:  # the paper reproduction's cell of this seed, where it ran
    # A study's records name each seed ({seed} in the path); the older scripts'
    # name seed 0's cell RECORD and another's RECORD_sSEED.
    paper_record = str(paper_record)
    candidates = ([paper_record.format(seed=seed)] if '{seed}' in paper_record else
                  [f'{paper_record}_s{seed}', *([paper_record] if seed == 0 else [])])
    for record in map(pathlib.Path, candidates):
      if (record / 'summary.json').exists():
        runs, name, records, wanted = '', record.name, str(record.parent), False
        break
  result = cell_records.run_cell(runs, name, 'launch.train', *args, wanted=wanted,
                                 records_dir=records)
  if not isinstance(result, dict):
    return result

  def evaluations(metric: str):  # its curve before any divergence; None: none
    curve = run_records.read_curve(runs, name, metric, records)
    return curve[metric] if curve is not None and len(curve) else None

  if run_records.diverged(result):  # a result: read where it stood before it diverged
    # (run_records.diverged still tells it apart, so a sweep scores it the worst)
    result = {**result, **{m: None if (c := evaluations(m)) is None else float(c.iloc[-1])
                           for m in table.metrics}}
  if table.last_k:
    curve = evaluations(table.metrics[0])
    result = {**result, LAST_MEAN: None if curve is None
              else float(curve.tail(table.last_k).mean())}
  return result


def seed_cell(table: Table, row: str, seed: int, runs_dir: str, records_dir: pathlib.Path,
              wanted: bool) -> dict | str:
  """One row's run of one seed (run now if `wanted` and not recorded yet): its
  summary, or cell_records.NOT_RUN / CANNOT_RUN."""
  common.FLAGS.task = table.task  # run_cell passes the task flags on to each run
  return _cell(table, row, seed, runs_dir, records_dir, wanted)


def _popularity(table: Table, seed: int) -> dict[str, float]:
  module = tasks.module(table.task)
  task = module.Task(module.make_config(seed=seed, **dict(table.task_settings)))
  values = task.objective.popularity(table.popularity or 'test')
  return {f'{table.popularity or "test"}/{k}': v for k, v in values.items()}


def _popularity_key(table: Table, seed: int) -> str:
  """The popularity row's key among a table's derived values (run_records.derived)."""
  settings = [f'--{name}={value}' for name, value in table.task_settings]
  return ' '.join(['popularity', f'--task={table.task}', *settings,
                   table.popularity or 'test', f'--seed={seed}'])


def popularity(table: Table, seed: int, records_dir: pathlib.Path) -> dict[str, float]:
  """The popularity row of `table` (its `popularity` part) for one seed, derived
  once into the records (run_records.derived)."""
  return run_records.derived(records_dir, _popularity_key(table, seed),
                              lambda: _popularity(table, seed))


def collect(table: Table, seeds: list[int], runs_dir: str, records_dir: pathlib.Path,
            wanted: bool) -> dict[str, list[dict]]:
  """Runs the table's missing cells (if `wanted`); row -> its finished seeds' summaries."""
  common.FLAGS.task = table.task  # run_cell passes the task flags on to each run
  results = {}
  if table.popularity is not None:  # a score without rounds: its last mean is itself
    results['popularity'] = [{**p, LAST_MEAN: p.get(table.metrics[0])} for p in (
        popularity(table, s, records_dir) for s in seeds)]
  for row in table.rows:
    results[row] = [_at_floor(r, table.metrics[0], results.get('popularity'), i)
                    for i, r in enumerate(_cell(table, row, s, runs_dir, records_dir, wanted)
                                          for s in seeds) if isinstance(r, dict)]
  return results


AT_FLOOR = 'at_floor'  # the key of a seed read at its popularity row


def _at_floor(result: dict, headline: str, popularity: list[dict] | None, index: int) -> dict:
  """A seed that diverged before its first evaluation of `headline`, read at its
  popularity row's values (results/README.md's rule: a diverged seed counts, never
  dropped); without a popularity row it stays unread (None) and its row says so."""
  if (popularity is None or result[headline] is not None
      or not run_records.diverged(result)):
    return result
  return {**result, **{k: popularity[index].get(k) for k, v in result.items() if v is None},
          AT_FLOOR: True}


def render(table: Table, seeds: list[int], results: dict[str, list[dict]]) -> list[str]:
  """The markdown lines of a table's collected results (`collect`)."""
  headline = table.metrics[0]
  held = LAST_MEAN if table.last_k else headline  # what the versus columns compare
  short = headline.split('/')[-1]
  labels = {'popularity': 'popularity', **{k: v[0] for k, v in table.rows.items()}}
  last = [f'{short}, mean of the last {table.last_k}'] if table.last_k else []
  # Every other metric against popularity too (its final value: what the row shows).
  against_popularity = table.metrics[1:] if 'popularity' in table.versus else ()
  header = [short, *last, *(m.split('/')[-1] for m in table.metrics[1:]),
            *(f'vs {labels[row]}' + (f' (mean of the last {table.last_k})' if last else '')
              for row in table.versus),
            *(f'{m.split("/")[-1]} vs popularity' for m in against_popularity),
            'per seed (' + short + ')']
  explained = (f' The mean of the last {table.last_k} evaluations of each run stands beside '
               f'its final {short}: it swings between evaluations, so the comparisons read '
               'that mean.' if table.last_k else '')
  lines = [f'## {table.title}', '',
           f'{table.caption()}; seeds {seeds}; mean ± std over the seeds (sample std).'
           + explained, '',
           '| method | ' + ' | '.join(header) + ' |', '|---|' + '---|' * len(header)]
  for row, runs in results.items():
    diverged = sum(run_records.diverged(r) for r in runs)
    floored = sum(r.get(AT_FLOOR, False) for r in runs)
    missing = sum(r[headline] is None for r in runs)
    if missing or (runs and floored == len(runs)):
      # one seed has no value at all, or none has one of its own: nothing to compare
      lines.append(f'| {labels[row]} | ' + ' | '.join(['diverged'] * (len(header) - 1))
                   + f' | diverged before its first evaluation of {short} in '
                   f'{floored + missing} of {len(runs)} seeds |')
      continue
    shown = [headline, *([LAST_MEAN] if table.last_k else []), *table.metrics[1:]]
    per_metric = [seed_stats.spread([r[m] for r in runs]) for m in shown]
    versus = ['' if other == row else seed_stats.versus(
        [r[held] for r in runs], [r[held] for r in results.get(other, [])])
              for other in table.versus]
    versus += ['' if row == 'popularity' else seed_stats.versus(
        [r[m] for r in runs], [r[m] for r in results.get('popularity', [])])
                for m in against_popularity]
    per_seed = ', '.join(f'{r[headline]:.3f}' for r in runs) or 'not run'
    if diverged:
      read = (['read at their last evaluation'] if not floored else
              [f'{diverged - floored} read at their last evaluation' if diverged > floored
               else '', f'{floored} before any evaluation, at popularity'])
      per_seed += f' ({diverged} of {len(runs)} diverged: ' + '; '.join(filter(None, read)) + ')'
    lines.append(f'| {labels[row]} | ' + ' | '.join(per_metric + versus) + f' | {per_seed} |')
  return lines + ['']


def tabulate(table: Table, seeds: list[int], runs_dir: str, records_dir: pathlib.Path,
             wanted: bool) -> list[str]:
  """Runs the table's missing cells (if `wanted`); its markdown lines."""
  return render(table, seeds, collect(table, seeds, runs_dir, records_dir, wanted))


def best_row(table: Table, results: dict[str, list[dict]], metric: str) -> str | None:
  """The row of a one-seed sweep with the highest `metric` (None until every row
  has run; a run whose model became NaN counts as the worst)."""
  if not all(results.get(row) for row in table.rows):
    return None
  return max(table.rows, key=lambda r: np.nan_to_num(score(results[r][0], metric), nan=-np.inf))


def sweep_then_headline(heading: list[str], sweep: Table, metric: str,
                        headlines: Callable[[str], Sequence[Table]], seeds: list[int],
                        runs_dir: str, results_dir: pathlib.Path, wanted: bool) -> None:
  """A sweep on seed 0, then the headline tables over `seeds` at the sweep's best
  row (`headlines(row)`), one after the other; writes them all, after `heading`,
  to table.md."""
  records = results_dir / 'cells'
  results = collect(sweep, [0], runs_dir, records, wanted)
  lines = [*heading, *render(sweep, [0], results)]
  chosen = best_row(sweep, results, metric)
  if chosen is None:
    lines.append('The headline rows wait for the whole sweep.')
  else:
    for table in headlines(chosen):
      lines += tabulate(table, seeds, runs_dir, records, wanted)
  results_dir.mkdir(parents=True, exist_ok=True)
  files.write_text(results_dir / 'table.md', '\n'.join(lines))


@dataclasses.dataclass(frozen=True)
class Swept:
  """A one-seed rate sweep: each rate tried with its run's summary (or NOT_RUN /
  CANNOT_RUN) and score (None: not run; NaN: diverged), and the chosen rate."""
  results: dict
  scores: dict
  chosen: float | None


def score(result: dict | str, metric: str) -> float | None:
  """A sweep run's score: None when it has not run, NaN when it diverged (the
  trainer stopped it, or its training loss is NaN), else its final `metric`."""
  if not isinstance(result, dict):
    return None
  if run_records.diverged(result):
    return math.nan
  return float(result[metric])


def sweep_rates(grid, run: Callable[[float], dict | str], metric: str, *,
                max_extensions: int, lower_is_better: bool = False) -> Swept:
  """Runs `run(rate)` (a cell's summary) at each rate of `grid`, extended past a
  best edge (experiments.rate_sweep), scored by its final `metric`."""
  results = {}

  def scored(rate):
    results[rate] = run(rate)
    return score(results[rate], metric)

  scores, chosen = rate_sweep.sweep(grid, scored, lower_is_better=lower_is_better,
                                    max_extensions=max_extensions)
  return Swept(results, scores, chosen)


def sweep_lines(swept: Swept, label: str, metrics: tuple[str, ...],
                floor: dict[str, float] | None = None) -> list[str]:
  """A sweep's rows, one a rate tried (the chosen one in bold), `label` naming the
  method (e.g. 'FedAvg, client Adam'), after a popularity row (`floor`, if
  given), then the rates tried."""
  lines = ['| ' + label + ' | ' + ' | '.join(m.split('/')[-1] for m in metrics) + ' |',
           '|---|' + '---|' * len(metrics)]
  if floor is not None:
    lines.append('| popularity | ' + ' | '.join(f'{floor[m]:.3f}' for m in metrics) + ' |')
  for rate, result in sorted(swept.results.items()):
    value = swept.scores[rate]
    if value is None:
      cells = ['not run'] * len(metrics)
    elif math.isnan(value):
      cells = ['diverged'] * len(metrics)
    else:
      cells = [f'{result[m]:.3f}' for m in metrics]
    shown = f'**{rate:g}**' if rate == swept.chosen else f'{rate:g}'
    lines.append(f'| {shown} | ' + ' | '.join(cells) + ' |')
  if swept.chosen is None:
    chosen = 'not chosen yet: the sweep is not complete'
  elif all(math.isnan(v) for v in swept.scores.values()):
    chosen = 'every rate diverged'
  elif min(swept.scores) < swept.chosen < max(swept.scores):
    chosen = f'{swept.chosen:g} wins, inside the rates tried'
  else:
    chosen = f'{swept.chosen:g} wins, at the edge of the rates tried (its extensions ran out)'
  return [*lines, '', f'Rates tried: {rate_sweep.describe(swept.scores, swept.chosen)}; '
          f'{chosen}.', '']
