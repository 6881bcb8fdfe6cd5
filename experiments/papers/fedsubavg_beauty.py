r"""Reproduces the shape of FedSubAvg's Table 2 on Amazon Beauty: rounds to a target.

  python -m launch.reproduce_fedsubavg --dataset=beauty    # run what is missing, tabulate
  python -m launch.reproduce_fedsubavg --dataset=beauty --only=none   # from the records

MovieLens-100K's table is a study: experiments/papers/fedsubavg_movielens.toml.
On Amazon Beauty, DIN on clicks in DIN's own Amazon form
(tff_rec.data.sequence_clicks: each interaction a click, a sampled unseen item
a non-click, each user's last pair the test), one file per seed under
--runs_dir/data, so each seed draws its non-clicks too. Each method
(CentralSGD, FedAvg, FedProx, SCAFFOLD, FedAdam, FedAdagrad, FedSubAvg) first
runs --sweep_rounds at each learning rate of the grid, seed 0 (the paper
tunes every method); a grid whose best rate is at its edge is extended past
that edge (1, 3, 10, ...) until the best is inside it or the rate beyond
diverges (MAX_EXTENSIONS at most). The best (lowest train loss / best
validation AUC at the end) then runs --rounds for every seed, evaluated every
--eval_every rounds. DIN's validation part is each user's last 10% of the
training examples (the test part's rule): no rate, round or target is chosen
on test. K
clients per round, each I = LOCAL_STEPS batches of BATCH_SIZE; CentralSGD
takes I steps of K x BATCH_SIZE examples per round.

Targets, per seed:
* LR: the paper's rule, CentralSGD's lowest train loss within the same
  rounds. CentralSGD is still falling there, so the target (and every ratio
  against it) depends on the run's length: a converged CentralSGD
  (--converged_rounds, seed 0) is shown beside it.
* DIN: CentralSGD's best validation AUC within the same rounds, less
  --auc_margin (the paper fixes a test AUC of 0.6 on its data, about 0.05 below
  its CentralSGD); rounds to target are read on validation too.

Every run is a launch.train / launch.centralized cell under --runs_dir
(resumable) and, once finished, is recorded in --results_dir/cells; a
recorded cell is not run again. Each seed draws the model, the cohorts and
the batches. Writes table.md and one curve plot per setting.
"""

import functools
import pathlib

from absl import app
from absl import flags
import numpy as np

from experiments import clicks
from experiments import files
from experiments import rate_sweep
from experiments import run_records
from experiments import seed_stats
from experiments import server_rates
from experiments.papers import cell_records
from experiments.papers import fedsubavg_movielens
from launch import common
from tasks import ctr

flags.DEFINE_enum('dataset', 'beauty', ['beauty'], "Amazon Beauty's interactions as DIN's "
                  "clicks (MovieLens-100K's table is the study "
                  'experiments/papers/fedsubavg_movielens.toml).')
flags.DEFINE_string('sequences', '../shared/data/amazon-beauty/Beauty.txt',
                    'Beauty: the sequence file (`uid item item ...` lines) clicks come from.')
flags.DEFINE_string('runs_dir', None, "Where the individual runs go (default: the dataset's).")
flags.DEFINE_string('results_dir', None, "Where the results go (default: the dataset's).")
flags.DEFINE_list('settings', None, "Which rows: lr, din (default: the dataset's).")
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds of the final runs.')
flags.DEFINE_list('only', None, 'Run only the cells these names or patterns match (e.g. '
                  '"*_fedsubavg_*"), then tabulate what exists; none: run nothing. A final '
                  "run waits for its method's whole sweep.")
flags.DEFINE_integer('rounds', None, "Rounds of the final runs (default: the setting's, "
                     'lr 200, din 100).', lower_bound=1)
flags.DEFINE_integer('sweep_rounds', None, "Rounds of each learning-rate trial (default: "
                     "the setting's, lr 40, din 20).", lower_bound=1)
flags.DEFINE_integer('converged_rounds', None, "Rounds of the converged CentralSGD run "
                     "(default: the setting's, lr 3000, din 400).", lower_bound=1)
flags.DEFINE_integer('clients', 50, 'K: clients per round.', lower_bound=1)
flags.DEFINE_integer('eval_every', None, "Evaluation period of the final runs (default: the "
                     "dataset's, MovieLens 2, Beauty 10).", lower_bound=1)
flags.DEFINE_float('auc_margin', 0.02, "DIN target: CentralSGD's best validation AUC minus this.")

FLAGS = flags.FLAGS

METHODS = {'central': 'CentralSGD', 'fedavg': 'FedAvg', 'fedprox': 'FedProx',
           'scaffold': 'Scaffold', 'fedadam': 'FedAdam', 'fedadagrad': 'FedAdagrad',
           'fedsubavg': 'FedSubAvg',
           'fedsubavg_bounded': 'FedSubAvg, correction at most K'}
# What runs a method that is not an algorithm's name: FedSubAvg with its
# correction bounded by K (ours: the paper's N / n_m reaches about 450 on Beauty).
BOUNDED = ('--algorithm=fedsubavg', '--max_correction={clients}')
# Each setting: its task flags, the metric that decides, and the client (or
# central) learning rates tried.
SETTINGS = {
    'din': dict(task=dict(model='din', split='chronological', validation_fraction=0.1),
                metric='eval/validation_auc', lower_is_better=False, rates=(0.1, 0.3, 1.0),
                central_rates=(1.0, 3.0, 10.0),
                rounds=100, sweep_rounds=20, converged_rounds=400),
}
# Each dataset: its settings, and what they change of SETTINGS'.
DATASETS = {
    # The paper's Amazon DIN runs 200 rounds; Beauty's clients hold few examples, so
    # the sweep runs longer than MovieLens' to separate the rates. An evaluation
    # scores 352k examples: every 10 rounds keeps a run near 6 minutes.
    'beauty': dict(title="Amazon Beauty (DIN's clicks)", item='item', eval_every=10,
                   runs_dir='runs/fedsubavg_beauty',
                   results_dir='results/fedsubavg_amazon_beauty',
                   settings={'din': dict(task=dict(model='din'), rounds=200,
                                         sweep_rounds=40,
                                         # FedAvg, FedProx and FedAdagrad sat at chance
                                         # (validation AUC 0.499-0.501) at every rate up
                                         # to 1: a tie, so the grid goes on to 3
                                         rates=(0.1, 0.3, 1.0, 3.0))}),
}
PAPER = {'din': 'Amazon DIN: CentralSGD 20, FedAvg 200+, FedProx 200+, Scaffold 200+, '
                'FedAdam 16, FedSubAvg 53 rounds to test AUC 0.6'}
LOCAL_STEPS = 10
BATCH_SIZE = 16
# Rates a sweep may add beyond its grid's edges, in all: each one costs a run.
MAX_EXTENSIONS = 3
# Equal tuning (experiments.server_rates): FedSubAvg's correction rescales the
# server's step, so each federated method's server rate is swept too, at the client
# rate its own sweep chose, on the same short validation runs (SCAFFOLD does not run
# here; the bounded form keeps the paper's server).
SERVER_SWEPT = ('fedavg', 'fedprox', 'fedadam', 'fedadagrad', 'fedsubavg')

# What each final run reports at its last round, as the table's rows.
FINAL_METRICS = {'eval/train_loss': 'train loss', 'eval/validation_auc': 'validation AUC',
                 'eval/test_logloss': 'test logloss', 'eval/test_auc': 'test AUC'}


def _dataset() -> dict:
  return DATASETS[FLAGS.dataset]


def _spec(setting: str) -> dict:
  """The setting as the dataset runs it (its task settings on top of the setting's)."""
  changes = _dataset()['settings'][setting]
  return {**SETTINGS[setting], **changes,
          'task': {**SETTINGS[setting]['task'], **changes.get('task', {})}}


def _task_values(setting: str, seed: int, make: bool = True) -> dict:
  """The task's settings for one seed's cells (Beauty: that seed's clicks, made
  only with `make`: clicks.clicks_task)."""
  return {**_spec(setting)['task'],
          **(clicks.clicks_task(FLAGS.sequences, FLAGS.runs_dir, seed, make=make)
             if FLAGS.dataset == 'beauty' else {})}


def _run(setting: str, method: str, rate: float, rounds: int, eval_every: int,
         name: str, seed: int, server_flags: tuple[str, ...] = ()) -> str:
  """Runs one cell (if neither recorded nor run); its name."""
  task_flags = common.flag_args(_task_values(setting, seed, _wanted(name)))
  if method == 'central':
    module, args = 'launch.centralized', (
        f'--batch_size={BATCH_SIZE * FLAGS.clients}', f'--steps_per_epoch={LOCAL_STEPS}',
        f'--epochs={rounds}', '--optimizer=sgd', f'--learning_rate={rate}')
  else:
    algorithm = ([a.format(clients=FLAGS.clients) for a in BOUNDED]
                 if method == 'fedsubavg_bounded' else [f'--algorithm={method}'])
    module, args = 'launch.train', (
        f'--batch_size={BATCH_SIZE}', f'--local_steps={LOCAL_STEPS}', *algorithm,
        f'--rounds={rounds}', f'--clients_per_round={FLAGS.clients}',
        f'--client_learning_rate={rate}', *server_flags)
  cell_records.run_cell(FLAGS.runs_dir, name, module, *task_flags, *args,
                  f'--eval_every={eval_every}', f'--seed={seed}',
                  wanted=_wanted(name), records_dir=_records())
  return name


def _wanted(name: str) -> bool:
  return cell_records.wanted(name, FLAGS.only)


def _records() -> str:
  return str(pathlib.Path(FLAGS.results_dir) / 'cells')


def _evaluations(name: str | None, metric: str):
  """The rows of a finished cell's metrics.csv where `metric` was evaluated; None
  when it has none (no cell: its rate is not chosen yet; not run, cut short)."""
  return (None if name is None
          else run_records.read_curve(FLAGS.runs_dir, name, metric, _records()))


def _curve(name: str, metric: str):
  """(steps, values) of a finished cell's evaluations; empty when it has none (not
  run, cut short, failed)."""
  rows = _evaluations(name, metric)
  if rows is None:
    return np.array([]), np.array([])
  step = 'epoch' if 'epoch' in rows else 'round'
  return rows[step].to_numpy(), rows[metric].to_numpy()


def _summary(name: str | None) -> dict | None:
  """A finished cell's summary (None: not run)."""
  if name is None:
    return None
  path = run_records.cell_file(FLAGS.runs_dir, name, 'summary.json', _records())
  return files.read_summary(path) if path.exists() else None


def _final_value(name: str, metric: str) -> float | None:
  """The metric at the cell's end: NaN if it diverged, None if it has not run (or
  never evaluated it)."""
  summary = _summary(name)
  if summary is None:
    return None
  if 'diverged_at_round' in summary:  # the trainer stopped it: its metrics are not there
    return float('nan')
  value = summary.get(metric)
  return None if value is None else float(value)


def _result(name: str | None, metric: str) -> float | None:
  return fedsubavg_movielens.result(_final_value, _curve, name, metric)


def _diverged(names: list[str | None]) -> bool:
  """Whether any of these finished cells diverged (its training, not a test metric)."""
  return any((summary := _summary(name)) is not None and run_records.diverged(summary)
             for name in names)


def _rounds(setting: str, kind: str) -> int:
  """--rounds / --sweep_rounds / --converged_rounds, or the setting's own."""
  return FLAGS[kind].value or _spec(setting)[kind]


def _sweep(setting: str, method: str) -> tuple[dict[float, float | None], float | None]:
  """The sweep of one method, seed 0 (rate_sweep: a best rate at an edge of the
  grid extends it): each rate tried with its metric, and the best rate."""
  spec = _spec(setting)
  rounds = _rounds(setting, 'sweep_rounds')

  def score(rate: float) -> float | None:
    return _final_value(_run(setting, method, rate, rounds, rounds,
                             f'sweep_{setting}_{method}_lr{rate:g}_s0', 0), spec['metric'])

  return rate_sweep.sweep(spec['central_rates'] if method == 'central' else spec['rates'],
                          score, lower_is_better=spec['lower_is_better'],
                          max_extensions=MAX_EXTENSIONS)


def _server_sweep(setting: str, method: str, rate: float
                  ) -> tuple[dict[float, float | None], float | None]:
  """`method`'s server rate sweep at client rate `rate`, seed 0, as `_sweep`."""
  spec = _spec(setting)
  rounds = _rounds(setting, 'sweep_rounds')
  default = server_rates.default(ctr.Task, method)

  def score(server_rate: float) -> float | None:
    name = f'sweep_{setting}_{method}_lr{rate:g}{server_rates.suffix(server_rate, default)}_s0'
    return _final_value(_run(setting, method, rate, rounds, rounds, name, 0,
                             server_rates.flags(server_rate, default)), spec['metric'])

  return rate_sweep.sweep(server_rates.grid(default), score,
                          lower_is_better=spec['lower_is_better'], max_extensions=MAX_EXTENSIONS)


def _server_section(setting: str, seeds: list[int], rates: dict, targets: dict) -> list[str]:
  """Each federated method at its chosen client rate and the server rate its own
  sweep chose, over `seeds` (fedsubavg_movielens.server_section's lines)."""
  spec = _spec(setting)
  rounds, metric, lower = _rounds(setting, 'rounds'), spec['metric'], spec['lower_is_better']
  done = [s for s in seeds if targets[s] is not None]
  columns = {}
  for m in (m for m in SERVER_SWEPT if rates.get(m) is not None):
    tried, chosen = _server_sweep(setting, m, rates[m])
    default = server_rates.default(ctr.Task, m)
    finals = [None if chosen is None else _run(
        setting, m, rates[m], rounds, FLAGS.eval_every,
        f'{setting}_{m}{server_rates.suffix(chosen, default)}_s{s}', s,
        server_rates.flags(chosen, default)) for s in seeds]
    columns[METHODS[m]] = (
        f'{rates[m]:g}', cell_records.NOT_RUN if chosen is None else f'{chosen:g}',
        rate_sweep.describe(tried, chosen),
        fedsubavg_movielens.rounds_cell([r for s in done if (r := fedsubavg_movielens.rounds_to(
            _curve, finals[seeds.index(s)], metric, targets[s], lower)) is not None], rounds),
        fedsubavg_movielens.final_cell(_final_value, _curve, finals, metric))
  return fedsubavg_movielens.server_section(setting, _rounds(setting, 'sweep_rounds'), metric,
                                            columns, f'{FINAL_METRICS[metric]} at {rounds}')


@functools.cache  # a seed's derived values share its task
def _task(setting: str, seed: int) -> ctr.Task:
  return ctr.Task(ctr.make_config(**_task_values(setting, seed),
                                  seed=seed))


def _derived(key: str, compute):
  """A value the tables show that comes from the data: computed (by building a
  task) only when the records lack it, so the tables rebuild without the data."""
  return run_records.derived(_records(), key, compute)


def _describe(setting: str) -> str:
  return _derived(f'{setting} s0 description', lambda: _task(setting, 0).describe())


def _item_baselines(setting: str, seed: int) -> list[float]:
  """The test AUC of the item floors (popularity, click rate) on one seed's split
  (Beauty: its clicks)."""
  return _derived(f'{setting} s{seed} item baselines',
                  lambda: _task(setting, seed).objective.item_baselines(_dataset()['item']))


def _target(setting: str, central: str) -> float | None:
  """The setting's target from one seed's CentralSGD run (None: not run)."""
  spec = _spec(setting)
  _, values = _curve(central, spec['metric'])
  if not len(values):
    return None
  return (float(values.min()) if spec['lower_is_better']
          else float(values.max()) - FLAGS.auc_margin)


def _at_best(name: str, metric: str) -> float | None:
  """The cell's test AUC at the evaluation where `metric` was best (None: not run)."""
  rows = _evaluations(name, metric)
  if rows is None or rows.empty:
    return None
  return float(rows['eval/test_auc'][rows[metric].idxmax()])


def _plot(path: pathlib.Path, setting: str, finals: dict[str, list[str]],
          target: float | None, floors: dict[str, float] | None) -> None:
  """Each column's (label -> cells) mean curve over its seeds: the setting's
  metric with its target, or test AUC with the item floors (name -> value)."""
  metric = 'eval/test_auc' if floors is not None else _spec(setting)['metric']
  fedsubavg_movielens.plot_curves(
      path, f'{_dataset()["title"]}, {setting.upper()}: {metric} by round (seed mean)', metric,
      {label: [_curve(name, metric) for name in names] for label, names in finals.items()},
      target, floors)


def tabulate(setting: str, seeds: list[int]) -> list[str]:
  spec = _spec(setting)
  rounds = _rounds(setting, 'rounds')
  if rounds == _rounds(setting, 'sweep_rounds'):
    raise app.UsageError('--rounds must differ from --sweep_rounds: a final run would be '
                         'compared with a sweep run evaluated only at its end')
  sweeps = {m: _sweep(setting, m) for m in METHODS}
  rates = {m: best for m, (_, best) in sweeps.items()}
  # column -> (label, method, rate): each method at its sweep's rate; then, for a
  # method whose final runs diverged in some seed (a short sweep cannot see a late
  # divergence; the training loss, not a test metric, decides), the next rate down.
  columns = {m: (label, m, rates[m]) for m, label in METHODS.items()}

  def run_finals(cells) -> dict[str, list[str | None]]:
    # None: a method whose sweep is incomplete has no final cells yet
    return {c: [_run(setting, m, r, rounds, FLAGS.eval_every, f'{setting}_{c}_s{s}', s)
                if r is not None else None for s in seeds] for c, (_, m, r) in cells.items()}

  finals = run_finals(columns)
  lower_rates = {}
  for m, (_, _, rate) in columns.items():
    if m != 'central' and _diverged(finals[m]):
      lower = rate_sweep.beyond(rate, up=False)
      lower_rates[f'{m}_lr{lower:g}'] = (f'{METHODS[m]} at {lower:g}', m, lower)
  columns.update(lower_rates)
  finals.update(run_finals(lower_rates))
  converged_rounds = _rounds(setting, 'converged_rounds')
  converged = _run(setting, 'central', rates['central'], converged_rounds,
                   max(1, converged_rounds // 50), f'{setting}_central_converged_s0', 0
                   ) if rates['central'] is not None else None
  targets = {s: _target(setting, finals['central'][i]) for i, s in enumerate(seeds)}
  done = [s for s in seeds if targets[s] is not None]
  popularity, click_rate = zip(*(_item_baselines(setting, s) for s in seeds))
  lower = spec['lower_is_better']
  best = np.nanmin if lower else np.nanmax
  rows = ['| seeds run | ' + ' | '.join(
      str(sum(_final_value(name, spec['metric']) is not None for name in finals[c]))
      for c in columns) + ' |']
  rows += ['| rounds to target | ' + ' | '.join(fedsubavg_movielens.rounds_cell(
      [r for s in done if (r := fedsubavg_movielens.rounds_to(
          _curve, finals[c][seeds.index(s)], spec['metric'], targets[s], lower)) is not None],
      rounds)
      for c in columns) + ' |']
  validated = bool(spec['task'].get('validation_fraction'))
  for metric, label in FINAL_METRICS.items():
    if validated or 'validation' not in metric:
      rows.append(f'| {label} at {rounds} | '
                  + ' | '.join(fedsubavg_movielens.final_cell(_final_value, _curve, finals[c], metric)
                               for c in columns) + ' |')
  best_label = 'lowest' if lower else 'best'
  rows.append(f'| {best_label} {FINAL_METRICS[spec["metric"]]} (any round, diverged seeds '
              'too) | ' + ' | '.join(seed_stats.spread(
                  [best(v) for name in finals[c] if len(v := _curve(name, spec['metric'])[1])],
                  digits=4) for c in columns) + ' |')
  if validated:
    rows.append(f'| test AUC at the best {FINAL_METRICS[spec["metric"]]} round | ' + ' | '.join(
        seed_stats.spread([v for name in finals[c] if (v := _at_best(name, spec['metric']))
                           is not None], digits=4) for c in columns) + ' |')
  # Test AUC whatever the setting's metric, against each floor: picking the stronger
  # floor would read test AUC to make a choice.
  floors = {'popularity': popularity, 'the item click rate': click_rate}
  for floor_name, floor in floors.items():
    rows.append(f'| test AUC at {rounds} against {floor_name} ({np.mean(floor):.3f}) | '
                + ' | '.join(fedsubavg_movielens.against_floor(_result, finals[c], floor)
                             for c in columns) + ' |')
  constants = [_derived(f'{setting} s{seed} constant',
                        lambda seed=seed: _task(setting, seed).floors(_dataset()['item'])['constant'])
               for seed in seeds]
  rows += fedsubavg_movielens.constant_rows(rounds, finals, {c: constants for c in finals},
                                            _result)
  _, converged_curve = _curve(converged, spec['metric'])
  converged_text = (f'{best(converged_curve):.4f} (its {"lowest" if lower else "best"} '
                    f'{spec["metric"]} over {converged_rounds} rounds, seed 0)'
                    if len(converged_curve) else cell_records.NOT_RUN)
  rule = ("CentralSGD's lowest train loss within the same rounds (the paper's rule)" if lower
          else f"CentralSGD's best {FINAL_METRICS[spec['metric']]} within the same rounds, "
          f'less {FLAGS.auc_margin:g}, and rounds to reach it read on the same metric')
  if done:
    _plot(pathlib.Path(FLAGS.results_dir) / f'{setting}_curves.png', setting,
          {columns[c][0]: names for c, names in finals.items()},
          np.mean([targets[s] for s in done]) if lower else None,
          None if lower else {n: np.mean(f) for n, f in floors.items()})
  return [
      f'## {setting.upper()} ({spec["metric"]})', '',
      f'{_describe(setting)}. Feature heat dispersion: max n_m / min n_m over embedding rows '
      "(the paper's Table 1; ML-1M there: 4,331); parameter: over all parameters.", '',
      f'Target, per seed: {rule}: '
      + (seed_stats.spread([targets[s] for s in done], digits=4) if done else cell_records.NOT_RUN)
      + f'. Converged CentralSGD: {converged_text}. Evaluated every {FLAGS.eval_every} '
      'rounds: rounds to target are resolved to that. Mean ± std over the seeds of '
      f'{seeds} that ran (a single value: one seed).', '',
      '| | ' + ' | '.join(label for label, _, _ in columns.values()) + ' |',
      '|---' * (len(columns) + 1) + '|',
      *rows,
      f'| learning rate (grid after {_rounds(setting, "sweep_rounds")} rounds, seed 0) | '
      + ' | '.join(f'{r:g}' if _final_value(finals[c][0], spec['metric']) is not None
                   else cell_records.NOT_RUN for c, (_, _, r) in columns.items()) + ' |',
      '| rates tried (the chosen one in bold) | ' + ' | '.join(
          rate_sweep.describe(sweeps[m][0], r) if c == m else 'one rate down: diverged above'
          for c, (_, m, r) in columns.items())
      + ' |',
      '', 'Item baselines, no model (test AUC, mean ± std over the seeds\' splits): '
      f'popularity, the item\'s clicks in the training examples, {seed_stats.spread(popularity)}; '
      f'the item\'s training click rate (add-one smoothed), {seed_stats.spread(click_rate)}. A '
      'model below them has learned less than the item\'s own rate.', '',
      f'Paper: {PAPER[setting]}.', '', f'![curves]({setting}_curves.png)', '',
      *_server_section(setting, seeds, rates, targets)]


def _main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  dataset = _dataset()
  FLAGS.runs_dir = FLAGS.runs_dir or dataset['runs_dir']
  FLAGS.results_dir = FLAGS.results_dir or dataset['results_dir']
  FLAGS.settings = FLAGS.settings or list(dataset['settings'])
  FLAGS.eval_every = FLAGS.eval_every or dataset['eval_every']
  common.check_choices('settings', FLAGS.settings, dataset['settings'])
  FLAGS.task = 'ctr'
  seeds = [int(s) for s in FLAGS.seeds]
  results = pathlib.Path(FLAGS.results_dir)
  results.mkdir(parents=True, exist_ok=True)
  lines = [f'# FedSubAvg on {dataset["title"]}: rounds to reach the target (Table 2 of '
           'Ding et al.)',
           '', 'Built by `python -m launch.reproduce_fedsubavg'
           + f' --dataset={FLAGS.dataset}'
           + '` from the cell records in `cells/`; README.md here has the reading and every '
           'deviation from the paper.', '',
           f'K = {FLAGS.clients} clients per round, each at most {LOCAL_STEPS} SGD steps of '
           f'{BATCH_SIZE} examples (one pass over its data if it holds fewer); CentralSGD: '
           f'{LOCAL_STEPS} steps of '
           f'{FLAGS.clients * BATCH_SIZE} pooled examples per round. Learning rates: the best '
           'of a grid after a short run (seed 0; by train loss for LR, by validation AUC for '
           'DIN), the grid extended past an edge that was best. Server: SGD 1.0 (FedAdam: '
           'Adam 0.01, FedAdagrad: Adagrad 0.1). Heat and weights: clients (the paper).', '']
  for setting in FLAGS.settings:
    lines += tabulate(setting, seeds)
  path = results / ('table.md' if len(FLAGS.settings) == len(dataset['settings']) else
                    f'table_{"_".join(FLAGS.settings)}.md')
  files.write_text(path, '\n'.join(lines))
  print(f'wrote {path}', flush=True)



main = cell_records.checking_only(_main)  # an --only that names no cell is refused
