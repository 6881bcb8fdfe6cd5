import pytest
import tensorflow as tf

from tasks import movielens_next_item as task_lib
from tff_rec.training import centralized


def test_centralized_training_learns_a_sequential_pattern(ml100k_dir):
  """Fixture users walk the catalogue in order: the next item is learnable."""
  task = task_lib.MovieLensNextItem(task_lib.Config(
      data_dir=str(ml100k_dir), loss='global_softmax', batch_size=8))
  split = task.centralized_split()
  model = task.keras_model()
  evaluator = task.evaluator(model)
  test = task.evaluation_dataset(split.test)
  before = evaluator(test)['recall_at_10']
  seen = []
  metrics = centralized.train(
      model, loss=task.loss(), optimizer=tf.keras.optimizers.Adam(0.05),
      epoch_dataset=lambda e: task.centralized_epoch(split.train, e), epochs=8,
      evaluate=lambda m: evaluator(test), eval_every=4,
      on_epoch=lambda e, m: seen.append((e, 'recall_at_10' in m)))
  assert seen == [(e, e in (4, 8)) for e in range(1, 9)]
  assert metrics['recall_at_10'] > max(0.5, before + 0.3)


def test_epochs_must_be_positive():
  with pytest.raises(ValueError, match='epochs must be >= 1'):
    centralized.train(None, loss=None, optimizer=None, epoch_dataset=None, epochs=0,
                      evaluate=None)
