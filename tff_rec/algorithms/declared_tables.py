"""A task's model as a TableModel: the form every method that swaps a table's form
(FAIR's tiers, CoLR's W + A B, SVD and top-k updates) trains.

A task offers it either as a weight-table model (`task.functional_model()`)
or as a Keras model with declared tables (`task.tables`), turned into one by
table_model.from_keras.
"""

from typing import Any, Callable

import tensorflow_federated as tff

from tff_rec import capabilities
from tff_rec.algorithms import api
from tff_rec.models import spec
from tff_rec.models import table_model

MIN_TABLE_ROWS = 100  # smaller tables of a Keras model (gender, age) train in full


def table_model_of(task, name: str, why: str) -> table_model.TableModel:
  """The task's TableModel; raises NotApplicable (`why`) without declared tables."""
  if capabilities.offers(task, capabilities.WeightTables):
    return task.functional_model()
  if not capabilities.offers(task, capabilities.KerasTables):
    raise api.not_applicable(name, task, why)
  if spec.built_to_read(task).losses:
    raise api.not_applicable(name, task, 'its Keras model adds a regularization loss '
                             '(e.g. spreadout), which the table form would drop')
  try:
    model = table_model.from_keras(
        task.keras_model, task.loss(), task.input_spec, [t.name for t in task.tables],
        min_table_rows=MIN_TABLE_ROWS,
        per_user_tables=[t.name for t in task.tables if t.private])
  # TFF's KerasFunctionalModelError is private: any failure here means no functional form.
  except Exception as e:  # pylint: disable=broad-except
    raise api.not_applicable(name, task, 'its Keras model has no functional form ('
                             f'{str(e).splitlines()[0][:200]})') from None
  if not model.tables:
    raise api.not_applicable(name, task, f'its model has no table of '
                             f'{MIN_TABLE_ROWS} rows or more to compress')
  return model


def client_data(task) -> tuple[tff.Computation, Callable[[str, int], Any]]:
  """(a client's data -> its sliced batches, in TFF; (client id, seed) -> that
  data): a weight-table model's own dataset computation and arguments, or a
  Keras model's client_batches (numpy batches, which the computation passes on)."""
  if capabilities.offers(task, capabilities.WeightTables):
    return task.table_dataset_computation, task.table_client_arguments
  return tff.tensorflow.computation(lambda batches: batches,
                                    api.batches_type(task)), task.client_batches
