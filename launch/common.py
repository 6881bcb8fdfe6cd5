"""What the launchers share: task flags, the output directory, progress lines."""

import json
import os
import pathlib
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # before TensorFlow loads

from absl import app
from absl import flags
from absl import logging

import tasks
from tff_rec import losses
from tff_rec.data import tables
from tff_rec.runtime import native

DEFAULT_DATA_DIR = '../shared/data/ml-100k'

flags.DEFINE_enum('task', 'movielens_next_item', sorted(tasks.TASKS), 'Task to run.')
flags.DEFINE_string('data_dir', DEFAULT_DATA_DIR,
                    'Dataset directory (MovieLens 100K or 1M files).')
flags.DEFINE_string('output_dir', None, 'Where metrics, checkpoints and the '
                    'summary go; an interrupted run resumes from here.')
flags.DEFINE_enum('loss', 'global_softmax', sorted(losses.RETRIEVAL_LOSSES),
                  'Retrieval loss (global_softmax: the paper\'s best federated).')
flags.DEFINE_float('spreadout_weight', 0.001,
                   'Weight of the spreadout term of the *_spreadout losses.')
flags.DEFINE_integer('embedding_dim', 16, 'Item embedding dimension.', lower_bound=1)
flags.DEFINE_integer('batch_size', 16, 'Training batch size.', lower_bound=1)
flags.DEFINE_integer('max_examples_per_user', 300,
                     'Cap on examples per user (0: none).', lower_bound=0)
flags.DEFINE_integer('seed', 0, 'Seed of every random choice.')

FLAGS = flags.FLAGS
# The flags above: what defines the task (a run's config.json includes them).
TASK_FLAGS = ('task', 'data_dir', 'loss', 'spreadout_weight', 'embedding_dim',
              'batch_size', 'max_examples_per_user', 'seed')
logging.set_verbosity(logging.WARNING)  # TFF logs every checkpoint at INFO
# Launchers run TFF computations only inside a NativeRuntime; TFF's own
# import-time context would print an error at exit (see runtime.native).
native.drop_tff_default_context()


def task_config(**overrides):
  """The task's Config from the shared flags (plus launcher-specific fields)."""
  from tasks import movielens_next_item  # pylint: disable=g-import-not-at-top
  from tff_rec.data import next_item  # pylint: disable=g-import-not-at-top
  return movielens_next_item.Config(
      data_dir=FLAGS.data_dir, loss=FLAGS.loss,
      spreadout_weight=FLAGS.spreadout_weight,
      embedding_dim=FLAGS.embedding_dim, batch_size=FLAGS.batch_size,
      seed=FLAGS.seed,
      examples=next_item.NextItemConfig(
          max_examples_per_user=FLAGS.max_examples_per_user),
      **overrides)


def build_task(config):
  """The task, or a UsageError naming --data_dir when its files are wrong."""
  try:
    return tasks.TASKS[FLAGS.task](config)
  except tables.DataFormatError as e:
    raise app.UsageError(
        f'--data_dir={FLAGS.data_dir}: {e}\nGet MovieLens with '
        '`python -m launch.download --dataset=ml-100k --cache_dir=DIR` and '
        'pass --data_dir=DIR/ml-100k.') from None


def output_dir(run_config: dict) -> pathlib.Path:
  """Creates --output_dir, or checks that the run there had the same config.

  A run resumes only under the flags it started with; anything else would
  mix two experiments in one metrics file.
  """
  root = pathlib.Path(FLAGS.output_dir)
  root.mkdir(parents=True, exist_ok=True)
  saved = root / 'config.json'
  if saved.exists():
    previous = json.loads(saved.read_text())
    if previous != run_config:
      changed = sorted(k for k in set(previous) | set(run_config)
                       if previous.get(k) != run_config.get(k))
      raise app.UsageError(
          f'--output_dir={root} holds a run with other settings '
          f'({", ".join(changed)}); resume it with the same flags or choose a '
          'new --output_dir.')
  else:
    write_json(saved, run_config)
  return root


def write_json(path: pathlib.Path, value) -> None:
  """Writes JSON atomically (temp file + rename): never half-written."""
  with tempfile.NamedTemporaryFile('w', dir=path.parent, delete=False,
                                   suffix='.tmp') as f:
    json.dump(value, f, indent=2, sort_keys=True)
  os.replace(f.name, path)


class Progress:
  """Prints one line per step: chosen metrics, time per step and an ETA.

  `shown` maps a short label to a metric key; absent metrics are skipped.
  The first step seen may be past 1 (a resumed run): the ETA counts from it.
  """

  def __init__(self, total: int, unit: str, shown: dict[str, str]):
    self.total, self.unit, self.shown = total, unit, shown
    self.first = None
    self.started = time.monotonic()  # the first step's time includes set-up

  def __call__(self, step: int, metrics: dict[str, float]) -> None:
    if self.first is None:
      self.first = step
      if step > 1:
        print(f'resumed from checkpoint at {self.unit} {step}', flush=True)
    per_step = (time.monotonic() - self.started) / (step - self.first + 1)
    eta = per_step * (self.total - step)
    values = '  '.join(f'{label} {metrics[key]:.4g}'
                       for label, key in self.shown.items() if key in metrics)
    print(f'{self.unit} {step}/{self.total}  {values}  '
          f'{per_step:.2f} s/{self.unit}  ETA {_duration(eta)}', flush=True)


def _duration(seconds: float) -> str:
  minutes, seconds = divmod(int(seconds), 60)
  hours, minutes = divmod(minutes, 60)
  return f'{hours}h{minutes:02d}m' if hours else f'{minutes}m{seconds:02d}s'

