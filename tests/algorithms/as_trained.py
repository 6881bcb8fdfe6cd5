"""An algorithm run the way a user runs it: launch.train's main() on flags, in this
process (its flags parsed into settings and options, registry.build, the runner,
the runtime it picks, the round loop), with what the loop saw kept for a
reference to check: the task, each round's cohort and client inputs, and the
model before the first round and after the last."""

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from launch import train as launcher
from tests.launch import launchers
from tff_rec import registry
from tff_rec import runner
from tff_rec.training import loop


class Client(NamedTuple):
  id: str
  seed: int  # the round's seed of its data (training.loop.client_seed)
  input: Any  # what the process's next took for it


@dataclasses.dataclass
class Run:
  task: Any
  training: Any  # registry.Training, its runtime resolved
  rounds: list[list[Client]]  # per round, in cohort order
  initial: list[np.ndarray]  # the trainable weights, Keras's order (or a dict's values)
  final: list[np.ndarray]
  metrics: dict[str, float]  # the last round's, as the loop released them


def _trainable(weights) -> list[np.ndarray]:
  if hasattr(weights, 'trainable'):  # ModelWeights
    weights = weights.trainable
  elif isinstance(weights, dict):
    return {k: np.asarray(v, np.float64) for k, v in weights.items()}
  return [np.asarray(w, np.float64) for w in weights]


def _spying(monkeypatch) -> dict:
  """What runner.run and the round loop see, kept in the dict returned as they run."""
  seen = {}
  run_task, run_loop = runner.run, loop.run

  def task_run(task, name, training, schedule, **kwargs):
    seen.update(task=task, training=runner.runtime_for(name, task, training))
    return run_task(task, name, training, schedule, **kwargs)

  def loop_run(process, *, client_input, schedule, **kwargs):
    inputs = []

    def recorded(client_id, seed):
      value = client_input(client_id, seed)
      inputs.append(Client(client_id, seed, value))
      return value

    seen['initial'] = _trainable(process.get_model_weights(process.initialize()))
    state, metrics = run_loop(process, client_input=recorded, schedule=schedule, **kwargs)
    seen['final'] = _trainable(process.get_model_weights(state))
    seen['metrics'] = metrics
    k = schedule.clients_per_round
    seen['rounds'] = [inputs[r * k:(r + 1) * k] for r in range(len(inputs) // k)]
    return state, metrics

  monkeypatch.setattr(runner, 'run', task_run)
  monkeypatch.setattr(loop, 'run', loop_run)
  return seen


def train(monkeypatch, tmp_path, *flags: str) -> Run:
  """launch.train on `flags` (--output_dir is added), to the end; the Run it made."""
  seen = _spying(monkeypatch)
  done = launchers.run_here(launcher, *flags, f'--output_dir={tmp_path / "run"}')
  assert done.returncode == 0, done.stderr[-3000:]
  return Run(**seen)


def train_task(monkeypatch, task, name: str, *, rounds: int, seed: int, options=None,
               stack=(), **settings) -> Run:
  """Algorithm `name` on a task object (a plug-in's, made by the test) as launch.train
  runs it once its flags are parsed: registry.training from the task's class and the
  settings, the composition checked, the runner to the end (no files written)."""
  seen = _spying(monkeypatch)
  training = registry.training(type(task), name, stack=tuple(stack), runtime='auto',
                               **settings)
  registry.check_composition(name, training)
  schedule = loop.Schedule(rounds=rounds, clients_per_round=training.clients_per_round,
                           eval_every=0, seed=seed)
  runner.run(task, name, training, schedule, options=options or {})
  return Run(**seen)
