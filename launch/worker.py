"""TFF's worker service on this machine, for `launch.train --runtime=remote`.

  python -m launch.worker --port=8000

Runs TFF's own C++ worker (`worker_binary`, the one the native runtime starts
locally) on the port, with its log on this process's output. A port in use is
refused before anything starts. SIGTERM or Ctrl-C stops the worker and exits 0;
the worker also dies with this process (it never outlives it).
"""

import signal
import socket
import subprocess
import sys
import threading
import time

from absl import app
from absl import flags

from launch import usage
from tff_rec.runtime import worker_binary

flags.DEFINE_integer('port', None, 'The port the worker serves on.', lower_bound=1,
                     upper_bound=65535)
flags.DEFINE_integer('max_concurrent_computation_calls', -1, 'Computations the worker runs '
                     'at once (-1: no limit).')
flags.mark_flag_as_required('port')
FLAGS = flags.FLAGS
STOP_TIMEOUT_S = 5


def _check_port_free(port: int) -> None:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
    # As gRPC binds: a port whose last connections linger (TIME_WAIT) is free.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind(('', port))
    except OSError as e:
      raise app.UsageError(f'--port={port} is in use ({e.strerror}): another worker, or '
                           'another program, holds it; stop it or choose another --port') \
          from None


def _log(message: str) -> None:
  print(f'{time.strftime("%Y-%m-%d %H:%M:%S")} launch.worker: {message}', flush=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  _check_port_free(FLAGS.port)
  binary = worker_binary.path()
  if not binary.is_file():
    raise app.UsageError(f'TFF worker binary not found at {binary}; run the setup first '
                         '(make setup)')
  worker = subprocess.Popen(
      [str(binary), f'--port={FLAGS.port}',
       f'--max_concurrent_computation_calls={FLAGS.max_concurrent_computation_calls}'],
      stdin=subprocess.DEVNULL, preexec_fn=worker_binary.die_with_parent)
  stopping = []

  def stop(signum, unused_frame):
    stopping.append(signum)
    _log(f'{signal.Signals(signum).name}: stopping the worker')
    worker.terminate()  # the worker keeps no state; it ignores SIGINT once it has served
    killer = threading.Timer(STOP_TIMEOUT_S, worker.kill)  # if it does not stop by itself
    killer.daemon = True
    killer.start()

  signal.signal(signal.SIGTERM, stop)
  signal.signal(signal.SIGINT, stop)
  _log(f'TFF worker (pid {worker.pid}) serving on port {FLAGS.port}')
  code = worker.wait()
  if stopping:
    _log(f'stopped (worker exit code {code})')
    sys.exit(0)
  _log(f'the TFF worker exited by itself with code {code}')
  sys.exit(code or 1)


if __name__ == '__main__':
  app.run(usage.brief_usage_errors(main))
