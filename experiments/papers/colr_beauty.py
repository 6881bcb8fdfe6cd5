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
code's average), and each method's client learning rate is picked on
validation HR@10 at round 100 from its own sweep (seed 0, recorded like every
cell). FedMF-64 and CoLR r = 4 then run at their rates over --seeds; the
popularity row ranks items by their number of training users.

Cells run through launch.train under --runs_dir (resumable) and are recorded in
--results_dir/cells; a recorded cell is not run again. Writes table.md.
"""

import pathlib

from absl import app
from absl import flags

from experiments import files
from experiments.papers import seeded_table

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


METHODS = {'colr': ('CoLR r=4', ('--algorithm=colr', '--rank=4')),
           'fedmf': ('FedMF-64', ('--algorithm=fedmf',))}
# The rate FedMF-64's headline cells first ran at (CoLR's, before FedMF had a
# sweep of its own): its cells at that rate keep their names.
FIRST_RATE = 1.0


def _sweep_row(method: str, rate: float) -> str:
  return f'{method}_lr{_rate(rate)}'


def sweep(method: str) -> seeded_table.Table:
  label, args = METHODS[method]
  return seeded_table.Table(
      'loo_ranking', f'Client learning rate: {label}, validation, seed 0',
      (SWEEP_METRIC, 'validation/ndcg_at_10'),
      {_sweep_row(method, r): (f'{label}, client SGD {_rate(r)}',
                               (*args, f'--client_learning_rate={_rate(r)}'), None)
       for r in SWEEP_RATES},
      ARGS, 'validation', BEAUTY)


def headline(rates: dict[str, float], records: pathlib.Path) -> seeded_table.Table:
  """FedMF-64 and CoLR r = 4, each at its rate; CoLR's seed 0 is its sweep's cell."""
  def row(method):
    label, args = METHODS[method]
    rate = rates[method]
    name = method if method == 'colr' or rate == FIRST_RATE else _sweep_row(method, rate)
    seed0 = (records / 'loo_ranking' / f'{_sweep_row(method, rate)}_s0' if method == 'colr'
             else None)
    return name, (f'{label} (client SGD {_rate(rate)})',
                  (*args, f'--client_learning_rate={_rate(rate)}'), seed0)

  return seeded_table.Table(
      'loo_ranking', 'FedMF-64 against CoLR r = 4, each at its validated rate', METRICS,
      dict(row(m) for m in ('fedmf', 'colr')), ARGS, 'test', BEAUTY,
      versus=(row('fedmf')[0], 'popularity'))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  results_dir = pathlib.Path(FLAGS.results_dir)
  records, wanted = results_dir / 'cells', FLAGS.only == 'all'
  lines = ["# CoLR's headline on Amazon Beauty", '',
           'Built by `python -m launch.reproduce_beauty` from the cell records. '
           'See README.md here for the reading.', '']
  rates = {}
  for method in METHODS:
    table = sweep(method)
    results = seeded_table.collect(table, [0], FLAGS.runs_dir, records, wanted)
    lines += seeded_table.render(table, [0], results)
    best = seeded_table.best_row(table, results, SWEEP_METRIC)
    rates[method] = None if best is None else float(best.split('_lr')[1])
  if None in rates.values():
    lines.append('The headline rows wait for both sweeps.')
  else:
    lines += seeded_table.tabulate(headline(rates, records), [int(s) for s in FLAGS.seeds],
                                   FLAGS.runs_dir, records, wanted)
  results_dir.mkdir(parents=True, exist_ok=True)
  files.write_text(results_dir / 'table.md', '\n'.join(lines))
  print(f'done: {results_dir / "table.md"}', flush=True)

