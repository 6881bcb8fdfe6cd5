r"""The centralized baseline: same task, model, loss and metrics, trained with Keras.

  python -m launch.centralized --loss=global_softmax --epochs=10 \
      --output_dir=runs/central_gs

Examples of all users are pooled, shuffled and split by example 80/10/10 (the
paper's centralized protocol). Reported: recall@k on the validation split each
`--eval_every` epochs; at the end on the test split and, for a like-for-like
comparison with federated runs, on the examples of the federated test users
(`test_users/...`).
"""

import asyncio

from absl import app
from absl import flags

from launch import common  # sets TF's log level before TensorFlow loads
import tensorflow as tf  # pylint: disable=g-bad-import-order
import tensorflow_federated as tff
from tff_rec.training import centralized

flags.DEFINE_integer('epochs', 5, 'Passes over the training examples.', lower_bound=1)
flags.DEFINE_enum('optimizer', 'adam', ['sgd', 'adam'], 'Optimizer.')
flags.DEFINE_float('learning_rate', 0.01, 'Learning rate.', lower_bound=0)
flags.DEFINE_integer('eval_every', 1, 'Evaluate every N epochs (0: at the end).',
                     lower_bound=0)

flags.mark_flag_as_required('output_dir')
FLAGS = flags.FLAGS

RUN_FLAGS = common.TASK_FLAGS + ('epochs', 'optimizer', 'learning_rate', 'eval_every')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  try:
    config = common.task_config()
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  task = common.build_task(config)
  out = common.output_dir({name: FLAGS[name].value for name in RUN_FLAGS})
  split = task.centralized_split()
  print(f'{FLAGS.task} centralized: {len(split.train["label"])} training '
        f'examples, {task.vocab_size} items; {FLAGS.loss}; output in {out}',
        flush=True)

  tf.keras.utils.set_random_seed(FLAGS.seed)
  model = task.keras_model()
  evaluator = task.evaluator(model)
  datasets = {name: task.evaluation_dataset(examples) for name, examples in (
      ('validation', split.validation), ('test', split.test),
      ('test_users', task.split.pooled('test')))}
  optimizer = (tf.keras.optimizers.Adam(FLAGS.learning_rate)
               if FLAGS.optimizer == 'adam' else
               tf.keras.optimizers.SGD(FLAGS.learning_rate))
  csv = tff.program.CSVFileReleaseManager(str(out / 'metrics.csv'),
                                          key_fieldname='epoch')
  progress = common.Progress(FLAGS.epochs, 'epoch', {
      'loss': 'train/loss', 'val recall_at_10': 'validation/recall_at_10'})

  def evaluate(m):
    del m  # the evaluator holds the model
    return {f'validation/{k}': v for k, v in evaluator(datasets['validation']).items()}

  def on_epoch(epoch, metrics):
    if epoch == FLAGS.epochs:
      for name in ('test', 'test_users'):
        metrics.update({f'{name}/{k}': v for k, v in evaluator(datasets[name]).items()})
    asyncio.run(csv.release(dict(sorted(metrics.items())), key=epoch))
    progress(epoch, metrics)

  metrics = centralized.train(
      model, loss=task.loss(), optimizer=optimizer,
      epoch_dataset=lambda epoch: task.centralized_epoch(split.train, epoch),
      epochs=FLAGS.epochs, evaluate=evaluate, eval_every=FLAGS.eval_every,
      on_epoch=on_epoch)
  common.write_json(out / 'summary.json', metrics)
  print(f'done: {out / "summary.json"}', flush=True)


if __name__ == '__main__':
  app.run(main)
