r"""The centralized baseline: same task, model, loss and metrics, data pooled.

  python -m launch.centralized --loss=global_softmax --epochs=10 \
      --output_dir=runs/central_gs
  python -m launch.centralized --task=ranking --epochs=20 \
      --learning_rate=1e-3 --output_dir=runs/central_goodreads

What is pooled and evaluated is the task's protocol (its train_centralized):
MovieLens next-item splits all users' examples by example 80/10/10 and reports
recall@k on validation, test and the federated test users; Goodreads ranking
trains on every user's triples and reports test NDCG@k. MovieLens CTR trains
on every training example; with --steps_per_epoch=I and --batch_size=K*B an
epoch is FedSubAvg's CentralSGD round (the examples of one federated round).
"""

import asyncio
import pathlib
import sys

from absl import app
from absl import flags

from experiments import files
from launch import common
from launch import outputs
from launch import progress
import tensorflow_federated as tff  # pylint: disable=g-bad-import-order
from tff_rec.training import loop
from tff_rec.training import optimizers

flags.DEFINE_integer('epochs', 5, 'Passes over the training examples.', lower_bound=1)
flags.DEFINE_enum('optimizer', 'adam', optimizers.OPTIMIZERS, 'Optimizer.')
flags.DEFINE_float('learning_rate', 0.01, 'Learning rate.', lower_bound=0)
flags.DEFINE_integer('eval_every', 1, 'Evaluate every N epochs (0: at the end).',
                     lower_bound=0)
flags.DEFINE_integer('steps_per_epoch', 0, 'ctr: batches per epoch (0: a full '
                     'pass).', lower_bound=0)

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  common.require('output_dir')
  outputs.check_folder(FLAGS.output_dir)  # before the data is read
  config = common.task_config('centralized')
  target = progress.parse_target(FLAGS.target)
  try:
    optimizer = optimizers.OptimizerConfig(FLAGS.optimizer, FLAGS.learning_rate)
  except ValueError as e:
    raise app.UsageError(f'--optimizer={FLAGS.optimizer} --learning_rate='
                         f'{FLAGS.learning_rate}: {e}') from None
  task = common.build_task(config)
  progress.check_target_part(target, ('train', *task.EVAL_PARTS))
  steps = {'steps_per_epoch': FLAGS.steps_per_epoch} if FLAGS.steps_per_epoch else {}
  if steps and FLAGS.task != 'ctr':
    raise app.UsageError(f'--steps_per_epoch does not apply to --task={FLAGS.task}')
  new = not (pathlib.Path(FLAGS.output_dir) / 'config.json').exists()
  out = outputs.output_dir(FLAGS.output_dir, common.run_config(
      config, epochs=FLAGS.epochs, optimizer=optimizer.settings(), eval_every=FLAGS.eval_every,
      **steps))
  print(f'{FLAGS.task} centralized: {task.describe()}; output in {out}', flush=True)
  csv = tff.program.CSVFileReleaseManager(str(out / 'metrics.csv'), key_fieldname='epoch')
  show_progress = progress.Progress(FLAGS.epochs, 'epoch', {
      'loss': 'train/loss', **{k: v for k, v in task.PROGRESS.items() if k != 'loss'}})

  def on_epoch(epoch, metrics):
    asyncio.run(csv.release(dict(sorted(metrics.items())), key=epoch))
    show_progress(epoch, metrics)
    progress.check_target_reported(target, metrics)

  try:
    metrics = task.train_centralized(optimizer, epochs=FLAGS.epochs,
                                     eval_every=FLAGS.eval_every, on_epoch=on_epoch, **steps)
  except ValueError as e:  # settings the pooled data cannot take (e.g. no full batch)
    if new:
      outputs.discard_unstarted(out)
    raise app.UsageError(str(e)) from None
  except KeyboardInterrupt:
    print(f'interrupted: {out / "metrics.csv"} holds the epochs done; a centralized run '
          'does not resume (the same command starts it over from epoch 1)',
          file=sys.stderr, flush=True)
    raise SystemExit(130) from None
  except loop.Diverged as e:
    common.stop_diverged(e, out, 'a lower --learning_rate')
  if target:
    metrics.update(progress.first_reached(out / 'metrics.csv', 'epoch', target))
  files.write_summary(out / 'summary.json', metrics)
  print(f'done: {out / "summary.json"}', flush=True)


if __name__ == '__main__':
  common.run(main)
