r"""FAIR's headline cells on a second dataset: Amazon Beauty-100, NDCG@20.

  python -m launch.reproduce_fair_beauty                 # run what is missing, tabulate
  python -m launch.reproduce_fair_beauty --only=none     # the tables from the records

FAIR's paper builds its second dataset, AmazonProduct-100, from the 100
users with the most interactions; Beauty-100 is the same cut of Amazon Beauty
5-core (`ranking` with --top_users=100: 100 users, 12,102 items,
the last 30% of each user's items for test). The official settings for
AmazonProduct-100 are Goodreads' but with E = 1 local epoch; 1,000 rounds of
10 clients is the official example's T; the client Adam rate is "the best of
1e-4 .. 1". Here each method's is picked on validation NDCG@20 (the last 30%
of each train list, test untouched; the mean of the last LAST_K evaluations,
which swing) from its own sweep on seed 0 (FedAvg's, and
FAIR-HET's, FAIR-HOM's and FedHM's at one capacity mix, SWEPT), extended past a
winning edge (experiments.rate_sweep). FedAvg, FAIR-HET, FAIR-HOM and FedHM then run,
each at its own rate, over --seeds at 1x-2x and 1x-16x (FedHM cannot run past
4x with 8 factors) and FAIR-HET and FAIR-HOM at 1x-64x: the cells of
results/fair_goodreads' seeded table. Then the consistency ablation of the
Goodreads script: FAIR at 2x-4x-8x-16x (every tier hashed) with consistent
subspaces and with a hash seed per tier, at FAIR-HET's rate. Cells at FedAvg's
rate, HEADLINE_RATE, which every row ran at first, stay in a table of their own.

Cells run through launch.train under --runs_dir (resumable) and are recorded in
--results_dir/cells; a recorded cell is not run again. Writes table.md.
"""

import dataclasses
import pathlib

from absl import app
from absl import flags

from experiments import files
from experiments.papers import seeded_table

seeded_table.define_flags('runs/fair_beauty', 'results/fair_amazon_beauty')
flags.DEFINE_list('sweeps', None, "Run only these methods' rate sweeps (e.g. fair,fedhm, "
                  "for runs side by side; 'none': no sweep); the others are read.")
flags.DEFINE_bool('headlines', True, 'Run the headline cells (--noheadlines: the sweeps '
                  'only).')
FLAGS = flags.FLAGS

BEAUTY_100 = (('data_dir', '../shared/data/amazon-beauty'), ('top_users', 100),
              ('local_epochs', 1))
ARGS = ('--rounds=1000', '--eval_every=10', '--checkpoint_every=100')
SWEEP_RATES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)  # extended past a winning edge (experiments.rate_sweep)
MAX_EXTENSIONS = 2
SWEEP_METRIC = 'validation/ndcg_at_20'
# The client rate every headline cell ran at first: FedAvg's sweep over SWEEP_RATES
# chose it at the grid's top edge, and the sweep extended to 3 still chooses it.
HEADLINE_RATE = 1.0
# Each method's own sweep, at this capacity mix (None: FedAvg, one tier); the
# method's other mixes run at the rate it chooses.
SWEPT = {'fedavg': None, 'fair': '1x-16x', 'fair_hom': '1x-16x', 'fedhm': '1x-2x'}
METRICS = ('test/ndcg_at_20', 'test/hr_at_20', 'test/recall_at_20')
LABELS = {'fedavg': 'FedAvg', 'fair': 'FAIR-HET', 'fair_hom': 'FAIR-HOM', 'fedhm': 'FedHM'}
CELLS = (('fedavg', None), ('fair', '1x-2x'), ('fair_hom', '1x-2x'), ('fedhm', '1x-2x'),
         ('fair', '1x-16x'), ('fair_hom', '1x-16x'), ('fair', '1x-64x'),
         ('fair_hom', '1x-64x'))
CONSISTENCY_SCHEME = '2x-4x-8x-16x'  # two hashed tiers or more (1x is the full table)
LAST_K = 10  # NDCG@20 swings by about 0.01 between evaluations (every 10 rounds)
CONSISTENCY = {'fair': 'FAIR, consistent subspaces',
               'fair_inconsistent': 'FAIR, a hash seed per tier (inconsistent)'}


def _rate_flag(rate: float) -> str:
  return f'--client_learning_rate={rate:g}'


SWEEP = seeded_table.Table(
    'ranking', '', (SWEEP_METRIC, 'validation/hr_at_20'), {}, ARGS, 'validation',
    (*BEAUTY_100, ('held_out', 'validation')), last_k=LAST_K)


def _label(algorithm: str, scheme: str | None) -> str:
  return ' '.join(filter(None, (LABELS[algorithm], scheme)))


def _sweep_row(algorithm: str, rate: float) -> str:
  """A sweep's cell (FedAvg's named as they were first recorded)."""
  if algorithm == 'fedavg':
    return f'fedavg_lr{rate:g}'
  return f'{algorithm}_{SWEPT[algorithm]}_validation_lr{rate:g}'


def sweep(algorithm: str, runs_dir: str, records: pathlib.Path, wanted: bool
          ) -> tuple[list[str], float | None]:
  """`algorithm`'s client rate sweep on seed 0 (validation NDCG@20, the mean of
  the last LAST_K evaluations to round 1,000), at its SWEPT mix: its markdown
  lines and the chosen rate (None until the sweep is complete)."""
  scheme = SWEPT[algorithm]
  capacities = (f'--capacities={scheme}',) if scheme else ()
  label = _label(algorithm, scheme)

  def run(rate):
    row = _sweep_row(algorithm, rate)
    table = dataclasses.replace(SWEEP, rows={row: (
        f'{label}, client Adam {rate:g}',
        (f'--algorithm={algorithm}', *capacities, _rate_flag(rate)), None)})
    return seeded_table.seed_cell(table, row, 0, runs_dir, records, wanted)

  swept = seeded_table.sweep_rates(SWEEP_RATES, run, seeded_table.LAST_MEAN,
                                   max_extensions=MAX_EXTENSIONS)
  floor = seeded_table.popularity(SWEEP, 0, records)
  shown = (SWEEP_METRIC, seeded_table.LAST_MEAN, *SWEEP.metrics[1:])
  return [f'## Client Adam rate: {label}, validation, seed 0', '',
          f'{SWEEP.caption()} --seed=0; at round 1,000, and the mean of the last {LAST_K} '
          'evaluations of NDCG@20, which chooses.', '',
          *seeded_table.sweep_lines(swept, f'{label}, client Adam', shown,
                                    {**floor, seeded_table.LAST_MEAN: floor[SWEEP_METRIC]})
          ], swept.chosen


def _row(base: str, rate: float) -> str:
  """A headline cell at client Adam `rate` (HEADLINE_RATE's keep their first names;
  the others' never meet FedAvg's sweep cells, fedavg_lrR)."""
  return base if rate == HEADLINE_RATE else f'{base}_test_lr{rate:g}'


def headlines(rates: dict[str, float | None]) -> tuple[seeded_table.Table, ...]:
  """Table 2's cells, then the consistency ablation, each method at its client Adam
  rate in `rates` (the consistency ablation at FAIR-HET's); a method whose rate is
  None (its sweep not complete) has no rows yet."""
  het = rates['fair']  # the consistency ablation's rate, and FedAvg's probe's
  rows = {}
  for algorithm, scheme in CELLS:
    capacities = (f'--capacities={scheme}',) if scheme else ()
    rate = rates[algorithm]
    if rate is None:
      continue
    rows[_row('_'.join(filter(None, (algorithm, scheme))), rate)] = (
        f'{_label(algorithm, scheme)}, Adam {rate:g}',
        (f'--algorithm={algorithm}', *capacities, _rate_flag(rate)), None)
    if algorithm == 'fedavg' and het not in (None, rate):
      # Is a gap between FAIR-HET and FedAvg the method's or its rate's? The
      # baseline at FAIR-HET's rate says; it chooses nothing.
      rows[_row('fedavg', het)] = (
          f"FedAvg, Adam {het:g} (a probe at FAIR-HET's rate; no sweep chose it)",
          ('--algorithm=fedavg', _rate_flag(het)), None)
  same = len(set(rates.values())) == 1
  about = (f'client Adam {rates["fedavg"]:g}' if same
           else 'each method at its own client Adam rate')
  tables = [seeded_table.Table(
      'ranking', f'FedAvg and FAIR, {about}, test', METRICS, rows,
      ARGS, 'test', BEAUTY_100, versus=(_row('fedavg', rates['fedavg']), 'popularity'),
      last_k=LAST_K)]
  if het is not None:
    consistency = {_row(f'{algorithm}_{CONSISTENCY_SCHEME}', het): (
        label, (f'--algorithm={algorithm}', f'--capacities={CONSISTENCY_SCHEME}',
                _rate_flag(het)), None) for algorithm, label in CONSISTENCY.items()}
    tables.append(seeded_table.Table(
        'ranking', f'Consistent against inconsistent subspaces at {CONSISTENCY_SCHEME}, '
        f'client Adam {het:g}, test', METRICS, consistency, ARGS, 'test', BEAUTY_100,
        versus=(_row(f'fair_{CONSISTENCY_SCHEME}', het), 'popularity'), last_k=LAST_K))
  return tuple(tables)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  unknown = sorted(set(FLAGS.sweeps or ()) - {*SWEPT, 'none'})
  if unknown:
    raise app.UsageError(f'--sweeps: no sweep of {unknown}; choose among {list(SWEPT)} '
                         'or none')
  results = pathlib.Path(FLAGS.results_dir)
  records, wanted = results / 'cells', FLAGS.only == 'all'
  lines, chosen = ["# FAIR's headline cells on Amazon Beauty-100", '',
                   'Built by `python -m launch.reproduce_fair_beauty` from the cell records. '
                   'See README.md here for the reading.', ''], {}
  for algorithm in SWEPT:
    sweep_lines, chosen[algorithm] = sweep(
        algorithm, FLAGS.runs_dir, records,
        wanted and (FLAGS.sweeps is None or algorithm in FLAGS.sweeps))
    lines += sweep_lines
  wanted = wanted and FLAGS.headlines
  seeds = [int(s) for s in FLAGS.seeds]
  pending = [LABELS[a] for a, rate in chosen.items() if rate is None]
  if pending:
    lines += [f'Not chosen yet ({", ".join(pending)}): their rows wait for their sweeps.',
              '']
  for table in headlines(chosen):
    lines += seeded_table.tabulate(table, seeds, FLAGS.runs_dir, records, wanted)
  if pending or set(chosen.values()) != {HEADLINE_RATE}:
    lines += ['# Every method at FedAvg\'s rate (the first headline cells)', '']
    for table in headlines(dict.fromkeys(SWEPT, HEADLINE_RATE)):
      lines += seeded_table.tabulate(table, seeds, FLAGS.runs_dir, records, wanted)
  results.mkdir(parents=True, exist_ok=True)
  files.write_text(results / 'table.md', '\n'.join(lines))
  print(f'done: {results / "table.md"}', flush=True)

