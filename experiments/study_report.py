"""A study's outputs, from its records alone: table.md, results.json, curves.png.

Every number is a run's mean of its last `selection.last` evaluations (one
reading for every curve), then mean ± std (sample) over the seeds; each method
is marked against the floors and the baseline by the one verdict rule
(experiments.verdicts).
"""

import math
import pathlib

import numpy as np

from experiments import files
from experiments import plots
from experiments import run_records
from experiments import seed_stats
from experiments import study as study_lib
from experiments import study_file
from experiments import verdicts


def _short(metric: str) -> str:
  return metric.split('/')[-1]


def _point(point) -> str:
  return ', '.join(f'{k}={v:g}' if isinstance(v, float) else f'{k}={v}'
                   for k, v in point.items()) or '(fixed)'


def results(study: study_file.Study, records: study_lib.Records, plan: study_lib.Plan,
            floors: dict[str, dict[str, list[float]]]) -> dict:
  """The study's numbers: per method its grid's scores, its choice and each seed's
  reported metrics; the floors' per seed."""
  methods = {}
  for name, state in plan.methods.items():
    method = study.methods[name]
    grid = [{'point': dict(k), 'score': s} for k, s in sorted(state.tried.items())]
    seeds = {}
    if state.chosen is not None:
      for seed in method.seeds:
        cell = study_lib.cell_name(name, state.chosen, seed)
        if records.finished(cell):
          means = records.last_means(cell, study.report, method.selection.last)
          seeds[seed] = {'diverged': means['diverged'],
                         **{m: means[m] for m in study.report}}
    methods[name] = {'algorithm': method.algorithm, 'chosen': state.chosen,
                     'grid': grid, 'seeds': seeds,
                     **({'selection': vars(method.selection)}
                        if method.selection != study.selection else {})}
  return {'study': study.path, 'task': study.task, 'seeds': list(study.seeds),
          'selection': vars(study.selection), 'report': list(study.report),
          'baseline': study.baseline, 'floors': floors, 'methods': methods}


def _values(method: dict, metric: str) -> list[float]:
  """The finished seeds' values of `metric`: a diverged one's at its last evaluations
  before it diverged (one never evaluated is left out)."""
  return [s[metric] for s in method['seeds'].values()
          if math.isfinite(s[metric])]


def table(numbers: dict, caption: str) -> str:
  """table.md's markdown."""
  selection, report = numbers['selection'], numbers['report']
  headline = report[0]
  floors, methods = numbers['floors'], numbers['methods']
  baseline = numbers['baseline']
  versus = [f for f in floors if headline in floors[f]] + ([baseline] if baseline else [])
  better = 'higher' if selection['goal'] == 'max' else 'lower'
  lines = [
      f'# Study {pathlib.Path(numbers["study"]).stem}', '',
      f'{caption}; seeds {", ".join(map(str, numbers["seeds"]))}.', '',
      f'Each method\'s settings are chosen on seed {numbers["seeds"][0]} by the mean of its '
      f'last {selection["last"]} evaluations of {selection["metric"]} ({better} is better) '
      'over its grid' + (f', a rate\'s grid extended past a winning edge by up to '
                         f'{selection["extend"]} rates' if selection['extend'] else '')
      + '; every seed then runs at the choice. Each value is a '
      f'run\'s mean of its last {selection["last"]} evaluations: mean ± std (sample) over '
      f'the seeds. "vs" columns give {_short(headline)}\'s verdict '
      f'(experiments.verdicts): above / below by Welch\'s test at p < {verdicts.RULE.level:g}, '
      f'level by an equivalence test within {100 * verdicts.RULE.margin:g}% of the other\'s '
      'mean, else undecided; against the baseline, not testable where both are below a '
      'floor.', '']
  own = {n: m['selection'] for n, m in methods.items() if 'selection' in m}
  if own:
    lines += ['Chosen by their own rule: ' + '; '.join(
        f'{n} (the mean of the last {r["last"]} evaluations of {r["metric"]}, {r["goal"]})'
        for n, r in own.items()) + '.', '']
  header = ['method', 'chosen', *map(_short, report),
            *(f'vs {v}' for v in versus), f'per seed ({_short(headline)})']
  lines += ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  for floor, values in floors.items():
    cells = [seed_stats.spread(values[m]) if m in values else '' for m in report]
    lines.append(f'| {floor} (floor) |  | ' + ' | '.join(cells) + ' |'
                 + ' |' * (len(versus) + 1))
  for name, method in methods.items():
    if method['chosen'] is None:
      lines.append(f'| {name} | grid not finished |' + ' |' * (len(header) - 2))
      continue
    runs = method['seeds']
    diverged = sum(s['diverged'] for s in runs.values())
    cells = [seed_stats.spread(_values(method, m)) for m in report]
    floor_values = {f: v[headline] for f, v in floors.items() if headline in v}
    marks = []
    for other in versus:
      theirs = floors[other][headline] if other in floors else _values(methods[other], headline)
      marks.append('' if other == name else str(verdicts.judge(
          _values(method, headline), theirs, headline, None if other in floors else floor_values)))
    per_seed = ', '.join((f'{s[headline]:.3f}' if math.isfinite(s[headline]) else 'none')
                         + (' (diverged)' if s['diverged'] else '')
                         for s in runs.values()) or seed_stats.NOT_RUN
    if diverged:  # a diverged seed is a result: read where it stood before it diverged
      per_seed += (f' ({diverged} of {len(runs)} diverged: each counted at its last '
                   'evaluations before it did)')
    lines.append(f'| {name} | {_point(method["chosen"])} | ' + ' | '.join(cells + marks)
                 + f' | {per_seed} |')
  lines += ['', f'## Grids (seed {numbers["seeds"][0]}: the mean of the last '
            f'{selection["last"]} evaluations of {selection["metric"]})', '',
            f'| method | point | {_short(selection["metric"])} |', '|---|---|---|']
  for name, method in methods.items():
    for tried in method['grid']:
      shown = _point(tried['point'])
      if tried['point'] == method['chosen']:
        shown = f'**{shown}**'
      score = tried['score']
      value = (seed_stats.NOT_RUN if score is None else 'diverged' if math.isnan(score)
               else f'{score:.4f}')
      lines.append(f'| {name} | {shown} | {value} |')
  return '\n'.join(lines) + '\n'


def curves(study: study_file.Study, records: study_lib.Records, plan: study_lib.Plan,
           path: pathlib.Path) -> None:
  """The selection metric's curve of each method at its choice: the mean over its
  seeds, a band from their lowest to their highest."""
  metric = study.selection.metric
  fig, ax = plots.figure()
  for name, state in plan.methods.items():
    method = study.methods[name]
    if state.chosen is None or method.selection.metric != metric:
      continue
    frames = [run_records.read_curve('', study_lib.cell_name(name, state.chosen, s), metric,
                                     str(records.folder / study_lib.RECORDS))
              for s in method.seeds]
    frames = [f for f in frames if f is not None and not f.empty]
    if not frames:
      continue
    rounds = frames[0]['epoch' if 'epoch' in frames[0] else 'round'].to_numpy()  # central: epochs
    length = min(len(f) for f in frames)
    values = np.stack([f[metric].to_numpy()[:length] for f in frames])
    line, = ax.plot(rounds[:length], values.mean(0), label=name)
    if len(frames) > 1:
      ax.fill_between(rounds[:length], values.min(0), values.max(0), alpha=0.2,
                      color=line.get_color())
  plots.save(fig, ax, path, xlabel='round', ylabel=metric,
             title=f'{pathlib.Path(study.path).stem}: {metric} at each method\'s choice')


def write(study: study_file.Study, folder: pathlib.Path, plan: study_lib.Plan,
          floors: dict, caption: str) -> dict:
  """table.md, results.json and curves.png into `folder`; the numbers."""
  records = study_lib.Records(folder)
  numbers = results(study, records, plan, floors)
  files.write_text(folder / 'table.md', table(numbers, caption))
  files.write_json(folder / 'results.json', _json_safe(numbers))
  curves(study, records, plan, folder / 'curves.png')
  return numbers


def _json_safe(value):
  """NaN as null (strict JSON), keys as strings."""
  if isinstance(value, dict):
    return {str(k): _json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_json_safe(v) for v in value]
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value
