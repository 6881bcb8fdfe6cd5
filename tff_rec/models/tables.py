"""The embedding tables a model declares: what the methods that work on tables
need to know of each (FedSubAvg's feature heat, FAIR's hashed tiers, CoLR's
factors, the private per-user rows those forms leave whole).

A task declares its model's tables once (`task.tables`); algorithms find them
there, by name, never by patterns in variable names. A Keras model's table is
the variable of the layer named after it; a weight-table model's (NeuMF) is the
weight of that name.
"""

import dataclasses
from typing import Iterable, Mapping, Sequence

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Table:
  name: str
  rows: int
  width: int
  features: tuple[str, ...]  # the input features whose ids index it
  private: bool = False      # a row per client (its user's): table forms never compress it


def declare(shapes: Mapping[str, Sequence[int]], features: Mapping[str, Iterable[str]], *,
            private: Iterable[str] = ()) -> tuple[Table, ...]:
  """The tables named in `features` (name -> the features that index it), with
  rows and width from `shapes` (name -> [rows, width]), in `features`' order."""
  private = set(private)
  missing = sorted(set(features) - set(shapes))
  if missing:
    raise ValueError(f'declared tables {missing} are not weights of the model '
                     f'(its weights: {sorted(shapes)})')
  unknown = sorted(private - set(features))
  if unknown:
    raise ValueError(f'private tables {unknown} are not declared tables {list(features)}')
  tables = []
  for name, indexed_by in features.items():
    rows, width = (tuple(shapes[name]) + (1,))[:2]
    tables.append(Table(name, int(rows), int(width), tuple(indexed_by), name in private))
  return tuple(tables)


def of_keras(model: tf.keras.Model, features: Mapping[str, Iterable[str]], *,
             private: Iterable[str] = ()) -> tuple[Table, ...]:
  """`declare` over a Keras model's trainable variables (a table: its layer's name)."""
  shapes = {_layer(v): v.shape for v in model.trainable_variables}
  return declare(shapes, features, private=private)


def variable_tables(model: tf.keras.Model, tables: Iterable[Table]) -> list[str | None]:
  """Per trainable variable of a Keras model, in order: the table it is, or None
  (a dense parameter)."""
  names = {t.name for t in tables}
  return [_layer(v) if _layer(v) in names else None for v in model.trainable_variables]


def by_name(tables: Iterable[Table]) -> dict[str, Table]:
  return {t.name: t for t in tables}


def _layer(variable: tf.Variable) -> str:
  return variable.name.split('/')[0]
