import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import conftest
from tff_rec.runtime import native


def _sum_at_clients():
  @tff.federated_computation(tff.FederatedType(np.int32, tff.CLIENTS))
  def total(values):
    return tff.federated_sum(values)
  return total


def test_runs_federated_computations_and_stops_its_worker_on_close():
  runtime = native.NativeRuntime().install()
  try:
    pid = runtime.worker_pid
    assert psutil.Process(pid).name() == native.WORKER_NAME
    assert _sum_at_clients()([1, 2, 3]) == 6
  finally:
    runtime.close()
  assert pid not in conftest.worker_processes()
  runtime.close()  # idempotent
  with pytest.raises(RuntimeError, match='no TFF native runtime is open'):
    _sum_at_clients()([1])


def _tiny_fed_avg():
  spec = (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None, 1], tf.float32))

  def model_fn():
    keras = tf.keras.Sequential([tf.keras.layers.Dense(
        1, input_shape=(2,), kernel_initializer='zeros')])
    return tff.learning.models.from_keras_model(keras, loss=tf.keras.losses.MeanSquaredError(),
                                                input_spec=spec)

  return tff.learning.algorithms.build_weighted_fed_avg(
      model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.1))


def test_a_worker_grown_past_its_bound_is_replaced_and_the_numbers_do_not_move():
  """A bound below any growth (-1 MB): the worker is replaced once it warmed up
  (the old one stopped: no_leaked_workers). The rounds end where they end on one
  worker."""
  process = _tiny_fed_avg()
  rng = np.random.default_rng(0)
  clients = [tf.data.Dataset.from_tensor_slices(
      (rng.normal(size=(6, 2)).astype(np.float32), rng.normal(size=(6, 1)).astype(np.float32))
  ).batch(2) for _ in range(3)]
  ended = {}
  for limit in (None, -1):
    with native.NativeRuntime(worker_growth_limit_mb=limit) as runtime:
      state, workers = process.initialize(), set()
      for _ in range(native.WARM_CALLS + 2):  # the first call initialized
        state = process.next(state, clients).state
        workers.add(runtime.worker_pid)
      ended[limit] = (process.get_model_weights(state).trainable, runtime.restarts,
                      len(workers))
      assert _sum_at_clients()([1, 2]) == 3
  assert ended[None][1:] == (0, 1)
  # Replaced once, after its WARM_CALLS computations; the new one warms up again.
  assert ended[-1][1:] == (1, 2)
  for unbounded, bounded in zip(ended[None][0], ended[-1][0], strict=True):
    np.testing.assert_array_equal(unbounded, bounded)


def test_worker_stops_when_the_with_block_raises():
  try:
    with native.NativeRuntime() as runtime:
      pid = runtime.worker_pid
      raise KeyError('boom')
  except KeyError:
    pass
  assert pid not in conftest.worker_processes()


_CHILD = textwrap.dedent('''
    import os, sys, time
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'
    from tff_rec.runtime import native
    runtime = native.NativeRuntime().install()
    print(runtime.worker_pid, flush=True)
    if sys.argv[1] == 'exit':
      sys.exit(0)          # no close(): atexit must stop the worker
    time.sleep(600)        # killed by the test
''')


def _child(mode, stderr=subprocess.DEVNULL):
  child = subprocess.Popen([sys.executable, '-c', _CHILD, mode], stdout=subprocess.PIPE,
                           stderr=stderr, cwd=conftest.REPO, text=True)
  return child, int(child.stdout.readline())


def _gone(pid, timeout=10.0):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if pid not in conftest.worker_processes():
      return True
    time.sleep(0.1)
  return False


def test_worker_stops_when_python_exits_without_closing_and_the_exit_is_quiet():
  child, pid = _child('exit', stderr=subprocess.PIPE)
  # The worker does not hold the parent's stdout: reading to EOF returns.
  rest, errors = child.communicate(timeout=30)
  assert rest == '' and child.returncode == 0
  assert _gone(pid)
  # TFF's own default context must not print an error from __del__ at exit.
  assert 'Exception ignored' not in errors and 'Traceback' not in errors


def test_worker_dies_with_a_killed_parent():
  child, pid = _child('sleep')
  assert pid in conftest.worker_processes()
  os.kill(child.pid, signal.SIGKILL)
  child.wait()
  assert _gone(pid)


def test_a_worker_that_dies_in_use_ends_the_program_with_a_retry_code():
  child, pid = _child('sleep')  # the child waits, as a trainer waits on a round
  os.kill(pid, signal.SIGKILL)  # as when TFF's worker segfaults
  assert child.wait(timeout=30) == native.WORKER_DIED_EXIT_CODE
