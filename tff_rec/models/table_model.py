"""A model as a function of named weights whose embedding tables are declared.

The form of a model that FAIR (and any method that swaps a table's form)
needs: the initial weights by name, a loss that reads table rows only through
`item_rows(table name, ids)` (so a hashed or low-rank form can stand in for a
table), and which weights are item tables and which are per-user tables (a
client needs only its own row of those).
"""

import collections
import dataclasses
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# (weights, batch, item_rows) -> scalar loss; item_rows(table name, ids) -> rows.
LossFn = Callable[[Mapping[str, tf.Tensor], Any, Callable], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class KerasView:
  """A Keras model's weights as a TableModel names them (from_keras) and back.

  names: the weights' names, in their creation order; keras_order: for each of
  the Keras model's trainable_variables, its index in `names`.
  """
  names: Sequence[str]
  keras_order: Sequence[int]

  def to_model_weights(self, weights: Mapping[str, Any]) -> tff.learning.models.ModelWeights:
    return tff.learning.models.ModelWeights(
        trainable=[weights[self.names[k]] for k in self.keras_order], non_trainable=[])

  def from_model_weights(self, model_weights) -> collections.OrderedDict:
    keras_position = {k: i for i, k in enumerate(self.keras_order)}
    return collections.OrderedDict(
        (name, model_weights.trainable[keras_position[k]]) for k, name in enumerate(self.names))


@dataclasses.dataclass(frozen=True)
class TableModel:
  initial_weights: Mapping[str, np.ndarray]
  loss: LossFn
  tables: Sequence[str]            # item tables: any table form may stand in for them
  per_user_tables: Sequence[str] = ()  # a client needs only its own row
  # A Keras model's: processes then give and take its ModelWeights, as tff.learning's do.
  keras_view: KerasView | None = None


def split(weights: Mapping[str, Any], tables: Sequence[str]):
  """(the dense weights, the tables' weights), each in its order."""
  dense = collections.OrderedDict((k, v) for k, v in weights.items() if k not in tables)
  return dense, collections.OrderedDict((k, weights[k]) for k in tables)


def from_keras(keras_model: Callable[[], tf.keras.Model], loss: tf.keras.losses.Loss,
               input_spec, tables: Iterable[str], *, min_table_rows: int,
               per_user_tables: Iterable[str] = ()) -> TableModel:
  """A Keras model as a TableModel, with the KerasView of its weights.

  Weights are named after their tables (a layer named after the table; other
  variables `dense_<k>`); tables of at least `min_table_rows` rows are the
  model's tables, smaller ones train in full, as do `per_user_tables` (a row per
  client: the model's per-user tables, never compressed). A table form stands in for a
  table by handing the model the rows of every id (item_rows(name, all ids)):
  the same function of the form's parameters as a row lookup, but the client
  holds the table at full size while it computes (the weight-table models,
  e.g. NeuMF, look rows up instead). Built with TFF's
  functional_model_from_keras: models whose layers share a variable, or with
  non-trainable state, are refused there.
  """
  functional = tff.learning.models.functional_model_from_keras(keras_model, loss, input_spec)
  trainable, non_trainable = functional.initial_weights
  if non_trainable:
    raise ValueError('the Keras model has non-trainable variables, which a TableModel '
                     'does not carry')
  tables = set(tables)
  created, keras_order = creation_order(keras_model)
  layers = [name.split('/')[0] for name in created]
  if len(layers) != len(trainable):
    raise ValueError(f'{len(layers)} variables created for {len(trainable)} weights')
  names = [layer if layer in tables else f'dense_{k}' for k, layer in enumerate(layers)]
  per_user = tuple(n for n in names if n in set(per_user_tables))
  compressed = [n for n, w in zip(names, trainable)
                if n in tables and n not in per_user and np.shape(w)[0] >= min_table_rows]

  rows = {n: np.shape(w)[0] for n, w in zip(names, trainable)}  # a form's size differs

  def table_loss(weights, batch, item_rows):
    x, y = batch
    values = tuple(item_rows(n, tf.range(rows[n])) if n in compressed else weights[n]
                   for n in names)
    return functional.loss(functional.predict_on_batch((values, ()), x, training=True), y)

  initial = collections.OrderedDict((n, np.asarray(w)) for n, w in zip(names, trainable))
  return TableModel(initial, table_loss, compressed, per_user, KerasView(names, keras_order))


def creation_order(keras_model: Callable[[], tf.keras.Model]) -> tuple[list[str], list[int]]:
  """The model's variable names in the order they are created (the order of
  functional_model_from_keras's weights), and for each of its
  trainable_variables (Keras's order) its position in that creation order."""
  created = []

  def record(next_creator, **kwargs):
    variable = next_creator(**kwargs)
    created.append(variable)
    return variable

  with tf.Graph().as_default(), tf.variable_creator_scope(record):
    model = keras_model()
  position = {id(v): k for k, v in enumerate(created)}
  return [v.name for v in created], [position[id(v)] for v in model.trainable_variables]
