r"""Federated training from the command line.

  python -m launch.train --task=movielens_next_item --algorithm=fedavg \
      --loss=global_softmax --rounds=100 --clients_per_round=50 \
      --output_dir=runs/gs

Writes to --output_dir: metrics.csv and tensorboard/ (one row/event per
round), checkpoints/ (resumed automatically when the run is restarted with the
same flags), config.json and, at the end, summary.json (final validation and
test metrics).
"""

import contextlib

from absl import app
from absl import flags

from launch import common  # sets TF's log level before TensorFlow loads
import tensorflow_federated as tff  # pylint: disable=g-bad-import-order
from tff_rec.algorithms import baselines
from tff_rec.runtime import inprocess
from tff_rec.runtime import native
from tff_rec.training import checkpoints
from tff_rec.training import loop

flags.DEFINE_enum('algorithm', 'fedavg', baselines.ALGORITHMS, 'Learning algorithm.')
flags.DEFINE_integer('rounds', 100, 'Training rounds.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 50, 'Clients sampled per round.', lower_bound=1)
flags.DEFINE_integer('local_epochs', 1, 'Client epochs per round (FedAvg).', lower_bound=1)
flags.DEFINE_enum('client_optimizer', 'sgd', baselines.OPTIMIZERS, 'Client optimizer.')
flags.DEFINE_float('client_learning_rate', 0.1, 'Client learning rate.', lower_bound=0)
flags.DEFINE_enum('server_optimizer', 'adam', baselines.OPTIMIZERS, 'Server optimizer.')
flags.DEFINE_float('server_learning_rate', 0.01, 'Server learning rate.', lower_bound=0)
flags.DEFINE_integer('eval_every', 10, 'Evaluate on validation users every N '
                     'rounds (0: only after the last).', lower_bound=0)
flags.DEFINE_integer('checkpoint_every', 10, 'Save state every N rounds.', lower_bound=1)
flags.DEFINE_enum('runtime', 'native', ['native', 'inprocess'],
                  "native: TFF's C++ worker (CPU). inprocess: the round's "
                  'MapReduceForm run in this process (custom ops, GPU).')

flags.mark_flag_as_required('output_dir')
FLAGS = flags.FLAGS

RUN_FLAGS = common.TASK_FLAGS + (
             'algorithm', 'rounds', 'clients_per_round', 'local_epochs', 'client_optimizer',
             'client_learning_rate', 'server_optimizer', 'server_learning_rate',
             'eval_every', 'checkpoint_every', 'runtime')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  try:
    task_config = common.task_config(local_epochs=FLAGS.local_epochs)
    schedule = loop.Schedule(
        rounds=FLAGS.rounds, clients_per_round=FLAGS.clients_per_round,
        eval_every=FLAGS.eval_every, checkpoint_every=FLAGS.checkpoint_every,
        seed=FLAGS.seed)
    client_optimizer = baselines.OptimizerConfig(FLAGS.client_optimizer,
                                                 FLAGS.client_learning_rate)
    server_optimizer = baselines.OptimizerConfig(FLAGS.server_optimizer,
                                                 FLAGS.server_learning_rate)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  task = common.build_task(task_config)
  try:
    schedule.validate(len(task.train_client_ids))
  except ValueError as e:
    raise app.UsageError(f'--{e}') from None
  out = common.output_dir({name: FLAGS[name].value for name in RUN_FLAGS})
  print(f'{FLAGS.task}: {len(task.train_client_ids)} training clients, '
        f'{task.vocab_size} items; {FLAGS.algorithm} with {FLAGS.loss}; '
        f'output in {out}', flush=True)

  runtime = (native.NativeRuntime() if FLAGS.runtime == 'native'
             else contextlib.nullcontext())
  with runtime:
    process = tff.simulation.compose_dataset_computation_with_learning_process(
        task.dataset_computation,
        baselines.build_process(FLAGS.algorithm, task.model_fn,
                                client_optimizer=client_optimizer,
                                server_optimizer=server_optimizer))
    if FLAGS.runtime == 'inprocess':
      process = inprocess.InProcessLearningProcess(process)
    checkpointing = loop.Checkpointing(checkpoints.NumpyProgramStateManager(
        out / 'checkpoints', keep_total=2))
    managers = [
        tff.program.CSVFileReleaseManager(str(out / 'metrics.csv'),
                                          key_fieldname='round'),
        tff.program.TensorBoardReleaseManager(str(out / 'tensorboard')),
    ]
    progress = common.Progress(FLAGS.rounds, 'round', {
        'loss': 'train/client_work/train/loss',
        'val recall_at_10': 'validation/recall_at_10',
        'test recall_at_10': 'test/recall_at_10',
        'rss MB': 'memory/rss_mb'})
    _, metrics = loop.run(
        process, client_ids=task.train_client_ids,
        client_input=task.client_arguments, schedule=schedule,
        evaluate=lambda w: _prefixed('validation', task.evaluate(w, 'validation')),
        final_evaluate=lambda w: _prefixed('test', task.evaluate(w, 'test')),
        checkpointing=checkpointing, release_managers=managers,
        on_round=progress)
  if metrics:
    common.write_json(out / 'summary.json', metrics)
  print(f'done: {out / "summary.json"}', flush=True)


def _prefixed(prefix: str, metrics: dict[str, float]) -> dict[str, float]:
  return {f'{prefix}/{k}': v for k, v in metrics.items()}


if __name__ == '__main__':
  app.run(main)
