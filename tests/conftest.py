"""Shared fixtures: the TFF runtime, a worker-leak guard, MovieLens-format files,
the reproduction scripts' flags."""

import os
import pathlib
import sys

from absl.testing import flagsaver
import psutil
import pytest

import launch  # pylint: disable=unused-import  # TensorFlow, whenever it loads, loads quietly
from tests import fixtures
from tff_rec.runtime import worker_binary

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / 'shared' / 'data'


def _is_live_worker(proc: psutil.Process) -> bool:
  try:
    return proc.name() == worker_binary.NAME and proc.status() != psutil.STATUS_ZOMBIE
  except psutil.NoSuchProcess:
    return False


def worker_processes() -> dict[int, psutil.Process]:
  """Live TFF worker processes anywhere on this machine, by pid."""
  return {p.pid: p for p in psutil.process_iter() if _is_live_worker(p)}


def own_worker_processes() -> dict[int, psutil.Process]:
  """Live TFF workers descended from this test process.

  Other programs on the machine may run their own; a worker orphaned by a
  subprocess under test is checked by that test itself.
  """
  return {p.pid: p for p in psutil.Process().children(recursive=True)
          if _is_live_worker(p)}


def pytest_collection_modifyitems(config, items):
  """Tests marked slow start first, spread over the xdist processes: worksteal
  hands each process one contiguous share of this list, so each share here
  begins with its part of the slow tests (dealt in turn) and then its part of the
  rest. None of them starts last and runs alone while the others sit idle (the
  suite's last minute was such a tail)."""
  shares = getattr(config, 'workerinput', {}).get('workercount', 1)
  # the longest first (slow(seconds=...) where measured), so none starts late
  slow = sorted((item for item in items if item.get_closest_marker('slow')),
                key=lambda item: -item.get_closest_marker('slow').kwargs.get('seconds', 10))
  rest = [item for item in items if not item.get_closest_marker('slow')]
  bounds = [len(rest) * share // shares for share in range(shares + 1)]
  items[:] = [item for share in range(shares)
              for item in (*slow[share::shares], *rest[bounds[share]:bounds[share + 1]])]


def pytest_collection_finish(session):
  """Computations need the `tff_runtime` fixture: TFF's own context, made when the
  tests' imports load TFF, is dropped (alive at exit, it printed a traceback).
  Nothing here loads TFF: xdist's controller, which imports no test, never pays
  for TensorFlow.

  TF's graph optimizer (Grappler) is off in the test processes: it rewrites each
  graph when the graph is first run, and a test runs most of its graphs once or a
  few times, so the rewriting cost more than it saved (the suite: 18.9 CPU-minutes
  with it, 15.0 without, 2026-12-07). It keeps a graph's meaning; the trainers the
  tests start as processes, TFF's worker binary and the benchmarks run with it, so
  the in-process-against-native tests compare a graph optimized and not."""
  del session
  if 'tensorflow' in sys.modules:
    sys.modules['tensorflow'].config.optimizer.set_experimental_options(
        {'disable_meta_optimizer': True})
  if 'tensorflow_federated' in sys.modules:
    from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
    native.drop_tff_default_context()


@pytest.fixture(scope='session')
def _session_runtime():
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  with native.NativeRuntime() as runtime:
    yield runtime


@pytest.fixture
def tff_runtime(_session_runtime):
  """The session's native TFF runtime (one worker), as the default context."""
  return _session_runtime.activate()


@pytest.fixture(autouse=True)
def no_leaked_workers(request):
  """Fails a test that leaves a TFF worker running that nobody owns.

  A leftover worker keeps its parent's stdout open, which makes CI wait until
  its time limit; the session runtime's own worker is expected.
  """
  before = set(own_worker_processes())
  yield
  leaked = []
  runtime = (request.getfixturevalue('_session_runtime')
             if '_session_runtime' in request.fixturenames else None)
  for pid, proc in own_worker_processes().items():
    if pid in before or (runtime and pid == runtime.worker_pid):
      continue
    leaked.append(pid)
    proc.kill()
  assert not leaked, f'test left TFF worker processes running: {leaked}'


@pytest.fixture
def reproduction_flags():
  """launch.common's flags as a reproduction script has them (--task=loo_ranking).

  Set, not parsed: parsing would run the validators of every launcher imported
  into this test process, and launch.train's requires --output_dir.
  """
  from launch import common  # pylint: disable=g-import-not-at-top  (it defines flags)
  with flagsaver.flagsaver(task='loo_ranking'):
    common.FLAGS.mark_as_parsed()
    yield
  common.FLAGS.unparse_flags()


@pytest.fixture
def ml100k_dir(tmp_path) -> pathlib.Path:
  """A small MovieLens 100K-format directory: 30 users, 40 items."""
  return fixtures.write_ml100k(tmp_path / 'ml-100k', fixtures.synthetic_ratings(30, 40), 30, 40)


@pytest.fixture
def ranking_dir(tmp_path) -> pathlib.Path:
  """MovieLens 100K-format ratings for leave-one-out ranking: 30 users, 200
  items (enough for 99 unseen evaluation negatives each)."""
  return fixtures.write_ml100k(tmp_path / 'ml-100k', fixtures.synthetic_ratings(30, 200),
                               30, 200)


@pytest.fixture
def ml1m_dir(tmp_path) -> pathlib.Path:
  """The same ratings as `ml100k_dir`, in MovieLens 1M format."""
  return fixtures.write_ml1m(tmp_path / 'ml-1m', fixtures.synthetic_ratings(30, 40), 30, 40)


def skip_outside_ci(message: str) -> None:
  """Skips a test whose prerequisite this machine lacks; under CI, which has
  them all (the real data, the CUDA toolkit), fails it instead."""
  if os.environ.get('CI', '').lower() in ('true', '1'):
    pytest.fail(f'{message} (CI={os.environ["CI"]}: this test may not skip there)')
  pytest.skip(message)


def _real_data(folder: str, probe: str) -> pathlib.Path:
  path = SHARED_DATA / folder
  if not (path / probe).is_file():
    skip_outside_ci(f'real dataset {folder} not found at {path}')
  return path


@pytest.fixture
def real_ml100k() -> pathlib.Path:
  return _real_data('ml-100k', 'u.data')


@pytest.fixture
def real_beauty() -> pathlib.Path:
  return _real_data('amazon-beauty', 'Beauty.txt')


@pytest.fixture
def real_goodreads() -> pathlib.Path:
  return _real_data('goodreads-100', 'train.txt')


@pytest.fixture
def user_items_dir(tmp_path) -> pathlib.Path:
  """A small Goodreads-100-format directory: 8 users, 40 items, two taste groups."""
  train, test = fixtures.synthetic_user_items(8, 40)
  return fixtures.write_user_items(tmp_path / 'user-items', train, test)
