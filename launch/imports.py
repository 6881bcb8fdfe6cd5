"""--import=MODULE: a user's own modules, loaded before a launcher makes its flags.

A module registers algorithms (`tff_rec.registry.register`) or tasks
(`tasks.register`) when imported; loading it before the flags are defined
makes its algorithms, options and tasks flags and choices like the package's
own. MODULE is a module name on the Python path (the working directory
included) or a .py file. A module that is missing or raises stops the
launcher here, naming the flag, the module and its error.
"""

import importlib
import importlib.util
import pathlib
import sys
from typing import Sequence

FLAG = 'import'


def named(argv: Sequence[str]) -> list[str]:
  """The values of every --import in `argv` (--import=M or --import M)."""
  names = []
  for i, arg in enumerate(argv):
    if arg.startswith(f'--{FLAG}='):
      names.append(arg.split('=', 1)[1])
    elif arg == f'--{FLAG}' and i + 1 < len(argv):
      names.append(argv[i + 1])
  return names


def load(name: str) -> None:
  """Imports module `name` (a module name, or a path to a .py file)."""
  path = pathlib.Path(name)
  if path.suffix == '.py':
    if not path.is_file():
      raise ModuleNotFoundError(f'no file {path}')
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
  else:
    if '' not in sys.path and str(pathlib.Path.cwd()) not in sys.path:
      sys.path.insert(0, '')  # python -m puts the working directory first; a script may not
    importlib.import_module(name)


def load_all(argv: Sequence[str]) -> None:
  """Loads every --import of `argv`; exits naming the module and its error."""
  for name in named(argv):
    if not name:
      sys.exit(f'error: --{FLAG}= names no module; give a module name or a .py file')
    try:
      load(name)
    except Exception as e:  # pylint: disable=broad-except  # whatever the user's module raises
      sys.exit(f'error: --{FLAG}={name}: the module could not be loaded: '
               f'{type(e).__name__}: {e}')
