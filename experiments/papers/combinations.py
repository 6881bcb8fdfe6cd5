r"""Cross-paper combinations against their parts alone, with a popularity row.

  python -m launch.reproduce_combinations                 # run what is missing, tabulate
  python -m launch.reproduce_combinations --tables=goodreads --seeds=0,1
  python -m launch.reproduce_combinations --only=none     # the table from the records

goodreads: FAIR's setting on Goodreads-100 (50 rounds of 10 clients, NeuMF,
fresh client Adam 1e-3, 5 local epochs, the mean replaces the model):
FedAvg, FedAvg + FedSubAvg's correction, FAIR-HET 1x-2x, and FAIR-HET 1x-2x
with FedSubAvg's correction stacked on its recovered tables (`--stack=fedsubavg`).

movielens: CoLR's setting on ML-100K leave-one-out (1000 rounds of 10
clients, d = 64, client SGD 0.5, stored user vectors): FedMF, FedMF +
FedSubAvg, CoLR r = 4, CoLR r = 4 + FedSubAvg (the correction scales the rows
of the mean A, which commutes with the shared basis B), at the parts' server
step 1; then each stacked row at the server step its sweep (seed 0, validation
HR@10, SERVER_RATES extended past a winning edge) chooses, beside its part
alone at that step.

A part alone is the paper reproduction's own record where it ran with the
same flags and seed (results/fair_goodreads, results/colr_movielens: seed 0
NAME, seed S NAME_sS); every other cell is recorded in
results/combinations/cells. Each seed draws the
model, the cohorts and the negatives.
"""

import dataclasses
import pathlib

from absl import app
from absl import flags

from experiments import files
from experiments.papers import seeded_table
from launch import common

flags.DEFINE_string('runs_dir', 'runs/combinations', 'Where the individual runs go.')
flags.DEFINE_string('results_dir', 'results/combinations', 'Where the results go.')
flags.DEFINE_list('tables', ['goodreads', 'movielens'], 'Which tables.')
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds of every cell.')
flags.DEFINE_enum('only', 'all', ['all', 'none'], 'none: tabulate the records, run nothing.')
FLAGS = flags.FLAGS

TABLES = {
    'goodreads': seeded_table.Table(
        'ranking', 'Goodreads-100: FAIR tiers with FedSubAvg\'s correction',
        ('test/ndcg_at_20', 'test/recall_at_20'),
        {'fedavg': ('FedAvg', ('--algorithm=fedavg',), 'results/fair_goodreads/cells/fedavg'),
         'fedsubavg': ('FedAvg + FedSubAvg', ('--algorithm=fedsubavg',), None),
         'fair': ('FAIR-HET 1x-2x', ('--algorithm=fair', '--capacities=1x-2x'),
                  'results/fair_goodreads/cells/fair_1x-2x'),
         'fair_fedsubavg': ('FAIR-HET 1x-2x + FedSubAvg', (
             '--algorithm=fair', '--capacities=1x-2x', '--stack=fedsubavg'), None)},
        ('--rounds=50', '--eval_every=10', '--client_learning_rate=0.001'), '',
        versus=('popularity',)),
}


# CoLR's setting on ML-100K: the parts alone and stacked at the parts' server
# step (1.0, the paper's); then each stacked method at the server step its own
# sweep chooses on validation, beside its part alone at that step; each part alone
# at the server step its own sweep (the same rates) chooses.
MOVIELENS = ('loo_ranking', "ML-100K leave-one-out: CoLR with FedSubAvg's correction",
             ('--rounds=1000', '--eval_every=100', '--checkpoint_every=100'))
PARTS = {'fedmf': ('FedMF-64', ('--algorithm=fedmf', '--embedding_dim=64'),
                   'results/colr_movielens/cells/fedmf_d64-client_learning_rate=0.5-s{seed}'),
         'colr': ('CoLR r=4', ('--algorithm=colr', '--rank=4'),
                  'results/colr_movielens/cells/colr_r4-client_learning_rate=0.5-s{seed}')}
STACKED = {'fedsubavg': ('FedMF-64 + FedSubAvg', ('--algorithm=fedsubavg',), 'fedmf'),
           'colr_fedsubavg': ('CoLR r=4 + FedSubAvg', (
               '--algorithm=colr', '--rank=4', '--stack=fedsubavg'), 'colr')}
# The correction multiplies a rare item's step by up to N / (n_m K) = 94 here,
# and every stacked row diverges at the parts' step 1.0: the server step is
# swept below it, seed 0, on validation HR@10 (each user's second-to-last item),
# extended past a winning edge (experiments.rate_sweep).
SERVER_RATES = (0.03, 0.1, 0.3)
# Where the rule could not decide at 3 seeds (FedMF-64 + FedSubAvg at its chosen
# step against FedMF-64 at its own: -0.021, p = 0.14), both run 5 more.
MORE_SEEDS = tuple(range(8))
SWEEP_METRICS = ('validation/hr_at_10', 'validation/ndcg_at_10')
MAX_EXTENSIONS = 2


def _at(row: str, rate: float) -> str:
  """The row of `row` at server step `rate` (the parts' own step, 1, is `row`)."""
  return row if rate == 1 else f'{row}_lr{rate:g}'


def _movielens_row(row: str, rate: float) -> tuple:
  label, args, *_ = {**PARTS, **STACKED}[row]
  if rate == 1:
    return (label, args, PARTS[row][2] if row in PARTS else None)
  return (f'{label}, server lr {rate:g}', (*args, f'--server_learning_rate={rate:g}'), None)


def _movielens(seeds: list[int], runs_dir: str, records: pathlib.Path,
               wanted: bool) -> list[str]:
  """The server-step sweeps of the stacked rows, then the table over `seeds`."""
  rows = {r: _movielens_row(r, 1) for row, (*_, part) in STACKED.items() for r in (part, row)}
  base = seeded_table.Table(MOVIELENS[0], MOVIELENS[1], ('test/hr_at_10', 'test/ndcg_at_10'),
                            rows, MOVIELENS[2], 'test', versus=('popularity',))
  lines = [f'## {MOVIELENS[1]}: the server step, validation, seed 0', '',
           f'{base.caption()} --seed=0; validation HR@10 / NDCG@10 at the last round '
           '(each user\'s second-to-last item; the test item untouched). Each part alone and '
           'each stacked row gets the same sweep (the same rates, extended past a winning '
           'edge: a part\'s own step, 1, is its recorded row); each runs below at the best '
           'here.', '']
  floor = seeded_table.popularity(dataclasses.replace(base, popularity='validation'), 0,
                                  records)
  chosen = {}
  for row, (label, *_) in {**PARTS, **STACKED}.items():
    def run(rate, row=row):
      sweep = dataclasses.replace(base, rows={_at(row, rate): _movielens_row(row, rate)})
      return seeded_table.seed_cell(sweep, _at(row, rate), 0, runs_dir, records, wanted)

    swept = seeded_table.sweep_rates(SERVER_RATES, run, SWEEP_METRICS[0],
                                     max_extensions=MAX_EXTENSIONS)
    lines += seeded_table.sweep_lines(swept, f'{label}, server lr', SWEEP_METRICS, floor)
    chosen[row] = swept.chosen
  for row, rate in chosen.items():
    if rate is not None and rate != 1:
      rows[_at(row, rate)] = _movielens_row(row, rate)
      if row in STACKED:  # beside its part alone at that step
        part = STACKED[row][2]
        rows[_at(part, rate)] = _movielens_row(part, rate)
  table = dataclasses.replace(base, rows=rows)
  lines += seeded_table.tabulate(table, seeds, runs_dir, records, wanted)
  if None not in (chosen['fedsubavg'], chosen['fedmf']):  # each at the step it chose
    stacked, part = _at('fedsubavg', chosen['fedsubavg']), _at('fedmf', chosen['fedmf'])
    more = dataclasses.replace(
        base, title=f'{MOVIELENS[1]}: FedMF-64 + FedSubAvg against FedMF-64, '
        f'{len(MORE_SEEDS)} seeds', rows={part: rows[part], stacked: rows[stacked]},
        versus=('popularity', part))
    lines += seeded_table.tabulate(more, list(MORE_SEEDS), runs_dir, records, wanted)
  if None in chosen.values():
    lines += ['The rows at a chosen server step wait for their whole sweep.', '']
  return lines


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  common.check_choices('tables', FLAGS.tables, [*TABLES, 'movielens'])
  seeds = [int(s) for s in FLAGS.seeds]
  records = pathlib.Path(FLAGS.results_dir) / 'cells'
  out = pathlib.Path(FLAGS.results_dir)
  out.mkdir(parents=True, exist_ok=True)
  for name in FLAGS.tables:  # a file each, whichever tables one run builds
    lines = ['# Cross-paper combinations', '',
             'Built by `python -m launch.reproduce_combinations` from the cell records. '
             'See README.md here for the reading.', '']
    if name == 'movielens':
      lines += _movielens(seeds, FLAGS.runs_dir, records, FLAGS.only == 'all')
    else:
      lines += seeded_table.tabulate(TABLES[name], seeds, FLAGS.runs_dir, records,
                                     wanted=FLAGS.only == 'all')
    path = out / f'table_{name}.md'
    files.write_text(path, '\n'.join(lines))
    print(f'done: {path}', flush=True)

