"""The federated round loop: sample a cohort, run a round, evaluate, release, checkpoint.

Determinism: the cohort of round r and each client's shuffle seed are functions
of (seed, r, client id) only, never of how many rounds ran in this process, so
a run resumed from a checkpoint gives the same metrics as an uninterrupted one.
"""

import asyncio
import collections
import dataclasses
import time
import zlib
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import resources

# (client id, shuffle seed) -> that client's input to process.next: a
# tf.data.Dataset, or the arguments of a dataset computation composed into
# the process (tff.simulation.compose_dataset_computation_with_learning_process).
ClientInputFn = Callable[[str, int], Any]
EvaluateFn = Callable[[tff.learning.models.ModelWeights], Mapping[str, float]]
# Where a round's client training loss is, in every process's metrics (tff.learning's
# composed layout, which the project's own round follows: rounds.round_metrics).
TRAIN_LOSS = 'train/client_work/train/loss'
TRAIN_EXAMPLES = 'train/client_work/train/num_examples'


class Diverged(ArithmeticError):
  """The run stopped: its training loss or model became non-finite."""

  def __init__(self, round_num: int, what: str, metrics: dict[str, float],
               last_evaluation: dict[str, float], last_evaluated_round: int | None,
               unit: str = 'round'):
    super().__init__(f'diverged at {unit} {round_num}: {what}')
    self.round_num = round_num
    self.unit = unit  # 'round', or 'epoch' (centralized training)
    self.what = what
    self.metrics = metrics  # that round's, as released
    self.last_evaluation = last_evaluation  # the last finite evaluation, {} if none
    self.last_evaluated_round = last_evaluated_round


@dataclasses.dataclass(frozen=True)
class Schedule:
  rounds: int
  clients_per_round: int
  # 0: evaluate after the last round only; None: never (a benchmark timing rounds)
  eval_every: int | None = 10
  checkpoint_every: int = 10
  seed: int = 0

  def validate(self, num_clients: int) -> None:
    """Raises ValueError naming the setting when the schedule cannot run."""
    if self.rounds < 1:
      raise ValueError(f'rounds must be >= 1, got {self.rounds}')
    if self.clients_per_round < 1:
      raise ValueError(f'clients_per_round must be >= 1, got {self.clients_per_round}')
    if self.clients_per_round > num_clients:
      raise ValueError(f'clients_per_round={self.clients_per_round} is larger '
                       f'than the {num_clients} training clients; use at most '
                       f'{num_clients}')
    if (self.eval_every or 0) < 0 or self.checkpoint_every < 1:
      raise ValueError('eval_every must be >= 0 and checkpoint_every >= 1, got '
                       f'{self.eval_every} and {self.checkpoint_every}')


def sample_cohort(client_ids: Sequence[str], size: int, *, seed: int,
                  round_num: int) -> list[str]:
  """`size` distinct clients, a function of (seed, round_num) only."""
  rng = np.random.default_rng([seed, round_num])
  return [client_ids[i] for i in rng.choice(len(client_ids), size, replace=False)]


def client_seed(seed: int, round_num: int, client_id: str) -> int:
  """A shuffle seed for one client's data in one round (stable across runs)."""
  entropy = [seed, round_num, zlib.crc32(client_id.encode())]
  return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def flatten_metrics(metrics: Any, prefix: str = '') -> dict[str, float]:
  """Nested mappings of scalars -> {'a/b/c': float}; empty branches dropped."""
  flat = {}
  if isinstance(metrics, Mapping):
    for key, value in metrics.items():
      flat.update(flatten_metrics(value, f'{prefix}{key}/'))
  elif not isinstance(metrics, (tuple, list)) or metrics:
    flat[prefix.rstrip('/')] = float(np.asarray(metrics))
  return flat


@dataclasses.dataclass
class Checkpointing:
  """Where program state goes: a tff.program.ProgramStateManager."""
  manager: tff.program.ProgramStateManager

  def load(self, initial_state) -> tuple[Any, int]:
    state, version = asyncio.run(self.manager.load_latest(initial_state))
    return (initial_state, 0) if state is None else (state, int(version))

  def save(self, state, round_num: int) -> None:
    asyncio.run(self.manager.save(state, round_num))


def run(process: tff.learning.templates.LearningProcess, *,
        client_ids: Sequence[str], client_input: ClientInputFn,
        schedule: Schedule, evaluate: EvaluateFn,
        final_evaluate: EvaluateFn | None = None,
        checkpointing: Checkpointing | None = None,
        release_managers: Sequence[tff.program.ReleaseManager] = (),
        on_round: Callable[[int, dict[str, float]], None] | None = None):
  """Runs rounds 1..schedule.rounds (resuming after the latest checkpoint).

  Per round it releases the process metrics, `evaluate`'s metrics (every
  `eval_every` rounds and after the last; with `eval_every=None` never, nor
  `final_evaluate`; prefixed by the caller), the round's
  wall time and the resident memory of this process and its TFF worker.
  `final_evaluate`'s metrics join the last round's release.

  Returns (final state, the last round's released metrics or {} if the
  checkpoint was already at the last round).
  """
  client_ids = sorted(client_ids)
  schedule.validate(len(client_ids))
  state = process.initialize()
  done = 0
  if checkpointing:
    state, done = checkpointing.load(state)
  metrics, evaluated, evaluated_round = {}, {}, None
  for round_num in range(done + 1, schedule.rounds + 1):
    started = time.perf_counter()
    cohort = sample_cohort(client_ids, schedule.clients_per_round,
                           seed=schedule.seed, round_num=round_num)
    inputs = [client_input(c, client_seed(schedule.seed, round_num, c))
              for c in cohort]
    output = process.next(state, inputs)
    state = output.state
    metrics = flatten_metrics(output.metrics, 'train/')
    metrics['train/round_seconds'] = time.perf_counter() - started
    last = round_num == schedule.rounds
    evaluating = schedule.eval_every is not None and (
        last or (schedule.eval_every and round_num % schedule.eval_every == 0))
    # A round that trained no example is checked whether evaluated or not: its
    # cohort may hold no batch (drop_remainder), or its model may be non-finite.
    empty = trained_nothing(metrics)
    weights = process.get_model_weights(state) if evaluating or empty else None
    what = _divergence(metrics, weights)
    if what and empty:
      what += "; the round trained no example (none of its cohort's clients held a batch)"
    if what:
      _release(release_managers, metrics, round_num)
      raise Diverged(round_num, what, metrics, evaluated, evaluated_round)
    if evaluating:
      metrics.update(evaluate(weights))
    if evaluating and last and final_evaluate:
      metrics.update(final_evaluate(weights))
    losses = non_finite_losses(metrics)
    if losses:  # a finite model whose outputs overflow
      _release(release_managers, metrics, round_num)
      raise Diverged(round_num, losses, metrics, evaluated, evaluated_round)
    if evaluating and all(np.isfinite(v) for v in metrics.values()):
      evaluated = {k: v for k, v in metrics.items() if not k.startswith('train/')}
      evaluated_round = round_num
    metrics.update(resources.memory_metrics())
    _release(release_managers, metrics, round_num)
    if checkpointing and (last or round_num % schedule.checkpoint_every == 0):
      checkpointing.save(state, round_num)
    if on_round:
      on_round(round_num, metrics)
  return state, metrics


def non_finite_losses(metrics: dict[str, float]) -> str | None:
  """Which losses among `metrics` are not finite ('eval/train_loss is nan, ...'), or
  None."""
  losses = sorted(k for k, v in metrics.items() if k.endswith('loss') and not np.isfinite(v))
  return ', '.join(f'{k} is {metrics[k]}' for k in losses) or None


def trained_nothing(metrics: dict[str, float]) -> bool:
  """Whether a round's clients trained no example (its training loss, a mean over
  none, then reads 0)."""
  return metrics.get(TRAIN_EXAMPLES) == 0


def _divergence(metrics: dict[str, float], weights) -> str | None:
  """What shows that the run has diverged, or None: a non-finite training loss or
  (when given) non-finite model weights."""
  if TRAIN_LOSS in metrics and not np.isfinite(metrics[TRAIN_LOSS]):
    return f'the training loss is {metrics[TRAIN_LOSS]}'
  if weights is not None and not all(
      np.isfinite(np.sum(w)) for w in tf.nest.flatten(_arrays(weights))):
    return "the model's weights are not finite"
  return None


def _arrays(weights):
  """A model's weights as a nest of arrays (ModelWeights or any structure)."""
  if isinstance(weights, tff.learning.models.ModelWeights):
    return [weights.trainable, weights.non_trainable]
  return weights


def _release(managers, metrics: dict[str, float], round_num: int) -> None:
  if not managers:
    return
  value = collections.OrderedDict(sorted(metrics.items()))

  async def release_all():
    await asyncio.gather(*(m.release(value, key=round_num) for m in managers))

  asyncio.run(release_all())
