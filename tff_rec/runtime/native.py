"""TFF's native C++ runtime, with a worker process whose lifetime we own.

TFF's own `set_sync_local_cpp_execution_context` starts `worker_binary` with
the parent's stdout/stderr and stops it only in a `__del__`, which often never
runs: the worker outlives Python and keeps the terminal's (or CI's) pipe open.
`NativeRuntime` builds the same context from TFF's public pieces but starts
the worker itself: output goes to a log file, the kernel kills it if Python
dies (PR_SET_PDEATHSIG), and `close()` (also run at exit) stops it. If the
worker dies on its own (TFF 0.87's worker has segfaulted in a gRPC thread
mid-run), a call waiting on it would wait forever: a watchdog thread then
prints the worker's log tail and ends the program with WORKER_DIED_EXIT_CODE,
so a driver can restart it from its last checkpoint.

TFF 0.87's worker grows over long runs (FAIR 1x-2x on Goodreads-100: about
0.9 MB a round, after a warm-up). Nothing of a run lives on the worker between
two computations (a sync context's results come back to Python), so the
runtime starts a fresh worker before a computation once the running one holds
`worker_growth_limit_mb` more than after its first WARM_CALLS computations:
memory stays bounded and the numbers do not move.

TFF's import-time default context is dropped when a runtime is installed and
not restored: its `__del__` fails noisily if it is still alive at interpreter
exit. After `close()` the default is a context that says the runtime closed.
"""

import atexit
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import portpicker
import psutil
import tensorflow_federated as tff

from tff_rec.runtime import worker_binary

WORKER_NAME = worker_binary.NAME
WORKER_DIED_EXIT_CODE = 75  # EX_TEMPFAIL: worth a retry from the last checkpoint
# The worker's size after this many computations is what its growth counts from:
# its first computations load the round's graphs (2.8 GB for FAIR on Goodreads).
WARM_CALLS = 10
DEFAULT_GROWTH_LIMIT_MB = 1024  # FAIR on Goodreads (+0.5 MB a round) reaches it in ~2,000 rounds
_GRPC_MAX_MESSAGE_BYTES = 2 * 1000 * 1000 * 1000  # TFF's own cap
_GRPC_OPTIONS = [
    ('grpc.max_message_length', _GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_receive_message_length', _GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_send_message_length', _GRPC_MAX_MESSAGE_BYTES),
]


# What compiles a computation for a TFF worker: TFF's native backend's compiler,
# looked up at each compile (a launcher may wrap it: launch.quiet_start).
compiler = tff.backends.native.desugar_and_transform_to_native


def context_arguments(stub: tff.framework.RemoteExecutorGrpcStub) -> dict:
  """The arguments of a TFF execution context (sync or async) that runs
  computations on the worker behind `stub`, compiled as TFF's native backend does."""

  def stack_fn(cardinalities):
    # A computation with no CLIENTS-placed argument still needs a cardinality.
    cardinalities.setdefault(tff.CLIENTS, 0)
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    return executor

  return dict(executor_fn=tff.framework.ResourceManagingExecutorFactory(stack_fn),
              compiler_fn=lambda computation: compiler(computation),
              transform_args=tff.tensorflow.transform_args,
              transform_result=tff.tensorflow.transform_result)


def channel(address: str) -> grpc.Channel:
  """A gRPC channel to a TFF worker, with TFF's message size cap."""
  return grpc.insecure_channel(address, _GRPC_OPTIONS)


def _accepts(port: int) -> bool:
  with socket.socket() as probe:
    return probe.connect_ex(('localhost', port)) == 0


class WorkerStartError(RuntimeError):
  pass


class ClosedContext(tff.framework.SyncContext):
  """The default context when no runtime is open: fails with a clear message."""

  def invoke(self, comp, arg):
    raise RuntimeError('no TFF native runtime is open (or it was closed); run '
                       'computations inside `with NativeRuntime():`')


def drop_tff_default_context() -> None:
  """Replaces the context TFF makes at import with a ClosedContext.

  For programs that import TFF but run no computation: TFF's context, if
  still alive at interpreter exit, prints an error from its __del__.
  """
  tff.framework.set_default_context(ClosedContext())


class _OnCurrentWorker(tff.framework.SyncContext):
  """TFF's context for a NativeRuntime: each computation runs on its current worker."""

  def __init__(self, runtime: 'NativeRuntime'):
    self._runtime = runtime

  def invoke(self, comp, arg):
    return self._runtime._invoke(comp, arg)  # pylint: disable=protected-access


class NativeRuntime:
  """A TFF sync execution context on a local `worker_binary`.

  Use as a context manager, or call `install()` and `close()`. While installed
  it is TFF's default context; `close()` restores the previous one. A worker
  grown `worker_growth_limit_mb` past its warm size is replaced by a fresh one
  before the next computation (None: never); `restarts` counts them.
  """

  def __init__(self, *, max_concurrent_computation_calls: int = -1,
               start_timeout_s: float = 60.0,
               worker_growth_limit_mb: float | None = DEFAULT_GROWTH_LIMIT_MB):
    self._max_calls = max_concurrent_computation_calls
    self._start_timeout_s = start_timeout_s
    self._growth_limit_mb = worker_growth_limit_mb
    self._process: subprocess.Popen | None = None
    self._channel: grpc.Channel | None = None
    self._context = None
    self._worker_context = None  # TFF's context on the current worker
    self._calls, self._warm_mb = 0, None
    self._log = None
    self.restarts = 0

  @property
  def worker_pid(self) -> int | None:
    return self._process.pid if self._process else None

  def install(self) -> 'NativeRuntime':
    self._use_new_worker()
    self._context = _OnCurrentWorker(self)
    atexit.register(self.close)
    return self.activate()

  def _use_new_worker(self) -> None:
    self._worker_context = tff.framework.SyncExecutionContext(**context_arguments(
        self._start_worker()))
    self._calls, self._warm_mb = 0, None

  def _invoke(self, comp, arg):
    if self._worker_context is None:
      raise RuntimeError('the TFF native runtime was closed')
    if self._grown_too_much():
      self._stop_worker()
      self._use_new_worker()
      self.restarts += 1
    self._calls += 1
    return self._worker_context.invoke(comp, arg)

  def _grown_too_much(self) -> bool:
    if self._growth_limit_mb is None or self._calls < WARM_CALLS:
      return False
    try:
      size_mb = psutil.Process(self._process.pid).memory_info().rss / 2**20
    except psutil.NoSuchProcess:  # it died: the watchdog ends the program
      return False
    if self._warm_mb is None:
      self._warm_mb = size_mb
    return size_mb - self._warm_mb > self._growth_limit_mb

  def activate(self) -> 'NativeRuntime':
    """Makes this runtime TFF's default context again (another may have been)."""
    if self._context is None:
      raise RuntimeError('the TFF native runtime is not installed')
    tff.framework.set_default_context(self._context)
    return self

  def _start_worker(self) -> tff.framework.RemoteExecutorGrpcStub:
    binary = worker_binary.path()
    if not binary.is_file():
      raise WorkerStartError(f'TFF worker binary not found at {binary}; is '
                             'tensorflow-federated 0.87 installed (make setup)?')
    port = portpicker.pick_unused_port()
    self._log = tempfile.NamedTemporaryFile(prefix='tff_worker_', suffix='.log',
                                            delete=False)
    self._process = subprocess.Popen(
        [str(binary), f'--port={port}',
         f'--max_concurrent_computation_calls={self._max_calls}'],
        stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        preexec_fn=worker_binary.die_with_parent)
    deadline = time.monotonic() + self._start_timeout_s
    stub = None
    # The channel is made once the port accepts: gRPC waits 1 s (its first
    # reconnect backoff) after a refused connection, a second of every start.
    while stub is None or not stub.is_ready:
      if self._process.poll() is not None or time.monotonic() > deadline:
        log = pathlib.Path(self._log.name).read_text(errors='replace')[-2000:]
        self.close()
        raise WorkerStartError(f'TFF worker on port {port} did not start; its '
                               f'log ends:\n{log}')
      if stub is None and _accepts(port):
        self._channel = channel(f'localhost:{port}')
        stub = tff.framework.RemoteExecutorGrpcStub(self._channel)
      time.sleep(0.01)
    threading.Thread(target=self._watch, args=(self._process,), daemon=True,
                     name='tff-worker-watchdog').start()
    return stub

  def _watch(self, process: subprocess.Popen) -> None:
    """Ends the program if `process` exits while this runtime still uses it."""
    code = process.wait()
    if self._process is not process:  # close() stopped it
      return
    log = pathlib.Path(self._log.name).read_text(errors='replace')[-2000:]
    print(f'TFF worker (pid {process.pid}) exited with code {code} while in use; '
          f'its log ends:\n{log}\nStopping (exit {WORKER_DIED_EXIT_CODE}); a run '
          'restarted with the same flags resumes from its last checkpoint.',
          file=sys.stderr, flush=True)
    os._exit(WORKER_DIED_EXIT_CODE)  # pylint: disable=protected-access

  def close(self) -> None:
    """Stops the worker (idempotent); later computations raise."""
    if self._context is not None:
      if tff.framework.get_context_stack().current is self._context:
        drop_tff_default_context()
      self._context = None
    self._stop_worker()
    atexit.unregister(self.close)

  def _stop_worker(self) -> None:
    self._worker_context = None
    if self._channel is not None:
      self._channel.close()
      self._channel = None
    if self._process is not None:
      process, self._process = self._process, None  # first: the watchdog stands down
      if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
          process.wait(timeout=5)
        except subprocess.TimeoutExpired:
          process.kill()
          process.wait()
    if self._log is not None:
      self._log.close()
      os.unlink(self._log.name)
      self._log = None

  def __enter__(self) -> 'NativeRuntime':
    return self.install()

  def __exit__(self, *exc) -> None:
    self.close()
