"""One federated run: an algorithm built for a task, on a runtime, through the
round loop. The trainer, the matrix and the Python API all run here, so the
runtime is decided in one place (`runtime_for`) and every run checks that its
aggregation took effect."""

import dataclasses
import pathlib
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import composer
from tff_rec import registry
from tff_rec.aggregators import inner
from tff_rec.data import client_files
from tff_rec.runtime import inprocess
from tff_rec.runtime import native
from tff_rec.training import loop

RUNTIMES = ('auto', 'native', 'inprocess')


class AggregationNotVisible(RuntimeError):
  """A round's metrics show nothing of the secure sum or DP asked for."""


@dataclasses.dataclass(frozen=True)
class Started:
  """What a run built, before its first round (the training composed for it, its
  runtime resolved, and the kind of model it trains)."""
  built: registry.Built

  @property
  def training(self) -> registry.Training:
    return self.built.training

  @property
  def kind(self) -> str:
    return self.built.kind

  def describe(self, name: str, runtime: str | None = None) -> str:
    """`runtime` names where the rounds run when it is not the resolved one's (TFF's
    native rounds on remote workers)."""
    return (f'{name} on its {self.kind} model ({registry.implementations()[name][self.kind]}), '
            f'{len(self.built.client_ids)} training clients, '
            f'{runtime or self.training.runtime} runtime')


@dataclasses.dataclass(frozen=True)
class Recording:
  """Where a run's state and metrics go: made once it has started, so a run
  refused while building leaves nothing behind."""
  checkpointing: loop.Checkpointing | None = None
  release_managers: Sequence[tff.program.ReleaseManager] = ()


def runtime_for(name: str, task, training: registry.Training, options=None
                ) -> registry.Training:
  """`training` with its runtime resolved: 'auto' is the one of TFF's native worker
  and the in-process runtime that runs the algorithm with `options` fastest here,
  both giving the same numbers (tested): in-process where the aggregation needs it
  (secure sums) and for FedMF's round, whose clients' sliced batches run there
  without the native worker's per-client calls (CoLR's setting, 60 clients: 0.087
  vs 0.159 s/round; results/benchmarks_runtimes.md); else TFF's native worker, as
  fast or faster on the other workloads when this rule was set (the 2026-12-07
  benchmark has in-process the faster on all of them: docs/runtimes.md)."""
  if training.runtime not in RUNTIMES:
    raise ValueError(f'unknown runtime {training.runtime!r}; choose one of {RUNTIMES}')
  if training.runtime != 'auto':
    return training
  _, applied = registry.applied(name, training, **(options or {}))
  inprocess_ = applied.aggregator.needs_inprocess or registry.kind_for(name, task) == 'mf'
  return dataclasses.replace(training, runtime='inprocess' if inprocess_ else 'native')


def context_for(training: registry.Training):
  """The context a resolved runtime's rounds run in, with its default settings."""
  return native.NativeRuntime() if training.runtime == 'native' else inprocess.Parallelism()


def run(task, name: str, training: registry.Training, schedule: loop.Schedule, *,
        options: dict | None = None, context=None, client_data_dir: str | None = None,
        on_start: Callable[[Started], Recording | None] | None = None,
        on_round: Callable[[int, dict[str, float]], None] | None = None):
  """Algorithm `name` (with `options`) trained on `task`: (final state, the last
  round's metrics, with the task's final evaluation).

  `context` is the runtime's (a RemoteRuntime, an inprocess.Parallelism with its
  own settings, or a nullcontext inside one already entered); by default the
  resolved runtime's own. With `client_data_dir`, the clients' examples are
  written there once and read by the client work (`_reading_where_trained`): a
  round sends each client its index and seed (the row numbers too of batches no
  task's plan made), and a worker that cannot read them raises
  UnreadableClientFiles. `on_start` sees what was built before the
  first round and may return the run's Recording. Evaluation follows
  task.EVAL_PARTS, each part's metrics prefixed by its name. After the first
  round, a run whose metrics show nothing of its secure sum or DP raises
  AggregationNotVisible.
  """
  training = runtime_for(name, task, training, options)
  with context if context is not None else context_for(training):
    files = []
    if client_data_dir:
      built, files = _reading_where_trained(name, task, training, options, client_data_dir)
      for written in files:  # once nothing refused the run
        written.write()
    else:
      built = registry.build(name, task, training, **(options or {}))
    process = inprocess.for_runtime(built.process, training.runtime)  # its refusals first
    recording = (on_start(Started(built)) if on_start else None) or Recording()
    evaluate = built.evaluate or task.evaluate
    periodic, final = task.EVAL_PARTS
    checking = _AggregationCheck(built.training, on_round)
    try:
      return loop.run(
          process, client_ids=built.client_ids, client_input=built.client_input,
          schedule=schedule,
          evaluate=lambda w: _prefixed(periodic, evaluate(w, periodic)),
          final_evaluate=lambda w: _prefixed(final, evaluate(w, final)),
          checkpointing=recording.checkpointing,
          release_managers=recording.release_managers, on_round=checking)
    except loop.Diverged as e:  # a first round that diverged is checked all the same
      if not checking.done:
        checking.check(e.round_num, e.metrics)
      raise
    except Exception as e:  # pylint: disable=broad-except
      # A worker's error naming one of the client files.
      unreadable = next(filter(None, (f.unreadable(e) for f in files)), None)
      if not unreadable:
        raise
      raise client_files.UnreadableClientFiles(unreadable) from e


# Under --client_data_dir, beside the task's files (each layout in a folder of
# its own, so runs of different algorithms can share the directory): the
# clients' own fixed arrays, and the examples (and split rows) of batches that
# are not the task's own (client_files.BatchesWhereTrained).
OWN_ARRAYS, ROW_BATCHES = 'own_arrays', 'row_batches'


def _reading_where_trained(name: str, task, training: registry.Training, options,
                           folder: str) -> tuple[registry.Built, list[client_files.ClientFiles]]:
  """The algorithm built to read its clients' examples from files under `folder`
  where they train: whatever takes the task's dataset computation (tff.learning's
  processes; FAIR, the table forms and FedMF) through it (client_files.
  ReadWhereTrained; a ranking's per-round draws move into it), the project's
  rounds on numpy batches through their batches (client_files.BatchesWhereTrained),
  a round's clients' own fixed arrays (a reconstructed user's initial vector)
  from a folder of their own (client_files.ArraysWhereTrained).
  Built once: those builders read the task's batches, which the first wrapper
  leaves as they are."""
  try:
    reading, refusal = client_files.ReadWhereTrained(task, folder), None
  except client_files.ClientFilesError as e:
    reading, refusal = None, e
  built = registry.build(name, reading or task, training, **(options or {}))
  sample = built.client_input(built.client_ids[0], 0)
  if reading and not _sent_arrays(sample):
    return built, [reading.files]
  round_ = composer.round_of(built.process)
  if round_ is None or (reading is None and not client_files.holds_batches(sample)):
    if reading is None:
      raise refusal
    raise registry.NotApplicable(
        f'--algorithm={name} still hands each client arrays from the trainer (examples '
        f'drawn there every round on the {task.NAME} task), so it cannot read them from '
        '--client_data_dir')
  data_type = round_.client_work.type_signature.parameter[1]
  try:
    if client_files.holds_batches(sample):
      batches = client_files.BatchesWhereTrained(
          pathlib.Path(folder) / ROW_BATCHES, built.client_ids, built.client_input, data_type,
          task=reading, plan=getattr(task, 'batch_plan', None))
      # The task's batches are made from its files; others' examples have their own.
      files, reading = [batches.files or reading.files], batches
    else:  # the examples read by the task's computation, the client's own arrays beside
      files = [reading.files]
      reading = client_files.ArraysWhereTrained(
          pathlib.Path(folder) / OWN_ARRAYS, built.client_ids, built.client_input, data_type)
      files.append(reading.files)
  except client_files.ClientFilesError as e:
    raise registry.NotApplicable(f'--algorithm={name} cannot read its clients\' examples from '
                                 f'--client_data_dir: {e}') from None
  return dataclasses.replace(
      built, process=composer.with_client_data(built.process, reading.read),
      client_input=reading.client_input), files


def _sent_arrays(client_input) -> bool:
  """Whether a client's input still holds arrays (examples): its client work
  takes them from the trainer, not from the files (an index and a seed are scalars)."""
  return any(np.ndim(leaf) > 0 for leaf in tf.nest.flatten(client_input))


class _AggregationCheck:
  """An on_round that first checks, once, that the aggregation took effect (the
  round's metrics hold the secure sum's bounds, the DP clip and noise of the
  settings, each stacked correction's measurement), then calls `on_round`."""

  def __init__(self, training: registry.Training, on_round):
    self._training, self._on_round = training, on_round
    self.done = False

  def check(self, round_num: int, metrics: dict[str, float]) -> None:
    missing = [f'{setting}: {m}' for setting, evidence in self._training.evidence().items()
               for m in inner.missing_evidence(evidence, metrics)]
    if missing:
      raise AggregationNotVisible(
          f'the aggregation took no visible effect in round {round_num} ({"; ".join(missing)})')
    self.done = True

  def __call__(self, round_num: int, metrics: dict[str, float]) -> None:
    if not self.done:
      self.check(round_num, metrics)
    if self._on_round:
      self._on_round(round_num, metrics)


def _prefixed(prefix: str, metrics: dict[str, float]) -> dict[str, float]:
  return {f'{prefix}/{k}': v for k, v in metrics.items()}

