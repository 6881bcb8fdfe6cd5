r"""A launcher's runs one after another in one process (a study's cells).

  python -m launch.train_worker [--launcher=launch.centralized] [--import=MODULE ...]

Reads one JSON line per run from stdin, {"flags": [...], "log": PATH}, runs
the launcher's main (launch.train's by default) on those flags (parsed afresh,
as a command line would be) with its output in PATH, and writes {"code": EXIT
STATUS, "seconds": ITS WALL TIME} on a line to stdout. Importing TensorFlow and
TFF once saves each run of a study its ~7 s. One launcher a worker: launchers
define flags of the same names.
"""

import contextlib
import importlib
import json
import os
import sys
import time
import traceback

from absl import app
from absl import flags

from launch import common

flags.DEFINE_enum('launcher', 'launch.train', ['launch.train', 'launch.centralized'],
                  'The launcher whose runs it takes.')


@contextlib.contextmanager
def _output_to(path: str):
  """stdout and stderr (TF's C++ logs too: the file descriptors) into `path`."""
  sys.stdout.flush()
  sys.stderr.flush()
  saved = os.dup(1), os.dup(2)
  with open(path, 'a') as log:
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
      yield
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os.dup2(saved[0], 1)
      os.dup2(saved[1], 2)
      for fd in saved:
        os.close(fd)


def run_one(launcher, args: list[str], log: str) -> int:
  """The launcher module's main on `args`, its output in `log`: its exit status."""
  flags.FLAGS.unparse_flags()
  with _output_to(log):
    try:
      launcher.main(flags.FLAGS([launcher.__name__, *args]))
      return 0
    except (flags.Error, app.UsageError) as e:
      print(f'error: {e}', file=sys.stderr)
      return 1
    except SystemExit as e:  # as the trainer's process would exit
      if isinstance(e.code, str):
        print(e.code, file=sys.stderr)
      return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # pylint: disable=broad-except  # the run's failure, in its log
      traceback.print_exc()
      return 1
    finally:
      flags.FLAGS.unparse_flags()


def main(argv):
  del argv
  launcher = importlib.import_module(flags.FLAGS.launcher)  # its flags join the parsed ones
  answer = os.fdopen(os.dup(1), 'w')  # the protocol's channel, apart from the runs' output
  for line in sys.stdin:
    job = json.loads(line)
    started = time.perf_counter()
    code = run_one(launcher, job['flags'], job['log'])
    answer.write(json.dumps({'code': code, 'seconds': time.perf_counter() - started}) + '\n')
    answer.flush()


if __name__ == '__main__':
  common.run(main)
