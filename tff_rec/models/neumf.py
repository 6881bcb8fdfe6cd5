"""NeuMF (He et al. 2017) as functions of a weights dict, with BPR training.

A GMF branch (user * item embeddings) and an MLP branch (concatenated user
and item embeddings through `mlp_layers` halving ReLU layers) meet in one
linear output. The weights are plain tensors in an OrderedDict rather than a
Keras model so that a client can train whichever form its item tables take
(full, hashed memory, low rank: see compressed_table) with the same code, and
hold only that form in memory. Item rows are read through `item_rows(name,
ids)`, the one place the form matters.

Initialisation as FAIR's official NeuMF (adapted from yihong-chen's NCF):
embeddings N(0, 0.01^2), MLP kernels Xavier-uniform, output kernel Kaiming-
uniform with a = 1 (bound sqrt(3 / fan_in)), biases 0.
"""

import collections
import dataclasses
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

ITEM_TABLES = ('item_gmf', 'item_mlp')
ItemRows = Callable[[str, tf.Tensor], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class NeuMFShape:
  num_users: int
  num_items: int
  factors: int = 8
  mlp_layers: int = 1

  def __post_init__(self):
    for name in ('num_users', 'num_items', 'factors', 'mlp_layers'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')

  @property
  def mlp_dim(self) -> int:
    """Width of the MLP branch's embeddings (the layers halve it down to factors)."""
    return self.factors * 2 ** (self.mlp_layers - 1)

  def embedding_shapes(self) -> dict[str, tuple[int, int]]:
    """Shape of each embedding table: the users' (a row per user), then the items'."""
    return {'user_gmf': (self.num_users, self.factors),
            'user_mlp': (self.num_users, self.mlp_dim),
            'item_gmf': (self.num_items, self.factors),
            'item_mlp': (self.num_items, self.mlp_dim)}

  def table_shapes(self) -> dict[str, tuple[int, int]]:
    """Shape of each item table (the tables FAIR compresses)."""
    return {name: self.embedding_shapes()[name] for name in ITEM_TABLES}


def initial_weights(shape: NeuMFShape, seed: int) -> collections.OrderedDict:
  rng = np.random.default_rng(seed)
  f, e = shape.factors, shape.mlp_dim

  def normal(rows, cols):
    return rng.normal(0.0, 0.01, size=(rows, cols)).astype(np.float32)

  def uniform(bound, rows, cols):
    return rng.uniform(-bound, bound, size=(rows, cols)).astype(np.float32)

  weights = collections.OrderedDict(
      user_gmf=normal(shape.num_users, f), user_mlp=normal(shape.num_users, e),
      item_gmf=normal(shape.num_items, f), item_mlp=normal(shape.num_items, e))
  width = 2 * e
  for layer in range(shape.mlp_layers):
    weights[f'mlp_{layer}/kernel'] = uniform(np.sqrt(6 / (width + width // 2)),
                                             width, width // 2)
    weights[f'mlp_{layer}/bias'] = np.zeros(width // 2, np.float32)
    width //= 2
  weights['output/kernel'] = uniform(np.sqrt(3 / (f + width)), f + width, 1)
  weights['output/bias'] = np.zeros(1, np.float32)
  return weights


def full_item_rows(weights: Mapping[str, tf.Tensor]) -> ItemRows:
  """Item rows read from full [num_items, dim] tables."""
  return lambda name, ids: tf.gather(weights[name], ids)


def _mlp(weights, hidden: tf.Tensor) -> tf.Tensor:
  layer = 0
  while f'mlp_{layer}/kernel' in weights:
    hidden = tf.nn.relu(tf.matmul(hidden, weights[f'mlp_{layer}/kernel'])
                        + weights[f'mlp_{layer}/bias'])
    layer += 1
  return hidden


def scores(weights: Mapping[str, tf.Tensor], users: tf.Tensor, items: tf.Tensor,
           item_rows: ItemRows) -> tf.Tensor:
  """Score of each (user, item) pair: [B]."""
  gmf = tf.gather(weights['user_gmf'], users) * item_rows('item_gmf', items)
  mlp = _mlp(weights, tf.concat(
      [tf.gather(weights['user_mlp'], users), item_rows('item_mlp', items)], -1))
  out = tf.matmul(tf.concat([gmf, mlp], -1), weights['output/kernel'])
  return out[:, 0] + weights['output/bias'][0]


def score_margins(weights: Mapping[str, tf.Tensor], batch: Mapping[str, tf.Tensor],
                  item_rows: ItemRows) -> tf.Tensor:
  """s(u, pos) - mean_k s(u, neg_k) per triple of the batch (user [B], positive [B],
  negatives [B, K]): [B]."""
  users, negatives = batch['user'], batch['negatives']
  num_negatives = tf.shape(negatives)[1]
  pos = scores(weights, users, batch['positive'], item_rows)
  neg = scores(weights, tf.repeat(users, num_negatives), tf.reshape(negatives, [-1]),
               item_rows)
  return pos - tf.reduce_mean(tf.reshape(neg, [-1, num_negatives]), axis=1)


def bpr_loss(weights: Mapping[str, tf.Tensor], batch: Mapping[str, tf.Tensor],
             item_rows: ItemRows, *, l2: float) -> tf.Tensor:
  """BPR with L2 decay on the batch's embeddings, as FAIR's official code.

  batch: user [B], positive [B], negatives [B, K]. Loss:
  -mean(log sigmoid(s(u, pos) - mean_k s(u, neg_k)))
  + l2 * (sum of squared norms of every embedding the batch used) / 2 / B.
  (The official code adds the user MLP embedding's norm six times instead
  of each embedding's, a bug noted in OFFICIAL_CODE_NOTES.md; this follows
  the intent.)
  """
  users, positive, negatives = batch['user'], batch['positive'], batch['negatives']
  ranking = -tf.reduce_mean(tf.math.log_sigmoid(score_margins(weights, batch, item_rows)))
  items = tf.concat([positive, tf.reshape(negatives, [-1])], 0)
  squares = [tf.reduce_sum(tf.square(tf.gather(weights[name], users)))
             for name in ('user_gmf', 'user_mlp')]
  squares += [tf.reduce_sum(tf.square(item_rows(name, items))) for name in ITEM_TABLES]
  batch_size = tf.cast(tf.shape(users)[0], tf.float32)
  return ranking + l2 * tf.add_n(squares) / 2.0 / batch_size


def score_all_items(weights: Mapping[str, tf.Tensor], users: tf.Tensor) -> tf.Tensor:
  """[len(users), num_items] scores from full tables, without tiling the MLP input.

  The first MLP layer splits into a user part and an item part (its kernel
  rows), so each side is multiplied once and broadcast: the biggest tensor
  is [users, items, first layer width].
  """
  user_mlp = tf.gather(weights['user_mlp'], users)
  kernel = weights['mlp_0/kernel']
  e = user_mlp.shape[-1]
  hidden = tf.nn.relu(tf.matmul(user_mlp, kernel[:e])[:, None, :]
                      + tf.matmul(weights['item_mlp'], kernel[e:])[None]
                      + weights['mlp_0/bias'])
  layer = 1
  while f'mlp_{layer}/kernel' in weights:
    hidden = tf.nn.relu(tf.einsum('uid,do->uio', hidden, weights[f'mlp_{layer}/kernel'])
                        + weights[f'mlp_{layer}/bias'])
    layer += 1
  f = weights['user_gmf'].shape[-1]
  out_kernel = weights['output/kernel'][:, 0]
  gmf_part = tf.matmul(tf.gather(weights['user_gmf'], users) * out_kernel[:f],
                       weights['item_gmf'], transpose_b=True)
  mlp_part = tf.einsum('uid,d->ui', hidden, out_kernel[f:])
  return gmf_part + mlp_part + weights['output/bias'][0]


class NeuMFMargins(tf.keras.layers.Layer):
  """NeuMF's weights (named as initial_weights) as one Keras layer: triples ->
  score_margins [B, 1]. Initialised by the same laws as initial_weights (Keras's
  seeded draws, not the same numbers)."""

  def __init__(self, shape: NeuMFShape, seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.shape, self.seed = shape, seed
    self.named = collections.OrderedDict()

  def build(self, input_shape):
    f, e, s = self.shape.factors, self.shape.mlp_dim, self.seed
    normal = lambda k: tf.keras.initializers.RandomNormal(stddev=0.01, seed=s + k)
    for k, (name, shape) in enumerate(self.shape.embedding_shapes().items()):
      self.named[name] = self.add_weight(name=name, shape=shape, initializer=normal(k))
    width = 2 * e
    for layer in range(self.shape.mlp_layers):
      self.named[f'mlp_{layer}/kernel'] = self.add_weight(
          name=f'mlp_{layer}/kernel', shape=(width, width // 2),
          initializer=tf.keras.initializers.GlorotUniform(seed=s + 10 + layer))
      self.named[f'mlp_{layer}/bias'] = self.add_weight(
          name=f'mlp_{layer}/bias', shape=(width // 2,), initializer='zeros')
      width //= 2
    self.named['output/kernel'] = self.add_weight(
        name='output/kernel', shape=(f + width, 1), initializer=tf.keras.initializers
        .VarianceScaling(1.0, 'fan_in', 'uniform', seed=s + 20))  # bound sqrt(3 / fan_in)
    self.named['output/bias'] = self.add_weight(name='output/bias', shape=(1,),
                                                initializer='zeros')

  def call(self, triples):
    return score_margins(self.named, triples, full_item_rows(self.named))[:, None]

  def get_config(self):
    return {**super().get_config(), 'shape': dataclasses.asdict(self.shape), 'seed': self.seed}


def keras_model(shape: NeuMFShape, num_negatives: int, seed: int) -> tf.keras.Model:
  """NeuMF as a Keras model over {'user', 'positive', 'negatives'} triples, for the
  algorithms that train one: its output is the margin BprLoss takes. No L2 term
  (a regularization loss would be a second objective for them to average)."""
  triples = collections.OrderedDict(
      user=tf.keras.Input((), dtype=tf.int32, name='user'),
      positive=tf.keras.Input((), dtype=tf.int32, name='positive'),
      negatives=tf.keras.Input((num_negatives,), dtype=tf.int32, name='negatives'))
  return tf.keras.Model(triples, NeuMFMargins(shape, seed, name='neumf')(triples),
                        name='neumf')


def keras_weight_names(model: tf.keras.Model) -> list[str]:
  """A Keras NeuMF's trainable variables by initial_weights' names, in its order."""
  return [v.name.split('/', 1)[1].rsplit(':', 1)[0] for v in model.trainable_variables]


class BprLoss(tf.keras.losses.Loss):
  """-log sigmoid(margin): BPR on a Keras NeuMF's output (the label is unused)."""

  PER_EXAMPLE = True  # each row's loss reads that row only (keras_lockstep)

  def call(self, y_true, y_pred):
    del y_true
    return -tf.math.log_sigmoid(y_pred)
