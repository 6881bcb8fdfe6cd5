r"""Ning et al.'s Table 2 on MovieLens: centralized vs federated global recall@k
for the four losses, and the relative drop, over seeds.

  python -m launch.reproduce_dual_encoder                  # run what is missing, tabulate
  python -m launch.reproduce_dual_encoder --only=none      # the tables from the records

Federated: FedAvg over the training users, --cohort_share of them a round
(the paper's 2%: 15 of ML-100K's 754), one local epoch, evaluated on the test
users. Centralized: the same model, loss and batch, trained with Adam on one
of two splits (the task's --centralized_split): by_user, the federated
training users, scored on the federated test users (like for like: the drop
compares two models on the same examples); by_example, the paper's split of
all users' examples 80/10/10. Neither scores an example it trained on.

Two more groups of cells explain the batch softmax. `probe_*`: centralized
(by_user) batch softmax with tfrs's corrections: accidental hits masked, the
log-q sampling correction, both; and federated batch softmax with log-q.
`lr_*`: the learning-rate check at the paper's cohort, seed 0: the official
run's client SGD 0.01 / server Adam 1.0 (ours is the fed_*_s0 cell).

Every cell runs in its own process and directory under --runs_dir and, once
finished, is recorded in --results_dir/cells (config, metrics, summary); a
recorded cell is not run again. Cells run seed by seed, so a cut reproduction
leaves whole seeds. Each seed draws the model, the cohorts and the shuffles.
Writes table.md and recall_at_10.png to --results_dir.

Another dataset, and a subset of the cells (a large one costs more a cell):

  python -m launch.reproduce_dual_encoder --data_dir=../shared/data/amazon-beauty \
      --nodrop_remainder --losses=global_softmax,batch_softmax_spreadout \
      --splits=by_user --probes= --results_dir=results/dual_encoder_beauty

--shared_records names other tables' results folders: a cell one of them
recorded with the same settings is read from there (another budget's table
shares cells with this one) instead of run again or copied.
"""

import dataclasses
import functools
import pathlib

from absl import app
from absl import flags
import numpy as np

from experiments import files
from experiments import plots
from experiments import run_records
from experiments import seed_stats
from experiments.papers import cell_records
from launch import common
from tasks import next_item

LOSSES = {'batch_softmax': 'BS', 'batch_softmax_spreadout': 'BS+S',
          'hinge_spreadout': 'H+S', 'global_softmax': 'GS'}
KS = (1, 5, 10)
SPLITS = {'by_user': 'Like for like: C trained on the federated training users and '
                     'scored on the federated test users',
          'by_example': "The paper's protocol: C on all users' examples split 80/10/10 by "
                        'example, scored on its test tenth'}
PROBES = {  # name -> (label, launcher, flags); plain BS is the central_by_user/fed cells
    'central_bs_hits': ('centralized BS, accidental hits masked', 'launch.centralized',
                        ('--remove_accidental_hits',)),
    'central_bs_logq': ('centralized BS, log-q correction', 'launch.centralized',
                        ('--logq_correction',)),
    'central_bs_hits_logq': ('centralized BS, both', 'launch.centralized',
                             ('--remove_accidental_hits', '--logq_correction')),
    'central_bs_b128': ('centralized BS, batch 128', 'launch.centralized', ('--batch_size=128',)),
    'fed_bs_logq': ('federated BS, log-q correction (global label counts)', 'launch.train',
                    ('--logq_correction',)),
}
LEARNING_RATES = {'official': (0.01, 1.0), 'ours': (0.1, 0.01)}  # client SGD, server Adam

flags.DEFINE_string('runs_dir', 'runs/dual_encoder', 'Where the individual runs go.')
flags.DEFINE_string('results_dir', 'results/dual_encoder_ml100k',
                    'Where table.md, recall_at_10.png and the cell records go.')
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds of every cell.')
flags.DEFINE_list('shared_records', [], "Other tables' --results_dir: a cell recorded there "
                  'with the same settings is read from there, not run or copied here.')


def _define_subset(name: str, choices: dict, help_text: str) -> None:
  """A list flag of some of `choices`' names (default: all)."""
  flags.DEFINE_list(name, list(choices), f'{help_text} (of {", ".join(choices)}).')
  flags.register_validator(name, lambda names: set(names) <= set(choices),
                           f'--{name}: choose from {", ".join(choices)}')


_define_subset('losses', LOSSES, 'The losses to compare')
_define_subset('splits', SPLITS, "The centralized baselines' splits")
_define_subset('probes', PROBES, 'Batch-softmax probes; they need batch_softmax in --losses '
               'and by_user in --splits')
flags.DEFINE_bool('rate_check', True, "Run the other rates' seed-0 cells (the lr_* cells).")
flags.DEFINE_enum('only', 'all', ['all', 'none'], 'none: tabulate the records, run nothing.')
flags.DEFINE_integer('rounds', 200, 'Federated rounds.', lower_bound=1)
flags.DEFINE_float('cohort_share', 0.02, 'Share of the training users in each round.',
                   lower_bound=0, upper_bound=1)
flags.DEFINE_integer('eval_every', 10, 'Federated evaluation period.', lower_bound=1)
flags.DEFINE_enum('learning_rates', 'ours', list(LEARNING_RATES),
                  'Federated client SGD / server Adam rates: the official run\'s or ours '
                  '(the lr_* cells compare them).')
flags.DEFINE_integer('epochs', 10, 'Centralized epochs.', lower_bound=1)
flags.DEFINE_float('centralized_learning_rate', 0.01, 'Centralized Adam learning rate.')

FLAGS = flags.FLAGS


def _records(results_dir: str) -> str:
  return str(pathlib.Path(results_dir) / 'cells')


def _cell(records: dict[str, str], name: str, module: str, *args: str) -> dict | str:
  """A cell's summary from this table's records, a --shared_records table's record
  of the very same cell, or a run; `records` learns where its record is."""
  own = _records(FLAGS.results_dir)
  records[name] = own
  if not (pathlib.Path(own) / name / 'summary.json').exists():
    records[name] = cell_records.recorded_in(map(_records, FLAGS.shared_records), name,
                                       *args) or own
  return cell_records.run_cell(FLAGS.runs_dir, name, module, *args, wanted=FLAGS.only == 'all',
                         records_dir=records[name])


def _federated_args(clients: int, rates: str) -> tuple[str, ...]:
  client, server = LEARNING_RATES[rates]
  return ('--algorithm=fedavg', f'--rounds={FLAGS.rounds}',
          f'--clients_per_round={_cohort(clients)}', f'--eval_every={FLAGS.eval_every}',
          f'--client_learning_rate={client}', f'--server_learning_rate={server}')


def _central_args(split: str) -> tuple[str, ...]:
  return (f'--centralized_split={split}', f'--epochs={FLAGS.epochs}',
          f'--learning_rate={FLAGS.centralized_learning_rate}', '--eval_every=1')


def _cohort(clients: int) -> int:
  """The clients a round, of `clients` training users."""
  return max(1, round(FLAGS.cohort_share * clients))


@dataclasses.dataclass
class Results:
  """Per cell kind, the finished seeds' summaries."""
  federated: dict[str, list[dict]]  # loss -> summaries
  central: dict[str, dict[str, list[dict]]]  # split -> loss -> summaries
  probes: dict[str, list[dict]]
  rates: dict[tuple[str, str], dict | str]  # (loss, rates) -> seed 0's summary
  records: dict[str, str]  # cell -> the folder of its record (or of its record to be)


def run_all(clients: int, seeds: list[int]) -> Results:
  """Every cell of every seed, over `clients` training users."""
  federated = {loss: [] for loss in FLAGS.losses}
  central = {split: {loss: [] for loss in FLAGS.losses} for split in FLAGS.splits}
  probes = {name: [] for name in FLAGS.probes}
  records = {}
  cell = functools.partial(_cell, records)

  def add(runs: list[dict], result: dict | str) -> None:
    if isinstance(result, dict):  # finished
      runs.append(result)

  for s in seeds:
    for loss in FLAGS.losses:
      add(federated[loss], cell(f'fed_{loss}_s{s}', 'launch.train', f'--loss={loss}',
                                f'--seed={s}', *_federated_args(clients, FLAGS.learning_rates)))
      for split in FLAGS.splits:
        add(central[split][loss], cell(f'central_{split}_{loss}_s{s}', 'launch.centralized',
                                       f'--loss={loss}', f'--seed={s}', *_central_args(split)))
    for name in FLAGS.probes:
      _, module, extra = PROBES[name]
      args = (_central_args('by_user') if module == 'launch.centralized'
              else _federated_args(clients, FLAGS.learning_rates))
      add(probes[name], cell(f'probe_{name}_s{s}', module, '--loss=batch_softmax',
                             f'--seed={s}', *args, *extra))
  # The chosen rates' seed-0 run is the fed_ cell itself.
  rates = {(loss, r): cell(f'lr_{loss}_{r}_s0' if r != FLAGS.learning_rates else
                           f'fed_{loss}_s0', 'launch.train', f'--loss={loss}', '--seed=0',
                           *_federated_args(clients, r))
           for loss in FLAGS.losses for r in LEARNING_RATES} if FLAGS.rate_check else {}
  return Results(federated, central, probes, rates, records)


def _selected(named: dict, names: list[str]) -> list[tuple]:
  """`named`'s (name, value) pairs among `names`, in `named`'s order."""
  return [(name, value) for name, value in named.items() if name in names]


def _values(runs: list[dict], key: str) -> list[float]:
  return [r[key] for r in runs]


def drop_table(results: Results, split: str, popularity: dict[str, list[dict]]) -> str:
  """Per loss: centralized and federated recall@k (%), the R@10 drop, and each of C
  and F at every k against its test set's popularity (`popularity`: part -> per seed)."""
  at = ' / '.join(f'R@{k}' for k in KS)
  header = ['loss', *(f'C R@{k}' for k in KS), *(f'F R@{k}' for k in KS), 'drop R@10',
            'F vs C at R@10', f'C vs popularity at {at}', f'F vs popularity at {at}']
  parts = (split, 'by_user')
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  for loss, label in _selected(LOSSES, FLAGS.losses):
    central, federated = results.central[split][loss], results.federated[loss]
    cells = [label]
    for runs in (central, federated):
      cells += [seed_stats.spread(_values(runs, f'test/recall_at_{k}'), 100, 2) for k in KS]
    c10, f10 = (_values(runs, 'test/recall_at_10') for runs in (central, federated))
    drops = [(c - f) / c for c, f in zip(c10, f10) if c]  # seed i against seed i
    cells.append(seed_stats.spread(drops, 100, 1) + '%' if drops else cell_records.NOT_RUN)
    cells.append(seed_stats.versus(f10, c10, 100, 2))
    cells += [' / '.join(seed_stats.versus(
        _values(runs, f'test/recall_at_{k}'), _values(popularity[part], f'recall_at_{k}'), 100, 2)
                         for k in KS) for runs, part in zip((central, federated), parts)]
    lines.append('| ' + ' | '.join(cells) + ' |')
  lines.append('| popularity | ' + ' | '.join(
      seed_stats.spread(_values(popularity[part], f'recall_at_{k}'), 100, 2)
      for part in parts for k in KS) + ' | | | | |')
  return '\n'.join(lines)


def probe_table(results: Results, popularity: list[dict]) -> str:
  """Batch softmax with and without corrections, against plain BS of its kind and
  against popularity (per seed)."""
  lines = ['| batch softmax | R@1 (%) | R@5 (%) | R@10 (%) | vs plain, R@10 | '
           'vs popularity, R@10 |', '|---|---|---|---|---|---|']
  floor = _values(popularity, 'recall_at_10')
  plain = {'launch.centralized': results.central['by_user']['batch_softmax'],
           'launch.train': results.federated['batch_softmax']}
  rows = [('centralized BS', 'launch.centralized', plain['launch.centralized'])]
  probes = _selected(PROBES, FLAGS.probes)
  rows += [(label, module, results.probes[name]) for name, (label, module, _) in probes
           if module == 'launch.centralized']
  rows += [('federated BS', 'launch.train', plain['launch.train'])]
  rows += [(label, module, results.probes[name]) for name, (label, module, _) in probes
           if module == 'launch.train']
  for label, module, runs in rows:
    values = [seed_stats.spread(_values(runs, f'test/recall_at_{k}'), 100, 2) for k in KS]
    versus = ('' if runs is plain[module] else seed_stats.versus(
        _values(runs, 'test/recall_at_10'), _values(plain[module], 'test/recall_at_10'), 100, 2))
    floored = seed_stats.versus(_values(runs, 'test/recall_at_10'), floor, 100, 2)
    lines.append(f'| {label} | ' + ' | '.join(values) + f' | {versus} | {floored} |')
  lines.append('| popularity | ' + ' | '.join(
      seed_stats.spread(_values(popularity, f'recall_at_{k}'), 100, 2) for k in KS) + ' | | |')
  return '\n'.join(lines)


def rates_table(results: Results, popularity: float) -> str:
  """Seed 0's validation R@10 at each rate, and validation popularity's R@10."""
  lines = ['| loss | ' + ' | '.join(f'{name}: client SGD {c:g}, server Adam {s:g}'
                                    for name, (c, s) in LEARNING_RATES.items()) + ' |',
           '|---|' + '---|' * len(LEARNING_RATES)]
  for loss, label in _selected(LOSSES, FLAGS.losses):
    cells = []
    for rates in LEARNING_RATES:
      run = results.rates[(loss, rates)]
      cells.append(f'{100 * run["validation/recall_at_10"]:.2f}' if isinstance(run, dict)
                   else run)
    lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
  lines.append('| popularity | ' + ' | '.join([f'{100 * popularity:.2f}'] * len(LEARNING_RATES))
               + ' |')
  return '\n'.join(lines)


def plot(path: pathlib.Path, results: Results, seeds: list[int], popularity: float) -> None:
  """Federated validation recall@10 by round (mean over seeds, min-max band)."""
  fig, ax = plots.figure()
  ax.axhline(100 * popularity, color='gray', linestyle=':', label='popularity')
  for i, (loss, label) in enumerate(_selected(LOSSES, FLAGS.losses)):
    names = [f'fed_{loss}_s{s}' for s in seeds]
    curves = [run_records.read_curve(FLAGS.runs_dir, name, 'validation/recall_at_10',
                                results.records[name]) for name in names]
    curves = [c.set_index('round')['validation/recall_at_10'] for c in curves if c is not None]
    if not curves:
      continue
    frame = 100 * np.vstack([c.to_numpy() for c in curves])
    rounds = curves[0].index.to_numpy()
    ax.plot(rounds, frame.mean(axis=0), color=f'C{i}', marker='.', label=f'federated {label}')
    ax.fill_between(rounds, frame.min(axis=0), frame.max(axis=0), color=f'C{i}', alpha=0.2)
    central = _values(results.central.get('by_user', {}).get(loss, []),
                      'validation/recall_at_10')
    if central:
      ax.axhline(100 * np.mean(central), color=f'C{i}', linestyle='--', linewidth=1,
                 label=f'centralized {label} (by user, final)')
  plots.save(fig, ax, path, xlabel='round', ylabel='validation recall@10 (%)',
             title='Federated vs centralized dual encoder (mean, band: seeds)',
             legend_columns=2)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  if FLAGS.probes and ('batch_softmax' not in FLAGS.losses or 'by_user' not in FLAGS.splits):
    raise app.UsageError('--probes compare against plain batch softmax: add batch_softmax '
                         'to --losses and by_user to --splits, or pass --probes=')
  seeds = [int(s) for s in FLAGS.seeds]
  FLAGS.task = 'next_item'
  config = common.task_config()
  # What the tables show of the data is derived once into this table's records
  # (cells/derived.json), so that it rebuilds without the data: the task is
  # built only for a value not derived yet.
  task = functools.cache(lambda: next_item.Task(config))
  derived = functools.partial(run_records.derived, _records(FLAGS.results_dir))
  clients = derived('train_clients', lambda: len(task().train_client_ids))
  vocab_size = derived('vocab_size', lambda: task().vocab_size)

  def by_user(part: str) -> dict[str, float]:
    return derived(f'popularity_by_user_{part}', lambda: task().objective.popularity(
        task().split.pooled('train'), task().split.pooled(part)))

  def by_example(seed: int) -> dict[str, float]:
    split = next_item.Task(dataclasses.replace(  # the by-example split of that seed
        config, seed=seed, centralized_split='by_example')).centralized_split()
    return task().objective.popularity(split.train, split.test)

  results = run_all(clients, seeds)
  # Popularity per seed, each seed's against the row's run of that seed: by user,
  # every seed has the same split, so the floor is exact (one value repeated) and
  # only the row's spread decides; by example, each seed splits anew.
  popularity = {'by_user': [by_user('test')] * len(seeds)}
  if 'by_example' in FLAGS.splits:
    popularity['by_example'] = [derived(f'popularity_by_example_s{s}',
                                        functools.partial(by_example, s)) for s in seeds]
  out = pathlib.Path(FLAGS.results_dir)
  out.mkdir(parents=True, exist_ok=True)
  plot(out / 'recall_at_10.png', results, seeds, by_user('validation')['recall_at_10'])
  client, server = LEARNING_RATES[FLAGS.learning_rates]
  sections = []
  if FLAGS.rate_check:
    sections.append(f"""Learning rates ({FLAGS.learning_rates}): validation R@10 after {FLAGS.rounds} rounds at
this cohort, seed 0, with the official run's rates and with ours (the README
says which was chosen and why); popularity's validation R@10 beside them (one
seed: no spread to mark a row against it).

{rates_table(results, by_user('validation')['recall_at_10'])}""")
  if 'by_user' in FLAGS.splits:
    sections.append(f"""## {SPLITS['by_user']}

{drop_table(results, 'by_user', popularity)}""")
  if 'by_example' in FLAGS.splits:
    sections.append(f"""## {SPLITS['by_example']}

C is scored on a different test set from F here, each seed's own split, so
C's popularity is that split's, per seed (F's is the like-for-like one).

{drop_table(results, 'by_example', popularity)}""")
  sections.append('Paper (MovieLens 1M): drop at R@10 27.22% (BS), 18.37% (BS+S), '
                  '6.46% (H+S),\n0.53% (GS).')
  if FLAGS.probes:
    sections.append(f"""## Why centralized batch softmax sits at popularity: its sampling bias

Batch softmax (no spreadout) on the like-for-like split, with tfrs's
corrections; "vs plain" against the same kind (centralized or federated) of
plain BS.

{probe_table(results, popularity['by_user'])}""")
  sections.append('![validation recall@10 by round](recall_at_10.png)')
  remainder = 'dropped, as in the official code' if config.drop_remainder else 'kept'
  text = f"""# Federated dual encoder on {pathlib.Path(config.data_dir).name}: Table 2 of Ning et al.

Built by `python -m launch.reproduce_dual_encoder` from the cell records in
`cells/`. Global recall@k (%) of the label among all {vocab_size} items,
mean ± std over seeds {seeds} (each draws the model, cohorts and shuffles).
C: centralized, F: federated (FedAvg). Drop = (C - F) / C at R@10, per seed.
"F vs C": {seed_stats.RULE_TEXT} (in points of R@10); "vs
popularity" holds a row against popularity the same way. Popularity ranks items by how
often they are a training label; on the like-for-like split it is exact (the same
split for every seed: ± 0.00), so only the row's spread decides.

Settings: {config.data_dir}, batch {config.batch_size} (a client's last partial batch
{remainder}), embedding dim {config.embedding_dim}, at most
{config.examples.max_examples_per_user} examples per user, spreadout weight
{config.spreadout_weight}. Federated: {FLAGS.rounds} rounds of {_cohort(clients)} clients
({FLAGS.cohort_share:.0%} of {clients} training users; the paper's share
is 2%), 1 local epoch, client SGD {client:g}, server Adam {server:g}. Centralized:
{FLAGS.epochs} epochs, Adam {FLAGS.centralized_learning_rate:g}.

""" + '\n\n'.join(sections) + '\n'
  files.write_text(out / 'table.md', text)
  print(text)

