"""The one client loop: a loss of weight tensors or a tff.learning model, a
dataset or sliced batches, and a hook on the gradients, all the same SGD."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import sliced
from tff_rec.training import functional

X = np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0], [-1.0, 1.0], [0.0, 3.0]], np.float32)
Y = np.array([[1.0], [0.0], [2.0], [-1.0], [0.5]], np.float32)
START = [np.array([[0.2], [-0.1]], np.float32)]
LEARNING_RATE = 0.1


def _by_hand(hook=lambda g: g):
  """SGD on the mean squared error of a bias-free linear model, batches of 2."""
  w, loss_sum = START[0].copy(), 0.0
  for start in range(0, len(X), 2):
    x, y = X[start:start + 2], Y[start:start + 2]
    error = x @ w - y
    loss_sum += float(np.mean(error ** 2)) * len(x)
    w = w - LEARNING_RATE * hook(2 * x.T @ error / len(x))
  return w, loss_sum


def _dataset():
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=X, y=Y)).batch(2)


def _keras_model():
  keras = tf.keras.Sequential([tf.keras.layers.Dense(1, use_bias=False, input_shape=(2,))])
  return tff.learning.models.from_keras_model(
      keras, loss=tf.keras.losses.MeanSquaredError(),
      input_spec=_dataset().element_spec)


def _as_xy(batch):
  return (batch['x'], batch['y'])


def test_a_keras_model_and_a_loss_of_tensors_take_the_same_steps():
  expected, expected_loss = _by_hand()
  sgd = tff.learning.optimizers.build_sgdm(LEARNING_RATE)
  trained = functional.train(_keras_model(), sgd, START, _dataset().map(_as_xy))
  np.testing.assert_allclose(trained.weights[0], expected, rtol=1e-6)
  assert float(trained.loss_sum) == pytest.approx(expected_loss, rel=1e-5)
  assert (int(trained.count), int(trained.steps)) == (5, 3)

  def loss(weights, batch):
    return tf.reduce_mean((batch['x'] @ weights['w'] - batch['y']) ** 2)

  batches = sliced.Batches(collections.OrderedDict(x=tf.constant(X), y=tf.constant(Y)),
                           tf.constant([0, 2, 4]), tf.constant([2, 4, 5]), tf.range(5))
  for data in (_dataset(), batches):
    trained = functional.train(loss, sgd, {'w': START[0]}, data)
    np.testing.assert_allclose(trained.weights['w'], expected, rtol=1e-6)
    assert (int(trained.count), int(trained.steps)) == (5, 3)


def test_the_hook_changes_the_gradients_every_step_takes():
  shift = np.array([[0.3], [-0.2]], np.float32)
  expected, _ = _by_hand(lambda g: g - shift)
  trained = functional.train(_keras_model(), tff.learning.optimizers.build_sgdm(LEARNING_RATE),
                             START, _dataset().map(_as_xy), hook=lambda g: [g[0] - shift])
  np.testing.assert_allclose(trained.weights[0], expected, rtol=1e-6)

