"""What a task can offer the algorithms, one Protocol each.

A task is data, a model and evaluation (`Task`); the rest are the forms of
its model and data that some algorithms need. The registry picks an
algorithm's implementation by the model kinds a task satisfies
(algorithms.api.MODEL_KINDS), and a builder refuses a task that lacks what it
needs (algorithms.api.require), both by `offers` against these.
"""

import inspect
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Task(Protocol):
  """Every task: what the trainer shows, runs and scores."""
  NAME: str
  DEFAULT_ALGORITHM: str
  TRAIN_DEFAULTS: dict  # trainer settings it is tuned for (clients_per_round, optimizers)
  EVAL_PARTS: tuple[str, str]  # (periodic, final) evaluation
  PROGRESS: dict  # progress-line label -> metric

  @property
  def train_client_ids(self) -> list[str]: ...

  def describe(self) -> str: ...

  def evaluate(self, weights, part: str) -> dict[str, float]: ...


@runtime_checkable
class KerasModel(Protocol):
  """A Keras model for tff.learning's clients, and their tf.data datasets."""

  def model_fn(self): ...  # a tff.learning VariableModel

  # tff.Computation: a client's arguments -> its dataset
  dataset_computation: Any

  def client_arguments(self, client_id: str, seed: int) -> tuple: ...


@runtime_checkable
class KerasBatches(Protocol):
  """A Keras model's client batches as numpy arrays, for the project's client loop."""

  def model_fn(self): ...

  def client_batches(self, client_id: str, seed: int): ...  # sliced.Batches

  @property
  def batch_plan(self): ...  # sliced.Plan: the same batches its datasets hold


@runtime_checkable
class ClientExamples(Protocol):
  """A client's examples as one table of per-example arrays (MetaUA's support and
  query split them)."""

  def client_examples(self, client_id: str) -> dict[str, np.ndarray]: ...

  def model_input(self, examples: dict[str, np.ndarray]) -> tuple: ...  # (x, y)

  @property
  def batch_plan(self): ...

  def keras_model(self): ...


@runtime_checkable
class FeatureHeat(Protocol):
  """Declared embedding tables and the rows each client's data index: FedSubAvg's
  feature heat."""

  @property
  def tables(self) -> tuple: ...  # models.tables.Table

  def client_table_rows(self) -> dict[str, list[np.ndarray]]: ...

  def client_sizes(self) -> list[int]: ...


@runtime_checkable
class KerasTables(Protocol):
  """A Keras model with declared tables, which the table forms (FAIR's tiers,
  CoLR's W + A B, SVD, top-k) train as a TableModel."""

  def keras_model(self): ...

  def loss(self): ...

  @property
  def input_spec(self): ...

  @property
  def tables(self) -> tuple: ...

  def client_batches(self, client_id: str, seed: int): ...

  @property
  def batch_plan(self): ...


@runtime_checkable
class WeightTables(Protocol):
  """A model of named weight tables (NeuMF) and its clients' sliced batches."""

  def functional_model(self): ...  # models.table_model.TableModel

  table_dataset_computation: Any  # tff.Computation: a client's arguments -> its sliced batches

  def table_client_arguments(self, client_id: str, seed: int) -> tuple: ...


@runtime_checkable
class PrivateUsers(Protocol):
  """A matrix factorization whose user vectors stay on their clients (FedMF)."""

  initial_items: np.ndarray
  initial_users: np.ndarray  # made once and kept

  def initial_user_table(self) -> np.ndarray: ...  # initial_users, made anew at each call

  def client_rows(self, user: int, seed, epochs: int): ...

  # A client's rows with `extra_epochs` (a reconstruction's) before its local
  # epochs, and the tff.Computation making its sliced batches of them.
  def mf_client_arguments(self, client_id: str, seed, extra_epochs: int = 0) -> tuple: ...

  def mf_dataset_computation(self, extra_epochs: int = 0) -> Any: ...

  def user_index(self, client_id: str) -> int: ...


def offers(task, capability: type) -> bool:
  """isinstance(task, capability) without running any of the task's members.

  Python 3.11's runtime protocols test a member with hasattr, which runs a
  property: a wrapper's lazily made files and dataset computation
  (client_files.ReadWhereTrained) were made by asking which kind of model it
  offers. Python 3.12 looks members up statically, as here; a member a
  Wrapper forwards is looked up in its task the same way.
  """
  return all(has(task, name) for name in _members(capability))


def _members(capability: type) -> set[str]:
  """The names a Protocol declares: its methods, properties and annotated attributes."""
  return {name for base in capability.__mro__ if base not in (Protocol, object)
          for name in (*vars(base), *vars(base).get('__annotations__', {}))
          if not name.startswith('_')}


def has(task, name: str) -> bool:
  """hasattr(task, name) without running a property of the task."""
  try:
    inspect.getattr_static(task, name)
  except AttributeError:
    return isinstance(task, Wrapper) and has(task.wrapped, name)
  return True


class Wrapper:
  """A task seen through a wrapper that adds or replaces some of its members;
  every other member is the task's (`wrapped`)."""

  def __init__(self, task):
    self.wrapped = task

  def __getattr__(self, name):
    return getattr(self.__dict__['wrapped'], name)
