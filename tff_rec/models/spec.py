"""A task's model, one of a task's three parts beside its clients' data
(tff_rec.data.client_arrays) and its objective (tff_rec.objectives): the Keras
model and the embedding tables it declares. A task holds it as `model`, and
tff_rec.feeds.Feeds derives the task's `keras_model()` and `tables` from it."""

import dataclasses
from typing import Callable, Iterable, Mapping, Sequence
import weakref

import tensorflow as tf

from tff_rec.models import tables as tables_lib


@dataclasses.dataclass(frozen=True)
class KerasSpec:
  """`build()`: a fresh Keras model at each call (TFF builds its own in each graph
  it traces). `table_features`: each embedding table the model declares, by name,
  and the features whose ids index it (FedSubAvg's heat counts them; FAIR's and
  CoLR's forms swap the table's form); `private`: those that are each user's own
  rows, never compressed. A table is its layer's weights, by the layer's name
  (tables.of_keras), or, with `shapes` (() -> name -> [rows, width]), one of the
  weights a single layer holds (NeuMF's)."""
  build: Callable[[], tf.keras.Model]
  table_features: Mapping[str, Iterable[str]]
  private: Sequence[str] = ()
  shapes: Callable[[], Mapping[str, Sequence[int]]] | None = None

  def tables(self) -> tuple[tables_lib.Table, ...]:
    if self.shapes is not None:
      return tables_lib.declare(self.shapes(), self.table_features, private=self.private)
    return tables_lib.of_keras(self.build(), self.table_features, private=self.private)


_BUILT_TO_READ = weakref.WeakKeyDictionary()


def built_to_read(task) -> tf.keras.Model:
  """The task's Keras model built once per task object, to read what it is (its
  variables' names and shapes, its own losses and state), never to train or score:
  a build (0.1-0.2 s a model) reads one to choose tables, another for a lockstep form."""
  try:
    built = _BUILT_TO_READ.get(task)
  except TypeError:  # a task that cannot be a weak key (unhashable, slots): built each time
    return task.keras_model()
  if built is None:
    built = _BUILT_TO_READ[task] = task.keras_model()
  return built
