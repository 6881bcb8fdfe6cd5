r"""CoLR's headline cell on a second dataset: Amazon Beauty, leave-one-out (HR@10).

  python -m launch.reproduce_beauty                 # run what is missing, tabulate
  python -m launch.reproduce_beauty --only=none     # the tables from the records

Amazon Beauty 5-core through the generic sequence reader (`loo_ranking`
on the sequence file, every user: 22,363 clients, 12,101 items), d = 64,
stored user vectors, 1,000 clients a round (4.5% of the users), 100 rounds.

CoLR's ML-100K setting does not carry over. At client SGD 0.5 with the paper's
average over the cohort, an item row held by ~3 of 1,000 clients moves by
3/1000 of their step, and Beauty's users hold 5-7 training items (one batch a
local epoch), so the model stays at chance after 100 rounds
(results/scale_amazon_beauty). Both rows here therefore average each item over
the clients that touched it (`--item_average=touched`, the official CoLR
code's average), and the client learning rate is picked on validation HR@10 at
round 100 from CoLR r = 4's sweep (seed 0, recorded like every cell). FedMF-64
and CoLR r = 4 then run at that rate over --seeds; the popularity row ranks
items by their number of training users.

Cells run through launch.train under --runs_dir (resumable) and are recorded in
--results_dir/cells; a recorded cell is not run again. Writes table.md.
"""

import pathlib

from absl import app
from absl import flags

from launch import common
from launch import seeded_table

seeded_table.define_flags('runs/beauty', 'results/colr_amazon_beauty')
FLAGS = flags.FLAGS

BEAUTY = (('data_dir', '../shared/data/amazon-beauty'), ('min_interactions', 5))
ARGS = ('--embedding_dim=64', '--clients_per_round=1000', '--item_average=touched',
        '--rounds=100', '--eval_every=20', '--checkpoint_every=20')
SWEEP_RATES = (0.5, 1.0, 2.0, 4.0)
SWEEP_METRIC = 'validation/hr_at_10'
METRICS = ('test/hr_at_10', 'test/ndcg_at_10')


def _rate(rate: float) -> str:
  return f'{rate:g}'


def _sweep_row(rate: float) -> str:
  return f'colr_lr{_rate(rate)}'


SWEEP = seeded_table.Table(
    'loo_ranking', 'Client learning rate: CoLR r = 4, validation, seed 0',
    (SWEEP_METRIC, 'validation/ndcg_at_10'),
    {_sweep_row(r): (f'CoLR r=4, client SGD {_rate(r)}', (
        '--algorithm=colr', '--rank=4', f'--client_learning_rate={_rate(r)}'), None)
     for r in SWEEP_RATES},
    ARGS, 'validation', BEAUTY)


def headline(rate: float, records: pathlib.Path) -> seeded_table.Table:
  """FedMF-64 and CoLR r = 4 at `rate`; CoLR's seed 0 is the sweep's cell."""
  rate_flag = f'--client_learning_rate={_rate(rate)}'
  sweep_cell = records / SWEEP.task / f'{_sweep_row(rate)}_s0'
  return seeded_table.Table(
      'loo_ranking', f'FedMF-64 against CoLR r = 4 at client SGD {_rate(rate)}',
      METRICS,
      {'fedmf': ('FedMF-64', ('--algorithm=fedmf', rate_flag), None),
       'colr': ('CoLR r=4', ('--algorithm=colr', '--rank=4', rate_flag), sweep_cell)},
      ARGS, 'test', BEAUTY, versus=('fedmf', 'popularity'))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  rates = {_sweep_row(r): r for r in SWEEP_RATES}
  records = pathlib.Path(FLAGS.results_dir) / 'cells'
  seeded_table.sweep_then_headline(
      ["# CoLR's headline on Amazon Beauty", '',
       'Built by `python -m launch.reproduce_beauty` from the cell records. '
       'See README.md here for the reading.', ''],
      SWEEP, SWEEP_METRIC, lambda row: (headline(rates[row], records),),
      [int(s) for s in FLAGS.seeds], FLAGS.runs_dir, pathlib.Path(FLAGS.results_dir),
      FLAGS.only == 'all')
  print(f'done: {pathlib.Path(FLAGS.results_dir) / "table.md"}', flush=True)


if __name__ == '__main__':
  common.run(main)
