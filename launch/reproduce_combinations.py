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
of the mean A, which commutes with the shared basis B); and the last three at a
tenth of the server learning rate.

A part alone is the paper reproduction's own record where it ran with the
same flags and seed (results/fair_goodreads, results/colr_movielens: seed 0
NAME, seed S NAME_sS); every other cell is recorded in
results/combinations/cells. Each seed draws the
model, the cohorts and the negatives.
"""

import pathlib

from absl import app
from absl import flags

from launch import common
from launch import outputs
from launch import seeded_table

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
    'movielens': seeded_table.Table(
        'loo_ranking', 'ML-100K leave-one-out: CoLR with FedSubAvg\'s correction',
        ('test/hr_at_10', 'test/ndcg_at_10'),
        {'fedmf': ('FedMF-64', ('--algorithm=fedmf', '--embedding_dim=64'),
                   'results/colr_movielens/cells/fedmf_d64'),
         'fedsubavg': ('FedMF-64 + FedSubAvg', ('--algorithm=fedsubavg',), None),
         'colr': ('CoLR r=4', ('--algorithm=colr', '--rank=4'),
                  'results/colr_movielens/cells/colr_r4'),
         'colr_fedsubavg': ('CoLR r=4 + FedSubAvg', (
             '--algorithm=colr', '--rank=4', '--stack=fedsubavg'), None),
         # The correction multiplies a rare item's step by up to N / (n_m K) = 94
         # here: the same at a tenth of the server step, with FedMF there too.
         'fedmf_lr0.1': ('FedMF-64, server lr 0.1', (
             '--algorithm=fedmf', '--server_learning_rate=0.1'), None),
         'fedsubavg_lr0.1': ('FedMF-64 + FedSubAvg, server lr 0.1', (
             '--algorithm=fedsubavg', '--server_learning_rate=0.1'), None),
         'colr_lr0.1': ('CoLR r=4, server lr 0.1', (
             '--algorithm=colr', '--rank=4', '--server_learning_rate=0.1'), None),
         'colr_fedsubavg_lr0.1': ('CoLR r=4 + FedSubAvg, server lr 0.1', (
             '--algorithm=colr', '--rank=4', '--stack=fedsubavg',
             '--server_learning_rate=0.1'), None)},
        ('--rounds=1000', '--eval_every=100', '--checkpoint_every=100'), 'test',
        versus=('popularity',)),
}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  common.check_choices('tables', FLAGS.tables, TABLES)
  seeds = [int(s) for s in FLAGS.seeds]
  lines = ['# Cross-paper combinations', '',
           'Built by `python -m launch.reproduce_combinations` from the cell records. '
           'See README.md here for the reading.', '']
  for name in FLAGS.tables:
    lines += seeded_table.tabulate(TABLES[name], seeds, FLAGS.runs_dir,
                                   pathlib.Path(FLAGS.results_dir) / 'cells',
                                   wanted=FLAGS.only == 'all')
  out = pathlib.Path(FLAGS.results_dir)
  out.mkdir(parents=True, exist_ok=True)
  path = out / ('table.md' if len(FLAGS.tables) == len(TABLES) else
                f'table_{"_".join(FLAGS.tables)}.md')
  outputs.write_text(path, '\n'.join(lines))
  print(f'done: {path}', flush=True)


if __name__ == '__main__':
  common.run(main)
