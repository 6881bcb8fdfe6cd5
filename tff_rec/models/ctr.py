"""CTR models over int feature ids (tff_rec.data.ctr): LR, DCNv2 and DIN.

Each model is a Keras model from a dict of int32 feature tensors to one
click logit per example ([batch, 1]). Its embedding tables are Keras
Embedding layers named after the table, so FedSubAvg can find a table's
variable ('<table>/embeddings:0') and count which clients touch its rows.
Row 0 of every table is the padding id: multi-valued features mask it, so
padding never receives a gradient, and a row a client's data never index
gets an exactly zero update (no weight decay on the tables).
"""

import dataclasses
import functools
from typing import Callable

import tensorflow as tf
import tensorflow_recommenders as tfrs


@dataclasses.dataclass(frozen=True)
class CtrModel:
  """What a model reads and which columns index each of its tables."""
  columns: tuple[str, ...]
  tables: dict[str, tuple[str, ...]]  # table name -> feature columns that index it
  default_dim: int
  build: Callable[..., tf.keras.Model]  # (vocab_sizes, dim, seed) -> Keras model


def _inputs(columns, widths: dict[str, int]) -> dict[str, tf.keras.Input]:
  return {c: tf.keras.Input(shape=(widths[c],) if widths.get(c) else (), name=f'{c}_ids',
                            dtype=tf.int32) for c in columns}


EMBEDDING_STDDEV = 0.01  # the tables' initial normal stddev


def _table(name: str, vocab_size: int, dim: int, seed: int, stddev: float
           ) -> tf.keras.layers.Embedding:
  return tf.keras.layers.Embedding(
      vocab_size, dim, name=name,
      embeddings_initializer=tf.keras.initializers.RandomNormal(stddev=stddev, seed=seed))


class MaskedPooling(tf.keras.layers.Layer):
  """The rows of a multi-valued feature, padding id 0 masked out, summed or averaged.

  A layer rather than raw TF ops on Keras tensors, so that TFF can rebuild the
  model as a functional model (table forms, FAIR, CoLR).
  """

  def __init__(self, mode: str = 'sum', **kwargs):
    super().__init__(**kwargs)
    if mode not in ('sum', 'mean'):
      raise ValueError(f'unknown pooling {mode!r}; choose sum or mean')
    self.mode = mode

  def call(self, rows, ids):
    mask = tf.cast(tf.not_equal(ids, 0), rows.dtype)[..., None]
    total = tf.reduce_sum(rows * mask, 1)
    return total if self.mode == 'sum' else total / tf.maximum(tf.reduce_sum(mask, 1), 1.0)

  def get_config(self):
    return {**super().get_config(), 'mode': self.mode}


def build_lr(vocab_sizes: dict[str, int], widths: dict[str, int], dim: int = 1,
             seed: int = 0, columns: tuple[str, ...] | None = None,
             embedding_stddev: float = EMBEDDING_STDDEV) -> tf.keras.Model:
  """FedSubAvg's MovieLens LR: one weight per one-hot feature value, plus a bias
  (an id-list feature adds the weights of its values)."""
  del dim  # one weight per value
  columns = columns or LR.columns
  inputs = _inputs(columns, widths)
  terms = []
  for k, c in enumerate(columns):
    table = _table(c, vocab_sizes[c], 1, seed + k, embedding_stddev)
    terms.append(table(inputs[c]) if c not in widths
                 else MaskedPooling('sum')(table(inputs[c]), inputs[c]))
  logit = _Bias(name='bias')(tf.keras.layers.Add()(terms) if len(terms) > 1 else terms[0])
  return tf.keras.Model(inputs, logit, name='lr')


class _Bias(tf.keras.layers.Layer):
  """x + b: LR's intercept (a Dense layer would also scale the sum)."""

  def build(self, input_shape):
    self.bias = self.add_weight(name='bias', shape=(1,), initializer='zeros')

  def call(self, x):
    return x + self.bias


def _pooled_fields(inputs, columns, vocab_sizes, dim, seed, stddev):
  """One [batch, dim] vector per column: the row, or the mean of the non-padding rows."""
  vectors = []
  for k, c in enumerate(columns):
    table = _table(c, vocab_sizes[c], dim, seed + k, stddev)
    ids = inputs[c]
    vectors.append(table(ids) if len(ids.shape) == 1 else MaskedPooling('mean')(table(ids), ids))
  return vectors


def build_dcn(vocab_sizes: dict[str, int], widths: dict[str, int], dim: int = 4,
              seed: int = 0, cross_layers: int = 2, deep_units=(64, 32),
              columns: tuple[str, ...] | None = None,
              embedding_stddev: float = EMBEDDING_STDDEV) -> tf.keras.Model:
  """DCNv2 (Wang et al. 2021), stacked: field embeddings -> cross layers -> MLP."""
  columns = columns or DCN.columns
  inputs = _inputs(columns, widths)
  fields = _pooled_fields(inputs, columns, vocab_sizes, dim, seed, embedding_stddev)
  x0 = tf.keras.layers.Concatenate()(fields) if len(fields) > 1 else fields[0]
  x = x0
  for k in range(cross_layers):
    x = tfrs.layers.dcn.Cross(
        kernel_initializer=tf.keras.initializers.TruncatedNormal(seed=seed + 100 + k))(x0, x)
  for k, units in enumerate(deep_units):
    x = tf.keras.layers.Dense(units, 'relu', kernel_initializer=tf.keras.initializers
                              .GlorotUniform(seed=seed + 200 + k))(x)
  logit = tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers
                                .GlorotUniform(seed=seed + 300))(x)
  return tf.keras.Model(inputs, logit, name='dcn')


def build_din(vocab_sizes: dict[str, int], widths: dict[str, int], dim: int = 18,
              seed: int = 0, attention_units=(80, 40), units=(200, 80),
              embedding_stddev: float = EMBEDDING_STDDEV,
              columns: tuple[str, str, str] | None = None) -> tf.keras.Model:
  """DIN (Zhou et al. 2018), FedSubAvg's CTR model: attention over clicked items.

  `columns`: (user, item, history), MovieLens's user, movie and history by
  default; the item table embeds the candidate and the history. Input as the
  official code: [user, item, sum of history, item * sum, attention-weighted
  history], then an MLP. Attention weights stay unnormalised, as the DIN
  paper has them (FedSubAvg's code applies a masked softmax). Deviations from
  both: no BatchNorm (moving statistics are not federated parameters) and
  PReLU in place of Dice (batch statistics too).
  """
  user_column, item_column, history_column = columns or DIN.columns
  inputs = _inputs((user_column, item_column, history_column), widths)
  user = _table(user_column, vocab_sizes[user_column], dim, seed,
                embedding_stddev)(inputs[user_column])
  items = _table(item_column, vocab_sizes[item_column], dim, seed + 1, embedding_stddev)
  query = items(inputs[item_column])
  interest = DinInterest(attention_units, seed)(query, items(inputs[history_column]),
                         inputs[history_column])
  x = tf.keras.layers.Concatenate()([user, query, interest])
  for k, n in enumerate(units):
    x = tf.keras.layers.Dense(n, kernel_initializer=tf.keras.initializers
                              .GlorotUniform(seed=seed + 30 + k))(x)
    x = tf.keras.layers.PReLU()(x)
  logit = tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers
                                .GlorotUniform(seed=seed + 40))(x)
  return tf.keras.Model(inputs, logit, name='din')


class DinInterest(tf.keras.layers.Layer):
  """DIN's user interest from the clicked movies' rows `keys` (history `ids`, 0 is
  padding) and the candidate's row `query`: [sum of the history, query * that
  sum, the attention-weighted history] (the official code's input). The
  attention MLP scores [q, k, q - k, q * k] per clicked movie."""

  def __init__(self, attention_units=(80, 40), seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.attention_units, self.seed = tuple(attention_units), seed
    self.attention = [
        tf.keras.layers.Dense(n, 'sigmoid', kernel_initializer=tf.keras.initializers
                              .GlorotUniform(seed=seed + 10 + k))
        for k, n in enumerate(attention_units)] + [
            tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers
                                  .GlorotUniform(seed=seed + 20))]

  def call(self, query, keys, ids):
    mask = tf.cast(tf.not_equal(ids, 0), keys.dtype)[..., None]
    keys *= mask
    queries = tf.broadcast_to(query[:, None, :], tf.shape(keys))
    score = tf.concat([queries, keys, queries - keys, queries * keys], -1)
    for layer in self.attention:
      score = layer(score)
    attended = tf.reduce_sum(score * mask * keys, 1)  # DIN keeps the weights unnormalised
    summed = tf.reduce_sum(keys, 1)
    return tf.concat([summed, query * summed, attended], -1)

  def get_config(self):
    return {**super().get_config(), 'attention_units': self.attention_units,
            'seed': self.seed}


LR = CtrModel(columns=('gender', 'age', 'movie', 'gender_x_movie', 'age_x_movie'),
              tables={c: (c,) for c in ('gender', 'age', 'movie', 'gender_x_movie',
                                        'age_x_movie')},
              default_dim=1, build=build_lr)
DCN = CtrModel(columns=('user', 'movie', 'gender', 'age', 'occupation', 'zip', 'genres'),
               tables={c: (c,) for c in ('user', 'movie', 'gender', 'age', 'occupation',
                                         'zip', 'genres')},
               default_dim=4, build=build_dcn)


def _din(user: str, item: str, history: str) -> CtrModel:
  """DIN over these columns; the item's table embeds the item and the history."""
  return CtrModel(columns=(user, item, history), tables={user: (user,), item: (item, history)},
                  default_dim=18,
                  build=functools.partial(build_din, columns=(user, item, history)))


DIN = _din('user', 'movie', 'history')
MODELS = {'lr': LR, 'dcn': DCN, 'din': DIN}


def for_columns(model: str, features: tuple[str, ...], lists: tuple[str, ...]) -> CtrModel:
  """A model over a CTR file's declared id and id-list columns: LR and DCNv2 with
  a table each; DIN reads features (user, item) and lists (history), the
  item's table indexed by item and history."""
  columns = (*features, *lists)
  if model == 'din':
    if len(features) != 2 or len(lists) != 1:
      raise ValueError('--model=din on a CTR file reads --feature_columns=USER,ITEM and '
                       '--list_columns=HISTORY (the items clicked before); got feature '
                       f'columns {list(features)} and list columns {list(lists)}')
    return _din(*columns)
  spec = MODELS[model]
  return dataclasses.replace(spec, columns=columns, tables={c: (c,) for c in columns},
                             build=functools.partial(spec.build, columns=columns))
