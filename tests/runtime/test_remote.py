"""RemoteRuntime's refusals: bad addresses, and a server that is not a TFF worker
(launch.train against real workers: tests/launch/test_worker.py)."""

import concurrent.futures
import time

import grpc
import portpicker
import pytest

from tff_rec.runtime import remote


@pytest.mark.parametrize('addresses, message', [
    ([], 'no worker addresses'),
    (['localhost'], "worker address 'localhost' is not host:port"),
    (['localhost:0'], "worker address 'localhost:0' is not host:port"),
    (['a:1', 'a:1'], 'a worker is listed twice in a:1,a:1'),
    (['localhost:1', 'b:2', '127.0.0.1:1'],
     r'localhost:1 and 127.0.0.1:1 are the same worker \(127.0.0.1:1\); list each worker once'),
])
def test_bad_addresses_are_refused_naming_them(addresses, message):
  with pytest.raises(ValueError, match=message):
    remote.RemoteRuntime(addresses)


# TFF's stub subscribes to its channel's connectivity for good; closing the
# channel (the runtime does, on failure) makes gRPC's polling thread raise once.
@pytest.mark.filterwarnings('ignore::pytest.PytestUnhandledThreadExceptionWarning')
def test_a_server_that_is_not_a_tff_worker_is_named_within_seconds():
  """A gRPC server without TFF's executor service (as a worker of an
  incompatible TFF would be): a clear error at start, never a hang."""
  port = portpicker.pick_unused_port()
  server = grpc.server(concurrent.futures.ThreadPoolExecutor(1))
  server.add_insecure_port(f'localhost:{port}')
  server.start()
  try:
    started = time.monotonic()
    with pytest.raises(remote.WorkerError,
                       match=f'TFF worker localhost:{port} cannot run a computation'):
      remote.RemoteRuntime([f'localhost:{port}']).install()
    assert time.monotonic() - started < 15
  finally:
    server.stop(0)
