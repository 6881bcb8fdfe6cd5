"""TFF workers on several machines (`launch.worker`), driven from this process.

TFF's own way to spread a round over workers: one async execution context per
worker (TFF's remote executor over gRPC, as the native runtime uses for its
local worker), combined by TFF's mergeable-computation context. A round is
compiled to its mergeable form: each worker runs the part up to the
aggregation on its share of the cohort, the partial aggregates are merged, and
the rest runs once. No scheduler of ours.

A worker that stops answering ends the program within seconds, naming it
(WORKER_DIED_EXIT_CODE, as the native runtime: restart to resume from the last
checkpoint). An address that does not answer at start fails within the connect
timeout, naming it; so does a worker that cannot run a trivial computation.
"""

import os
import re
import socket
import sys
import threading
import time
from typing import Sequence

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.runtime import native

WATCH_INTERVAL_S = 0.5
GRPC_POLL_S = 0.25  # grpc's _poll_connectivity wakes every 0.2 s
_ADDRESS = re.compile(r'^(?P<host>[^\s:]+|\[[0-9a-fA-F:.]+\]):(?P<port>\d{1,5})$')


class WorkerError(RuntimeError):
  """A worker that cannot be reached or cannot run our computations."""


def parse_addresses(addresses: Sequence[str]) -> list[str]:
  """host:port addresses, checked; an error names the first bad one."""
  if not addresses:
    raise ValueError('no worker addresses; give host:port,host:port')
  parsed = {}
  for address in addresses:
    found = _ADDRESS.match(address)
    if not found or not 0 < int(found['port']) < 65536:
      raise ValueError(f'worker address {address!r} is not host:port (e.g. '
                       'localhost:8000)')
    parsed[address] = found['host'].strip('[]'), int(found['port'])
  if len(parsed) < len(addresses):
    raise ValueError(f'a worker is listed twice in {",".join(addresses)}')
  reached = {}  # (ip, port) -> the address that reaches it
  for address, (host, port) in parsed.items():
    for endpoint in _endpoints(host, port):
      other = reached.setdefault(endpoint, address)
      if other != address:  # it would get two shares of every round, as two workers
        raise ValueError(f'{other} and {address} are the same worker ({endpoint[0]}:'
                         f'{endpoint[1]}); list each worker once')
  return list(addresses)


def _endpoints(host: str, port: int) -> set[tuple[str, int]]:
  """The (ip, port) pairs host:port resolves to; none for a host that does not
  resolve (connecting to it then fails, naming it)."""
  try:
    return {info[4][:2] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
  except OSError:
    return set()


class _CountingContext(tff.framework.AsyncExecutionContext):
  """A worker's context that counts the calls it ran (each a share of a round's
  clients, or the round's merge): what shows that the work was spread."""

  def __init__(self, **arguments):
    super().__init__(**arguments)
    self.calls = 0

  async def invoke(self, comp, arg):
    self.calls += 1
    return await super().invoke(comp, arg)


class RemoteRuntime:
  """TFF's mergeable execution context over the workers at `addresses`.

  Use as a context manager, or call `install()` and `close()`; while installed
  it is TFF's default context.
  """

  def __init__(self, addresses: Sequence[str], *, connect_timeout_s: float = 10.0):
    self._addresses = parse_addresses(addresses)
    self._connect_timeout_s = connect_timeout_s
    self._channels: list[grpc.Channel] = []
    self._context = None
    self._counted = {}
    self._closed = threading.Event()
    self._watchdogs: list[threading.Thread] = []

  def install(self) -> 'RemoteRuntime':
    contexts = []
    for address in self._addresses:
      channel = native.channel(address)
      self._channels.append(channel)
      try:
        grpc.channel_ready_future(channel).result(timeout=self._connect_timeout_s)
      except grpc.FutureTimeoutError:
        self.close()
        raise WorkerError(
            f'TFF worker {address} did not answer within {self._connect_timeout_s:g} s; '
            'is `python -m launch.worker --port=PORT` running there, and the port '
            'reachable from here?') from None
      stub = tff.framework.RemoteExecutorGrpcStub(channel)
      self._check_runs(address, stub)
      contexts.append(_CountingContext(**native.context_arguments(stub)))
    self._counted = dict(zip(self._addresses, contexts, strict=True))
    self._context = tff.backends.native.create_mergeable_comp_execution_context(contexts)
    tff.framework.set_default_context(self._context)
    self._watchdogs = [threading.Thread(target=self._watch, args=(address, channel),
                                        daemon=True, name=f'tff-worker-watchdog-{address}')
                       for address, channel in zip(self._addresses, self._channels)]
    for watchdog in self._watchdogs:
      watchdog.start()
    return self

  def calls(self) -> dict[str, int]:
    """Computations each worker ran since install(), by address."""
    return {address: context.calls for address, context in self._counted.items()}

  def _check_runs(self, address: str, stub) -> None:
    """Runs a trivial computation there: a worker of another TFF version fails
    here, with its error, instead of mid-round."""

    @tff.tensorflow.computation(np.int32)
    def add_one(x):
      return x + tf.constant(1)

    try:
      result = tff.framework.SyncExecutionContext(**native.context_arguments(stub)).invoke(
          add_one, np.int32(1))
    except Exception as e:  # pylint: disable=broad-except
      self.close()
      raise WorkerError(f'TFF worker {address} cannot run a computation from this '
                        f'trainer (TFF {tff.__version__} here; is the worker another '
                        f'version?): {type(e).__name__}: {str(e)[:500]}') from None
    if result != 2:
      self.close()
      raise WorkerError(f'TFF worker {address} computed 1 + 1 = {result}')

  def _watch(self, address: str, channel: grpc.Channel) -> None:
    """Ends the program if the worker at `address` stops answering while in use."""
    while not self._closed.wait(WATCH_INTERVAL_S):
      try:
        grpc.channel_ready_future(channel).result(timeout=WATCH_INTERVAL_S * 4)
      except (grpc.FutureTimeoutError, ValueError):
        if self._closed.is_set():
          return
        print(f'TFF worker {address} stopped answering; stopping (exit '
              f'{native.WORKER_DIED_EXIT_CODE}). Restart it and run the same command '
              'again: the run resumes from its last checkpoint.', file=sys.stderr,
              flush=True)
        os._exit(native.WORKER_DIED_EXIT_CODE)  # pylint: disable=protected-access

  def close(self) -> None:
    """Disconnects (idempotent); the workers keep running for the next trainer."""
    self._closed.set()
    if self._context is not None:
      if tff.framework.get_context_stack().current is self._context:
        native.drop_tff_default_context()
      self._context = None
    for watchdog in self._watchdogs:
      watchdog.join(timeout=WATCH_INTERVAL_S * 5)
    if self._watchdogs:
      # A watchdog's last check leaves grpc's connectivity poller running up to
      # GRPC_POLL_S after it: a channel closed under it raises in that thread.
      time.sleep(GRPC_POLL_S)
    self._watchdogs = []
    for channel in self._channels:
      channel.close()
    self._channels = []

  def __enter__(self) -> 'RemoteRuntime':
    return self if self._context is not None else self.install()

  def __exit__(self, *exc) -> None:
    self.close()
