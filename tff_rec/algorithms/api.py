"""What an algorithm's builder returns and how it refuses a task: shared by every
algorithm module and the registry (which re-exports it)."""

import dataclasses
from typing import Any, Callable, Mapping

from tff_rec.models import tables


class NotApplicable(ValueError):
  """The algorithm does not apply to this task or these settings; the message says why."""


@dataclasses.dataclass(frozen=True)
class Built:
  """A learning process and how to feed and score it.

  process: initialize / next / get_model_weights / set_model_weights (a tff
    LearningProcess; a client_state.ClientStateProcess for algorithms whose
    clients keep state between rounds; MetaUA's MetaUAProcess).
  client_input: (client id, seed) -> that client's input to `next`.
  evaluate: (model weights, part) -> metrics; default the task's evaluate.
  """
  process: Any
  client_ids: list[str]
  client_input: Callable[[str, int], Any]
  evaluate: Callable[[Any, str], Mapping[str, float]] | None = None


def not_applicable(name: str, task, why: str) -> NotApplicable:
  return NotApplicable(f'--algorithm={name} does not apply to --task={task.NAME}: {why}')


def require(task, name: str, attributes: tuple[str, ...], why: str) -> None:
  """Raises NotApplicable (`why`) unless the task has every one of `attributes`."""
  if not all(hasattr(task, a) for a in attributes):
    raise not_applicable(name, task, why)


# What a task offers, by the attributes an algorithm asks for.
KERAS = ('model_fn', 'dataset_computation', 'client_arguments')
KERAS_WHY = ('the algorithm trains a Keras model (tff.learning) and this task\'s model is '
             'a function of weight tables')
TABLES = ('tables', 'client_table_rows', 'client_sizes')  # feature heat of its tables


def table_of_variable(task) -> list[str | None] | None:
  """Per trainable variable of the task's Keras model: the declared table it is, or
  None (dense); None when no variable is a declared table (e.g. NeuMF's one layer)."""
  if not (hasattr(task, 'tables') and hasattr(task, 'keras_model')):
    return None
  per_variable = tables.variable_tables(task.keras_model(), task.tables)
  return per_variable if any(per_variable) else None


def keras_dataset_computation(task):
  """The task's client datasets as its Keras model reads them: its
  `keras_dataset_computation` where its other algorithms read another form."""
  return getattr(task, 'keras_dataset_computation', task.dataset_computation)
