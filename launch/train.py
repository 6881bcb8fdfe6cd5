r"""Federated training from the command line.

  python -m launch.train --task=next_item --algorithm=fedavg \
      --loss=global_softmax --rounds=100 --clients_per_round=50 \
      --output_dir=runs/gs
  python -m launch.train --task=ranking --algorithm=fair \
      --capacities=1x-2x-4x --rounds=100 --output_dir=runs/fair
  python -m launch.train --task=ctr --model=lr --algorithm=fedsubavg \
      --split=random --target='eval/train_loss<=0.5' --output_dir=runs/fedsubavg
  python -m launch.train --task=loo_ranking --algorithm=colr --rank=4 \
      --rounds=1000 --output_dir=runs/colr4

Writes to --output_dir: metrics.csv and tensorboard/ (one row/event per
round), checkpoints/ (resumed automatically when the run is restarted with the
same flags), config.json and, at the end, summary.json (final metrics).
Settings left unset take the task's defaults (its TRAIN_DEFAULTS and Config).
"""

import dataclasses
import logging
import pathlib
import sys

from absl import app
from absl import flags
import pandas as pd

from experiments import files
from experiments import spec as spec_lib
from launch import common
from launch import outputs
from launch import progress
import tasks  # pylint: disable=g-bad-import-order
import tensorflow_federated as tff
from tff_rec import registry
from tff_rec import runner
from tff_rec.aggregators import inner
from tff_rec.data import client_files
from tff_rec.runtime import inprocess
from tff_rec.runtime import native
from tff_rec.runtime import remote
from tff_rec.training import checkpoints
from tff_rec.training import loop


flags.DEFINE_enum('algorithm', None, sorted(registry.algorithms()),
                  "Learning algorithm (default: the task's; " + ', '.join(
                      f'{name} {module.Task.DEFAULT_ALGORITHM}'
                      for name, module in sorted(tasks.TASKS.items()))
                  + '). `python -m launch.matrix` shows which run where.')
flags.DEFINE_integer('rounds', 100, 'Training rounds. A run resumed with more extends it (the one '
                     'setting a resume may change).', lower_bound=1)
flags.DEFINE_integer('eval_every', 10, 'Evaluate every N rounds (0: only after the last).',
                     lower_bound=0)
flags.DEFINE_integer('checkpoint_every', 10, 'Save state every N rounds.', lower_bound=1)
flags.DEFINE_integer('stop_after_round', None, 'Stop once this round is checkpointed (a '
                     'multiple of --checkpoint_every), as an interruption would, e.g. to '
                     'fit a job\'s time limit; the same command resumes the run.',
                     lower_bound=1)
flags.DEFINE_enum('runtime', 'auto', ['auto', 'native', 'inprocess', 'remote'],
                  "native: TFF's C++ worker (CPU). inprocess: the round's "
                  'MapReduceForm run in this process (custom ops, GPU). remote: TFF workers '
                  'on other machines (--workers; start each with launch.worker). auto: the '
                  'one of native and inprocess that runs the algorithm fastest (in-process '
                  'for FedMF and secure sums; both give the same numbers).')
flags.DEFINE_list('workers', None, '--runtime=remote: the workers, host:port,host:port '
                  '(each runs python -m launch.worker --port=PORT); each round\'s clients '
                  'are split across them.')
flags.DEFINE_string('client_data_dir', None, "Write the clients' examples here once and let "
                    'the client work read them: a round then sends each client its index '
                    'and seed, not its examples. With --runtime=remote, a folder every worker '
                    "reads at the same path. For tff.learning's algorithms, FAIR, the table "
                    "forms and FedMF (stored users), which read the task's dataset "
                    "computation, and the project's rounds on numpy batches (scaffold, "
                    "metaua, fednova), whose clients also get their batches' row numbers. "
                    "The rankings' clients then draw their negatives and order in TF from "
                    "the seed, where they train: every runtime repeats such a run, but it "
                    'is not the run without files (numpy draws on the trainer). Examples '
                    'the trainer must still draw every round are refused, naming why.')
flags.DEFINE_integer('threads', None, '--runtime=inprocess: shards of clients run at once '
                     '(default: one per core).', lower_bound=1)
flags.DEFINE_integer('clients_per_call', None, '--runtime=inprocess: clients per TF call '
                     '(default: up to 8, fewer where their memory would pass 512 MB).',
                     lower_bound=1)
flags.DEFINE_enum('lockstep', None, list(inprocess.LOCKSTEP), '--runtime=inprocess: train '
                  "a round's clients as one computation, their parameters side by side, "
                  'where the algorithm has that form (FedMF, CoLR, SVD and top-k with stored '
                  "users; the FedAvg family on a Keras model's batches): auto (the default) "
                  'where that form is the faster (FedMF and its forms), on (wherever it has '
                  'it; refused where it has not), off (client by client). Equal to float '
                  'tolerance, not to the bit.')
flags.DEFINE_float('worker_growth_limit_mb', None, "--runtime=native: replace TFF's "
                   'worker by a fresh one once it holds this many MB more than after its '
                   'first computations (TFF 0.87\'s worker grows on long runs; nothing of a run '
                   'lives on it between rounds, so the numbers do not move); 0: never '
                   f'(default {native.DEFAULT_GROWTH_LIMIT_MB:g}).', lower_bound=0)
flags.DEFINE_enum('aggregator', 'mean', inner.NAMES,
                  "The aggregation inside every method's own factory: a plain mean, TFF's "
                  "secure sum (--secure_bound; in-process runtime) or TFF's DP "
                  '(--dp_noise_multiplier, --dp_clip).')
flags.DEFINE_float('secure_bound', None, '--aggregator=secure: each value clipped to '
                   '+-bound before the secure sum; under a weighted mean, each value '
                   "times its client's weight (> 0; default 1). The round's metrics "
                   'count the clipped clients.')
flags.DEFINE_float('dp_noise_multiplier', None, '--aggregator=dp: Gaussian noise stddev '
                   'over the clip (default 1).', lower_bound=0)
flags.DEFINE_float('dp_clip', None, "--aggregator=dp: each client's update clipped to this "
                   'L2 norm (> 0; default 1).')
flags.DEFINE_list('stack', None, "Other methods' aggregation stacked on the algorithm's "
                  "own: fedsubavg (scale each table row's aggregate by N / its feature heat; "
                  'on the FedAvg family, FAIR and CoLR).')
try:
  OPTION_FIELDS = registry.option_fields()
except ValueError as e:  # a user's module retyped an option
  common.exit_at_import(str(e))
common.define_option_flags(OPTION_FIELDS)
SETTING_FIELDS = {f.name: f for f in dataclasses.fields(registry.Settings)}


def _with_defaults(field) -> str:
  """A training setting's help with its defaults: the algorithms' that set their
  own, else the task's."""
  def listed(label: str, owners: dict[str, dict]) -> list[str]:
    values = [f'{name} {common.flag_value(settings[field.name])}'
              for name, settings in sorted(owners.items()) if field.name in settings]
    return [f'{label}: {", ".join(values)}'] if values else []

  shown = '; '.join([
      *listed('algorithms', {n: a.own_settings() for n, a in registry.algorithms().items()}),
      *listed('tasks', {n: m.Task.TRAIN_DEFAULTS for n, m in tasks.TASKS.items()})])
  return f"{field.metadata['help']} (default: {shown})" if shown else field.metadata['help']


common.define_option_flags(SETTING_FIELDS, helps={
    name: _with_defaults(field) for name, field in SETTING_FIELDS.items()})

FLAGS = flags.FLAGS
AGGREGATOR_FLAGS = {'secure_bound': 'secure', 'dp_noise_multiplier': 'dp', 'dp_clip': 'dp'}
PARALLELISM_FLAGS = ('threads', 'clients_per_call', 'lockstep')


def _spec() -> spec_lib.RunSpec:
  """The run the flags ask for (its settings checked as far as flags alone can be)."""
  for name, needs in AGGREGATOR_FLAGS.items():
    if FLAGS[name].value is not None and FLAGS.aggregator != needs:
      raise app.UsageError(f'--{name} applies to --aggregator={needs}')
  return spec_lib.RunSpec(
      task=FLAGS.task, algorithm=FLAGS.algorithm,
      task_settings=common.task_setting_values('federated'),
      options=common.option_values(OPTION_FIELDS),
      settings=common.option_values(SETTING_FIELDS), aggregator=FLAGS.aggregator,
      aggregator_settings=common.set_flags(AGGREGATOR_FLAGS), stack=tuple(FLAGS.stack or ()),
      rounds=FLAGS.rounds, eval_every=FLAGS.eval_every,
      checkpoint_every=FLAGS.checkpoint_every, runtime=FLAGS.runtime,
      execution=common.set_flags((*PARALLELISM_FLAGS, 'client_data_dir')))


def _context(training: registry.Training):
  """The context the rounds run in: TFF's workers on other machines, or the
  resolved runtime's with the in-process parallelism flags."""
  parallel = common.set_flags(PARALLELISM_FLAGS)
  if parallel and training.runtime != 'inprocess':
    raise app.UsageError(f'--{next(iter(parallel))} applies to --runtime=inprocess')
  if FLAGS.workers and FLAGS.runtime != 'remote':
    raise app.UsageError('--workers applies to --runtime=remote')
  if FLAGS.runtime == 'remote':
    if not FLAGS.workers:
      raise app.UsageError('--runtime=remote needs --workers=host:port,... (start each '
                           'worker with python -m launch.worker --port=PORT)')
    try:
      return remote.RemoteRuntime(FLAGS.workers).install()  # connects: bad workers stop here
    except (ValueError, remote.WorkerError) as e:
      raise app.UsageError(f'--workers: {e}') from None
  limit = FLAGS.worker_growth_limit_mb
  if limit is not None and (training.runtime != 'native' or FLAGS.runtime == 'remote'):
    raise app.UsageError('--worker_growth_limit_mb applies to --runtime=native (remote '
                         'workers are started, and bounded, by whoever runs them)')
  if training.runtime == 'native':
    return native.NativeRuntime(worker_growth_limit_mb=(
        native.DEFAULT_GROWTH_LIMIT_MB if limit is None else limit or None))
  settings = inprocess.Parallelism(**parallel)
  try:
    settings.check_cohort(training.clients_per_round)
  except ValueError as e:
    raise app.UsageError(f'--{e}') from None
  return settings


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  common.require('output_dir')
  outputs.check_folder(FLAGS.output_dir)  # before the data is read
  spec = _spec()
  name, options = spec.name, spec.options
  common.as_usage_error(lambda: registry.check_options(name, options))
  target = progress.parse_target(FLAGS.target)
  task_config = common.checked_config(lambda: spec.task_config)
  training, schedule = common.as_usage_error(lambda: (spec.training, spec.schedule))
  stop = FLAGS.stop_after_round
  if stop is not None and (stop >= FLAGS.rounds or stop % FLAGS.checkpoint_every):
    raise app.UsageError(f'--stop_after_round={stop} must be a multiple of --checkpoint_every'
                         f'={FLAGS.checkpoint_every} below --rounds={FLAGS.rounds}')
  task = common.build_task(task_config)
  progress.check_target_part(target, ('train', *task.EVAL_PARTS))
  training = common.as_usage_error(lambda: runner.runtime_for(name, task, training, options))
  run_config = spec.to_config(runtime='remote' if FLAGS.runtime == 'remote'
                              else training.runtime)
  # Options are recorded as given: one given at its default's value is the same run.
  option_defaults = spec.option_defaults()
  outputs.check_resumable(FLAGS.output_dir, run_config, option_defaults)  # before building
  out = []  # the output folder, once the run has started

  def start(started: runner.Started) -> runner.Recording:
    try:
      schedule.validate(len(started.built.client_ids))
    except ValueError as e:
      raise app.UsageError(f'--{e}') from None
    out.append(outputs.output_dir(FLAGS.output_dir, run_config, option_defaults))
    remote = f'remote ({",".join(FLAGS.workers)})' if FLAGS.runtime == 'remote' else None
    print(f'{FLAGS.task}: {task.describe()}; {started.describe(name, remote)}; output in '
          f'{out[0]}', flush=True)
    return runner.Recording(
        _SayingWhatItSkips(checkpoints.NumpyProgramStateManager(
            out[0] / 'checkpoints', keep_total=2)),
        [tff.program.CSVFileReleaseManager(str(out[0] / 'metrics.csv'),
                                           key_fieldname='round'),
         tff.program.TensorBoardReleaseManager(str(out[0] / 'tensorboard'))])

  context = _context(training)
  try:
    _, metrics = runner.run(
        task, name, training, schedule, options=options, context=context,
        client_data_dir=FLAGS.client_data_dir, on_start=start,
        on_round=_stopping_after(stop, target, _warning_once_when_clipped(
            progress.Progress(FLAGS.rounds, 'round',
                              {**task.PROGRESS, 'rss MB': 'memory/rss_mb'}))))
  except checkpoints.CheckpointMismatchError as e:  # e.g. saved before the state's form changed
    raise SystemExit(f'error: {e}; resume it with the code that wrote it, or start afresh '
                     'in a new --output_dir') from None
  except client_files.ClientFilesError as e:  # files of another dataset, or unwritable
    raise app.UsageError(f'--client_data_dir={FLAGS.client_data_dir}: {e}') from None
  except ValueError as e:
    if out:  # trained, then failed: not a usage error
      raise
    raise app.UsageError(str(e)) from None
  except (runner.AggregationNotVisible, client_files.UnreadableClientFiles) as e:
    if isinstance(e, client_files.UnreadableClientFiles):
      # The round's calls on the other workers fail the same way; asyncio would log
      # each never-awaited task's traceback at exit, echoes of the error said here.
      logging.getLogger('asyncio').setLevel(logging.CRITICAL)
    raise SystemExit(f'error: {e}: stopped') from None
  except checkpoints.NoReadableCheckpointError as e:
    raise SystemExit(f'error: {e}, or start afresh in a new --output_dir') from None
  except loop.Diverged as e:
    common.stop_diverged(e, out[0], CURES)
  except _Stopped:
    print(f'stopped after round {stop} (--stop_after_round), its checkpoint saved: the same '
          'command without that flag resumes', flush=True)
    return
  except KeyboardInterrupt:
    if not out:
      raise
    print(f'interrupted; the same command resumes from the last checkpoint in '
          f'{out[0] / "checkpoints"} (every --checkpoint_every={schedule.checkpoint_every} '
          'rounds)', file=sys.stderr, flush=True)
    raise SystemExit(INTERRUPTED_EXIT_CODE) from None
  summary = out[0] / 'summary.json'
  if not metrics and not summary.exists():  # every round checkpointed, cut before its summary
    metrics = _last_round(out[0] / 'metrics.csv')
    print('every round was already done; the summary is its last round\'s metrics',
          flush=True)
  elif metrics and isinstance(context, remote.RemoteRuntime):  # how the rounds were spread
    metrics.update({f'remote/calls/{address}': float(calls)
                    for address, calls in context.calls().items()})
  elif metrics and isinstance(context, native.NativeRuntime):
    metrics['memory/worker_restarts'] = float(context.restarts)
    if context.restarts:
      print(f"TFF's worker was replaced {context.restarts} time(s): it grew past "
            '--worker_growth_limit_mb', flush=True)
  if metrics:  # nothing when a finished run is run again: its summary stands
    if target:
      metrics.update(progress.first_reached(out[0] / 'metrics.csv', 'round', target))
    files.write_summary(summary, metrics)
  print(f'done: {out[0] / "summary.json"}', flush=True)


class _SayingWhatItSkips(loop.Checkpointing):
  """Checkpointing that says which unreadable checkpoints it passed over."""

  def load(self, initial_state):
    loaded = super().load(initial_state)
    for path, why in self.manager.skipped:
      print(f'checkpoint {path} is unreadable ({why}): set aside as {path.name}.unreadable; '
            'resuming from the newest readable one', flush=True)
    return loaded


class _Stopped(Exception):
  """--stop_after_round reached."""


def _last_round(path: pathlib.Path) -> dict[str, float]:
  """The metrics the loop released for a run's last round (metrics.csv's last
  row: released before that round's checkpoint, so it is there when the
  checkpoint is), as the summary holds them."""
  if not path.exists():
    return {}
  row = pd.read_csv(path).iloc[-1].drop('round')
  return {k: float(v) for k, v in row.dropna().items()}


def _warning_once_when_clipped(on_round):
  """`on_round`, then a warning the first round a secure sum clips (its metrics count
  the clients it clipped every round)."""
  warned = False

  def then_warn(round_num: int, metrics: dict[str, float]) -> None:
    nonlocal warned
    on_round(round_num, metrics)
    clipping = inner.secure_clipping(metrics)
    if clipping and not warned:
      warned = True
      print(f'warning: round {round_num}: the secure sum clipped the values of '
            f'{clipping[0]:g} clients to [{clipping[1]:g}, {clipping[2]:g}] (under a weighted '
            "mean, each value is the update times its client's weight); a larger --secure_bound "
            "(--secure_sum_bound for FedMF's forms) keeps them whole. Every round's "
            'counts: *_clipped_count in metrics.csv', file=sys.stderr, flush=True)

  return then_warn


def _stopping_after(stop: int | None, target, on_round):
  """`on_round`, the target's metric checked, then a stop once round `stop` is done
  (the loop has saved its checkpoint before it calls on_round)."""

  def then_stop(round_num: int, metrics: dict[str, float]) -> None:
    on_round(round_num, metrics)
    progress.check_target_reported(target, metrics)
    if round_num == stop:
      raise _Stopped()

  return then_stop


INTERRUPTED_EXIT_CODE = 130  # a shell's for Ctrl-C
CURES = ('a lower --client_learning_rate or --server_learning_rate; with --aggregator=dp, '
         'a lower --dp_noise_multiplier or a larger cohort; with FedSubAvg\'s correction '
         '(--algorithm=fedsubavg, --stack=fedsubavg), FedAvg or a lower rate (the factor N / '
         'heat is large where one client holds a row)')


if __name__ == '__main__':
  common.run(main)
