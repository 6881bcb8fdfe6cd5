r"""Reproduces the shape of FedSubAvg's Table 2 on MovieLens: rounds to a target.

  python -m launch.reproduce_fedsubavg --runs_dir=runs/fedsubavg \
      --results_dir=results/fedsubavg_movielens

Two settings, as the paper's MovieLens and CTR rows: FedSubAvg's LR on the
random 80/20 split, target = the lowest train loss CentralSGD reaches; and
DIN on the chronological split, target = CentralSGD's best test AUC less
--auc_margin. Each method (CentralSGD, FedAvg, FedProx, SCAFFOLD, FedAdam,
FedAdagrad, FedSubAvg) first runs --sweep_rounds at each learning rate of
the grid (the paper tunes every method); the best (lowest train loss / best
AUC at the end) then runs --rounds, evaluated every --eval_every rounds.
K clients per round, each I = --local_steps batches of --batch_size;
CentralSGD takes I steps of K x batch_size examples per round. Every run is
a launch.train / launch.centralized cell under --runs_dir (resumable).
Writes table.md and one curve plot per setting to --results_dir, with each
dataset's feature heat dispersion.
"""

import os
import pathlib

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags


from launch import common
from launch import plots
from tasks import movielens_ctr

flags.DEFINE_string('runs_dir', 'runs/fedsubavg', 'Where the individual runs go.')
flags.DEFINE_string('results_dir', 'results/fedsubavg_movielens', 'Where the results go.')
flags.DEFINE_list('settings', ['lr', 'din'], 'Which rows: lr, din.')
flags.DEFINE_integer('rounds', None, "Rounds of the final runs (default: the setting's, "
                     'lr 200, din 100).', lower_bound=1)
flags.DEFINE_integer('sweep_rounds', None, "Rounds of each learning-rate trial (default: "
                     "the setting's, lr 40, din 20).", lower_bound=1)
flags.DEFINE_integer('clients', 50, 'K: clients per round.', lower_bound=1)
flags.DEFINE_integer('eval_every', 2, 'Evaluation period of the final runs.', lower_bound=1)
flags.DEFINE_float('auc_margin', 0.02, 'DIN target: CentralSGD best test AUC minus this.')

FLAGS = flags.FLAGS

METHODS = {'central': 'CentralSGD', 'fedavg': 'FedAvg', 'fedprox': 'FedProx',
           'scaffold': 'Scaffold', 'fedadam': 'FedAdam', 'fedadagrad': 'FedAdagrad',
           'fedsubavg': 'FedSubAvg'}
# Each setting: its task flags, the metric that decides, and the client (or
# central) learning rates tried.
SETTINGS = {
    'lr': dict(task=dict(model='lr', split='random'), metric='eval/train_loss',
               lower_is_better=True, rates=(0.3, 1.0, 3.0, 10.0), central_rates=(1.0, 3.0, 10.0),
               rounds=200, sweep_rounds=40),
    'din': dict(task=dict(model='din', split='chronological'), metric='eval/test_auc',
                lower_is_better=False, rates=(0.1, 0.3, 1.0), central_rates=(1.0, 3.0, 10.0),
                rounds=100, sweep_rounds=20),
}
PAPER = {'lr': 'MovieLens-1M LR: CentralSGD 180, FedAvg 170, FedProx 170, Scaffold 180, '
               'FedAdam 170, FedSubAvg 100 rounds to the train loss target 0.325',
         'din': 'Amazon DIN: CentralSGD 20, FedAvg 200+, FedProx 200+, Scaffold 200+, '
                'FedAdam 16, FedSubAvg 53 rounds to test AUC 0.6'}
LOCAL_STEPS = 10
BATCH_SIZE = 16


def _run(setting: str, method: str, rate: float, rounds: int, eval_every: int) -> str:
  """Runs one cell (if not done); its name."""
  task_flags = [f'--{k}={v}' for k, v in SETTINGS[setting]['task'].items()]
  name = f'{setting}_{method}_lr{rate:g}_r{rounds}'
  if method == 'central':
    common.run_cell(FLAGS.runs_dir, name, 'launch.centralized', *task_flags,
                    f'--batch_size={BATCH_SIZE * FLAGS.clients}',
                    f'--steps_per_epoch={LOCAL_STEPS}', f'--epochs={rounds}',
                    '--optimizer=sgd', f'--learning_rate={rate}', f'--eval_every={eval_every}')
  else:
    common.run_cell(FLAGS.runs_dir, name, 'launch.train', *task_flags,
                    f'--batch_size={BATCH_SIZE}', f'--local_steps={LOCAL_STEPS}',
                    f'--algorithm={method}', f'--rounds={rounds}',
                    f'--clients_per_round={FLAGS.clients}', f'--client_learning_rate={rate}',
                    f'--eval_every={eval_every}')
  return name


def _curve(name: str, metric: str):
  """(steps, values) of a cell's evaluations; empty when it has none (it failed)."""
  rows = common.read_curve(FLAGS.runs_dir, name, metric)
  if rows is None:
    return [], []
  step = 'epoch' if 'epoch' in rows else 'round'
  return rows[step].to_numpy(), rows[metric].to_numpy()


def _final_value(name: str, metric: str) -> float:
  _, values = _curve(name, metric)
  return float(values[-1]) if len(values) else float('nan')


def _rounds(setting: str, kind: str) -> int:
  """--rounds / --sweep_rounds, or the setting's own."""
  return FLAGS[kind].value or SETTINGS[setting][kind]


def _best_rate(setting: str, method: str) -> float:
  """The grid's rate with the best metric after the sweep's rounds."""
  spec = SETTINGS[setting]
  rates = spec['central_rates'] if method == 'central' else spec['rates']
  sweep = _rounds(setting, 'sweep_rounds')
  scores = {r: _final_value(_run(setting, method, r, sweep, sweep), spec['metric'])
            for r in rates}
  sign = 1 if spec['lower_is_better'] else -1
  finite = {r: s for r, s in scores.items() if s == s}  # NaN: diverged
  return min(finite, key=lambda r: sign * finite[r]) if finite else rates[0]


def _rounds_to(name: str, metric: str, target: float, lower: bool, rounds: int) -> str:
  steps, values = _curve(name, metric)
  if not len(steps):
    return common.CANNOT_RUN
  reached = steps[values <= target if lower else values >= target]
  return str(int(reached.min())) if len(reached) else f'{rounds}+'


def _plot(path: pathlib.Path, setting: str, finals: dict[str, str], target: float) -> None:
  metric = SETTINGS[setting]['metric']
  fig, ax = plots.figure()
  for method, name in finals.items():
    ax.plot(*_curve(name, metric), label=METHODS[method])
  ax.axhline(target, color='gray', linestyle=':', label='target')
  plots.save(fig, ax, path, xlabel='round', ylabel=metric,
             title=f'MovieLens-100K, {setting.upper()}: {metric} by round')


def main(argv):
  del argv
  FLAGS.task = 'movielens_ctr'
  results = pathlib.Path(FLAGS.results_dir)
  results.mkdir(parents=True, exist_ok=True)
  lines = ['# FedSubAvg on MovieLens-100K: rounds to reach the target (Table 2 of Ding et al.)',
           '', f'K = {FLAGS.clients} clients per round, each {LOCAL_STEPS} SGD steps of '
           f'{BATCH_SIZE} examples; CentralSGD: {LOCAL_STEPS} steps of '
           f'{FLAGS.clients * BATCH_SIZE} pooled examples per round. Learning rates: the best '
           'of a grid after a short run. Server: SGD 1.0 (FedAdam: Adam 0.01, FedAdagrad: '
           'Adagrad 0.1). Heat and weights: clients (the paper). One seed.', '']
  for setting in FLAGS.settings:
    spec = SETTINGS[setting]
    rounds = _rounds(setting, 'rounds')
    if rounds == _rounds(setting, 'sweep_rounds'):  # cells are named by their rounds
      raise app.UsageError('--rounds must differ from --sweep_rounds: a final run would '
                           'reuse a sweep run, evaluated only at its end')
    rates = {m: _best_rate(setting, m) for m in METHODS}
    finals = {m: _run(setting, m, rates[m], rounds, FLAGS.eval_every) for m in METHODS}
    _, central = _curve(finals['central'], spec['metric'])
    if not len(central):
      raise app.UsageError(f'CentralSGD ({finals["central"]}) has no evaluations: its '
                           'target cannot be set; see its error above')
    target = (float(central.min()) if spec['lower_is_better']
              else float(central.max()) - FLAGS.auc_margin)
    task = movielens_ctr.MovieLensCtr(movielens_ctr.make_config(**spec['task']))
    lines += [f'## {setting.upper()} ({spec["metric"]}, target {target:.4f})', '',
              f'{task.describe()}. Feature heat dispersion: max n_m / min n_m over '
              "embedding rows (the paper's Table 1; ML-1M there: 4,331); parameter: over "
              f'all parameters. Evaluated every {FLAGS.eval_every} rounds: rounds to target '
              'are resolved to that.', '',
              '| | ' + ' | '.join(METHODS.values()) + ' |',
              '|---' * (len(METHODS) + 1) + '|',
              '| rounds to target | ' + ' | '.join(
                  _rounds_to(finals[m], spec['metric'], target, spec['lower_is_better'], rounds)
                  for m in METHODS) + ' |',
              f'| {spec["metric"]} at {rounds} | ' + ' | '.join(
                  f'{_final_value(finals[m], spec["metric"]):.4f}' for m in METHODS) + ' |',
              f'| learning rate (grid after {_rounds(setting, "sweep_rounds")} rounds) | '
              + ' | '.join(f'{rates[m]:g}' for m in METHODS) + ' |',
              '', f'Paper: {PAPER[setting]}.', '', f'![curves]({setting}_curves.png)', '']
    _plot(results / f'{setting}_curves.png', setting, finals, target)
  (results / 'table.md').write_text('\n'.join(lines))
  print(f'wrote {results / "table.md"}', flush=True)


if __name__ == '__main__':
  app.run(main)
