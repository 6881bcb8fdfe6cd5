"""Result files written atomically (a temporary file renamed over the target: never
half-written) and summaries read back."""

import json
import math
import os
import pathlib
import shutil
import tempfile


def copy_atomically(source: pathlib.Path, target: pathlib.Path) -> None:
  temporary = target.with_suffix(target.suffix + '.tmp')
  shutil.copyfile(source, temporary)
  os.replace(temporary, target)


def write_json(path: pathlib.Path, value) -> None:
  """Writes JSON atomically: never half-written."""
  write_text(path, json.dumps(value, indent=2, sort_keys=True))


def write_summary(path: pathlib.Path, metrics: dict) -> None:
  """A run's summary.json as strict JSON, which any parser reads: a value that is
  not finite (a diverged run's loss) as null; read_summary reads it as NaN."""
  write_json(path, {k: None if isinstance(v, float) and not math.isfinite(v) else v
                    for k, v in metrics.items()})


def read_summary(path: pathlib.Path) -> dict:
  """A summary.json's values, null as NaN (records before write_summary hold NaN)."""
  return {k: math.nan if v is None else v for k, v in json.loads(path.read_text()).items()}


def _umask() -> int:
  mask = os.umask(0)  # reading it means setting it: set back at once, at import
  os.umask(mask)
  return mask


# A temporary file is made private (0600); what replaces the result gets the
# mode open() would have given it, so colleagues can read the results.
FILE_MODE = 0o666 & ~_umask()


def write_text(path: pathlib.Path, text: str) -> None:
  """Writes a file atomically (temp file + rename): never half-written."""
  with tempfile.NamedTemporaryFile('w', dir=path.parent, delete=False,
                                   suffix='.tmp') as f:
    f.write(text)
  os.chmod(f.name, FILE_MODE)
  os.replace(f.name, path)
