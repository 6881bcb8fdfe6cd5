"""The FedAvg family's builders for a task that offers only a Keras model and its
datasets (tff.learning's processes: a plug-in task like docs/plugins.md's), run as
launch.train runs them, against their maths in numpy: each client's steps, its
update weighed by examples or equally, FedProx's term, FedSubAvg's N / n_m. The
task, made here: ratings, each user a client holding an unequal number; a score
a (u . v) + b with MSE; every local epoch one batch of all a client's examples,
so its steps do not depend on the dataset's order."""

import collections
import types

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests.algorithms import as_trained
from tests.algorithms import reference
from tff_rec.models import tables

COUNTS = (3, 9, 5, 14, 7, 4)
USERS, ITEMS, DIM, EPOCHS, RATE, SEED = len(COUNTS), 12, 3, 3, 0.2, 4


class FullBatchRatings:
  NAME = 'full_batch_ratings'
  DEFAULT_ALGORITHM = 'fedavg'
  TRAIN_DEFAULTS = dict(clients_per_round=4, client_optimizer='sgd', client_learning_rate=RATE,
                        server_optimizer='sgd', server_learning_rate=1.0)
  EVAL_PARTS = ('test', 'test')
  PROGRESS = {}
  input_spec = (collections.OrderedDict(user=tf.TensorSpec([None], tf.int32),
                                        item=tf.TensorSpec([None], tf.int32)),
                tf.TensorSpec([None, 1], tf.float32))

  def __init__(self):
    self.config = types.SimpleNamespace(seed=SEED)
    rng = np.random.default_rng(SEED)
    self.clients = {
        f'u{u}': (collections.OrderedDict(
            user=np.full(n, u, np.int32),
            item=((2 * u + rng.integers(0, 4, n)) % ITEMS).astype(np.int32)),
                  rng.integers(1, 6, (n, 1)).astype(np.float32))
        for u, n in enumerate(COUNTS)}
    self.train_client_ids = sorted(self.clients)

  def describe(self) -> str:
    return f'{USERS} users'

  def evaluate(self, weights, part):
    del weights, part
    return {}

  def keras_model(self):
    ids = {k: tf.keras.Input((), dtype=tf.int32, name=k) for k in ('user', 'item')}
    init = tf.keras.initializers.RandomNormal(stddev=0.5, seed=SEED)
    users = tf.keras.layers.Embedding(USERS, DIM, embeddings_initializer=init, name='users')
    items = tf.keras.layers.Embedding(ITEMS, DIM, embeddings_initializer=init, name='items')
    score = tf.keras.layers.Dot(axes=1)([users(ids['user']), items(ids['item'])])
    return tf.keras.Model(ids, tf.keras.layers.Dense(1, name='scale', kernel_initializer=(
        tf.keras.initializers.Constant(0.8)), bias_initializer='ones')(score))

  def model_fn(self):
    return tff.learning.models.from_keras_model(
        self.keras_model(), loss=tf.keras.losses.MeanSquaredError(), input_spec=self.input_spec)

  @property
  def dataset_computation(self):
    x, y = self.input_spec

    @tff.tensorflow.computation(tff.types.tensorflow_to_type(x),
                                tff.types.tensorflow_to_type(y), np.int64)
    def client_dataset(features, ratings, seed):
      examples = tf.data.Dataset.from_tensor_slices((features, ratings)).shuffle(64, seed=seed)
      return examples.batch(tf.cast(tf.shape(ratings)[0], tf.int64)).repeat(EPOCHS)

    return client_dataset

  def client_arguments(self, client_id, seed):
    features, ratings = self.clients[client_id]
    return features, ratings, np.int64(seed)

  @property
  def tables(self):
    return tables.of_keras(self.keras_model(), {'users': ['user'], 'items': ['item']})

  def client_table_rows(self):
    return {name: [self.clients[c][0][column] for c in self.train_client_ids]
            for name, column in (('users', 'user'), ('items', 'item'))}

  def client_sizes(self):
    return list(COUNTS)


def _gradient(weights, features, ratings):
  """(MSE, gradients) of a (u . v) + b; weights [users, items, a [1, 1], b [1]]."""
  users, items, scale, bias = weights
  u, i, y = features['user'], features['item'], np.asarray(ratings).reshape(-1)
  dots = np.sum(users[u] * items[i], axis=1)
  error = 2 * (scale[0, 0] * dots + bias[0] - y) / len(y)
  grad_users, grad_items = np.zeros_like(users), np.zeros_like(items)
  np.add.at(grad_users, u, error[:, None] * scale[0, 0] * items[i])
  np.add.at(grad_items, i, error[:, None] * scale[0, 0] * users[u])
  loss = float(np.mean((scale[0, 0] * dots + bias[0] - y) ** 2))
  return loss, [grad_users, grad_items, np.array([[error @ dots]]), np.array([error.sum()])]


def _fedavg(run, **options):
  """FedAvg's rounds (reference.fedavg): each client's every epoch one full batch."""
  return reference.fedavg(run, _gradient, lambda client: [client.input[:2]] * EPOCHS, RATE,
                          **options)


def _run(monkeypatch, name, **settings):
  return as_trained.train_task(monkeypatch, FullBatchRatings(), name, rounds=2, seed=SEED,
                               **settings)


@pytest.mark.parametrize('heat', ['clients', 'examples'])
def test_fedavg_weighs_clients_as_its_heat_says(monkeypatch, heat):
  run = _run(monkeypatch, 'fedavg', options=dict(heat=heat))
  reference.assert_matches(run, _fedavg(run, weighting=heat))


def test_fedprox_pulls_each_step_towards_the_broadcast_model(monkeypatch):
  run = _run(monkeypatch, 'fedprox', options=dict(proximal_strength=2.0))
  reference.assert_matches(run, _fedavg(run, weighting='examples', proximal=2.0))


def test_fedsubavg_scales_each_row_by_n_over_its_heat(monkeypatch):
  """Heat in clients (and clients weighed equally), the factor bounded at 4."""
  task = FullBatchRatings()
  run = _run(monkeypatch, 'fedsubavg', options=dict(heat='clients', max_correction=4.0))
  scales = []
  for name, rows in task.client_table_rows().items():
    heat = np.zeros(USERS if name == 'users' else ITEMS)
    for touched in rows:
      heat[np.unique(touched)] += 1
    scales.append(np.minimum(np.where(heat > 0, USERS / np.maximum(heat, 1), 1.0), 4.0))
  reference.assert_matches(run, _fedavg(run, weighting='clients', row_scales=scales))
