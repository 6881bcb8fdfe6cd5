"""Running launch.train in tests: as a user does (a process), or its flag
parsing and main() in this process (refusals, and runs whose process does not
matter: a fresh process per run would import TF and TFF again, about 7 s of a
core each). Other launchers: tests/launch/launchers.py."""

import functools
import subprocess
import sys

# The trainer's flags, defined in this test process for its refusals (a launcher
# that defines a flag of the same name cannot be imported into a test process).
from launch import train as launcher
from tests import conftest
from tests.launch import launchers

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


train_here = functools.partial(launchers.run_here, launcher)


def refusal(*args) -> str:
  """What the trainer says when it refuses `args` (train_here: its flag parsing and
  main(), run in this process). A fresh process per case would import TF and TFF
  again (about 6 s each); test_resume_refuses_other_flags checks the command line's
  own exit."""
  done = train_here(*args)
  return done.stderr if done.returncode else 'not refused: it trained'
