r"""Reproduces the shape of MetaUA's Tables 2, 3 and 4 on MovieLens CTR (AUC, logloss).

  python -m launch.reproduce_metaua --rounds=200 --runs_dir=runs/metaua \
      --results_dir=results/metaua_movielens
  python -m launch.reproduce_metaua --dataset=beauty   # Table 2's paper rows on Beauty

On Amazon Beauty, the clicks are DIN's Amazon form of its interactions (as
reproduce_fedsubavg's; one file per seed under --runs_dir/data), the model
DCNv2 over user, item and history, and only Table 2's paper rows run, with
0.25% of the clients a round.

The paper's setting on MovieLens (ctr): DCNv2 with embeddings of 4,
each user's last 10% of ratings held out, client SGD 0.01 on batches of 15
for 3 local epochs, 10% of the clients a round, 200 rounds; MetaUA with the
local loss as the attribute, meta SGD 2.0, FedAdagrad at the server. Cells:
* Table 2: FedAvg, FedAdagrad (clients weighted by their examples, as the
  paper) and the paper's MetaUA (eq. 1), then, labelled below them, MetaUA
  with other meta-loss scales, FedAvg and FedAdagrad with clients weighted
  equally (the task's default), FedAdam and FedNova, at rounds 20 / 50 / 100 /
  150 / 200, over --seeds (mean ± std).
* Table 4: the ablation, MetaUA with no adjustment, client weighting only,
  server learning rate only, both, over --seeds; and no adjustment without a
  query set, which is FedAdagrad run through MetaUA's driver (a check against
  Table 2's FedAdagrad, shown beside it).
* Table 3: the attributes z1..z6 one at a time, and all together, over --seeds.
* The meta loss's scale: the paper's sum over all query examples against
  each client's mean summed and the mean over all.
* Why FedAvg hardly learns: a centralized DCN on the same split (the
  ceiling), FedAvg at larger client learning rates and with a larger
  embedding initialisation (seed 0).
* Choices on validation (seed 0, 100 rounds, each user's last 10% of
  training ratings held out): each of Table 2's paper rows and equal-weight
  baselines gets its client learning rate from a sweep (experiments.rate_sweep),
  and the ablation's and attributes' meta loss is the form with the lowest
  validation logloss. Nothing is chosen on test. The ablation and attribute
  tables run that form at its own validated client rate, and at the paper's.
* Table 2 again at each row's client rate chosen on validation (the
  investigation's fix: FedAvg learns at larger rates), servers unchanged,
  over --seeds; then the paper's rows' server rates swept at those client
  rates (equal tuning: MetaUA learns its server step), each row over --seeds
  at both rates chosen.
* Figure 4: the paper's MetaUA and FedAdagrad with 5% and 1% of the clients a
  round, over --seeds (10% is Table 2).
* Figure 5: the paper's MetaUA at other meta learning rates, over --seeds (2.0
  is Table 2).
Each cell is a launch.train run under --runs_dir (resumable); finished cells
are recorded in --results_dir/cells and not run again. Seed 0's cells are
named NAME, other seeds' NAME_sS. Every table but the investigation's (seed
0) shows mean ± std over the seeds that ran, with their count; Table 2's
cells run first, then the ablation's, then the attributes'. Writes table.md,
curves.png, fractions.png and meta_rates.png to --results_dir.
"""

import functools
import pathlib

from absl import flags

import numpy as np
import pandas as pd

from experiments import clicks
from experiments import files
from experiments import plots
from experiments import rate_sweep
from experiments import run_records
from experiments import seed_stats
from experiments import server_rates
from experiments.papers import cell_records
from launch import common
from tasks import ctr
from tff_rec.algorithms import metaua

flags.DEFINE_enum('dataset', 'movielens', ['movielens', 'beauty'], 'MovieLens-100K (every '
                  "table), or Amazon Beauty's interactions as DIN's clicks (Table 2's paper "
                  'rows).')
flags.DEFINE_string('sequences', '../shared/data/amazon-beauty/Beauty.txt',
                    'Beauty: the sequence file (`uid item item ...` lines) clicks come from.')
flags.DEFINE_string('runs_dir', None, "Where the individual runs go (default: the dataset's).")
flags.DEFINE_string('results_dir', None, "Where the results go (default: the dataset's).")
flags.DEFINE_integer('rounds', 200, 'Federated rounds.', lower_bound=1)
flags.DEFINE_integer('eval_every', 10, 'Evaluation period (the table reads rounds 20, 50, '
                     '100, 150 and 200 of it).', lower_bound=1)
flags.DEFINE_float('client_fraction', None, "Share of the clients in each round (default: "
                   "the dataset's, MovieLens 10%, Beauty 0.25%).", lower_bound=0, upper_bound=1)
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds of every table but the investigation '
                  '(seed 0).')
flags.DEFINE_list('only', None, 'Run only these cells (names or patterns), then tabulate '
                  'what exists (--only=none: tabulate only).')
FLAGS = flags.FLAGS

TABLE_ROUNDS = (20, 50, 100, 150, 200)
AUC, LOGLOSS = 'eval/test_auc', 'eval/test_logloss'
TASK_ARGS = ('--model=dcn', '--embedding_dim=4', '--batch_size=15', '--local_epochs=3',
             '--split=chronological', '--client_learning_rate=0.01')
METHODS = {'fedavg_examples': 'FedAvg', 'fedadagrad_examples': 'FedAdagrad',
           'metaua': 'MetaUA (the paper: eq. 1)',
           'metaua_client_mean': 'variant: MetaUA, client-mean meta loss',
           'metaua_mean': 'variant: MetaUA, mean meta loss',
           'fedavg': 'deviation: FedAvg, clients weighted equally',
           'fedadagrad': 'deviation: FedAdagrad, clients weighted equally',
           'fedadam': 'extra baseline: FedAdam, clients weighted equally',
           'fednova': 'extra baseline: FedNova'}
# The paper's FedAvg, FedAdagrad and FedAdam weigh client k by n_k / n (as
# MetaUA does with client weighting off); ctr weighs clients equally
# unless told, after FedSubAvg's paper.
PAPER_WEIGHTS = ('--heat=examples',)
# Adaptive servers as Reddi et al. and the paper write them: accumulators from ~0.
SERVER_ARGS = {'fedadagrad': ('--server_adaptivity=1e-3',),
               'fedadam': ('--server_adaptivity=1e-3',)}
META_LOSS = {'metaua': 'sum (eq. 1)', 'metaua_client_mean': 'client means, summed',
             'metaua_mean': 'mean over all query examples'}
# The ablation and attribute tables run with the meta loss chosen on validation
# (_meta_loss), their full MetaUA being Table 2's cell of that form; their other
# cells are named by the form. The client-mean form's tables, its choice made on
# test before, are kept below them.
EARLIER_META_LOSS = 'metaua_client_mean'
NO_ADJUSTMENT = ('--noclient_weighting', '--noserver_lr_scaling')
# Neither part learned, so no meta loss: one pair of cells whatever the form.
NO_ADJUSTMENT_CELLS = {
    'metaua_none': ('no adjustment', NO_ADJUSTMENT),
    # A check of the driver: with no query set this is FedAdagrad on all the data.
    'metaua_none_no_query': ('check: no adjustment, no query set (FedAdagrad)',
                             (*NO_ADJUSTMENT, '--query_fraction=0'))}


def _meta_loss_args(full: str) -> tuple[str, ...]:
  """The --meta_loss of Table 2's MetaUA cell `full` (of META_LOSS)."""
  return () if full == 'metaua' else (f'--meta_loss={full.removeprefix("metaua_")}',)


def _form(full: str) -> str:
  return full.removeprefix('metaua_') if full != 'metaua' else 'sum'


def _ablation(full: str, rate: float | None = None) -> dict[str, tuple[str, tuple[str, ...]]]:
  """Table 4's cells with the meta loss of Table 2's MetaUA cell `full`, at client
  SGD `rate` (None: the paper's): the check against Table 2's FedAdagrad only at
  the paper's rate, where that FedAdagrad ran."""
  loss = _meta_loss_args(full)
  no_adjustment = dict(NO_ADJUSTMENT_CELLS)
  if rate not in (None, PAPER_CLIENT_RATE):
    del no_adjustment['metaua_none_no_query']
  return {**no_adjustment,
          f'metaua_weighting_{_form(full)}': ('client weighting',
                                              ('--noserver_lr_scaling', *loss)),
          f'metaua_server_lr_{_form(full)}': ('server lr', ('--noclient_weighting', *loss)),
          full: ('client weighting + server lr', loss)}


# Why FedAvg hardly learns (seed 0): name -> (label, launcher, args beyond TASK_ARGS').
CENTRAL_ARGS = ('--split=chronological', '--model=dcn', '--embedding_dim=4', '--eval_every=1')
INVESTIGATION = {
    'ceiling_central_sgd': ('centralized DCN, SGD 0.01, batch 15, 5 epochs', 'launch.centralized',
                            ('--batch_size=15', '--optimizer=sgd', '--learning_rate=0.01',
                             '--epochs=5')),
    'ceiling_central_adam': ('centralized DCN, Adam 0.001, batch 15, 5 epochs',
                             'launch.centralized', ('--batch_size=15', '--optimizer=adam',
                                                    '--learning_rate=0.001', '--epochs=5')),
    'fedavg': ('FedAvg (client SGD 0.01, embeddings init std 0.01)', 'launch.train', ()),
    'fedavg_clr0.1': ('FedAvg, client SGD 0.1', 'launch.train', ('--client_learning_rate=0.1',)),
    'fedavg_clr0.3': ('FedAvg, client SGD 0.3', 'launch.train', ('--client_learning_rate=0.3',)),
    'fedavg_init0.1': ('FedAvg, embeddings init std 0.1', 'launch.train',
                       ('--embedding_stddev=0.1',)),
}


# Choices are read on validation, never on test: each user's last 10% of training
# ratings held out by the test part's rule, seed 0, SWEEP_ROUNDS rounds, scored by
# the mean of the last LAST_K evaluations (a single evaluation swings).
VALIDATION_ARGS = ('--validation_fraction=0.1',)
VALIDATION_AUC, VALIDATION_LOGLOSS = 'eval/validation_auc', 'eval/validation_logloss'
SWEEP_ROUNDS = 100
LAST_K = 5  # evaluations averaged by the sweeps and the investigation table
# Table 2's paper rows, and its baselines with clients weighted equally, again at
# each one's client learning rate chosen on validation (cell NAME_clrR): a grid
# from the paper's 0.01 up, extended past an edge by rate_sweep.
FIXED_ROWS = ('fedavg_examples', 'fedadagrad_examples', 'metaua', 'metaua_mean', 'fedavg',
              'fedadagrad')
CLIENT_RATES = (0.01, 0.03, 0.1, 0.3)
PAPER_CLIENT_RATE = 0.01
MAX_EXTENSIONS = 3  # rates a sweep may add past its grid's edges: each one a run


# Equal tuning (experiments.server_rates): MetaUA learns its server step, so Table
# 2's paper rows, each at its client rate chosen above, sweep their server rate too
# on the same validation: FedAvg's SGD, FedAdagrad's Adagrad and the Adagrad rate
# MetaUA's learned scale multiplies. Its meta rate stays the paper's (Figure 5).
PAPER_ROWS = ('fedavg_examples', 'fedadagrad_examples', 'metaua')  # Table 2's


def _fixed(name: str, rate: float) -> str:
  """Table 2's cell `name` at client rate `rate` (the paper's rate: Table 2's own)."""
  return name if rate == PAPER_CLIENT_RATE else f'{name}_clr{rate:g}'


def _client_rate_args(rate: float) -> tuple[str, ...]:
  return () if rate == PAPER_CLIENT_RATE else (f'--client_learning_rate={rate:g}',)


def _sweep_cell(name: str, rate: float) -> str:
  return f'sweep_{name}_clr{rate:g}'


# Figure 4 runs Table 2's paper MetaUA and FedAdagrad with fewer clients a
# round (cell NAME_fracF); Figure 5 the paper's MetaUA at other meta SGD rates.
FRACTION_ROWS = ('fedadagrad_examples', 'metaua')
FRACTIONS = (0.05, 0.01)
META_RATES = (0.1, 0.5, 1.0, 4.0)
PAPER_META_RATE = 2.0  # metaua's default: Table 2's cells run at it


def _cohort(fraction: float) -> int:
  """Clients a round at `fraction` of the training clients."""
  clients = _derived('s0 training clients', lambda: len(_task(0).train_client_ids))
  return max(1, round(fraction * clients))


def _fraction(name: str, fraction: float) -> str:
  return f'{name}_frac{fraction:g}'


def _meta_rate(rate: float) -> str:
  return f'metaua_meta_lr{rate:g}'


def _attributes(full: str) -> dict[str, tuple[str, tuple[str, ...]]]:
  """Table 3's cells with the meta loss of Table 2's MetaUA cell `full`: each
  attribute alone (the default, the local loss, is `full` itself), then all."""
  loss, form = _meta_loss_args(full), _form(full)
  cells = {full if attribute == 'local_loss' else f'metaua_z{k}_{attribute}_{form}':
           (f'z{k} {attribute}',
            loss if attribute == 'local_loss' else (f'--attributes={attribute}', *loss))
           for k, attribute in enumerate(metaua.ATTRIBUTES, 1)}
  cells[f'metaua_all_{form}'] = ('all', (f'--attributes={",".join(metaua.ATTRIBUTES)}', *loss))
  return cells


PAPER = {  # ML-1M: Table 2 (rounds 20..200), Table 4 (50..400); Table 3: Amazon-CDs
    'table2': 'FedAvg AUC 0.648 / 0.673 / 0.811 / 0.811 / 0.812, logloss 0.594 / 0.592 / '
              '0.492 / 0.490 / 0.490; FedAdagrad AUC 0.809 / 0.842 / 0.864 / 0.870 / 0.874, '
              'logloss 0.533 / 0.499 / 0.465 / 0.452 / 0.450; MetaUA AUC 0.814 / 0.850 / '
              '0.867 / 0.875 / 0.880, logloss 0.500 / 0.432 / 0.413 / 0.403 / 0.393',
    'table4': 'logloss at 200: no adjustment 0.436, client weighting 0.417, server lr 0.415, '
              'both 0.393',
    'table3': 'logloss at 200: no adjustment 0.269, z1 0.241, z2 0.206, z3 0.498, z4 0.335, '
              'z5 0.275, z6 0.239, all 0.649',
}


# Each dataset: its folders and share of the clients a round. On Beauty's 22,363
# users, even the paper's smallest share (1%, Figure 4: 224 clients) takes about
# 10 s a round here; 0.25% (56 clients) is about FedSubAvg's K = 50.
DATASETS = {
    'movielens': dict(runs_dir='runs/metaua', results_dir='results/metaua_movielens',
                      client_fraction=0.1),
    'beauty': dict(runs_dir='runs/metaua_beauty', results_dir='results/metaua_amazon_beauty',
                   client_fraction=0.0025),
}
BEAUTY_PROBES = ('metaua_none', 'metaua_none_no_query')  # Table 4's first rows


def _data(seed: int, make: bool = True) -> dict:
  """The task's data settings for one seed's cells (Beauty: that seed's clicks,
  made only with `make`: clicks.clicks_task)."""
  if FLAGS.dataset != 'beauty':
    return {}
  return clicks.clicks_task(FLAGS.sequences, FLAGS.runs_dir, seed, make=make)


@functools.cache  # a seed's derived values share its task
def _task(seed: int) -> ctr.Task:
  return ctr.Task(ctr.make_config(
      model='dcn', embedding_dim=4, seed=seed, **_data(seed)))


def _records() -> str:
  return str(pathlib.Path(FLAGS.results_dir) / 'cells')


def _derived(key: str, compute):
  """A value the tables show that comes from the data: computed (by building a
  task) only when the records lack it, so the tables rebuild without the data."""
  return run_records.derived(_records(), key, compute)


def _describe() -> str:
  return _derived('s0 description', lambda: _task(0).describe())


def _item_baselines(seed: int, item: str) -> list[float]:
  """The test AUC of the item floors (popularity, click rate) on one seed's data."""
  return _derived(f's{seed} item baselines', lambda: _task(seed).objective.item_baselines(item))


def _seeded(name: str, seed: int) -> str:
  return name if seed == 0 else f'{name}_s{seed}'


def _cell(name: str, algorithm: str, clients: int, *args: str, seed: int = 0,
          rounds: int | None = None) -> dict | str:
  cell = _seeded(name, seed)
  wanted = cell_records.wanted(cell, FLAGS.only)
  return cell_records.run_cell(
      FLAGS.runs_dir, cell, 'launch.train', *TASK_ARGS, *common.flag_args(_data(seed, wanted)),
      f'--algorithm={algorithm}',
      f'--rounds={rounds or FLAGS.rounds}', f'--eval_every={FLAGS.eval_every}',
      f'--clients_per_round={clients}', *args, f'--seed={seed}', wanted=wanted,
      records_dir=_records())


def _validation_score(cell: str, metric: str) -> float | None:
  return run_records.mean_of_last(FLAGS.runs_dir, cell, metric, LAST_K, _records())


def _sweep(name: str, clients: int, table2: dict, rate: float) -> str:
  """Runs (or finds) one validation cell of Table 2's row `name`; its name."""
  algorithm, args = table2[name]
  cell = _sweep_cell(name, rate)
  _cell(cell, algorithm, clients, *args, *VALIDATION_ARGS, *_client_rate_args(rate),
        rounds=SWEEP_ROUNDS)
  return cell


def _server_rate(name: str, clients: int, table2: dict, client_rate: float
                 ) -> tuple[dict[float, float | None], float | None]:
  """Row `name`'s server rate sweep at its chosen client rate, on validation AUC."""
  algorithm, args = table2[name]
  default = server_rates.default(ctr.Task, algorithm)

  def score(server_rate: float) -> float | None:
    cell = _sweep_cell(name, client_rate) + server_rates.suffix(server_rate, default)
    _cell(cell, algorithm, clients, *args, *VALIDATION_ARGS, *_client_rate_args(client_rate),
          *server_rates.flags(server_rate, default), rounds=SWEEP_ROUNDS)
    return _validation_score(cell, VALIDATION_AUC)

  return rate_sweep.sweep(server_rates.grid(default), score, lower_is_better=False,
                          max_extensions=MAX_EXTENSIONS)


def _client_rate(name: str, clients: int, table2: dict
                 ) -> tuple[dict[float, float | None], float | None]:
  """Row `name`'s client rate sweep on validation AUC (rate_sweep's scores and
  best rate; None until the sweep is complete)."""
  return rate_sweep.sweep(
      CLIENT_RATES,
      lambda rate: _validation_score(_sweep(name, clients, table2, rate), VALIDATION_AUC),
      lower_is_better=False, max_extensions=MAX_EXTENSIONS)


def _meta_loss(clients: int, table2: dict) -> tuple[dict[str, float | None], str | None]:
  """Each meta-loss form's validation logloss (the metric of the paper's Tables 3
  and 4) at the paper's settings, and the best form (None until all have run)."""
  scores = {name: _validation_score(_sweep(name, clients, table2, PAPER_CLIENT_RATE),
                                    VALIDATION_LOGLOSS) for name in META_LOSS}
  if None in scores.values():
    return scores, None
  finite = {n: v for n, v in scores.items() if np.isfinite(v)}
  return scores, min(finite, key=finite.get) if finite else None


def _investigate(clients: int) -> None:
  for name, (_, module, args) in INVESTIGATION.items():
    if module == 'launch.train':
      _cell(name, 'fedavg', clients, *args)
    else:
      cell_records.run_cell(FLAGS.runs_dir, name, module, *CENTRAL_ARGS, *args, '--seed=0',
                      wanted=cell_records.wanted(name, FLAGS.only), records_dir=_records())


def _curves(name: str, metric: str, seeds) -> dict[int, pd.DataFrame]:
  """The finished seeds' evaluations of `metric`, by seed (a diverged one's before
  it diverged)."""
  return {s: c for s in seeds
          if (c := run_records.read_curve(FLAGS.runs_dir, _seeded(name, s), metric, _records()))
          is not None}


def _held(curves: dict[int, pd.DataFrame], diverged: set[int], metric: str
          ) -> dict[int, pd.DataFrame]:
  """`curves` for a table: a seed of `diverged` holds its last evaluation at the
  table's later rounds (it counts, read before it diverged); one that diverged
  before any evaluation has none to hold."""
  held = {}
  for seed, curve in curves.items():
    if len(curve) and seed in diverged:
      later = [r for r in TABLE_ROUNDS if r > curve['round'].max()]
      curve = pd.concat([curve, pd.DataFrame({'round': later, metric: curve[metric].iloc[-1]})])
    held[seed] = curve
  return held


def _at_rounds(curves: list, metric: str) -> list[str]:
  """The metric at TABLE_ROUNDS: mean ± std over the curves that have it."""
  values = [dict(zip(c['round'], c[metric])) for c in curves]
  return [seed_stats.spread([v[r] for v in values if r in v]).replace(cell_records.NOT_RUN, '-')
          for r in TABLE_ROUNDS]


def _constant_logloss(part: str, seed: int = 0) -> float:
  """Test logloss of predicting every click with `part`'s click rate on `seed`'s
  data (the test's own rate is the best constant, which no model could know)."""
  def compute() -> float:
    examples = _task(seed).examples
    test = examples.labels[examples.rows('test')] > 0
    rate = float(np.mean(examples.labels[examples.rows(part)] > 0))
    return float(-np.mean(np.where(test, np.log(rate), np.log(1 - rate))))
  return _derived(f's{seed} constant logloss at the {part} click rate', compute)


def _logloss_floor(seeds) -> list[float]:
  """The constant at the training click rate's test logloss on each of `seeds`'
  data (MovieLens' split has no seed: seed 0's, once per seed)."""
  return [_constant_logloss('train', s if FLAGS.dataset == 'beauty' else 0) for s in seeds]


def _item_floors(seeds) -> list[list[float]]:
  """Popularity's and click rate's test AUC on each of `seeds`' data. MovieLens'
  split has no seed: seed 0's values once per seed, so that a floor held exact
  leaves only the row's spread to the rule."""
  item, data = ('item', list(seeds)) if FLAGS.dataset == 'beauty' else ('movie', [0] * len(seeds))
  return [list(f) for f in zip(*(_item_baselines(s, item) for s in data))] or [[], []]


def _against_floors(finals: dict[int, float]) -> list[str]:
  """A row's test AUC by seed against each item floor on the same seeds' data
  (seed_stats.against_floor): no floor is picked, since picking the stronger one
  would read test AUC to make a choice."""
  if not finals:
    return ['-', '-']
  return [seed_stats.against_floor(list(finals.values()), floor)
          for floor in _item_floors(finals)]


def _floors(seeds, read: str) -> str:
  """A table's caption: both floors on its seeds' data, and how its mark column
  (`read`: which AUC of a row it judges) reads."""
  popularity, click_rate = _item_floors(seeds)
  if FLAGS.dataset == 'beauty':
    popularity, click_rate = seed_stats.spread(popularity), seed_stats.spread(click_rate)
    held = "mean ± std over the seeds' clicks; a row is judged on the seeds it ran"
  else:
    popularity, click_rate = f'{popularity[0]:.3f}', f'{click_rate[0]:.3f}'
    held = 'one split for every seed, so held exact'
  return (f'Floors, no model (test AUC, {held}): popularity (the item\'s training clicks) '
          f'{popularity}; the item\'s training click rate (add-one smoothed) {click_rate}. '
          f'Last two columns: the row\'s {read} against each of them, above or below where '
          f'{seed_stats.RULE_TEXT[2:]}.')


def _investigation_table() -> list[str]:
  """Each investigation cell's last test AUC / logloss and their means over the last
  LAST_K evaluations (not the best evaluation: that would pick a round on test),
  seed 0."""
  lines = [f'| cell | AUC, mean of the last {LAST_K} | logloss, mean of the last {LAST_K} | '
           'last AUC | last logloss | last AUC against popularity | against click rate |',
           '|---|---|---|---|---|---|---|']
  for name, (label, _, _) in INVESTIGATION.items():
    step = {}
    for metric in (AUC, LOGLOSS):
      rows = run_records.read_curve(FLAGS.runs_dir, name, metric, _records())
      step[metric] = rows[metric].to_numpy() if rows is not None else None
    if step[AUC] is None:
      lines.append(f'| {label} | - | - | - | - | - | - |')
      continue
    lines.append(f'| {label} | {step[AUC][-LAST_K:].mean():.3f} | '
                 f'{step[LOGLOSS][-LAST_K:].mean():.3f} | '
                 f'{step[AUC][-1]:.3f} | {step[LOGLOSS][-1]:.3f} | '
                 + ' | '.join(_against_floors({0: step[AUC][-1]})) + ' |')
  return [*lines, '', _floors((0,), 'last AUC')]


def _scored(score: float | None, chosen: bool) -> str:
  text = '-' if score is None else 'diverged' if np.isnan(score) else f'{score:.3f}'
  return f'**{text}**' if chosen else text


def _choices_table(sweeps: dict, meta_losses: tuple) -> list[str]:
  """Each client rate sweep and the meta-loss comparison, the choices in bold."""
  lines = [f'| Table 2 row | client SGD tried | validation AUC, mean of the last {LAST_K} '
           'evaluations, by rate |', '|---|---|---|']
  for name, (scores, chosen) in sweeps.items():
    lines.append(f'| {METHODS[name]} | {rate_sweep.describe(scores, chosen)} | ' + ' / '.join(
        _scored(scores[r], r == chosen) for r in sorted(scores)) + ' |')
  scores, chosen = meta_losses
  lines += ['', f'| meta loss (client SGD {PAPER_CLIENT_RATE:g}) | validation logloss, mean of '
            f'the last {LAST_K} | validation AUC, mean of the last {LAST_K} |', '|---|---|---|']
  for name, form in META_LOSS.items():
    auc = _validation_score(_sweep_cell(name, PAPER_CLIENT_RATE), VALIDATION_AUC)
    lines.append(f'| {form} | {_scored(scores[name], name == chosen)} | {_scored(auc, False)} |')
  return lines


def _equal_tuning(sweeps: dict, servers: dict, defaults: dict, seeds) -> list[str]:
  """The server rate sweeps, then Table 2's paper rows at both rates chosen."""
  lines = [f'## Table 2 at the client and server rates chosen on validation (equal tuning; '
           f'mean ± std over the seeds of {seeds} that ran)', '',
           'MetaUA learns its server step, so each of the paper\'s rows, at its client rate '
           'chosen above, sweeps its server learning rate too (the same grid size for each: '
           'three rates around its default, extended past a winning edge; seed 0, '
           f'{SWEEP_ROUNDS} rounds, the mean of the last {LAST_K} validation AUCs). '
           "MetaUA's is the Adagrad rate its learned scale multiplies; its meta SGD stays "
           'the paper\'s 2.0 (Figure 5 varies it).', '',
           '| Table 2 row | server rates tried | validation AUC by rate |', '|---|---|---|']
  chosen = {}
  for name, (scores, server_rate) in servers.items():
    lines.append(f'| {METHODS[name]}, client SGD {sweeps[name][1]:g} | '
                 f'{rate_sweep.describe(scores, server_rate)} | ' + ' / '.join(
                     _scored(scores[r], r == server_rate) for r in sorted(scores)) + ' |')
    if server_rate is not None:
      cell = _fixed(name, sweeps[name][1]) + server_rates.suffix(server_rate, defaults[name])
      chosen[cell] = (
          f'{METHODS[name]}, client SGD {sweeps[name][1]:g}, server {server_rate:g}')
  return [*lines, '', *(_table(chosen, seeds) if chosen else ['(the sweeps have not run)']),
          '']


def _ablation_runs(chosen: str | None, sweeps: dict) -> list[tuple[str, float]]:
  """(Table 2's MetaUA cell, client rate) of each ablation and attribute table: the
  meta loss chosen on validation at its own client rate chosen on validation, then
  at the paper's rate, then the earlier form (chosen on test before) at the paper's."""
  runs = []
  if chosen:
    own_rate = sweeps.get(chosen, (None, None))[1]
    if own_rate not in (None, PAPER_CLIENT_RATE):
      runs.append((chosen, own_rate))
  return runs + [(full, PAPER_CLIENT_RATE)
                 for full in dict.fromkeys(f for f in (chosen, EARLIER_META_LOSS) if f)]


def _ablation_tables(full: str, rate: float, chosen: str | None, seeds, sweeps: dict
                     ) -> list[str]:
  """Tables 4 and 3 with the meta loss of Table 2's MetaUA cell `full` at client
  SGD `rate`, against FedAdagrad (n_k weights) at the rate its own sweep chose for
  the table at a swept rate, else Table 2's."""
  how = ('chosen on validation' if full == chosen else
         'the earlier choice, made on test; not the form validation chooses')
  own_rate = sweeps.get(full, (None, None))[1]
  if rate != PAPER_CLIENT_RATE:
    about_rate = f'client SGD {rate:g}, chosen on validation by its own sweep above'
    reference_rate = sweeps['fedadagrad_examples'][1] or PAPER_CLIENT_RATE
  else:
    about_rate = f'client SGD {PAPER_CLIENT_RATE:g}, the paper\'s'
    if own_rate not in (None, PAPER_CLIENT_RATE):
      about_rate += f' (its own validation sweep above chooses {own_rate:g}: the tables above)'
    reference_rate = PAPER_CLIENT_RATE
  heading = (f'meta loss: {META_LOSS[full]}, {how}; {about_rate}; mean ± std over the seeds '
             'that ran')

  def at(cells):
    return {_fixed(name, rate): label for name, label in _labels(cells).items()}

  reference = {_fixed('fedadagrad_examples', reference_rate):
               f"reference: Table 2's FedAdagrad, client SGD {reference_rate:g}"}
  return [f'## Table 4: ablation ({heading})', '',
          *_table({**at(_ablation(full, rate)), **reference}, seeds),
          '', f'Paper (ML-1M): {PAPER["table4"]}.', '',
          f'## Table 3: client attributes ({heading})', '',
          *_table(at(_attributes(full)), seeds), '',
          f'Paper (Amazon-CDs, not ML-1M): {PAPER["table3"]}.', '']


def _labels(cells: dict[str, tuple[str, tuple[str, ...]]]) -> dict[str, str]:
  return {name: label for name, (label, _) in cells.items()}


def _table(cells: dict[str, str], seeds=(0,)) -> list[str]:
  """Each cell's AUC and logloss at TABLE_ROUNDS, its last AUC against each
  floor, and the floors as the caption."""
  header = ' | '.join(str(r) for r in TABLE_ROUNDS)
  last = f'AUC at {TABLE_ROUNDS[-1]}'
  lines = [f'| method | seeds | AUC at {header} | logloss at {header} | {last} against '
           'popularity | against click rate | logloss at '
           f'{TABLE_ROUNDS[-1]} against the constant |',
           '|---|---|' + '---|' * (2 * len(TABLE_ROUNDS) + 3)]
  constant = dict(zip(seeds, _logloss_floor(seeds)))
  for name, label in cells.items():
    diverged = {s for s in seeds
                if run_records.cell_diverged(FLAGS.runs_dir, _seeded(name, s), _records())}
    auc, logloss = (_held(_curves(name, m, seeds), diverged, m) for m in (AUC, LOGLOSS))
    final_logloss = _at_last_round(logloss, LOGLOSS)
    seeds_run = f'{len(auc)} ({len(diverged)} diverged)' if diverged else len(auc)
    lines.append(f'| {label} | {seeds_run} | ' + ' | '.join(
        _at_rounds(list(auc.values()), AUC)
        + _at_rounds(list(logloss.values()), LOGLOSS)
        + _against_floors(_at_last_round(auc, AUC))
        + [seed_stats.against_floor(list(final_logloss.values()),
                                    [constant[s] for s in final_logloss])
           if final_logloss else '-']) + ' |')
  return [*lines, '', _floors(seeds, last),
          '', f'The constant predictor at the training click rate scores test logloss '
          f'{seed_stats.spread(list(constant.values()))}; the last column holds each row\'s '
          f'logloss at {TABLE_ROUNDS[-1]} against it on the same seeds (a loss above it is '
          'worse).']


def _at_last_round(curves: dict, metric: str) -> dict[int, float]:
  """seed -> `metric` at the table's last round, for the seeds whose curve has it."""
  return {s: v for s, c in curves.items()
          if (v := dict(zip(c['round'], c[metric])).get(TABLE_ROUNDS[-1])) is not None}


def _plot(path: pathlib.Path, cells: dict[str, str], metric: str, seeds, title: str,
          dataset: str = 'MovieLens-100K CTR') -> None:
  """Each cell's `metric` by round, the mean over its finished seeds."""
  fig, ax = plots.figure()
  for name, label in cells.items():
    curves = [c.set_index('round')[metric] for c in _curves(name, metric, seeds).values()]
    if curves:
      mean = pd.concat(curves, axis=1).dropna().mean(axis=1)
      ax.plot(mean.index, mean, marker='.', label=f'{label} ({len(curves)} seeds)')
  plots.save(fig, ax, path, xlabel='round', ylabel=metric.removeprefix('eval/'),
             title=f'{dataset}, DCNv2: {title}')


# Beauty's second Table 2 runs every paper row at the client rate MovieLens'
# validation chooses for FedAvg and MetaUA (not tuned on Beauty: its cells cost
# 4-12 minutes each).
BEAUTY_CLIENT_RATE = 0.1


def _beauty(clients: int, seeds: list[int], table2: dict) -> str:
  """Table 2's paper rows on Beauty's clicks, at the paper's client rate and at
  BEAUTY_CLIENT_RATE; the table's text."""
  for rate in (PAPER_CLIENT_RATE, BEAUTY_CLIENT_RATE):
    for seed in seeds:
      for name in PAPER_ROWS:
        algorithm, args = table2[name]
        _cell(_fixed(name, rate), algorithm, clients, *args, *_client_rate_args(rate),
              seed=seed)
  for name in BEAUTY_PROBES:  # seed 0: does MetaUA's driver learn with both parts off?
    _cell(name, 'metaua', clients, *NO_ADJUSTMENT_CELLS[name][1])
  out = pathlib.Path(FLAGS.results_dir)
  out.mkdir(parents=True, exist_ok=True)
  rows = {name: METHODS[name] for name in PAPER_ROWS}
  _plot(out / 'curves.png', rows, AUC, seeds, 'test AUC by round', "Amazon Beauty (DIN's clicks)")
  return '\n'.join([
      "# MetaUA on Amazon Beauty (DIN's clicks): Table 2's paper rows (Liu et al.)", '',
      'Built by `python -m launch.reproduce_metaua --dataset=beauty` from the cell records in '
      "`cells/`; results/README.md has the reading.", '',
      f'{_describe()}. Clicks in DIN\'s Amazon form: each interaction a click, an item '
      'the user never had a sampled non-click, each user\'s last pair the test (one file per '
      f'seed). DCNv2 over user, item and history (embeddings of 4) as on MovieLens, '
      f'{clients} clients a round ({FLAGS.client_fraction:.2%}; the paper\'s 10% would be '
      f'{_cohort(0.1)} and its smallest share, 1%, {_cohort(0.01)}: too slow '
      f'here), {FLAGS.rounds} rounds, the MovieLens rows\' '
      'client, server and meta settings.', '',
      f'## Table 2 (mean ± std over the seeds of {seeds} that ran)', '',
      *_table(rows, seeds), '',
      f'## Table 2 at client SGD {BEAUTY_CLIENT_RATE:g} (mean ± std over the seeds of {seeds} '
      'that ran)', '',
      f'Every row at {BEAUTY_CLIENT_RATE:g}, the client rate MovieLens\' validation chooses '
      'for FedAvg and MetaUA (not tuned on Beauty).', '',
      *_table({_fixed(name, BEAUTY_CLIENT_RATE): label for name, label in rows.items()},
              seeds), '',
      '## Why MetaUA does not learn here: its driver with both parts off (seed 0)', '',
      *_table(_labels(NO_ADJUSTMENT_CELLS), seeds=(0,)), '',
      'A constant predictor scores test logloss 0.693 (the click rate is 0.5 by '
      'construction).', '',
      f'Paper (ML-1M): {PAPER["table2"]}.', '', '![test AUC by round](curves.png)', ''])


def _movielens(clients: int, seeds: list[int], table2: dict) -> str:
  """Every table on MovieLens; their text."""
  _investigate(clients)
  for seed in seeds:  # the headline cells first, a seed at a time
    for name, (algorithm, args) in table2.items():
      _cell(name, algorithm, clients, *args, seed=seed)
  sweeps = {name: _client_rate(name, clients, table2) for name in FIXED_ROWS}
  meta_losses = _meta_loss(clients, table2)
  for seed in seeds:
    for name, (_, rate) in sweeps.items():
      if rate is not None:
        algorithm, args = table2[name]
        _cell(_fixed(name, rate), algorithm, clients, *args, *_client_rate_args(rate),
              seed=seed)
  servers = {name: _server_rate(name, clients, table2, sweeps[name][1])
             for name in PAPER_ROWS if sweeps[name][1] is not None}
  defaults = {name: server_rates.default(ctr.Task, table2[name][0]) for name in servers}
  for seed in seeds:
    for name, (_, server_rate) in servers.items():
      if server_rate is not None:
        algorithm, args = table2[name]
        rate = sweeps[name][1]
        _cell(_fixed(name, rate) + server_rates.suffix(server_rate, defaults[name]), algorithm,
              clients, *args, *_client_rate_args(rate),
              *server_rates.flags(server_rate, defaults[name]), seed=seed)
  # The chosen form's ablation (its seeds first), then its attributes; the earlier
  # form's are recorded.
  ablations = _ablation_runs(meta_losses[1], sweeps)
  for full, rate in ablations:
    for cells in (_ablation(full, rate), _attributes(full)):
      for seed in seeds:
        for name, (_, args) in cells.items():
          _cell(_fixed(name, rate), 'metaua', clients, *args, *_client_rate_args(rate),
                seed=seed)
  for seed in seeds:
    for fraction in FRACTIONS:
      for name in FRACTION_ROWS:
        algorithm, args = table2[name]
        _cell(_fraction(name, fraction), algorithm, _cohort(fraction), *args, seed=seed)
    for rate in META_RATES:
      _cell(_meta_rate(rate), 'metaua', clients, f'--meta_lr={rate:g}', seed=seed)
  fraction_rows = {_fraction(name, fraction) if fraction != FLAGS.client_fraction else name:
                   f'{METHODS[name]}, {fraction:.0%} of the clients'
                   for fraction in (FLAGS.client_fraction, *FRACTIONS) for name in FRACTION_ROWS}
  rate_rows = {_meta_rate(rate) if rate != PAPER_META_RATE else 'metaua': f'meta SGD {rate:g}'
               for rate in sorted((*META_RATES, PAPER_META_RATE))}
  out = pathlib.Path(FLAGS.results_dir)
  out.mkdir(parents=True, exist_ok=True)
  _plot(out / 'curves.png', METHODS, LOGLOSS, seeds, 'test logloss by round')
  _plot(out / 'fractions.png', fraction_rows, AUC, seeds, 'test AUC by share of clients')
  _plot(out / 'meta_rates.png', rate_rows, LOGLOSS, seeds,
        "the paper's MetaUA's test logloss by meta SGD rate")
  return '\n'.join([
      '# MetaUA on MovieLens-100K CTR: Tables 2, 3 and 4 of Liu et al.', '',
      f'{_describe()}. DCNv2 (embeddings of 4), client SGD 0.01 on batches of 15 for 3 '
      f'local epochs, {clients} clients a round (10%), {FLAGS.rounds} rounds; test AUC and '
      'logloss of the global model on every user\'s last 10% of ratings. Servers: FedAvg '
      'SGD 1.0, FedAdagrad and MetaUA Adagrad 0.1, FedAdam Adam 0.01, both adaptive servers '
      'with tau = 1e-3 (their accumulators start near 0, as the paper writes FedAdagrad), '
      'FedNova SGD 1.0. Client weights n_k / n (the paper\'s FedAvg aggregation) unless a '
      'row says "clients weighted equally" (ctr\'s default, from FedSubAvg\'s '
      'paper). MetaUA: local loss as the attribute, meta SGD 2.0 on the summed '
      'query loss (eq. 1), 20% of each client\'s training examples as its query set (the '
      'others train), FedAdagrad at the server.', '',
      f'## Table 2 (mean ± std over the seeds of {seeds} that ran)', '',
      "The paper's three rows first; variants and extra baselines below, labelled.", '',
      *_table(METHODS, seeds), '',
      f'Paper (ML-1M): {PAPER["table2"]}.', '',
      '![test logloss by round](curves.png)', '',
      '## Why FedAvg hardly learns (seed 0)', '',
      'A centralized DCN on the same chronological split is the ceiling; the FedAvg rows '
      '(clients weighted equally) change one thing each. Centralized cells are read per '
      f'epoch, federated per evaluation (every {FLAGS.eval_every} rounds). Constant '
      f'predictors score test logloss {_constant_logloss("train"):.3f} at the '
      f'training click rate and {_constant_logloss("test"):.3f} at the test\'s own '
      '(the best constant).', '',
      *_investigation_table(), '',
      f'## Choices made on validation (seed 0, {SWEEP_ROUNDS} rounds)', '',
      'Each user\'s last 10% of training ratings held out by the test part\'s rule '
      '(`--validation_fraction=0.1`); the other 90% train. Each of Table 2\'s rows below '
      'gets its client learning rate from a grid that starts at the paper\'s '
      f'{PAPER_CLIENT_RATE:g} and is extended past an edge that wins (up to '
      f'{MAX_EXTENSIONS} rates, or until the next rate diverges); the meta loss of the '
      'ablation and attribute tables is the form with the lowest validation logloss (the '
      'metric of the paper\'s Tables 3 and 4). Scores: the mean of the last '
      f'{LAST_K} evaluations (every {FLAGS.eval_every} rounds), not one evaluation.', '',
      *_choices_table(sweeps, meta_losses), '',
      '## Table 2 at the client SGD chosen on validation (mean ± std over the seeds of '
      f'{seeds} that ran)', '',
      'The paper\'s three rows, then the baselines with clients weighted equally, each at '
      'its own client learning rate from its sweep above, trained on all the training '
      'ratings; the servers and MetaUA\'s meta SGD are as above, tuned by the paper for '
      '0.01.', '',
      *_table({_fixed(name, rate): f'{METHODS[name]}, client SGD {rate:g}'
               for name, (_, rate) in sweeps.items() if rate is not None}, seeds), '',
      *_equal_tuning(sweeps, servers, defaults, seeds),
      *[line for full, rate in ablations for line in _ablation_tables(
          full, rate, meta_losses[1], seeds, sweeps)],
      "## The meta loss's scale (mean ± std over the seeds that ran)", '',
      'How round t\'s query losses add up to the meta loss: the paper\'s eq. 1 sums over every '
      'query example of the cohort, so its gradient (and each meta step at a fixed meta '
      'learning rate) grows with the cohort and its query sets.', '',
      *_table(META_LOSS, seeds), '',
      '## Figure 4: fewer clients a round (mean ± std over the seeds that ran)', '',
      f'The paper\'s MetaUA and FedAdagrad (n_k weights) with {FLAGS.rounds} rounds of '
      + ', '.join(str(_cohort(f)) for f in (FLAGS.client_fraction, *FRACTIONS))
      + ' clients; the paper trains longer at the smaller shares. The summed meta loss '
      '(eq. 1) shrinks with the cohort, and so does each meta step.', '',
      *_table(fraction_rows, seeds), '', '![test AUC by share of clients](fractions.png)', '',
      "## Figure 5: the meta learning rate (mean ± std over the seeds that ran)", '',
      "The paper's MetaUA (eq. 1, the summed query loss) at several meta SGD rates; the "
      'paper uses 2.0 throughout and reports that rates above 1 end with almost the same '
      'logloss at round 200.', '',
      *_table(rate_rows, seeds), '', '![test logloss by meta rate](meta_rates.png)', ''])


def _main(argv):
  del argv
  dataset = DATASETS[FLAGS.dataset]
  FLAGS.runs_dir = FLAGS.runs_dir or dataset['runs_dir']
  FLAGS.results_dir = FLAGS.results_dir or dataset['results_dir']
  if FLAGS.client_fraction is None:
    FLAGS.client_fraction = dataset['client_fraction']
  FLAGS.task = 'ctr'
  clients = _cohort(FLAGS.client_fraction)
  seeds = [int(s) for s in FLAGS.seeds]
  table2 = {  # cell -> (algorithm, args)
      'fedavg_examples': ('fedavg', PAPER_WEIGHTS),
      'fedadagrad_examples': ('fedadagrad', (*SERVER_ARGS['fedadagrad'], *PAPER_WEIGHTS)),
      'metaua': ('metaua', ()),
      'fedavg': ('fedavg', ()), 'fedadagrad': ('fedadagrad', SERVER_ARGS['fedadagrad']),
      **{n: ('metaua', (f'--meta_loss={n.removeprefix("metaua_")}',))
         for n in META_LOSS if n != 'metaua'},
      'fedadam': ('fedadam', SERVER_ARGS['fedadam']), 'fednova': ('fednova', ())}
  tabulate = _beauty if FLAGS.dataset == 'beauty' else _movielens
  text = tabulate(clients, seeds, table2)
  files.write_text(pathlib.Path(FLAGS.results_dir) / 'table.md', text)
  print(text)



main = cell_records.checking_only(_main)  # an --only that names no cell is refused
