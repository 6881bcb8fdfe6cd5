"""Running launch.train in tests: as a user does (a process), or its flag
parsing and main() in this process (refusals, and runs whose process does not
matter: a fresh process per run would import TF and TFF again, about 7 s of a
core each). `run_here` does the same for another launcher whose flags do not
collide with the trainer's."""

import contextlib
import functools
import io
import subprocess
import sys
import types

from absl import app
from absl import flags

# The trainer's flags, defined in this test process for its refusals (a launcher
# that defines a flag of the same name cannot be imported into a test process).
from launch import train as launcher
from tests import conftest

FAST = ['--rounds=4', '--clients_per_round=5', '--eval_every=2', '--checkpoint_every=1',
        '--batch_size=4', '--loss=global_softmax']
RANKING = ['--task=loo_ranking', '--rounds=4', '--clients_per_round=5', '--eval_every=2',
           '--checkpoint_every=1', '--batch_size=32', '--embedding_dim=8']


def train(*args, **kwargs) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'launch.train', *args], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=600, **kwargs)


def start(*args) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, '-m', 'launch.train', *args], cwd=conftest.REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


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


train_here = functools.partial(run_here, launcher)


def refusal(*args) -> str:
  """What the trainer says when it refuses `args`: its flag parsing and main(),
  run in this process. A fresh process per case would import TF and TFF again
  (about 6 s each); test_data_dir_without_movielens_files and
  test_resume_refuses_other_flags check the command line's own exit."""
  flags.FLAGS.unparse_flags()
  try:
    launcher.main(flags.FLAGS(['train', *args]))
  except (flags.Error, app.UsageError) as e:
    return str(e)
  finally:
    flags.FLAGS.unparse_flags()
  return 'not refused: it trained'
