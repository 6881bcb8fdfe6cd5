r"""FAIR's headline cells on a second dataset: Amazon Beauty-100, NDCG@20.

  python -m launch.reproduce_fair_beauty                 # run what is missing, tabulate
  python -m launch.reproduce_fair_beauty --only=none     # the tables from the records

FAIR's paper builds its second dataset, AmazonProduct-100, from the 100
users with the most interactions; Beauty-100 is the same cut of Amazon Beauty
5-core (`ranking` with --top_users=100: 100 users, 12,102 items,
the last 30% of each user's items for test). The official settings for
AmazonProduct-100 are Goodreads' but with E = 1 local epoch; 1,000 rounds of
10 clients is the official example's T; the client Adam rate is "the best of
1e-4 .. 1". Here it is picked on validation NDCG@20 (the last 30% of each
train list, test untouched) from FedAvg's sweep on seed 0.
FedAvg, FAIR-HET, FAIR-HOM and FedHM then run at that rate over --seeds at
1x-2x and 1x-16x (FedHM cannot run past 4x with 8 factors) and FAIR-HET and
FAIR-HOM at 1x-64x: the cells of results/fair_goodreads' seeded table. Then
the consistency ablation of the Goodreads script: FAIR at 2x-4x-8x-16x (every
tier hashed) with consistent subspaces and with a hash seed per tier.

Cells run through launch.train under --runs_dir (resumable) and are recorded in
--results_dir/cells; a recorded cell is not run again. Writes table.md.
"""

import pathlib

from absl import app
from absl import flags

from launch import common
from launch import seeded_table

seeded_table.define_flags('runs/fair_beauty', 'results/fair_amazon_beauty')
FLAGS = flags.FLAGS

BEAUTY_100 = (('data_dir', '../shared/data/amazon-beauty'), ('top_users', 100),
              ('local_epochs', 1))
ARGS = ('--rounds=1000', '--eval_every=10', '--checkpoint_every=100')
SWEEP_RATES = {f'fedavg_lr{r:g}': r for r in (1.0, 1e-1, 1e-2, 1e-3, 1e-4)}  # row -> rate
SWEEP_METRIC = 'validation/ndcg_at_20'
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
    'ranking', 'Client Adam rate: FedAvg, validation, seed 0',
    (SWEEP_METRIC, 'validation/hr_at_20'),
    {row: (f'FedAvg, client Adam {r:g}', ('--algorithm=fedavg', _rate_flag(r)), None)
     for row, r in SWEEP_RATES.items()},
    ARGS, 'validation', (*BEAUTY_100, ('held_out', 'validation')))


def headlines(rate: float) -> tuple[seeded_table.Table, ...]:
  """Table 2's cells, then the consistency ablation, at client Adam `rate`."""
  rows = {}
  for algorithm, scheme in CELLS:
    capacities = (f'--capacities={scheme}',) if scheme else ()
    rows['_'.join(filter(None, (algorithm, scheme)))] = (
        ' '.join(filter(None, (LABELS[algorithm], scheme))),
        (f'--algorithm={algorithm}', *capacities, _rate_flag(rate)), None)
  consistency = {f'{algorithm}_{CONSISTENCY_SCHEME}': (
      label, (f'--algorithm={algorithm}', f'--capacities={CONSISTENCY_SCHEME}',
              _rate_flag(rate)), None) for algorithm, label in CONSISTENCY.items()}
  return (seeded_table.Table(
      'ranking', f'FedAvg and FAIR at client Adam {rate:g}, test', METRICS, rows,
      ARGS, 'test', BEAUTY_100, versus=('fedavg', 'popularity'), last_k=LAST_K),
          seeded_table.Table(
      'ranking', f'Consistent against inconsistent subspaces at {CONSISTENCY_SCHEME}, '
      f'client Adam {rate:g}, test', METRICS, consistency, ARGS, 'test', BEAUTY_100,
      versus=(f'fair_{CONSISTENCY_SCHEME}', 'popularity'), last_k=LAST_K))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  results = pathlib.Path(FLAGS.results_dir)
  seeded_table.sweep_then_headline(
      ["# FAIR's headline cells on Amazon Beauty-100", '',
       'Built by `python -m launch.reproduce_fair_beauty` from the cell records. '
       'See README.md here for the reading.', ''],
      SWEEP, SWEEP_METRIC, lambda row: headlines(SWEEP_RATES[row]), [int(s) for s in FLAGS.seeds],
      FLAGS.runs_dir, results, FLAGS.only == 'all')
  print(f'done: {results / "table.md"}', flush=True)


if __name__ == '__main__':
  common.run(main)
