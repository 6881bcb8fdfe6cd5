"""A task's training clients in one array form, and the feeds algorithms read,
derived from it: the Keras model's input spec, tff.learning's client datasets
and their arguments, the project's numpy batches (the same sliced.Plan; drawn
by TF where a client reads its examples from files),
FedSubAvg's heat (the rows of each declared table a client's features index,
and its size), and the examples pooled for a centralized baseline.

A task that keeps its clients as `ClientArrays` under `client_arrays` and
inherits `Feeds` offers those members (capabilities.KerasModel's,
KerasBatches', ClientExamples', FeatureHeat's) without writing them.
"""

import functools
from typing import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import lean
from tff_rec.data import sliced
from tff_rec.training import centralized

# Examples: (features by name, labels), every array one row an example.
Examples = tuple[Mapping[str, np.ndarray], np.ndarray]
# The labels' key in a client's examples as one dict (capabilities.ClientExamples).
LABEL = 'label'
CENTRAL_SHUFFLE_BUFFER = 1 << 17  # examples the centralized baseline shuffles among


class ClientArrays:
  """Every training client's examples: the examples' arrays, pooled, and each
  client's rows into them (one array per feature whatever the clients: 10^6
  clients are 10^6 index arrays, not 10^6 sets of feature arrays)."""

  def __init__(self, features: Mapping[str, np.ndarray], labels: np.ndarray,
               rows: Mapping[str, np.ndarray]):
    lengths = {name: len(v) for name, v in features.items()}
    if set(lengths.values()) != {len(labels)}:
      raise ValueError(f'the features have {lengths} rows and the labels {len(labels)}: one '
                       'row an example')
    if LABEL in features:
      raise ValueError(f'a feature is named {LABEL!r}, the labels\' key in a client\'s '
                       'examples (MetaUA reads them so): rename it')
    self._features, self._labels = dict(features), labels
    self._rows = {c: np.asarray(r, np.int64) for c, r in rows.items()}
    self.ids = list(self._rows)  # as given: the order clients are sampled from
    if not self.ids:
      raise ValueError('no client has a training example')
    for client in self.ids:
      r = self._rows[client]
      if r.ndim != 1 or not r.size or r.min() < 0 or r.max() >= len(labels):
        raise ValueError(f'client {client!r}: its rows must be a non-empty list of examples '
                         f'in 0..{len(labels) - 1}, got {r.tolist()[:10]}')

  def examples(self, client_id: str) -> Examples:
    rows = self._rows[client_id]
    return {k: v[rows] for k, v in self._features.items()}, self._labels[rows]

  def sizes(self) -> list[int]:
    """Examples per client, in `ids` order."""
    return [len(self._rows[c]) for c in self.ids]

  def table_rows(self, tables, padding: int | None = None) -> dict[str, list[np.ndarray]]:
    """Per declared table (models.tables.Table), per client in `ids` order: the rows
    its features index (FedSubAvg's heat counts them), less `padding` (an id that
    is no feature)."""
    def indexed(table, client):
      ids = np.concatenate([np.ravel(self._features[f][self._rows[client]])
                            for f in table.features])
      return ids if padding is None else ids[ids != padding]

    return {table.name: [indexed(table, c) for c in self.ids] for table in tables}

  def pooled(self) -> Examples:
    """Every client's examples, in `ids` order, as one set."""
    rows = np.concatenate([self._rows[c] for c in self.ids])
    return {k: v[rows] for k, v in self._features.items()}, self._labels[rows]

  def arguments(self, client_id: str, seed: int) -> tuple:
    """What `dataset_computation` takes for a client: its features, labels, seed."""
    return (*self.examples(client_id), np.int64(seed))

  def input_spec(self):
    """(features, labels) as Keras takes them: TensorSpecs of any number of rows."""
    return ({k: _spec(v) for k, v in self._features.items()}, _spec(self._labels))

  def dataset_computation(self, plan: sliced.Plan) -> tff.Computation:
    """(features, labels, seed) -> the client's batches as `plan` makes them with
    tf.data: tff.learning's client dataset."""
    # lean: without tf.data's graph optimizations, which cost more per client than
    # a small client's training
    return self._client_computation(lambda features, labels, seed: lean.lean(plan.dataset(
        tf.data.Dataset.from_tensor_slices((features, labels)), seed)))

  def batches(self, client_id: str, plan: sliced.Plan, seed: int) -> sliced.Batches:
    """The client's batches as `plan` makes them with numpy: the project's clients."""
    return plan.batches(self.examples(client_id), seed)

  def batches_computation(self, plan: sliced.Plan) -> tff.Computation:
    """(features, labels, seed) -> the client's batches as `plan` makes them, their
    order drawn by TF: where a client reads its examples from files."""
    return self._client_computation(
        lambda features, labels, seed: plan.batches_tf((features, labels), seed))

  def _client_computation(self, make) -> tff.Computation:
    """make(features, labels, seed) as a TF computation on `arguments`' types."""
    features, labels = self.input_spec()
    return tff.tensorflow.computation(make, tff.types.tensorflow_to_type(features),
                                      tff.types.tensorflow_to_type(labels), np.int64)


def _spec(array: np.ndarray) -> tf.TensorSpec:
  return tf.TensorSpec([None, *np.shape(array)[1:]], tf.as_dtype(np.asarray(array).dtype))


class Feeds:
  """The members of capabilities.KerasModel, KerasBatches, ClientExamples and
  FeatureHeat, for a task whose `client_arrays` is a ClientArrays, `keras_model()`
  and `loss()` its model and loss, `tables` its declared tables and `config` its
  settings (`batch_size`; `seed`, MetaUA's query split; one epoch a round: a task
  overrides `batch_plan` for more)."""

  PADDING_ID: int | None = None  # an id of the tables that is no feature (heat skips it)

  @property
  def train_client_ids(self) -> list[str]:
    return self.client_arrays.ids

  @functools.cached_property
  def input_spec(self):
    return self.client_arrays.input_spec()

  def model_fn(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(self.keras_model(), loss=self.loss(),
                                                input_spec=self.input_spec)

  @property
  def batch_plan(self) -> sliced.Plan:
    return sliced.Plan(self.config.batch_size)

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    return self.client_arrays.dataset_computation(self.batch_plan)

  def client_arguments(self, client_id: str, seed: int) -> tuple:
    return self.client_arrays.arguments(client_id, seed)

  def client_batches(self, client_id: str, seed: int) -> sliced.Batches:
    return self.client_arrays.batches(client_id, self.batch_plan, seed)

  @functools.cached_property
  def batches_computation(self) -> tff.Computation:
    return self.client_arrays.batches_computation(self.batch_plan)

  def client_examples(self, client_id: str) -> dict[str, np.ndarray]:
    features, labels = self.client_arrays.examples(client_id)
    return {**features, LABEL: labels}

  @staticmethod
  def model_input(examples: Mapping[str, np.ndarray]) -> Examples:
    return {k: v for k, v in examples.items() if k != LABEL}, examples[LABEL]

  def client_table_rows(self) -> dict[str, list[np.ndarray]]:
    return self.client_arrays.table_rows(self.tables, self.PADDING_ID)

  def client_sizes(self) -> list[int]:
    return self.client_arrays.sizes()

  def train_centralized(self, optimizer, *, epochs: int, eval_every: int, on_epoch):
    """The centralized baseline: the Keras model on every client's examples pooled,
    shuffled each epoch and batched as the clients batch, scored by `evaluate` on
    the final part and named as the trainer names it."""
    pooled = tf.data.Dataset.from_tensor_slices(self.client_arrays.pooled())
    epoch_of = centralized.KerasEpochs(
        self.keras_model(), loss=self.loss(), optimizer=optimizer.keras(),
        epoch_dataset=lambda epoch: pooled.shuffle(CENTRAL_SHUFFLE_BUFFER, seed=epoch).batch(
            self.config.batch_size))
    part = self.EVAL_PARTS[1]

    def evaluate():
      weights = tff.learning.models.ModelWeights.from_model(epoch_of.model)
      return {f'{part}/{k}': v for k, v in self.evaluate(weights, part).items()}

    return centralized.train(epoch_of, epochs=epochs, eval_every=eval_every,
                             on_epoch=on_epoch, evaluate=evaluate)
