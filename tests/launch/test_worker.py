"""launch.worker and launch.train --runtime=remote: real worker processes on
loopback, real trainer processes."""

import json
import re
import signal
import socket
import subprocess
import sys
import time

import portpicker
import psutil
import pytest

from tests import conftest
from tests.launch import trainer
from tff_rec import runner

# A remote run that ends with an exception in one of grpc's threads fails.
pytestmark = pytest.mark.filterwarnings('error::pytest.PytestUnhandledThreadExceptionWarning')

START_TIMEOUT_S = 30


class Worker:
  """`python -m launch.worker` on a free loopback port."""

  def __init__(self, port: int | None = None):
    self.port = port or portpicker.pick_unused_port()
    self.address = f'localhost:{self.port}'
    self.process = subprocess.Popen(
        [sys.executable, '-m', 'launch.worker', f'--port={self.port}'], cwd=conftest.REPO,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(self.port):
      assert self.process.poll() is None, self.process.stdout.read()
      assert time.monotonic() < deadline, f'worker on {self.port} did not start'
      time.sleep(0.1)

  def binaries(self) -> list[psutil.Process]:
    return [p for p in psutil.Process(self.process.pid).children(recursive=True)
            if p.name() == 'worker_binary']

  def stop(self) -> str:
    """SIGTERM, as a service manager stops it: its output."""
    if self.process.poll() is None:
      self.process.send_signal(signal.SIGTERM)
    output, _ = self.process.communicate(timeout=15)
    return output


def _answers(port: int) -> bool:
  with socket.socket() as probe:
    return probe.connect_ex(('localhost', port)) == 0


@pytest.fixture
def workers():
  """Two workers; stopped after the test, leaving no process behind."""
  started = [Worker(), Worker()]
  yield started  # a test may replace one
  binaries = [b for w in started for b in w.binaries()]
  for worker in started:
    worker.stop()
  _, alive = psutil.wait_procs(binaries, timeout=10)
  assert not alive, f'worker binaries left running: {alive}'


def test_a_worker_logs_stops_cleanly_on_sigterm_and_leaves_no_process():
  worker = Worker()
  binaries = worker.binaries()
  assert len(binaries) == 1
  output = worker.stop()
  assert worker.process.returncode == 0, output
  assert f'serving on port {worker.port}' in output
  assert 'SIGTERM: stopping the worker' in output and 'stopped' in output
  psutil.wait_procs(binaries, timeout=10)
  assert not any(b.is_running() and b.status() != psutil.STATUS_ZOMBIE for b in binaries)


def test_a_worker_refuses_a_port_in_use():
  with socket.socket() as holder:
    holder.bind(('', 0))
    holder.listen()
    port = holder.getsockname()[1]
    done = subprocess.run([sys.executable, '-m', 'launch.worker', f'--port={port}'],
                          cwd=conftest.REPO, capture_output=True, text=True, timeout=60)
  assert done.returncode != 0
  assert f'--port={port} is in use' in done.stderr


def _summary(out) -> dict:
  return json.loads((out / 'summary.json').read_text())


# One algorithm of each paper, on small data: (data fixture, flags). The dual
# encoder's FedAvg is compared in the killed-worker test below. Every worker
# reads its clients' examples from files (--client_data_dir, added by the test):
# a round sends each client its index and seed: FAIR and CoLR draw their
# negatives from it, the project's rounds the order of their batches (FedSubAvg
# and FedProx, the FedAvg family's round on the task's batches; MetaUA, whose
# batches split the client's examples).
PAPERS = {
    'FedSubAvg LR': ('ml100k_dir', ['--task=ctr', '--algorithm=fedsubavg',
                                    '--model=lr', '--rounds=2', '--clients_per_round=6',
                                    '--eval_every=2', '--batch_size=8']),
    'FAIR 1x-2x': ('user_items_dir', ['--task=ranking', '--algorithm=fair',
                                      '--capacities=1x-2x', '--rounds=2',
                                      '--clients_per_round=4', '--eval_every=2',
                                      '--batch_size=4', '--factors=4', '--local_epochs=1']),
    'CoLR, stored users': ('ranking_dir', [*trainer.RANKING, '--algorithm=colr',
                                           '--rank=2', '--rounds=2']),
    # Its initial user vectors are written once too and read where it trains.
    'CoLR, reconstructed users': ('ranking_dir', [*trainer.RANKING, '--algorithm=colr',
                                                  '--rank=2', '--rounds=2',
                                                  '--user_state=reconstructed']),
    # The Keras FedAvg family's round on a ranking's numpy batches: their order
    # sent, their columns drawn where the clients train.
    'FedProx, leave-one-out': ('ranking_dir', [*trainer.RANKING, '--algorithm=fedprox',
                                               '--rounds=2']),
    'MetaUA LR': ('ml100k_dir', ['--task=ctr', '--algorithm=metaua', '--model=lr',
                                 '--rounds=2', '--clients_per_round=6', '--eval_every=2',
                                 '--batch_size=8']),
}


@pytest.mark.slow
@pytest.mark.parametrize('paper', PAPERS)
def test_two_workers_train_to_the_native_numbers(paper, workers, request, tmp_path, capfd):
  data_fixture, flags = PAPERS[paper]
  flags = [f'--data_dir={request.getfixturevalue(data_fixture)}', *flags]
  files = [f'--client_data_dir={tmp_path / "clients"}']
  native = trainer.train_here(*flags, '--runtime=native', f'--output_dir={tmp_path / "n"}',
                              *files)  # TF's draws where the clients train, as remotely
  assert native.returncode == 0, native.stderr[-3000:]
  remote = trainer.train_here(*flags, '--runtime=remote', *files,
                              f'--workers={",".join(w.address for w in workers)}',
                              f'--output_dir={tmp_path / "r"}')
  assert remote.returncode == 0, remote.stderr[-3000:]
  logged = capfd.readouterr().err + remote.stderr  # TF's C++ logs write to the descriptor
  assert not re.search(r'^\S+ \S+: E ', logged, re.M), logged[-3000:]  # no error lines
  expected, got = _summary(tmp_path / 'n'), _summary(tmp_path / 'r')
  compared = [k for k, v in expected.items() if isinstance(v, float)
              and not k.startswith(('memory/', 'train/round_seconds'))]
  assert any(k.startswith(('test/', 'eval/')) for k in compared), compared
  for key in compared:
    assert got[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-6), key
  config = json.loads((tmp_path / 'r' / 'config.json').read_text())
  assert config['runtime'] == 'remote' and 'client_data_dir' in config
  clients = tmp_path / 'clients'
  assert (clients / (f'{runner.ROW_BATCHES}/0.tensors' if paper == 'MetaUA LR' else
                     '0.tensors')).exists()
  if 'reconstructed' in paper:  # each initial user vector read from its own file
    assert (clients / runner.OWN_ARRAYS / '0.tensors').exists()
  # Both workers ran a share of the rounds (each round's merge runs on one of them).
  calls = [got[f'remote/calls/{w.address}'] for w in workers]
  assert min(calls) >= 2, calls  # 2 rounds: a share of each at least


@pytest.mark.slow
def test_a_killed_worker_stops_the_trainer_naming_it_and_a_restart_resumes(
    workers, ml100k_dir, tmp_path):
  """The dual encoder's FedAvg: killed mid-run, restarted, resumed, it ends with
  the metrics of an uninterrupted run (a native one: the same numbers)."""
  flags = [f'--data_dir={ml100k_dir}', *trainer.FAST]
  whole = trainer.train_here(*flags, '--runtime=native', f'--output_dir={tmp_path / "whole"}')
  assert whole.returncode == 0, whole.stderr[-3000:]
  flags += ['--runtime=remote', f'--workers={",".join(w.address for w in workers)}']
  out = tmp_path / 'out'
  running = trainer.start(*flags, f'--output_dir={out}')
  for line in running.stdout:
    if line.startswith('round 2/4'):
      break
  workers[1].process.kill()  # the worker's binary dies with it
  killed = time.monotonic()
  output, _ = running.communicate(timeout=60)
  assert time.monotonic() - killed < 15
  assert running.returncode == 75, output[-3000:]
  assert f'TFF worker {workers[1].address} stopped answering' in output
  workers[1] = Worker(port=workers[1].port)  # restarted where it was
  done = trainer.train_here(*flags, f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'resumed from the checkpoint of round' in done.stdout
  expected, got = _summary(tmp_path / 'whole'), _summary(out)
  spread = {k for k in got if k.startswith('remote/calls/')}  # the remote run's own record
  # and the native run's: its worker's replacements
  assert len(spread) == 2 and got.keys() - spread == expected.keys() - {'memory/worker_restarts'}
  for key, value in expected.items():
    if not key.startswith(('memory/', 'train/round_seconds')):
      assert got[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


@pytest.mark.slow
def test_an_unreachable_worker_fails_within_seconds_naming_it(ml100k_dir, tmp_path):
  address = f'localhost:{portpicker.pick_unused_port()}'
  started = time.monotonic()
  message = trainer.refusal(f'--output_dir={tmp_path / "out"}',
                                f'--data_dir={ml100k_dir}', '--runtime=remote',
                                f'--workers={address}')
  assert f'TFF worker {address} did not answer within 10 s' in message
  assert time.monotonic() - started < 30
