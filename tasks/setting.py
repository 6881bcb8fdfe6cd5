"""A task's settings as fields of its Config dataclass: a default and what the
setting means (and its choices, if few). Launchers make each field that has a
description a flag, so a task's settings are declared in one place; the task
itself knows nothing of flags. A Config validates its values (a clear error
names the setting), so flags need no bounds of their own.
"""

import dataclasses
from typing import Any, Iterable

from tff_rec import settings

refuse_unused = settings.refuse_unused  # a task's Config refuses what its data leaves unused


TRAININGS = ('federated', 'centralized')


def setting(default: Any, description: str, *, choices: Iterable[str] = (),
            training: str | None = None, model_kind: str | None = None) -> dataclasses.Field:
  """A described field; `training` (one of TRAININGS) where only that kind of
  training uses it (a launcher of the other refuses it given); `model_kind`
  (tff_rec.algorithms.api.MODEL_KINDS) where only algorithms that train that
  kind of the task's model read it (registry.build refuses it given to others)."""
  metadata = {}
  if model_kind is not None:
    metadata['model_kind'] = model_kind
  if choices:
    metadata['choices'] = tuple(choices)
  if training is not None:
    if training not in TRAININGS:
      raise ValueError(f'training must be one of {TRAININGS}, got {training!r}')
    metadata['training'] = training
  return settings.described(default, description, **metadata)


def described(config_type) -> list[dataclasses.Field]:
  """The fields of a Config dataclass that have a description, those of a nested
  Config (a field whose default is a dataclass) included: a task's settings."""
  fields = []
  for field in dataclasses.fields(config_type):
    if dataclasses.is_dataclass(field.default):
      fields += described(type(field.default))
    elif 'help' in field.metadata:
      fields.append(field)
  return fields
