"""Equal tuning of server steps: where a method's novelty acts on the server's step,
every method in the comparison sweeps its server learning rate too (results/README.md).
The grid is three rates of the 1, 3, 10 ladder around the rate the method runs at by
default; a cell at that default keeps its plain name and flags."""

from experiments import rate_sweep
from tff_rec import registry


def default(task_class, algorithm: str) -> float:
  """The server rate `algorithm` runs at on `task_class` unless told (as
  registry.training resolves it: the task's defaults, then the algorithm's)."""
  return {**task_class.TRAIN_DEFAULTS,
          **registry.get(algorithm).own_settings()}['server_learning_rate']


def grid(rate: float) -> tuple[float, float, float]:
  """The ladder's rate below `rate`, it, and the one above."""
  return rate_sweep.beyond(rate, up=False), rate, rate_sweep.beyond(rate, up=True)


def suffix(rate: float, default_rate: float) -> str:
  """What a cell's name adds at server rate `rate` (nothing at the default)."""
  return '' if rate == default_rate else f'_slr{rate:g}'


def flags(rate: float, default_rate: float) -> tuple[str, ...]:
  """The trainer's flags for server rate `rate` (none at the default)."""
  return () if rate == default_rate else (f'--server_learning_rate={rate:g}',)
