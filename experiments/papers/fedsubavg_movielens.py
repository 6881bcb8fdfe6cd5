"""FedSubAvg on MovieLens-100K, the shape of Ding et al.'s Table 2 (rounds to a
target), rendered from the records of the study fedsubavg_movielens.toml beside
this module.

The study chose each method's learning rate on a short grid run (seed 0) and ran
its seeds; this adds what is the paper's own. Targets, per seed:
* LR: the paper's rule, CentralSGD's lowest train loss within the same rounds.
  CentralSGD is still falling there, so the target (and every ratio against it)
  depends on the run's length: the converged CentralSGD (seed 0) is shown beside.
* DIN: CentralSGD's best validation AUC within the same rounds, less AUC_MARGIN
  (the paper fixes a test AUC of 0.6 on its data, about 0.05 below its
  CentralSGD); rounds to target are read on validation too.
A diverged seed shows as diverged: the study runs no rate below its choice.
Values from the data (the description, the item floors) are derived once into
the records (experiments.run_records.derived), so the table rebuilds without it.
"""

import math
import pathlib

import numpy as np

from experiments import files
from experiments import plots
from experiments import rate_sweep
from experiments import run_records
from experiments import seed_stats
from experiments import study as study_lib

SETTINGS = ('lr', 'din')  # the methods NAME are SETTING_COLUMN, as the study names them
COLUMNS = {'central': 'CentralSGD', 'fedavg': 'FedAvg', 'fedprox': 'FedProx',
           'scaffold': 'Scaffold', 'fedadam': 'FedAdam', 'fedadagrad': 'FedAdagrad',
           'fedsubavg': 'FedSubAvg', 'fedsubavg_bounded': 'FedSubAvg, correction at most K'}
CONVERGED = 'central_converged'
AUC_MARGIN = 0.02
ITEM = 'movie'  # the item column the floors are read by
NOT_RUN = seed_stats.NOT_RUN
PAPER = {'lr': 'MovieLens-1M LR: CentralSGD 180, FedAvg 170, FedProx 170, Scaffold 180, '
               'FedAdam 170, FedSubAvg 100 rounds to the train loss target 0.325',
         'din': 'Amazon DIN: CentralSGD 20, FedAvg 200+, FedProx 200+, Scaffold 200+, '
                'FedAdam 16, FedSubAvg 53 rounds to test AUC 0.6'}
# What each final run reports at its last round, as the table's rows.
FINAL_METRICS = {'eval/train_loss': 'train loss', 'eval/validation_auc': 'validation AUC',
                 'eval/test_logloss': 'test logloss', 'eval/test_auc': 'test AUC'}


class _Reader:
  """The study's records as the table reads them."""

  def __init__(self, study, folder: pathlib.Path, plan: study_lib.Plan, task):
    self.study, self.plan, self.task = study, plan, task
    self.records = study_lib.Records(folder)
    self.cells = str(self.records.folder / study_lib.RECORDS)

  def finals(self, method: str) -> list[str | None]:
    """The method's cells at its choice, a seed each (None: its grid is not done)."""
    chosen = self.plan.methods[method].chosen
    return [None if chosen is None else study_lib.cell_name(method, chosen, seed)
            for seed in self.study.methods[method].seeds]

  def rate(self, method: str) -> float | None:
    chosen = self.plan.methods[method].chosen
    return None if chosen is None else next(iter(chosen.values()))

  def sweep(self, method: str) -> dict[float, float | None]:
    return {next(iter(dict(k).values())): s for k, s in self.plan.methods[method].tried.items()}

  def curve(self, name: str | None, metric: str):
    """(rounds, values) of a finished cell's evaluations; empty when it has none."""
    rows = None if name is None else run_records.read_curve('', name, metric, self.cells)
    if rows is None:
      return np.array([]), np.array([])
    step = 'epoch' if 'epoch' in rows else 'round'
    return rows[step].to_numpy(), rows[metric].to_numpy()

  def final_value(self, name: str | None, metric: str) -> float | None:
    """The metric at the cell's end: NaN if it diverged, None if it has not run (or
    never evaluated it)."""
    if name is None or not self.records.finished(name):
      return None
    summary = self.records.summary(name)
    if 'diverged_at_round' in summary:  # the trainer stopped it: its metrics are not there
      return float('nan')
    value = summary.get(metric)
    return None if value is None else float(value)

  def result(self, name: str | None, metric: str) -> float | None:
    return result(self.final_value, self.curve, name, metric)

  def at_best(self, name: str | None, metric: str) -> float | None:
    """The cell's test AUC at the evaluation where `metric` was best."""
    rows = None if name is None else run_records.read_curve('', name, metric, self.cells)
    if rows is None or rows.empty:
      return None
    return float(rows['eval/test_auc'][rows[metric].idxmax()])

  def derived(self, key: str, compute):
    return run_records.derived(self.cells, key, compute)


def result(final_value, curve, name: str | None, metric: str) -> float | None:
  """A cell's `metric` at its end (final_value(name, metric): NaN where it diverged,
  None where it has not run) or, where it diverged, its last finite evaluation
  (curve(name, metric)): a diverged seed is a result, never dropped from a mean."""
  value = final_value(name, metric)
  if value is None or not math.isnan(value):
    return value
  _, values = curve(name, metric)
  finite = values[np.isfinite(values)]
  return float(finite[-1]) if len(finite) else None


def final_cell(final_value, curve, names, metric: str) -> str:
  """`metric` at the end over the seeds that ran, a diverged one at its last
  evaluation before (result); how many diverged."""
  finals = [v for name in names if (v := final_value(name, metric)) is not None]
  diverged = sum(math.isnan(v) for v in finals)
  values = [v for name in names if (v := result(final_value, curve, name, metric)) is not None]
  if not finals:
    return NOT_RUN
  text = seed_stats.spread(values, digits=4) if values else 'diverged'
  if diverged:
    text += (f' ({diverged} of {len(finals)} seeds diverged, each read at its last '
             'evaluation before)')
  return text


def rounds_to(curve, name, metric: str, target: float, lower: bool) -> float | None:
  """The first evaluated round of curve(name, metric) that reached `target`; inf if
  none; None if not run."""
  steps, values = curve(name, metric)
  if not len(steps):
    return None
  reached = run_records.first_reaching(steps, values, target, lower)
  return float('inf') if reached is None else reached


def rounds_cell(rounds: list[float], total: int) -> str:
  """Rounds to target over seeds: mean ± std, or how many seeds never got there."""
  if not rounds:
    return NOT_RUN
  missed = sum(r == float('inf') for r in rounds)
  if missed == len(rounds):
    return f'{total}+'
  reached = seed_stats.spread([r for r in rounds if r != float('inf')], digits=0)
  return reached + (f' ({missed} of {len(rounds)} seeds: {total}+)' if missed else '')


def against_floor(result_of, names, floor: list[float], metric: str = 'eval/test_auc') -> str:
  """The seeds' `metric` at the end (result_of(name, metric): a diverged seed at its
  last evaluation before) against the floor's over the same seeds (names and floor
  in seed order; a seed not run leaves both)."""
  pairs = [(v, f) for name, f in zip(names, floor, strict=True)
           if (v := result_of(name, metric)) is not None and np.isfinite(v)]
  return seed_stats.against_floor([v for v, _ in pairs], [f for _, f in pairs])


# The losses a table marks against the constant predictor at the training click rate.
CONSTANT_METRICS = {'eval/train_loss': 'train loss', 'eval/test_logloss': 'test logloss'}


def constant_rows(rounds: int, finals: dict[str, list[str]], constants: dict[str, list[dict]],
                  result_of) -> list[str]:
  """Each loss at the end against the constant predictor at the training click rate
  (`constants`: column -> task.floors()['constant'] on each of its seeds); a loss
  above it is worse."""
  rows = []
  for metric, label in CONSTANT_METRICS.items():
    shown = np.mean([c[metric] for column in constants.values() for c in column])
    rows.append(f'| {label} at {rounds} against the constant at the training click rate '
                f'({shown:.4f}; a loss above it is worse) | ' + ' | '.join(
                    against_floor(result_of, names, [c[metric] for c in constants[column]],
                                  metric)
                    for column, names in finals.items()) + ' |')
  return rows


def plot_curves(path: pathlib.Path, title: str, metric: str, curves: dict[str, list],
                target: float | None, floors: dict[str, float] | None) -> None:
  """Each label's mean curve over its seeds' (rounds, values), with the target or the
  item floors (name -> value) as lines."""
  fig, ax = plots.figure()
  for label, seeds in curves.items():
    seeds = [c for c in seeds if len(c[0])]
    if seeds:
      length = min(len(c[0]) for c in seeds)
      ax.plot(seeds[0][0][:length], np.mean([c[1][:length] for c in seeds], axis=0),
              label=f'{label} ({len(seeds)} seeds)')
  if target is not None:
    ax.axhline(target, color='gray', linestyle=':', label='target (seed mean)')
  for (name, floor), style in zip((floors or {}).items(), ('--', '-.')):
    ax.axhline(floor, color='black', linestyle=style, label=f'{name} (no model)')
  plots.save(fig, ax, path, xlabel='round', ylabel=metric, title=title)


def _targets(reader: _Reader, setting: str) -> dict[int, float]:
  """The setting's target per seed from CentralSGD's run of that seed (the paper's
  rule: its lowest train loss; DIN: its best validation AUC less AUC_MARGIN)."""
  central = reader.study.methods[f'{setting}_central']
  lower = central.selection.goal == 'min'
  targets = {}
  for seed, name in zip(central.seeds, reader.finals(central.name)):
    _, values = reader.curve(name, central.selection.metric)
    if len(values):
      targets[seed] = float(values.min()) if lower else float(values.max()) - AUC_MARGIN
  return targets


def _section(reader: _Reader, folder: pathlib.Path, setting: str) -> list[str]:
  study = reader.study
  central = study.methods[f'{setting}_central']
  selection, seeds = central.selection, list(central.seeds)
  metric, lower = selection.metric, selection.goal == 'min'
  rounds, eval_every = central.rounds, central.eval_every
  finals = {c: reader.finals(f'{setting}_{c}') for c in COLUMNS}
  targets = _targets(reader, setting)
  done = [s for s in seeds if s in targets]

  def task_first(seed):  # the setting's task (its federated methods')
    return reader.task(seed, f'{setting}_fedavg')

  # A method may run more seeds than the target's (more seeds where a comparison is
  # undecided): each is held against the floors on its own seeds.
  every_seed = sorted({s for c in COLUMNS for s in study.methods[f'{setting}_{c}'].seeds})
  baselines = {seed: reader.derived(f'{setting} s{seed} item baselines',
                                    lambda seed=seed: task_first(seed).objective.item_baselines(ITEM))
               for seed in every_seed}
  popularity, click_rate = zip(*(baselines[s] for s in seeds))

  def on_seeds(values: dict, column: str) -> list:  # values[seed] for the column's seeds
    return [values[s] for s in study.methods[f'{setting}_{column}'].seeds]
  best = np.nanmin if lower else np.nanmax
  rows = ['| seeds run | ' + ' | '.join(
      str(sum(reader.final_value(name, metric) is not None for name in finals[c]))
      for c in COLUMNS) + ' |']
  rows += ['| rounds to target | ' + ' | '.join(rounds_cell(
      [r for s in done if (r := rounds_to(reader.curve, finals[c][seeds.index(s)], metric,
                                           targets[s], lower)) is not None], rounds)
      for c in COLUMNS) + ' |']
  validated = bool(study.methods[f'{setting}_fedavg'].task_settings.get('validation_fraction'))
  for shown, label in FINAL_METRICS.items():
    if validated or 'validation' not in shown:
      rows.append(f'| {label} at {rounds} | '
                  + ' | '.join(final_cell(reader.final_value, reader.curve, finals[c], shown)
                               for c in COLUMNS) + ' |')
  rows.append(f'| {"lowest" if lower else "best"} {FINAL_METRICS[metric]} (any round, diverged '
              'seeds too) | ' + ' | '.join(seed_stats.spread(
                  [best(v) for name in finals[c] if len(v := reader.curve(name, metric)[1])],
                  digits=4) for c in COLUMNS) + ' |')
  if validated:
    rows.append(f'| test AUC at the best {FINAL_METRICS[metric]} round | ' + ' | '.join(
        seed_stats.spread([v for name in finals[c] if (v := reader.at_best(name, metric))
                           is not None], digits=4) for c in COLUMNS) + ' |')
  # Test AUC whatever the setting's metric, against each floor: picking the stronger
  # floor would read test AUC to make a choice.
  floors = {'popularity': popularity, 'the item click rate': click_rate}
  for index, (floor_name, floor) in enumerate(floors.items()):
    by_seed = {s: b[index] for s, b in baselines.items()}
    rows.append(f'| test AUC at {rounds} against {floor_name} ({np.mean(floor):.3f}) | '
                + ' | '.join(against_floor(reader.result, finals[c], on_seeds(by_seed, c))
                             for c in COLUMNS) + ' |')
  constants = {seed: reader.derived(f'{setting} s{seed} constant', lambda seed=seed: task_first(
      seed).floors(ITEM)['constant']) for seed in every_seed}
  rows += constant_rows(rounds, finals, {c: on_seeds(constants, c) for c in COLUMNS},
                        reader.result)
  converged_method = study.methods[f'{setting}_{CONVERGED}']
  _, converged_curve = reader.curve(reader.finals(converged_method.name)[0], metric)
  converged_text = (f'{best(converged_curve):.4f} (its {"lowest" if lower else "best"} '
                    f'{metric} over {converged_method.rounds} rounds, seed 0)'
                    if len(converged_curve) else NOT_RUN)
  rule = ("CentralSGD's lowest train loss within the same rounds (the paper's rule)" if lower
          else f"CentralSGD's best {FINAL_METRICS[metric]} within the same rounds, "
          f'less {AUC_MARGIN:g}, and rounds to reach it read on the same metric')
  if done:  # the setting's metric with its target (LR), or test AUC with the floors (DIN)
    shown = metric if lower else 'eval/test_auc'
    plot_curves(folder / f'{setting}_curves.png',
                f'MovieLens-100K, {setting.upper()}: {shown} by round (seed mean)', shown,
                {COLUMNS[c]: [reader.curve(n, shown) for n in names] for c, names in finals.items()},
                np.mean([targets[s] for s in done]) if lower else None,
                None if lower else {n: np.mean(f) for n, f in floors.items()})
  description = reader.derived(f'{setting} s0 description', lambda: task_first(0).describe())
  return [
      f'## {setting.upper()} ({metric})', '',
      f'{description}. Feature heat dispersion: max n_m / min n_m over embedding rows '
      "(the paper's Table 1; ML-1M there: 4,331); parameter: over all parameters.", '',
      f'Target, per seed: {rule}: '
      + (seed_stats.spread([targets[s] for s in done], digits=4) if done else NOT_RUN)
      + f'. Converged CentralSGD: {converged_text}. Evaluated every {eval_every} '
      'rounds: rounds to target are resolved to that. Mean ± std over the seeds of '
      f'{seeds} that ran (a single value: one seed).', '',
      '| | ' + ' | '.join(COLUMNS.values()) + ' |',
      '|---' * (len(COLUMNS) + 1) + '|',
      *rows,
      f'| learning rate (grid after {selection.rounds} rounds, seed 0) | '
      + ' | '.join(f'{reader.rate(f"{setting}_{c}"):g}'
                   if reader.final_value(finals[c][0], metric) is not None else NOT_RUN
                   for c in COLUMNS) + ' |',
      '| rates tried (the chosen one in bold) | ' + ' | '.join(
          rate_sweep.describe(reader.sweep(f'{setting}_{c}'), reader.rate(f'{setting}_{c}'))
          for c in COLUMNS) + ' |',
      '', 'Item baselines, no model (test AUC, mean ± std over the seeds\' splits): '
      f'popularity, the item\'s clicks in the training examples, {seed_stats.spread(popularity)}; '
      f'the item\'s training click rate (add-one smoothed), {seed_stats.spread(click_rate)}. A '
      'model below them has learned less than the item\'s own rate.', '',
      f'Paper: {PAPER[setting]}.', '', f'![curves]({setting}_curves.png)', '']


def _server_section(reader: _Reader, setting: str) -> list[str]:
  """Equal tuning: each federated method with its server rate swept too, at the
  client rate its own grid chose (the study's methods SETTING_COLUMN_server)."""
  study = reader.study
  swept = {c: f'{setting}_{c}_server' for c in COLUMNS if f'{setting}_{c}_server' in study.methods}
  if not swept:
    return []
  central = study.methods[f'{setting}_central']
  metric, lower = central.selection.metric, central.selection.goal == 'min'
  targets = _targets(reader, setting)
  seeds = [s for s in central.seeds if s in targets]
  finals = {c: reader.finals(m) for c, m in swept.items()}
  first = study.methods[next(iter(swept.values()))]

  def chosen(method: str) -> str:
    rate = reader.rate(method)
    return NOT_RUN if rate is None else f'{rate:g}'

  return server_section(
      setting, first.selection.rounds, metric,
      {COLUMNS[c]: (f'{study.methods[m].settings["client_learning_rate"]:g}', chosen(m),
                    rate_sweep.describe(reader.sweep(m), reader.rate(m)),
                    rounds_cell([r for s in seeds if (r := rounds_to(
                        reader.curve, finals[c][list(study.methods[m].seeds).index(s)], metric,
                        targets[s], lower)) is not None], study.methods[m].rounds),
                    final_cell(reader.final_value, reader.curve, finals[c], metric))
       for c, m in swept.items()}, f'{FINAL_METRICS[metric]} at the end')


def server_section(setting: str, sweep_rounds: int, metric: str, columns: dict,
                   end: str) -> list[str]:
  """The equal-tuning section's lines: a column per method (label -> its client
  rate, server rate chosen, rates tried, rounds to target and `end` value)."""
  rows = ('client rate', 'server rate chosen', 'rates tried (the chosen one in bold)',
          'rounds to target', end)
  return [
      f'## {setting.upper()}: every federated method\'s server rate swept too', '',
      'FedSubAvg\'s correction rescales the server\'s step, so each method\'s server rate '
      'is swept as well (the same three rates around its default, extended past a winning '
      f'edge; {sweep_rounds} rounds, seed 0, by {metric}), each at the client rate '
      'its own grid chose above. The target is the one above; mean ± std over the seeds.', '',
      '| | ' + ' | '.join(columns) + ' |', '|---' * (len(columns) + 1) + '|',
      *(f'| {row} | ' + ' | '.join(cells[i] for cells in columns.values()) + ' |'
        for i, row in enumerate(rows)), '']


def render(study, folder: pathlib.Path, plan: study_lib.Plan, task) -> None:
  """table.md and a curve plot per setting into `folder`, from its records
  (`task(seed, method)`: that method's task, built only for a value not derived yet)."""
  reader = _Reader(study, folder, plan, task)
  fedavg = study.methods['din_fedavg']
  clients, steps = fedavg.settings['clients_per_round'], study.task_settings['local_steps']
  batch = study.task_settings['batch_size']
  lines = ['# FedSubAvg on MovieLens-100K: rounds to reach the target (Table 2 of Ding et al.)',
           '', 'Built by `python -m launch.study '
           '--spec=experiments/papers/fedsubavg_movielens.toml` from the cell records in '
           '`cells/`; README.md here has the reading and every deviation from the paper.', '',
           f'K = {clients} clients per round, each at most {steps} SGD steps of {batch} examples '
           f'(one pass over its data if it holds fewer); CentralSGD: {steps} steps of '
           f'{clients * batch} pooled examples per round. Learning rates: the best '
           'of a grid after a short run (seed 0; by train loss for LR, by validation AUC for '
           'DIN), the grid extended past an edge that was best. Server: SGD 1.0 (FedAdam: '
           'Adam 0.01, FedAdagrad: Adagrad 0.1). Heat and weights: clients (the paper).', '']
  for setting in SETTINGS:
    lines += _section(reader, folder, setting) + _server_section(reader, setting)
  files.write_text(folder / 'table.md', '\n'.join(lines))
