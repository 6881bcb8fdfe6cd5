r"""Reproduces the shape of FAIR's Tables 2 and 3 on Goodreads-100 (NDCG@20).

  python -m launch.reproduce_fair --rounds=50 --runs_dir=runs/fair \
      --results_dir=results/fair_goodreads

Table 2: central training, FedAvg, and FAIR-HET / FAIR-HOM / FedHM at
1x-2x, 1x-4x, 1x-8x, 1x-16x (users in id order, equal groups). Table 3:
FULL-TRN (only the 1x users train) vs FAIR-HET when 1% / 20% / 30% / 50% of
users, drawn at random, are 1x and the rest 2x. Plus FAIR with consistent vs
inconsistent subspaces at 2x-4x-8x-16x (every tier hashed). Table 3 and the
consistency ablation run over --seeds (Table 3's seed s draws its 1x users
with seed 101 + s: the paper's draw first; FedAvg runs at those seeds too,
to tell a seed's luck from FAIR's). Each cell is a
launch.train / launch.centralized run in its own directory under --runs_dir
(an interrupted reproduction resumes); a cell the method cannot run (FedHM
past 4x) is N/A. A finished cell's metrics, summary and config are recorded
in --results_dir/cells and not run again. Writes table.md, ndcg_curves.png
and consistency.png to --results_dir.

Every table runs the paper's client Adam --learning_rate (1e-3) but two: each
federated method's own rate (SWEPT: FedAvg, and FAIR-HET, FAIR-HOM, FedHM at one
capacity mix) is swept on a validation split (seed 0, --rounds), and each then
runs over --seeds at the rate it chose, at that mix and at every mix of Table 2.

The seeded table: --long_rounds (200) rounds over --seeds for FedAvg and,
at 1x-2x and 1x-16x, FAIR-HET, FAIR-HOM and FedHM (where it can run), and
FAIR-HET and FAIR-HOM at 1x-64x; mean ± std over the seeds, each of which
draws the model, the cohorts, the negatives and the hashes. Its cells run
seed by seed (every configuration's seed 0 first), so a cut reproduction
has the most configurations. It runs again at each method's rate chosen on
validation over --rounds, and at the rate chosen by the same sweep over
--long_rounds (LONG_GRID: the two rates it ran, extended past a winning edge).
"""

import asyncio
import dataclasses
import functools
import pathlib

from absl import flags

import pandas as pd
import tensorflow as tf

from experiments import files
from experiments import plots
from experiments import rate_sweep
from experiments import run_records
from experiments import seed_stats
from experiments.papers import cell_records
from launch import common
from tasks import ranking
from tff_rec import registry
from tff_rec.algorithms import capacities
from tff_rec.models import neumf
from tff_rec.runtime import native
from tff_rec.training import checkpoints
from tff_rec.training import optimizers

SCHEMES = ('1x-2x', '1x-4x', '1x-8x', '1x-16x')
RUN_ORDER = ('1x-16x', '1x-2x', '1x-4x', '1x-8x')  # the extremes show the shape first
HETEROGENEOUS = {'fair': 'FAIR-HET', 'fair_hom': 'FAIR-HOM', 'fedhm': 'FedHM'}
FULL_FRACTIONS = (0.01, 0.2, 0.3, 0.5)
METRIC = 'test/ndcg_at_20'
PAPER_TABLE2 = {'central': 0.28, 'fedavg': 0.278,
                'fair': (0.276, 0.276, 0.274, 0.276), 'fair_hom': (0.269, 0.254, 0.246, 0.208),
                'fedhm': (0.274, 0.275, None, None)}
PAPER_TABLE3 = {'full_trn': (0.037, 0.247, 0.238, 0.261), 'fair': (0.271, 0.258, 0.27, 0.258)}
TABLE3_SEED = 101  # the paper draws the 1x users with seed 101; seed s draws with 101 + s
CONSISTENCY_SCHEME = '2x-4x-8x-16x'  # two hashed tiers or more (1x is the full table)
CONSISTENCY = {f'fair_{CONSISTENCY_SCHEME}': 'consistent',
               f'fair_inconsistent_{CONSISTENCY_SCHEME}': 'inconsistent (a hash seed per tier)'}
SWING_FROM = 20  # evaluations after the first climb, for the consistency ablation's swing
PROBE_CAPACITIES = (2, 4, 16, 64, 256, 1024)
HOM_BEYOND = ('1x-64x', '1x-256x')  # where does FAIR-HOM collapse, if not at 16x?
LONG_SCHEMES = ('1x-2x', '1x-16x', '1x-64x')

flags.DEFINE_string('runs_dir', 'runs/fair', 'Where the individual runs go.')
flags.DEFINE_string('results_dir', 'results/fair_goodreads', 'Where the results go.')
flags.DEFINE_integer('rounds', 50, 'Federated rounds.', lower_bound=1)
flags.DEFINE_integer('eval_every', 10, 'Federated evaluation period.', lower_bound=1)
flags.DEFINE_integer('epochs', 10, 'Central training epochs.', lower_bound=1)
flags.DEFINE_float('learning_rate', 1e-3, 'Client (and central) Adam learning rate.')
flags.DEFINE_list('central_learning_rates', ['1e-3', '1e-4'], 'Central training runs at '
                  'each of these Adam learning rates (it overfits within a few epochs) and '
                  'at the one its validation sweep chooses from them.')
flags.DEFINE_integer('long_rounds', 200, 'Rounds of the seeded table.', lower_bound=1)
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds of the seeded table.')
flags.DEFINE_list('only', None, 'Run only these cells (names or patterns, e.g. '
                  'fedavg,fair_1x-*), then tabulate what exists (--only=none: tabulate only).')

FLAGS = flags.FLAGS


def _wanted(name: str) -> bool:
  return cell_records.wanted(name, FLAGS.only)


def _records() -> str:
  """Finished cells' records (metrics, summary, config): committed with the table."""
  return str(pathlib.Path(FLAGS.results_dir) / 'cells')


def _cell_run(name: str, module: str, *args: str) -> dict | str:
  return cell_records.run_cell(FLAGS.runs_dir, name, module, *args, wanted=_wanted(name),
                         records_dir=_records())


def _federated(name: str, algorithm: str, *args: str, rounds: int | None = None,
               rate: float | None = None) -> dict | str:
  rate = FLAGS.learning_rate if rate is None else rate
  return _cell_run(name, 'launch.train', f'--algorithm={algorithm}',
                   f'--rounds={rounds or FLAGS.rounds}', f'--eval_every={FLAGS.eval_every}',
                   f'--client_learning_rate={rate}', *args)


def _stem(algorithm: str, scheme: str | None) -> str:
  return '_'.join(filter(None, (algorithm, scheme)))


def _capacity(scheme: str | None) -> list[str]:
  return [f'--capacities={scheme}'] if scheme else []


def _label(algorithm: str, scheme: str | None) -> str:
  return ' '.join(filter(None, (HETEROGENEOUS.get(algorithm, 'FedAvg'), scheme)))


def _configurations(task, schemes, algorithms=tuple(HETEROGENEOUS)
                    ) -> dict[str, tuple[str, str | None]]:
  """FedAvg, then each algorithm at each scheme it can run (FedHM not past 4x):
  cell stem -> (algorithm, --capacities). `task` builds the task (see main)."""
  return {'fedavg': ('fedavg', None),
          **{f'{a}_{s}': (a, s) for s in schemes for a in algorithms
             if a != 'fedhm' or _fedhm_can_run(task, s)}}


def _long_cells(task) -> dict[str, tuple[str, str | None]]:
  """The seeded table's configurations."""
  return _configurations(task, LONG_SCHEMES)


def _table2_cells(task) -> dict[str, tuple[str, str | None]]:
  """Table 2's federated configurations and FAIR-HOM past the paper's capacities."""
  return {**_configurations(task, RUN_ORDER),
          **{f'fair_hom_{s}': ('fair_hom', s) for s in HOM_BEYOND}}


def _at_rate(stem: str, rate: float | None) -> str:
  """A configuration's cell stem at client Adam `rate` (the tables' own stem at
  --learning_rate, or with no rate given)."""
  return stem if rate is None or rate == FLAGS.learning_rate else f'{stem}_lr{rate:g}'


def run_seeded(cells: dict[str, tuple[str, str | None]], seeds: list[int], rounds: int,
               prefix: str = '', rates: dict[str, float] | None = None
               ) -> dict[str, list[str]]:
  """Runs configurations seed by seed (every configuration's first seed first, so
  a cut reproduction has the most configurations), each algorithm at its client
  Adam rate in `rates` (by default --learning_rate); stem -> its cells' names."""
  rates = rates or {}
  names = {stem: _seeded(_at_rate(f'{prefix}{stem}', rates.get(algorithm)), seeds)
           for stem, (algorithm, _) in cells.items()}
  for i, seed in enumerate(seeds):
    for stem, (algorithm, scheme) in cells.items():
      _federated(names[stem][i], algorithm, f'--seed={seed}',
                 *_capacity(scheme), rounds=rounds, rate=rates.get(algorithm))
  return names


def _final(curve: pd.Series) -> float:
  return float(curve.iloc[-1])


# Evaluations averaged beside each final value: not the best one, which would pick
# a round on test; a mean is also steadier than one evaluation.
LAST_K = 3


def _last_mean(curve: pd.Series) -> float:
  return float(curve.tail(LAST_K).mean())


def over_seeds(names: list[str], pick, rounds: int, step: str = 'round') -> list[float]:
  """pick(NDCG@20 curve) of each of a configuration's seeds that finished
  `rounds` (epochs, with step='epoch') or diverged (read before it did)."""
  curves = {n: run_records.read_curve(FLAGS.runs_dir, n, METRIC, _records()) for n in names}
  return [pick(c.set_index(step)[METRIC]) for n, c in curves.items()
          if c is not None and len(c) and (
              c[step].max() == rounds or run_records.cell_diverged(FLAGS.runs_dir, n, _records()))]


def _seeded(stem: str, seeds: list[int]) -> list[str]:
  return [f'{stem}_s{s}' for s in seeds]


def _vs_popularity(names: list[str] | str, popularity: float, rounds: int | None = None,
                   step: str = 'round') -> str:
  """Final NDCG@20 over the seeds against popularity's, by the one rule. The
  split has no seed, so popularity is exact: its value once per seed, and only the
  cell's spread decides."""
  if isinstance(names, str):  # the method cannot run
    return names
  final = over_seeds(names, _final, rounds or FLAGS.rounds, step)
  return seed_stats.versus(final, [popularity] * len(final))


def long_table(task, names: dict[str, list[str]], popularity: float) -> list[str]:
  """Final NDCG@20 and its last mean, mean ± std over seeds, and HET against HOM / FedAvg."""
  cells = _long_cells(task)
  last = {stem: over_seeds(names[stem], _final, FLAGS.long_rounds) for stem in names}
  mean = {stem: over_seeds(names[stem], _last_mean, FLAGS.long_rounds) for stem in names}
  lines = [f'| cell | seeds | final NDCG@20 | mean of the last {LAST_K} | final vs FedAvg | '
           'HET vs HOM (final) | final vs popularity |', '|---|---|---|---|---|---|---|',
           f'| popularity | | {popularity:.3f} | | | | |']
  for stem, (algorithm, scheme) in cells.items():
    label = _label(algorithm, scheme)
    versus = '' if stem == 'fedavg' else seed_stats.versus(last[stem], last['fedavg'])
    het_hom = ''
    if algorithm == 'fair':
      het_hom = seed_stats.versus(last[stem], last[f'fair_hom_{scheme}'])
    floored = _vs_popularity(names[stem], popularity, FLAGS.long_rounds)
    lines.append(f'| {label} | {len(last[stem])} | {seed_stats.spread(last[stem])} | '
                 f'{seed_stats.spread(mean[stem])} | {versus} | {het_hom} | {floored} |')
  return lines


# lazy_adam (ours: TF Addons' LazyAdam) against the paper's dense Adam, FAIR-HET
# 1x-2x: only the rows and hashed slots a step reads move. In-process, where it
# moves them in place (results/benchmarks_runtimes.md times both).
LAZY_SCHEME = '1x-2x'


def run_lazy(seeds: list[int]) -> list[str]:
  names = _seeded(f'fair_{LAZY_SCHEME}_lazy_adam', seeds)
  for seed, name in zip(seeds, names, strict=True):
    _federated(name, 'fair', f'--seed={seed}', f'--capacities={LAZY_SCHEME}',
               '--client_optimizer=lazy_adam', '--runtime=inprocess')
  return names


def lazy_rows(lazy: list[str], dense: list[str], popularity: float) -> list[str]:
  final = {kind: over_seeds(names, _final, FLAGS.rounds) for kind, names in
           (('dense', dense), ('lazy', lazy))}
  return [f'| client optimizer | final / mean of the last {LAST_K} | final vs dense Adam | '
          'final vs popularity |', '|---|---|---|---|',
          f'| dense Adam (the paper\'s) | {_cell(dense, None)} | | '
          f'{_vs_popularity(dense, popularity)} |',
          f'| lazy_adam (ours) | {_cell(lazy, None)} | '
          f'{seed_stats.versus(final["lazy"], final["dense"])} | '
          f'{_vs_popularity(lazy, popularity)} |']


def _central_stem(learning_rate: float) -> str:
  return 'central' if learning_rate == FLAGS.learning_rate else f'central_lr{learning_rate:g}'


def _curve(name: str) -> pd.DataFrame | None:
  return run_records.read_curve(FLAGS.runs_dir, name, METRIC, _records())


def _cell(names: list[str] | str, paper: float | str | None, rounds: int | None = None,
          step: str = 'round') -> str:
  """'final / mean of the last LAST_K evaluations' NDCG@20, each mean ± std over the
  seeds that finished (a diverged one read before it diverged), then the paper's
  number; the seed count where some have not finished."""
  if isinstance(names, str):  # the method cannot run
    return f'{names} (paper {paper or "N/A"})'
  rounds = rounds or FLAGS.rounds
  final, mean = (over_seeds(names, pick, rounds, step) for pick in (_final, _last_mean))
  text = (f'{seed_stats.spread(final)} / {seed_stats.spread(mean)}' if final
          else cell_records.NOT_RUN)
  if 0 < len(final) < len(names):
    text += f' ({len(final)} of {len(names)} seeds)'
  diverged = sum(run_records.cell_diverged(FLAGS.runs_dir, n, _records()) for n in names)
  if diverged:
    text += f' ({diverged} diverged)'
  return f'{text} (paper {paper})' if paper else text


def compression_probe(task, config, fedavg: str) -> list[str]:
  """Table rows: NDCG@20 of FedAvg's final model with its item tables squeezed
  through a cx hashed table (project, then recover), no retraining: how much of
  what FedAvg learned a FAIR-HOM subspace can hold at all.

  Needs FedAvg's checkpoint (and the task, which `task` builds); the rows are
  kept in the records, so a table rebuilt without the runs still has them.
  """
  kept = pathlib.Path(_records()) / 'compression_probe.md'
  saved = pathlib.Path(FLAGS.runs_dir) / fedavg / 'checkpoints'
  if not saved.exists():
    return kept.read_text().splitlines() if kept.exists() else ['(FedAvg has not run)']
  task = task()
  with native.NativeRuntime():
    process = registry.build('fedavg', task, registry.Training(
        optimizers.OptimizerConfig('adam', FLAGS.learning_rate),
        optimizers.OptimizerConfig('sgd', 1.0))).process
    state, _ = asyncio.run(checkpoints.NumpyProgramStateManager(saved).load_latest(
        process.initialize()))
    weights = process.get_model_weights(state)
  rows = ['| item tables | NDCG@20 |', '|---|---|',
          f'| full (FedAvg) | {task.evaluate(weights)["ndcg_at_20"]:.3f} |']
  for capacity in PROBE_CAPACITIES:
    forms = capacities.hashed_tiers(task.shape.table_shapes(), [capacity],
                                    seed=config.seed + 1, impl='composite')[f'{capacity}x']
    squeezed = dict(weights)
    for name in neumf.ITEM_TABLES:
      squeezed[name] = forms[name].recover(forms[name].reduce(tf.constant(weights[name])))
      squeezed[name] = squeezed[name].numpy()
    rows.append(f'| {capacity}x | {task.evaluate(squeezed)["ndcg_at_20"]:.3f} |')
  kept.parent.mkdir(parents=True, exist_ok=True)
  files.write_text(kept, '\n'.join(rows) + '\n')
  return rows


def _fedhm_can_run(task, scheme: str) -> bool:
  """Whether FedHM's low-rank tiers fit the data's tables at `scheme`: derived
  once into the records (`task` builds the task), as the table's cells follow."""

  def fits() -> bool:
    try:
      capacities.low_rank_tiers(task().shape.table_shapes(), capacities.parse(scheme))
      return True
    except ValueError:
      return False

  return run_records.derived(_records(), f'fedhm_can_run_{scheme}', fits)


def _full_trn_clients(num_clients: int, fraction: float, seed: int) -> int:
  tiers = capacities.assign(num_clients, 2, fractions=[fraction, 1 - fraction],
                            assignment='random', seed=seed)
  return int((tiers == 0).sum())


def plot_curves(path: pathlib.Path, names: dict[str, str], popularity: float,
                title: str) -> None:
  fig, ax = plots.figure()
  ax.axhline(popularity, color='gray', linestyle=':', label='popularity')
  for name, label in names.items():
    rows = _curve(name)
    if rows is not None and not rows.empty:
      ax.plot(rows['round'], rows[METRIC], marker='.', label=label)
  plots.save(fig, ax, path, xlabel='round', ylabel='test NDCG@20', title=title,
             legend_columns=2)


VALIDATION_METRIC = 'validation/ndcg_at_20'
MAX_EXTENSIONS = 3  # rates a validation sweep may add past its grid's edges


def _central_cell(name: str, rate: float, seed: int, *args: str) -> dict | str:
  return _cell_run(name, 'launch.centralized', f'--epochs={FLAGS.epochs}',
                   f'--learning_rate={rate:g}', '--eval_every=1', f'--seed={seed}', *args)


def _validation_sweep(grid, stem: str, run) -> tuple[dict[float, float | None], float | None]:
  """A rate sweep on the validation split (each user's last train items,
  --held_out=validation), seed 0: cells STEM_validation_lrR_s0, made by
  run(name, rate, held_out_flag), over `grid` extended past an edge that wins,
  each scored by the mean of its last LAST_K validation NDCG@20 evaluations (one
  evaluation swings)."""
  def score(rate: float) -> float | None:
    name = f'{stem}_validation_lr{rate:g}_s0'
    run(name, rate, '--held_out=validation')
    return run_records.mean_of_last(FLAGS.runs_dir, name, VALIDATION_METRIC, LAST_K,
                                     _records())

  return rate_sweep.sweep(grid, score, lower_is_better=False, max_extensions=MAX_EXTENSIONS)


def central_sweep() -> tuple[dict[float, float | None], float | None]:
  """Central training's Adam rate on validation: the --central_learning_rates grid
  (_validation_sweep; LAST_K epochs)."""
  return _validation_sweep([float(r) for r in FLAGS.central_learning_rates], 'central',
                           lambda name, rate, held_out: _central_cell(name, rate, 0, held_out))


# Each federated method's client Adam rate on validation, at one capacity mix
# (None: FedAvg's one tier): the tables run every method at --learning_rate, the
# paper's; these sweeps say whether that rate is each method's interior optimum.
SWEPT = {'fedavg': None, 'fair': '1x-16x', 'fair_hom': '1x-16x', 'fedhm': '1x-2x'}
FEDERATED_GRID = (1e-4, 1e-3, 1e-2)
# The seeded table's sweep over --long_rounds: a rate chosen at --rounds need not
# hold for four times as many (FAIR-HET and FedHM at 1e-2 peak by round 20, then
# fall). Its grid is the two rates the seeded tables ran, so a choice among them
# reads their cells.
LONG_GRID = (1e-3, 1e-2)


def federated_sweep(algorithm: str, scheme: str | None, grid=FEDERATED_GRID,
                    rounds: int | None = None, prefix: str = ''
                    ) -> tuple[dict[float, float | None], float | None]:
  """`algorithm`'s client Adam rate at `scheme`, over `rounds` (--rounds): `grid`
  (_validation_sweep; cells PREFIXSTEM_validation_...)."""
  return _validation_sweep(
      grid, prefix + _stem(algorithm, scheme),
      lambda name, rate, held_out: _federated(name, algorithm, *_capacity(scheme), held_out,
                                              '--seed=0', rate=rate, rounds=rounds))


NOT_CHOSEN = 'Not run yet: a method\'s validation sweep has not chosen its rate.'


def _rates_text(rates: dict[str, float]) -> str:
  """Each method's chosen rate, as the tables name them."""
  return ', '.join(f'{_label(a, None)} {r:g}' for a, r in rates.items())


def _scores(sweep: dict[float, float | None], chosen: float | None) -> str:
  """A sweep's rates and scores, the chosen one in bold."""
  return ', '.join(f'{"**" * (r == chosen)}{r:g}: ' + ('not run' if v is None else f'{v:.3f}')
                   + '**' * (r == chosen) for r, v in sorted(sweep.items()))


def federated_sweeps(validation_floor: float, **settings
                     ) -> tuple[list[str], dict[str, float | None]]:
  """Every SWEPT method's sweep (federated_sweep's `settings`): its table rows,
  and each method's chosen rate (None until its sweep is complete)."""
  rows = [f'| method | validation NDCG@20 by client Adam rate (mean of the last {LAST_K}) '
          '| chosen |', '|---|---|---|',
          f'| popularity | {validation_floor:.3f} | |']
  chosen = {}
  for algorithm, scheme in SWEPT.items():
    sweep, chosen[algorithm] = federated_sweep(algorithm, scheme, **settings)
    rate = chosen[algorithm]
    if rate is None:
      verdict = 'not yet (the sweep is not complete)'
    else:
      where = ('inside the rates tried' if min(sweep) < rate < max(sweep)
               else 'at the edge of the rates tried')
      ran = ('the tables\' rate' if rate == FLAGS.learning_rate
             else f'not the tables\' {FLAGS.learning_rate:g}')
      verdict = f'{rate:g}, {where}; {ran}'
    rows.append(f'| {_label(algorithm, scheme)} | {_scores(sweep, rate)} | {verdict} |')
  return rows, chosen


def run_tuned(task, chosen: dict[str, float | None], seeds: list[int]
              ) -> dict[str, list[str] | None]:
  """Table 2's configurations (the SWEPT ones among them), each at its method's
  chosen rate over the seeds, seed by seed: stem -> its cells (Table 2's own
  where that is the tables' rate; None until the method's sweep is complete)."""
  configurations = _configurations(task, RUN_ORDER)
  names = run_seeded({stem: c for stem, c in configurations.items() if chosen[c[0]] is not None},
                     seeds, FLAGS.rounds, rates=chosen)
  return {stem: names.get(stem) for stem in configurations}


def capacity_grid(names: dict[str, list[str] | str | None], cell,
                  labels: dict[str, str] = HETEROGENEOUS) -> list[str]:
  """Table 2's grid: a row per capacity mix, a column per heterogeneous method
  (`labels`), each cell(its cells or why none, the method, the mix's index)."""
  rows = ['| capacity | ' + ' | '.join(labels.values()) + ' |', '|---|---|---|---|']
  for i, scheme in enumerate(SCHEMES):
    rows.append(f'| {scheme} | ' + ' | '.join(
        cell(names.get(f'{a}_{scheme}', cell_records.CANNOT_RUN), a, i)
        for a in HETEROGENEOUS) + ' |')
  return rows


def tuned_table2(chosen: dict[str, float | None], names: dict[str, list[str] | None],
                 popularity: float) -> list[str]:
  """Table 2 at each method's chosen rate: final / last mean, then each final
  against FedAvg at its own rate and against popularity."""
  def rate(algorithm: str) -> str:
    return 'not chosen yet' if chosen[algorithm] is None else f'{chosen[algorithm]:g}'

  labels = {a: f'{label} ({rate(a)})' for a, label in HETEROGENEOUS.items()}
  fedavg = over_seeds(names['fedavg'] or [], _final, FLAGS.rounds)

  def grid(cell):  # cell(a configuration's cells), where it has cells
    return capacity_grid(names, lambda cells, algorithm, i: (
        'not chosen yet' if cells is None else cells if isinstance(cells, str)
        else cell(cells)), labels)

  return [*grid(lambda cells: _cell(cells, None)), '',
          f'FedAvg at its rate ({rate("fedavg")}): '
          + ('not run' if names['fedavg'] is None else _cell(names['fedavg'], None))
          + '. Each final against it:', '',
          *grid(lambda cells: seed_stats.versus(over_seeds(cells, _final, FLAGS.rounds),
                                                fedavg)),
          '', f'Each final against popularity ({popularity:.3f}):', '',
          *grid(lambda cells: _vs_popularity(cells, popularity))]


def tuned_rows(chosen: dict[str, float | None], names: dict[str, list[str] | None],
               popularity: float) -> list[str]:
  """Each SWEPT configuration at its own rate: final / last mean, against FedAvg
  at its own rate and against popularity (finals)."""
  final = {stem: over_seeds(cells, _final, FLAGS.rounds) if cells else []
           for stem, cells in names.items()}
  rows = [f'| method | client Adam | final / mean of the last {LAST_K} | final vs FedAvg '
          '(at its rate) | final vs popularity |', '|---|---|---|---|---|',
          f'| popularity | | {popularity:.3f} | | |']
  for algorithm, scheme in SWEPT.items():
    stem, rate = _stem(algorithm, scheme), chosen[algorithm]
    if names[stem] is None:
      rows.append(f'| {_label(algorithm, scheme)} | not chosen yet | | | |')
      continue
    versus = '' if stem == 'fedavg' else seed_stats.versus(final[stem], final['fedavg'])
    rows.append(f'| {_label(algorithm, scheme)} | {rate:g} | {_cell(names[stem], None)} | '
                f'{versus} | {_vs_popularity(names[stem], popularity)} |')
  return rows


def run_central(seeds: list[int], rates: list[float]) -> None:
  for seed in seeds:
    for rate in rates:
      _central_cell(f'{_central_stem(rate)}_s{seed}', rate, seed)


def run_ablations(task, seeds: list[int], rates: dict[str, float] | None = None
                  ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
  """Runs the consistency ablation and Table 3, seed by seed; for each, stem ->
  its cells' names. With `rates` (by method, as chosen on validation): FAIR's
  cells, consistent or not, at FAIR-HET's rate, FULL-TRN's (FedAvg on the 1x
  users alone) and FedAvg's at FedAvg's."""
  het, fedavg = (rates or {}).get('fair'), (rates or {}).get('fedavg')
  consistency = {stem: _seeded(_at_rate(stem, het), seeds) for stem in CONSISTENCY}
  table3_seeds = [TABLE3_SEED + s for s in seeds]
  clients = run_records.derived(_records(), 'train_clients',
                                 lambda: len(task().train_client_ids))
  table3 = {f'{a}_{f}': _seeded(_at_rate(f'{a}_{f}', fedavg if a == 'full_trn' else het),
                                table3_seeds)
            for f in FULL_FRACTIONS for a in ('full_trn', 'fair')}
  for i, seed in enumerate(seeds):
    for stem, names in consistency.items():
      _federated(names[i], stem.removesuffix(f'_{CONSISTENCY_SCHEME}'),
                 f'--capacities={CONSISTENCY_SCHEME}', f'--seed={seed}', rate=het)
    for fraction in FULL_FRACTIONS:
      args = ('--capacities=1x-2x', f'--capacity_fractions={fraction},{1 - fraction:.2f}',
              '--capacity_assignment=random', f'--seed={TABLE3_SEED + seed}')
      ones = _full_trn_clients(clients, fraction, TABLE3_SEED + seed)
      _federated(table3[f'full_trn_{fraction}'][i], 'full_trn', *args,
                 f'--clients_per_round={min(10, ones)}', rate=fedavg)
      _federated(table3[f'fair_{fraction}'][i], 'fair', *args, rate=het)
  # Table 2's FedAvg at Table 3's seeds: what each seed's model, cohorts and negatives
  # give with no user left out and no subspace, to tell a seed's luck from FAIR's.
  table3['fedavg'] = run_seeded({'fedavg': ('fedavg', None)}, table3_seeds,
                                FLAGS.rounds, rates=rates)['fedavg']
  return consistency, table3


def _by_seed(values: list[float]) -> str:
  return ' / '.join(f'{v:.3f}' for v in values) or cell_records.NOT_RUN


def table3_rows(table3: dict[str, list[str]], popularity: float) -> list[str]:
  final = {stem: over_seeds(names, _final, FLAGS.rounds) for stem, names in table3.items()}
  rows = ['| 1x users | ' + ' | '.join(f'{int(100 * f)}%' for f in FULL_FRACTIONS) + ' |',
          '|---|---|---|---|---|']
  for algorithm, label in (('full_trn', 'FULL-TRN'), ('fair', 'FAIR-HET')):
    cells = [f'{seed_stats.spread(final[f"{algorithm}_{f}"])} (paper {PAPER_TABLE3[algorithm][i]})'
             for i, f in enumerate(FULL_FRACTIONS)]
    rows.append(f'| {label} | ' + ' | '.join(cells) + ' |')
  gains = [seed_stats.versus(final[f'fair_{f}'], final[f'full_trn_{f}']) for f in FULL_FRACTIONS]
  floors = [f'| {label} vs popularity | ' + ' | '.join(
      _vs_popularity(table3[f'{algorithm}_{f}'], popularity) for f in FULL_FRACTIONS) + ' |'
            for algorithm, label in (('full_trn', 'FULL-TRN'), ('fair', 'FAIR-HET'))]
  return [*rows, '| FAIR-HET vs FULL-TRN | ' + ' | '.join(gains) + ' |', *floors, '',
          f'FedAvg at the same seeds (every user 1x): {seed_stats.spread(final["fedavg"])} '
          f'({_by_seed(final["fedavg"])} by seed; vs popularity: '
          f'{_vs_popularity(table3["fedavg"], popularity)}). FAIR-HET by seed: ' + '; '.join(
              f'{int(100 * f)}% {_by_seed(final[f"fair_{f}"])}' for f in FULL_FRACTIONS) + '.']


def _swing(curve: pd.Series) -> float:
  later = curve[curve.index >= SWING_FROM]
  return float(later.max() - later.min())


def consistency_rows(consistency: dict[str, list[str]], popularity: float) -> list[str]:
  rows = [f'| subspaces | final NDCG@20 | mean of the last {LAST_K} | swing | '
          'final vs consistent | final vs popularity |', '|---|---|---|---|---|---|',
          f'| popularity | {popularity:.3f} | | | | |']
  final = {stem: over_seeds(names, _final, FLAGS.rounds) for stem, names in consistency.items()}
  reference = f'fair_{CONSISTENCY_SCHEME}'
  for stem, label in CONSISTENCY.items():
    names = consistency[stem]
    versus = '' if stem == reference else seed_stats.versus(final[stem], final[reference])
    rows.append(f'| {label} | {seed_stats.spread(final[stem])} | '
                f'{seed_stats.spread(over_seeds(names, _last_mean, FLAGS.rounds))} | '
                f'{seed_stats.spread(over_seeds(names, _swing, FLAGS.rounds))} | {versus} | '
                f'{_vs_popularity(names, popularity)} |')
  return rows


def _main(argv):
  del argv
  FLAGS.task = 'ranking'  # the table's task, whatever --task says
  config = common.task_config()
  # What the table shows of the data is derived once into the records
  # (cells/derived.json), so that it rebuilds without the data: the task is
  # built only for a value not derived yet (or the compression probe).
  task = functools.cache(lambda: ranking.Task(config))
  popularity = run_records.derived(_records(), 'popularity',
                                   lambda: task().objective.popularity('test'))
  floor = popularity['ndcg_at_20']  # what every table's 'vs popularity' holds a cell against
  num_items = run_records.derived(_records(), 'num_items', lambda: task().data.num_items)
  seeds = [int(s) for s in FLAGS.seeds]
  table2 = run_seeded(_table2_cells(task), seeds, FLAGS.rounds)
  sweep, chosen = central_sweep()
  rates = sorted({float(r) for r in FLAGS.central_learning_rates} | {chosen} - {None},
                 reverse=True)
  run_central(seeds, rates)
  consistency, table3 = run_ablations(task, seeds)
  central_rows = [
      f'| central training, Adam {rate:g}{" (chosen on validation)" * (rate == chosen)} '
      f'(final / mean of the last {LAST_K} epochs) | '
      + _cell(names, PAPER_TABLE2['central'], FLAGS.epochs, 'epoch') + ' | '
      + _vs_popularity(names, floor, FLAGS.epochs, 'epoch') + ' |'
      for rate in rates for names in [_seeded(_central_stem(rate), seeds)]]
  central_sweep_line = (
      f'Central training\'s Adam rate is chosen on validation NDCG@20 (each user\'s last '
      f'train items held out, `--held_out=validation`; seed 0; the mean of the last {LAST_K} '
      f'epochs): {_scores(sweep, chosen)}.')
  validation_floor = run_records.derived(
      _records(), 'validation popularity', lambda: ranking.Task(dataclasses.replace(
          config, held_out='validation')).objective.popularity('validation'))['ndcg_at_20']
  sweep_rows, chosen_rates = federated_sweeps(validation_floor)
  tuned = run_tuned(task, chosen_rates, seeds)
  long_names = run_seeded(_long_cells(task), seeds, FLAGS.long_rounds, 'long_')
  lazy = run_lazy(seeds)
  # The seeded table, Table 3 and the consistency ablation again, each method at the
  # rate its sweep chose (once every sweep has chosen).
  tuned_rates = None if None in chosen_rates.values() else chosen_rates
  if tuned_rates:
    tuned_long = run_seeded(_long_cells(task), seeds, FLAGS.long_rounds, 'long_', tuned_rates)
  # The seeded table again at each method's rate chosen over --long_rounds. Cells
  # run in this order, so this sweep, which decides the tuned 200-round reading,
  # runs before the ablations at the --rounds choices below.
  long_sweep_rows, long_chosen = federated_sweeps(validation_floor, grid=LONG_GRID,
                                                  rounds=FLAGS.long_rounds, prefix='long_')
  if None in long_chosen.values():
    long_tuned_text = NOT_CHOSEN
  else:
    long_tuned = run_seeded(_long_cells(task), seeds, FLAGS.long_rounds, 'long_', long_chosen)
    long_tuned_text = (
        f"Each method at the rate its {FLAGS.long_rounds}-round sweep chose "
        f"({_rates_text(long_chosen)}), "
        f"seeds {seeds}: the cells of the two seeded tables above at those rates.\n\n"
        + '\n'.join(long_table(task, long_tuned, floor)))
  if tuned_rates:
    tuned_consistency, tuned_table3 = run_ablations(task, seeds, tuned_rates)
    tuned_text = f"""Each method at the client Adam rate its validation sweep chose
({_rates_text(tuned_rates)}; FULL-TRN at
FedAvg's, FAIR's consistent and inconsistent subspaces at FAIR-HET's), seeds {seeds}; a cell
at {FLAGS.learning_rate:g} is the tables' own.

{FLAGS.long_rounds} rounds:

{chr(10).join(long_table(task, tuned_long, floor))}

Table 3 ({FLAGS.rounds} rounds, seeds {[TABLE3_SEED + s for s in seeds]}):

{chr(10).join(table3_rows(tuned_table3, floor))}

Consistent vs inconsistent subspaces ({FLAGS.rounds} rounds):

{chr(10).join(consistency_rows(tuned_consistency, floor))}"""
  else:
    tuned_text = NOT_CHOSEN

  results = pathlib.Path(FLAGS.results_dir)
  results.mkdir(parents=True, exist_ok=True)
  plot_curves(results / 'ndcg_curves.png',
              {table2['fedavg'][0]: 'FedAvg',
               **{table2[f'{a}_{s}'][0]: f'{HETEROGENEOUS[a]} {s}'
                  for a in ('fair', 'fair_hom') for s in SCHEMES}},
              floor, 'Goodreads-100: FedAvg, FAIR-HET, FAIR-HOM')
  plot_curves(results / 'consistency.png',
              {n: f'{label} s{seed}' for stem, label in CONSISTENCY.items()
               for seed, n in zip(seeds, consistency[stem])},
              floor, 'Goodreads-100: consistent vs inconsistent subspaces')

  rows2 = capacity_grid(table2, lambda names, a, i: _cell(names, PAPER_TABLE2[a][i]))
  floors2 = capacity_grid(table2, lambda names, a, i: _vs_popularity(names, floor))
  bytes_rows = ['| run | MB down per round (10 clients) |', '|---|---|']
  for name in ['fedavg', *(f'{a}_{s}' for a in HETEROGENEOUS for s in SCHEMES
                           if f'{a}_{s}' in table2)]:
    path = run_records.cell_file(FLAGS.runs_dir, table2[name][0], 'metrics.csv', _records())
    if path.exists():
      mean = run_records.recorded(pd.read_csv(path), 'train/aggregator/bytes_down').mean() / 2**20
      bytes_rows.append(f'| {name} | {mean:.1f} |')
  text = f"""# FAIR on Goodreads-100: Tables 2 and 3 of Desai et al.

Test NDCG@20 of the server model over all items a user did not train on
(99 users, {num_items:,} items). Each cell: final / mean of the last {LAST_K}
evaluations (every {FLAGS.eval_every} rounds; never the best evaluation, which would pick
a round on test), each mean ± std over the seeds, then the
paper's number. "vs popularity": the final against popularity ({seed_stats.RULE_TEXT});
the split has no seed, so popularity is exact and only the cell's spread decides.

Settings: NeuMF {config.factors} factors, {config.mlp_layers}-layer MLP, BPR with
{config.num_negatives} negative(s), decay {config.l2}; batch {config.batch_size}; federated:
{FLAGS.rounds} rounds of 10 clients, {config.local_epochs} local epochs with a fresh Adam
{FLAGS.learning_rate}, the server replaces the model by the (recovered) weighted mean;
central: {FLAGS.epochs} epochs of Adam, evaluated after each. Seeds {seeds}.

{central_sweep_line}

| | NDCG@20 | final vs popularity |
|---|---|---|
| popularity (items by train users) | {floor:.3f} | |
{chr(10).join(central_rows)}
| FedAvg | {_cell(table2['fedavg'], PAPER_TABLE2['fedavg'])} | {_vs_popularity(table2['fedavg'], floor)} |

## Each federated method's client Adam rate, on validation ({FLAGS.rounds} rounds, seed 0)

Every other table on this page runs each method at client Adam {FLAGS.learning_rate:g}, the paper's.
Each method's own sweep, at one capacity mix, scores validation NDCG@20 (each user's last
train items held out, `--held_out=validation`) by the mean of its last {LAST_K} evaluations;
a grid whose best rate is at an edge is extended past it. One seed (0).

{chr(10).join(sweep_rows)}

Each method at the rate its sweep chose, on test, seeds {seeds} (Table 2's cells where
that is {FLAGS.learning_rate:g}):

{chr(10).join(tuned_rows(chosen_rates, tuned, floor))}

Table 2 with each method at the rate its sweep chose ({FLAGS.rounds} rounds, seeds {seeds};
FAIR-HOM's cells are Table 2's where it chose {FLAGS.learning_rate:g}). Final / mean of the
last {LAST_K} evaluations:

{chr(10).join(tuned_table2(chosen_rates, tuned, floor))}

## {FLAGS.long_rounds} rounds over seeds {seeds}

Mean ± std over the seeds that finished (one that diverged counts, read at its last
evaluation before it); in the "vs" columns {seed_stats.RULE_TEXT}.

{chr(10).join(long_table(task, long_names, floor))}

## {FLAGS.long_rounds} rounds, Table 3 and the consistency ablation at each method's chosen rate

{tuned_text}

## {FLAGS.long_rounds} rounds at each method's rate chosen over {FLAGS.long_rounds} rounds

The rate chosen above over {FLAGS.rounds} rounds need not hold for {FLAGS.long_rounds}. The same
sweep over {FLAGS.long_rounds} rounds (seed 0, validation NDCG@20, the mean of the last
{LAST_K} evaluations), from the two rates the seeded tables ran ({', '.join(f'{r:g}' for r in LONG_GRID)}),
extended past a winning edge:

{chr(10).join(long_sweep_rows)}

{long_tuned_text}

## Table 2 ({FLAGS.rounds} rounds, seeds {seeds}): heterogeneous capacities (first half of users 1x, second half cx)

{chr(10).join(rows2)}

Final NDCG@20 against popularity ({floor:.3f}):

{chr(10).join(floors2)}

## Table 3 ({FLAGS.rounds} rounds, seeds {[TABLE3_SEED + s for s in seeds]}): data loss (FULL-TRN) vs FAIR-HET, the rest of the users at 2x

Final NDCG@20, mean ± std over the seeds (each draws its own 1x users), then
the paper's number; then FAIR-HET minus FULL-TRN, and each against popularity
({floor:.3f}), each by the one rule (experiments.verdicts).

{chr(10).join(table3_rows(table3, floor))}

## Consistent vs inconsistent subspaces ({FLAGS.rounds} rounds, seeds {seeds})

"Swing": the largest minus the smallest evaluation from round {SWING_FROM} on, per seed.

{chr(10).join(consistency_rows(consistency, floor))}

## FAIR-HOM past the paper's capacities

| capacity | FAIR-HOM | final vs popularity |
|---|---|---|
| popularity | {floor:.3f} | |
{chr(10).join(f"| {s} | {_cell(table2[f'fair_hom_{s}'], 'not reported')} | "
              f"{_vs_popularity(table2[f'fair_hom_{s}'], floor)} |" for s in HOM_BEYOND)}

## Client optimizer: lazy_adam against dense Adam (FAIR-HET {LAZY_SCHEME}, {FLAGS.rounds} rounds, seeds {seeds})

lazy_adam (ours, TF Addons' LazyAdam) moves only the item rows and hashed slots a
step reads, and their moments; dense Adam (the paper's) moves every row by its
momentum. Same rate, in-process runtime (dense: native; the same numbers, tested).

{chr(10).join(lazy_rows(lazy, table2[f'fair_{LAZY_SCHEME}'], floor))}

## What a cx subspace can hold of FedAvg's model

FedAvg's final item tables projected to a cx hashed memory and recovered
(no retraining), then evaluated as they are; popularity below them (one run,
seed 0's: no spread to mark a row against it):

{chr(10).join(compression_probe(task, config, table2['fedavg'][0]))}
| popularity | {floor:.3f} |

## Communication (a real deployment's bytes: each client's own tier)

{chr(10).join(bytes_rows)}

![NDCG by round](ndcg_curves.png)

![consistent vs inconsistent](consistency.png)
"""
  files.write_text(results / 'table.md', text)
  print(text)



main = cell_records.checking_only(_main)  # an --only that names no cell is refused
