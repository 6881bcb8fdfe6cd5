import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks import next_item as task_lib
from tff_rec.training import centralized


def test_keras_epochs_learn_a_sequential_pattern_on_the_evaluation_schedule(ml100k_dir):
  """Fixture users walk the catalogue in order: the next item is learnable."""
  task = task_lib.Task(task_lib.Config(
      data_dir=str(ml100k_dir), loss='global_softmax', batch_size=8))
  split = task.centralized_split()
  model = task.keras_model()
  evaluator = task.objective.evaluator(model)
  test = task.objective.dataset(split.test, model)
  before = evaluator(test)['recall_at_10']
  seen = []
  metrics = centralized.train(
      centralized.KerasEpochs(model, loss=task.loss(), optimizer=tf.keras.optimizers.Adam(0.05),
                              epoch_dataset=lambda e: task.centralized_epoch(split.train, e)),
      epochs=8, evaluate=lambda: evaluator(test), eval_every=4,
      final_evaluate=lambda: {'final': 1.0},
      on_epoch=lambda e, m: seen.append((e, 'recall_at_10' in m, 'final' in m)))
  assert seen == [(e, e in (4, 8), e == 8) for e in range(1, 9)]
  assert metrics['recall_at_10'] > max(0.5, before + 0.3)


def test_functional_epochs_step_the_weights_with_one_optimizer_throughout():
  """Two epochs of one batch of SGD with momentum on (w - 3)^2: the momentum
  carries over from the first epoch into the second."""
  epoch_of = centralized.FunctionalEpochs(
      lambda w, batch: tf.reduce_mean((w['w'] - batch) ** 2),
      tff.learning.optimizers.build_sgdm(0.1, momentum=0.5), {'w': np.float32(0.0)},
      lambda epoch: tf.data.Dataset.from_tensors(tf.constant([3.0])))
  losses = []
  centralized.train(epoch_of, epochs=2, evaluate=dict,
                    on_epoch=lambda e, m: losses.append(m['train/loss']))
  # w1 = 0.6 (gradient -6); momentum 0.5 x -6 + gradient -4.8 = -7.8: w2 = 1.38.
  np.testing.assert_allclose(losses, [9.0, 2.4 ** 2], rtol=1e-6)
  np.testing.assert_allclose(epoch_of.weights['w'], 1.38, rtol=1e-6)


def test_epochs_must_be_positive():
  with pytest.raises(ValueError, match='epochs must be >= 1'):
    centralized.train(lambda epoch: 0.0, epochs=0, evaluate=dict)
