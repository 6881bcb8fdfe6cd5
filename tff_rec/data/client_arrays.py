"""A task's training clients in one array form, and the feeds algorithms read,
derived from it: tff.learning's client datasets and their arguments, FedSubAvg's
heat (the rows of each declared table a client's features index, and its size),
and the examples pooled for a centralized baseline.

A task that keeps its clients as `ClientArrays` under `client_arrays` and
inherits `Feeds` offers those members (capabilities.KerasModel's data,
capabilities.FeatureHeat's) without writing them.
"""

import functools
from typing import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import lean

# A client's examples: (features by name, labels), every array one row an example.
Examples = tuple[Mapping[str, np.ndarray], np.ndarray]
SHUFFLE_BUFFER = 1024


class ClientArrays:
  """Client id -> its Examples; every client has the same features, each array of
  one dtype and row shape for all clients."""

  def __init__(self, examples: Mapping[str, Examples]):
    if not examples:
      raise ValueError('no client has a training example')
    self._examples = dict(examples)
    self.ids = sorted(self._examples)
    first_features, first_labels = self._examples[self.ids[0]]
    self._form = _form(first_features, first_labels)
    for client in self.ids:
      features, labels = self._examples[client]
      lengths = {name: len(v) for name, v in features.items()}
      if set(lengths.values()) != {len(labels)}:
        raise ValueError(f'client {client!r}: its features have {lengths} rows and its '
                         f'labels {len(labels)}: one row an example')
      if _form(features, labels) != self._form:
        raise ValueError(f'client {client!r}: features and labels {_form(features, labels)} '
                         f'where client {self.ids[0]!r} has {self._form}')

  def examples(self, client_id: str) -> Examples:
    return self._examples[client_id]

  def sizes(self) -> list[int]:
    """Examples per client, in `ids` order."""
    return [len(self._examples[c][1]) for c in self.ids]

  def table_rows(self, tables) -> dict[str, list[np.ndarray]]:
    """Per declared table (models.tables.Table), per client in `ids` order: the rows
    its features index (FedSubAvg's heat counts them)."""
    return {table.name: [np.concatenate([np.ravel(self._examples[c][0][f])
                                         for f in table.features]) for c in self.ids]
            for table in tables}

  def pooled(self) -> Examples:
    """Every client's examples, in `ids` order, as one set."""
    parts = [self._examples[c] for c in self.ids]
    return ({name: np.concatenate([features[name] for features, _ in parts])
             for name in parts[0][0]}, np.concatenate([labels for _, labels in parts]))

  def arguments(self, client_id: str, seed: int) -> tuple:
    """What `dataset_computation` takes for a client: its features, labels, seed."""
    return (*self._examples[client_id], np.int64(seed))

  def dataset_computation(self, batch_size: int) -> tff.Computation:
    """(features, labels, seed) -> the client's examples shuffled by the seed, in
    batches of `batch_size`: tff.learning's client dataset."""
    features, labels = self._examples[self.ids[0]]

    @tff.tensorflow.computation({k: _type(v) for k, v in features.items()}, _type(labels),
                                np.int64)
    def client_dataset(features, labels, seed):
      # lean: without tf.data's graph optimizations, which cost more per client
      # than a small client's training
      return lean.lean(tf.data.Dataset.from_tensor_slices((features, labels))
                       .shuffle(SHUFFLE_BUFFER, seed=seed).batch(batch_size))

    return client_dataset


def _form(features: Mapping[str, np.ndarray], labels: np.ndarray):
  arrays = {**{f'feature {k}': v for k, v in features.items()}, 'labels': labels}
  return {k: (np.asarray(v).dtype.name, np.shape(v)[1:]) for k, v in sorted(arrays.items())}


def _type(array: np.ndarray) -> tff.TensorType:
  return tff.TensorType(np.asarray(array).dtype, [None, *np.shape(array)[1:]])


class Feeds:
  """The data members of capabilities.KerasModel and FeatureHeat, for a task whose
  `client_arrays` is a ClientArrays, `config.batch_size` its batch size and
  `tables` its declared tables."""

  @property
  def train_client_ids(self) -> list[str]:
    return self.client_arrays.ids

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    return self.client_arrays.dataset_computation(self.config.batch_size)

  def client_arguments(self, client_id: str, seed: int) -> tuple:
    return self.client_arrays.arguments(client_id, seed)

  def client_table_rows(self) -> dict[str, list[np.ndarray]]:
    return self.client_arrays.table_rows(self.tables)

  def client_sizes(self) -> list[int]:
    return self.client_arrays.sizes()
