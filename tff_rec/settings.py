"""Settings as dataclass fields: a default and what the setting means (metadata
'help', and 'choices' where few). The launchers make each described field a
flag (a task's Config, an algorithm's options, the training Settings); the
library itself knows nothing of flags.
"""

import dataclasses
from typing import Any


def described(default: Any, description: str, **metadata) -> dataclasses.Field:
  """A field with its meaning (and any other metadata, e.g. choices)."""
  return dataclasses.field(default=default, metadata={'help': description, **metadata})


def refuse_unused(config, name: str, applies: bool, where: str) -> None:
  """A ValueError when setting `name` of `config` was changed from its default
  where it has no effect: a setting is never silently ignored."""
  default = next(f.default for f in dataclasses.fields(config) if f.name == name)
  if not applies and getattr(config, name) != default:
    raise ValueError(f'{name} applies {where}; leave it out here')
