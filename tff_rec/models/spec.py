"""A task's model, one of a task's three parts beside its clients' data
(tff_rec.data.client_arrays) and its objective (tff_rec.objectives): the Keras
model and the embedding tables it declares. A task holds it as `model`, and
tff_rec.feeds.Feeds derives the task's `keras_model()` and `tables` from it."""

import dataclasses
from typing import Callable, Iterable, Mapping, Sequence

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
