r"""Federated training from the command line.

  python -m launch.train --task=movielens_next_item --algorithm=fedavg \
      --loss=global_softmax --rounds=100 --clients_per_round=50 \
      --output_dir=runs/gs
  python -m launch.train --task=goodreads_ranking --algorithm=fair \
      --capacities=1x-2x-4x --rounds=100 --output_dir=runs/fair
  python -m launch.train --task=movielens_ctr --model=lr --algorithm=fedsubavg \
      --split=random --target='eval/train_loss<=0.5' --output_dir=runs/fedsubavg
  python -m launch.train --task=movielens_ranking --algorithm=colr --rank=4 \
      --rounds=1000 --output_dir=runs/colr4

Writes to --output_dir: metrics.csv and tensorboard/ (one row/event per
round), checkpoints/ (resumed automatically when the run is restarted with the
same flags), config.json and, at the end, summary.json (final metrics).
Settings left unset take the task's defaults (its TRAIN_DEFAULTS and Config).
"""

import contextlib

from absl import app
from absl import flags

from launch import common  # sets TF's log level before TensorFlow loads
import tasks  # pylint: disable=g-bad-import-order
import tensorflow_federated as tff
from tff_rec.algorithms import baselines
from tff_rec.algorithms import capacities
from tff_rec.runtime import inprocess
from tff_rec.runtime import native
from tff_rec.training import checkpoints
from tff_rec.training import loop

ALGORITHMS = sorted({a for module in tasks.TASKS.values() for a in module.Task.ALGORITHMS})
flags.DEFINE_enum('algorithm', 'fedavg', ALGORITHMS, 'Learning algorithm (the task '
                  'says which it has).')
flags.DEFINE_integer('rounds', 100, 'Training rounds.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', None, "Clients sampled per round (default: "
                     "the task's; movielens_next_item 50, goodreads_ranking 10).",
                     lower_bound=1)
flags.DEFINE_enum('client_optimizer', None, baselines.OPTIMIZERS, "Client optimizer "
                  "(default: the task's; sgd for movielens, fresh adam for goodreads).")
flags.DEFINE_float('client_learning_rate', None, "Client learning rate (default: the "
                   "task's; 0.1 / 1e-3).", lower_bound=0)
flags.DEFINE_enum('server_optimizer', None, baselines.OPTIMIZERS, "Server optimizer "
                  "(default: the task's; adam / sgd).")
flags.DEFINE_float('server_learning_rate', None, "Server learning rate (default: the "
                   "task's; 0.01 / 1.0, which replaces the model by the mean).",
                   lower_bound=0)
flags.DEFINE_float('server_adaptivity', None, "adagrad / adam server: Reddi et al.'s tau, "
                   "the epsilon and (adagrad) sqrt of the starting accumulator (default: the "
                   "task's; TFF's defaults, metaua 1e-3).", lower_bound=0)
flags.DEFINE_integer('eval_every', 10, 'Evaluate every N rounds (0: only after the last).',
                     lower_bound=0)
flags.DEFINE_integer('checkpoint_every', 10, 'Save state every N rounds.', lower_bound=1)
flags.DEFINE_enum('runtime', 'native', ['native', 'inprocess'],
                  "native: TFF's C++ worker (CPU). inprocess: the round's "
                  'MapReduceForm run in this process (custom ops, GPU).')
# FAIR and its baselines (goodreads_ranking)
flags.DEFINE_string('capacities', None, "Capacity scheme, e.g. 1x-2x-4x: clients in id "
                    'order split into equal groups, one per capacity (default 1x-2x).')
flags.DEFINE_list('capacity_fractions', None, 'Share of clients in each capacity group, '
                  'e.g. 0.2,0.8 (default: equal groups).')
flags.DEFINE_enum('capacity_assignment', None, capacities.ASSIGNMENTS,
                  'ordered: groups by client id (the paper); random: after a seeded '
                  'shuffle (default ordered).')
# FedSubAvg and the CTR baselines (movielens_ctr)
flags.DEFINE_enum('heat', None, ['clients', 'examples'], "Feature heat and client weights: "
                  "'clients' counts clients per row and weighs clients equally (the "
                  "paper); 'examples' counts and weighs training examples (the official "
                  'code) (default clients).')
flags.DEFINE_float('proximal_strength', None, 'FedProx mu (default 0.01).', lower_bound=0)
# MetaUA (movielens_ctr)
flags.DEFINE_float('meta_lr', None, "MetaUA's SGD learning rate on the meta parameters "
                   '(default 2.0, the paper\'s).', lower_bound=0)
flags.DEFINE_list('attributes', None, 'MetaUA client attributes (z1..z6): num_samples, '
                  'local_loss, update_norm, loss_ratio, positive_rate, unique_features '
                  '(default local_loss).')
flags.DEFINE_boolean('client_weighting', None, 'MetaUA: learn client weights (off: FedAvg '
                     'weights) (default on).')
flags.DEFINE_boolean('server_lr_scaling', None, 'MetaUA: learn the per-layer server '
                     'learning-rate scale (off: 1) (default on).')
flags.DEFINE_enum('meta_loss', None, ['sum', 'client_mean', 'mean'], "MetaUA's meta loss "
                  "over the cohort's query examples: summed (the paper's eq. 1), each "
                  "client's mean summed, or the mean over all (default sum).")
flags.DEFINE_float('query_fraction', None, "MetaUA: share of each client's training "
                   'examples held out as its query set (default 0.2).')
# CoLR and its baselines (movielens_ranking)
flags.DEFINE_integer('rank', None, 'colr / svd: the rank r of the item update; scolr: the '
                     'global rank R; topk: keep as many entries as a rank-r factor '
                     'has bytes (default 4).')
flags.DEFINE_string('local_ranks', None, "scolr: each client group's local rank, e.g. "
                    '1-2-4 (clients in id order, equal groups); default: uniform in 1..R, '
                    'drawn every round.')
flags.DEFINE_enum('item_average', None, ['cohort', 'touched'], "The server's mean of an "
                  "item's update: over the cohort (the paper's FedAvg) or over the clients "
                  "whose data touched the item (the official code) (default cohort).")
flags.DEFINE_float('secure_sum_bound', None, "Sum the clients' payloads with TFF's secure "
                   'sum, each value clipped to +-bound (0: plain sum; default 0).',
                   lower_bound=0)

flags.mark_flag_as_required('output_dir')
FLAGS = flags.FLAGS

OPTION_FLAGS = ('capacities', 'capacity_fractions', 'capacity_assignment', 'heat',
                'proximal_strength', 'rank', 'local_ranks', 'item_average', 'secure_sum_bound',
                'meta_lr', 'attributes', 'client_weighting', 'server_lr_scaling',
                'query_fraction', 'meta_loss')


def _algorithm_options(task_class) -> dict:
  options = common.set_flags(OPTION_FLAGS)
  for name in options:
    if name not in task_class.ALGORITHM_OPTIONS:
      raise app.UsageError(f'--{name} does not apply to --task={FLAGS.task}')
  if 'attributes' in options:
    options['attributes'] = tuple(options['attributes'])
  if 'capacity_fractions' in options:
    try:
      options['capacity_fractions'] = tuple(float(f) for f in options['capacity_fractions'])
    except ValueError:
      raise app.UsageError('--capacity_fractions must be numbers, e.g. 0.2,0.8') from None
  return options


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  task_class = tasks.TASKS[FLAGS.task].Task
  if FLAGS.algorithm not in task_class.ALGORITHMS:
    raise app.UsageError(f'--algorithm={FLAGS.algorithm} is not one of --task='
                         f'{FLAGS.task}\'s algorithms: {", ".join(task_class.ALGORITHMS)}')
  options = _algorithm_options(task_class)
  target = common.parse_target(FLAGS.target)
  task_config = common.task_config()
  setting = {**task_class.TRAIN_DEFAULTS,
             **getattr(task_class, 'ALGORITHM_DEFAULTS', {}).get(FLAGS.algorithm, {}),
             **common.set_flags([*task_class.TRAIN_DEFAULTS, 'server_adaptivity'])}
  try:
    schedule = loop.Schedule(
        rounds=FLAGS.rounds, clients_per_round=setting['clients_per_round'],
        eval_every=FLAGS.eval_every, checkpoint_every=FLAGS.checkpoint_every,
        seed=task_config.seed)
    client_optimizer = baselines.OptimizerConfig(setting['client_optimizer'],
                                                 setting['client_learning_rate'])
    adaptivity = setting.get('server_adaptivity')
    if FLAGS.server_adaptivity is None and setting['server_optimizer'] == 'sgd':
      adaptivity = None  # a default tau of an adaptive server the flags replaced by SGD
    server_optimizer = baselines.OptimizerConfig(setting['server_optimizer'],
                                                 setting['server_learning_rate'], adaptivity)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  task = common.build_task(task_config)
  runtime = (native.NativeRuntime() if FLAGS.runtime == 'native'
             else contextlib.nullcontext())
  with runtime:
    try:
      process, client_ids, client_input = task.learning_process(
          FLAGS.algorithm, client_optimizer=client_optimizer,
          server_optimizer=server_optimizer, runtime=FLAGS.runtime, **options)
    except ValueError as e:
      raise app.UsageError(str(e)) from None
    try:
      schedule.validate(len(client_ids))
    except ValueError as e:
      raise app.UsageError(f'--{e}') from None
    out = common.output_dir(common.run_config(
        task_config, algorithm=FLAGS.algorithm, **options, runtime=FLAGS.runtime,
        client_optimizer=client_optimizer.settings(),
        server_optimizer=server_optimizer.settings(),
        **vars(schedule)))
    print(f'{FLAGS.task}: {task.describe()}; {FLAGS.algorithm}, {len(client_ids)} '
          f'training clients; output in {out}', flush=True)
    if FLAGS.runtime == 'inprocess':
      process = inprocess.InProcessLearningProcess(process)
    checkpointing = loop.Checkpointing(checkpoints.NumpyProgramStateManager(
        out / 'checkpoints', keep_total=2))
    managers = [
        tff.program.CSVFileReleaseManager(str(out / 'metrics.csv'),
                                          key_fieldname='round'),
        tff.program.TensorBoardReleaseManager(str(out / 'tensorboard')),
    ]
    progress = common.Progress(FLAGS.rounds, 'round',
                               {**task.PROGRESS, 'rss MB': 'memory/rss_mb'})
    periodic, final = task.EVAL_PARTS
    _, metrics = loop.run(
        process, client_ids=client_ids, client_input=client_input, schedule=schedule,
        evaluate=lambda w: _prefixed(periodic, task.evaluate(w, periodic)),
        final_evaluate=lambda w: _prefixed(final, task.evaluate(w, final)),
        checkpointing=checkpointing, release_managers=managers,
        on_round=progress)
  if metrics:
    if target:
      metrics.update(common.first_reached(out / 'metrics.csv', 'round', target))
    common.write_json(out / 'summary.json', metrics)
  print(f'done: {out / "summary.json"}', flush=True)


def _prefixed(prefix: str, metrics: dict[str, float]) -> dict[str, float]:
  return {f'{prefix}/{k}': v for k, v in metrics.items()}


if __name__ == '__main__':
  app.run(main)
