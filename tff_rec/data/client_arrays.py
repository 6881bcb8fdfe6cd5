"""A task's training clients in one array form, and what the feeds algorithms
read are made of (tff_rec.feeds): the Keras model's input spec, tff.learning's
client datasets and their arguments, the project's numpy batches (the same
sliced.Plan; drawn by TF where a client reads its examples from files),
FedSubAvg's heat (the rows of each declared table a client's features index,
and its size), and the examples pooled for a centralized baseline.

`ClientArrays`: examples the same every round; `ClientDraws`: examples a task
draws each round (sampled negatives), which offer the feeds but the pooled
examples, their heat and sizes counting what no draw changes (the positives).
"""

import functools
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import lean
from tff_rec.data import sliced

# Examples: (features by name, labels), every array one row an example.
Examples = tuple[Mapping[str, np.ndarray], np.ndarray]
# The labels' key in a client's examples as one dict (capabilities.ClientExamples).
LABEL = 'label'


class Clients:
  """Training clients' examples as the feeds take them: `ids`, and
  `drawn(client_id, seed)`, a client's examples in a round (seeded: drawn anew
  each round where the task samples them), `examples(client_id)` outside one."""

  ids: list[str]

  def drawn(self, client_id: str, seed) -> Examples:
    raise NotImplementedError

  def examples(self, client_id: str) -> Examples:
    raise NotImplementedError

  def arguments(self, client_id: str, seed: int) -> tuple:
    """What `dataset_computation` takes for a client: its features, labels, seed."""
    return (*self.drawn(client_id, seed), np.int64(seed))

  def table_rows(self, tables, padding: int | None = None) -> dict[str, list[np.ndarray]]:
    """Per declared table (models.tables.Table), per client in `ids` order: the rows
    its features index (FedSubAvg's heat counts them), less `padding` (an id that
    is no feature)."""
    def indexed(table, read):
      ids = np.concatenate([np.ravel(a) for a in map(read, table.features) if a is not None]
                           or [np.zeros(0, np.int64)])
      return ids if padding is None else ids[ids != padding]

    rows = {table.name: [] for table in tables}
    for client in self.ids:  # each of its features read once (a draw's kept ones are made)
      read = functools.cache(functools.partial(self._feature, client))
      for table in tables:
        rows[table.name].append(indexed(table, read))
    return rows

  def _feature(self, client_id: str, name: str) -> np.ndarray | None:
    """A client's feature `name` (LABEL: its labels), None where a table's feature is
    none of its data's."""
    raise NotImplementedError

  def input_spec(self):
    """(features, labels) as Keras takes them: TensorSpecs of any number of rows."""
    features, labels = self.examples(self.ids[0])
    return ({k: _spec(v) for k, v in features.items()}, _spec(labels))

  def dataset_computation(self, plan: sliced.Plan) -> tff.Computation:
    """(features, labels, seed) -> the client's batches as `plan` makes them with
    tf.data: tff.learning's client dataset."""
    # lean: without tf.data's graph optimizations, which cost more per client than
    # a small client's training
    return self._client_computation(lambda features, labels, seed: lean.lean(plan.dataset(
        tf.data.Dataset.from_tensor_slices((features, labels)), seed)))

  def batches(self, client_id: str, plan: sliced.Plan, seed: int) -> sliced.Batches:
    """The client's batches as `plan` makes them with numpy: the project's clients."""
    return plan.batches(self.drawn(client_id, seed), seed)

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


class ClientDraws(Clients):
  """Clients whose examples a task draws each round from the seed (`draw(client_id,
  seed)`: sampled negatives beside the positives), and outside a round from each
  client's own seed (`own_seed(client_id)`: MetaUA's examples). `kept(client_id)`:
  the features no draw changes, a row per training example (its positives and
  user): what its heat counts (a drawn negative is no feature of its data) and its
  size."""

  def __init__(self, ids, draw: Callable[[str, object], Examples],
               own_seed: Callable[[str], object],
               kept: Callable[[str], Mapping[str, np.ndarray]]):
    self.ids, self.drawn, self._own_seed, self._kept = list(ids), draw, own_seed, kept

  def examples(self, client_id: str) -> Examples:
    return self.drawn(client_id, self._own_seed(client_id))

  def sizes(self) -> list[int]:
    """Training examples per client (its kept rows), in `ids` order."""
    return [len(next(iter(self._kept(c).values()))) for c in self.ids]

  def _feature(self, client_id: str, name: str) -> np.ndarray | None:
    return self._kept(client_id).get(name)


def kept_positives(users: Mapping[str, int], positives_of: Callable[[int], np.ndarray],
                   name: str) -> Callable[[str], dict[str, np.ndarray]]:
  """ClientDraws' `kept` of clients whose examples are their train positives (as
  `name`; `positives_of(user)`) with sampled negatives: the positives and the
  user (`users[client_id]`), a row each. The negatives a client samples reach
  every item, so they are no feature of its data."""
  def kept(client_id: str) -> dict[str, np.ndarray]:
    user = users[client_id]
    positives = positives_of(user)
    return {'user': np.full(len(positives), user), name: positives}

  return kept


class ClientArrays(Clients):
  """Every training client's examples, the same every round: the examples'
  arrays, pooled, and each client's rows into them (one array per feature
  whatever the clients: 10^6 clients are 10^6 index arrays, not 10^6 sets of
  feature arrays)."""

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

  def drawn(self, client_id: str, seed) -> Examples:
    del seed  # the same examples every round
    return self.examples(client_id)

  def sizes(self) -> list[int]:
    """Examples per client, in `ids` order."""
    return [len(self._rows[c]) for c in self.ids]

  def _feature(self, client_id: str, name: str) -> np.ndarray:
    return (self._labels if name == LABEL else self._features[name])[self._rows[client_id]]

  def pooled(self) -> Examples:
    """Every client's examples, in `ids` order, as one set."""
    rows = np.concatenate([self._rows[c] for c in self.ids])
    return {k: v[rows] for k, v in self._features.items()}, self._labels[rows]


def _spec(array: np.ndarray) -> tf.TensorSpec:
  return tf.TensorSpec([None, *np.shape(array)[1:]], tf.as_dtype(np.asarray(array).dtype))
