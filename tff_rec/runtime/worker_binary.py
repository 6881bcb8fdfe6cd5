"""TFF's C++ worker binary: where it is, and how to start it so that it never
outlives its parent. No TensorFlow import: `launch.worker` starts in a blink."""

import ctypes
import importlib.util
import pathlib
import signal

NAME = 'worker_binary'


def path() -> pathlib.Path:
  """The worker binary of the installed tensorflow-federated."""
  spec = importlib.util.find_spec('tensorflow_federated')
  if spec is None or spec.origin is None:
    raise FileNotFoundError('tensorflow-federated is not installed; run the setup first '
                            '(make setup)')
  return pathlib.Path(spec.origin).parent / 'data' / NAME


def die_with_parent():
  """Runs in the child before exec: SIGKILL it when its parent dies (Linux)."""
  pr_set_pdeathsig = 1
  ctypes.CDLL('libc.so.6', use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
