"""A launcher's main() run in this process, or several of its commands in one
fresh process: what its command line returns, without importing TF and TFF
again for each command (about 6 s of a core each)."""

import contextlib
import fcntl
import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import types
from typing import Any, Callable

from absl import app
from absl import flags

from tests import conftest


def run_here(module: types.ModuleType, *args) -> subprocess.CompletedProcess:
  """A launcher's main() on `args` in this process, its output captured: what
  a process of it returns, for a run that needs no process of its own (one that
  is killed, or imports a user's module, does). Every flag is parsed afresh."""
  stdout, stderr = io.StringIO(), io.StringIO()
  code, error = 0, ''
  flags.FLAGS.unparse_flags()
  try:
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
      module.main(flags.FLAGS([module.__name__, *args]))
  except (flags.Error, app.UsageError) as e:
    code, error = 1, f'{e}\n'
  except SystemExit as e:  # as the process would exit: a status, or a message and 1
    code, error = (e.code, '') if isinstance(e.code, int) else (1, f'{e.code}\n')
  finally:
    flags.FLAGS.unparse_flags()
  return subprocess.CompletedProcess([module.__name__, *args], code, stdout.getvalue(),
                                     stderr.getvalue() + error)


_CHILD = textwrap.dedent('''
    import importlib, json, sys
    from launch import common
    from tests.launch import launchers
    module = importlib.import_module(sys.argv[1])
    commands = json.loads(sys.argv[2])
    sys.argv[1:] = []

    def main(argv):  # in the process a launcher's own common.run sets up
      del argv
      done = [launchers.run_here(module, *args) for args in commands]
      print(launchers.SEPARATOR + json.dumps([[d.returncode, d.stdout, d.stderr] for d in done]))

    common.run(main)
''')
SEPARATOR = '\n--- commands done ---\n'


def run_in_one_process(module: str,
                       commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
  """Each command of `module` (a launcher whose flags may collide with those of
  another imported here), one after another in one fresh process, as run_here
  runs them. What the process itself wrote to stderr (at its exit too) is added
  to every command's stderr."""
  process = subprocess.run([sys.executable, '-c', _CHILD, module, json.dumps(commands)],
                           cwd=conftest.REPO, capture_output=True, text=True, timeout=900,
                           check=False)
  assert process.returncode == 0 and SEPARATOR in process.stdout, process.stderr[-3000:]
  results = json.loads(process.stdout.split(SEPARATOR)[-1])
  return [subprocess.CompletedProcess([module, *args], code, stdout, stderr + process.stderr)
          for args, (code, stdout, stderr) in zip(commands, results, strict=True)]


def once_per_test_run(tmp_path_factory, name: str,
                      make: Callable[[pathlib.Path], Any]) -> tuple[Any, pathlib.Path]:
  """(make(folder), folder): made once for the whole test run, however many
  xdist processes run its tests (the first makes it, the others wait and read
  its JSON), for a costly module fixture whose tests worksteal may spread."""
  base = tmp_path_factory.getbasetemp()
  root = base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base  # shared by them
  folder, made = root / name, root / f'{name}.json'
  with open(root / f'{name}.lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not made.exists():
      folder.mkdir()
      made.write_text(json.dumps(make(folder)))
    return json.loads(made.read_text()), folder
