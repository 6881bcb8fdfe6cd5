"""Launchers' runs side by side: a pool of worker processes, each running one run
at a time in-process (launch.train_worker), so a study's cells pay for importing
TensorFlow and TFF once per worker, not once per cell. A worker takes one
launcher's runs (launch.train's, or launch.centralized's)."""

import json
import os
import pathlib
import selectors
import subprocess
import sys
from typing import Sequence

WORKER = 'launch.train_worker'
RUNS_PER_WORKER = 20  # then a fresh process: nothing a long-lived one gathers grows on


class Pool:
  """`size` workers; submit(name, flags, log, launcher) a run to a free one, wait() for
  any."""

  def __init__(self, size: int, imports: Sequence[str] = (), cwd: str | None = None):
    if size < 1:
      raise ValueError(f'a pool needs at least one worker, got {size}')
    self.size = size
    self._command = [sys.executable, '-m', WORKER, *(f'--import={m}' for m in imports)]
    self._cwd = cwd
    self._idle: dict[str, list[subprocess.Popen]] = {}  # launcher -> its idle workers
    self._launcher: dict[subprocess.Popen, str] = {}
    self._busy: dict[subprocess.Popen, str] = {}  # worker -> the run's name
    self._runs: dict[subprocess.Popen, int] = {}  # worker -> runs it took
    self._selector = selectors.DefaultSelector()
    self.run_seconds = 0.0  # the finished runs' own wall time, summed

  @property
  def free(self) -> int:
    return self.size - len(self._busy)

  def has_idle(self, launcher: str) -> bool:
    """Whether a worker of `launcher` waits (a run of another would replace one)."""
    return any(w.poll() is None for w in self._idle.get(launcher, ()))

  @property
  def running(self) -> list[str]:
    return list(self._busy.values())

  def _worker(self, launcher: str) -> subprocess.Popen:
    idle = self._idle.setdefault(launcher, [])
    while idle:
      worker = idle.pop()
      if worker.poll() is None:
        return worker
    others = [w for ws in self._idle.values() for w in ws]
    if others and len(others) + len(self._busy) >= self.size:  # no more processes than `size`
      _stop(others[0])
      self._idle[self._launcher.pop(others[0])].remove(others[0])
    return self._spawn(launcher)

  def _spawn(self, launcher: str) -> subprocess.Popen:
    worker = subprocess.Popen([*self._command, f'--launcher={launcher}'], cwd=self._cwd,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, 'PYTHONUNBUFFERED': '1'})
    self._runs[worker], self._launcher[worker] = 0, launcher
    return worker

  def start(self, launchers: Sequence[str]) -> None:
    """Starts a worker now, idle, for each of `launchers` (as many as the pool holds):
    they import TensorFlow while the caller does other work, not when the first
    runs are submitted."""
    for launcher in launchers[:self.size - len(self._launcher)]:  # _launcher: every live one
      self._idle.setdefault(launcher, []).append(self._spawn(launcher))

  def submit(self, name: str, flags: Sequence[str], log: pathlib.Path,
             launcher: str = 'launch.train') -> None:
    if not self.free:
      raise RuntimeError('no free worker: wait() for one first')
    worker = self._worker(launcher)
    log.parent.mkdir(parents=True, exist_ok=True)
    worker.stdin.write(json.dumps({'flags': list(flags), 'log': str(log)}) + '\n')
    worker.stdin.flush()
    self._busy[worker] = name
    self._runs[worker] += 1
    self._selector.register(worker.stdout, selectors.EVENT_READ, worker)

  def wait(self) -> tuple[str, int]:
    """(name, exit status) of the next run to finish; a worker that died gives its
    process's status (a run it took down)."""
    if not self._busy:
      raise RuntimeError('nothing is running')
    key, _ = self._selector.select()[0]
    worker = key.data
    self._selector.unregister(worker.stdout)
    name = self._busy.pop(worker)
    line = worker.stdout.readline()
    if not line:  # the worker died with the run
      del self._launcher[worker]
      code = worker.wait()
      return name, code if code else 1
    if self._runs[worker] >= RUNS_PER_WORKER:
      _stop(worker)
      del self._launcher[worker]
    else:
      self._idle[self._launcher[worker]].append(worker)
    answer = json.loads(line)
    self.run_seconds += answer['seconds']
    return name, int(answer['code'])

  def close(self) -> None:
    """Stops every worker (a run cut off resumes from its checkpoints)."""
    for worker in [*(w for ws in self._idle.values() for w in ws), *self._busy]:
      _stop(worker, kill=worker in self._busy)
    self._idle, self._busy, self._launcher = {}, {}, {}

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _stop(worker: subprocess.Popen, kill: bool = False) -> None:
  if kill:
    worker.terminate()
  else:
    worker.stdin.close()
  try:
    worker.wait(timeout=30)
  except subprocess.TimeoutExpired:
    worker.kill()
    worker.wait()
