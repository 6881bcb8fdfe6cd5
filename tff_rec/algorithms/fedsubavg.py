"""FedSubAvg (Ding et al., NeurIPS 2022) on any task whose model declares tables.

FedSubAvg is FedAvg with aggregators.fedsubavg.FedSubAvgFactory stacked on
its aggregate: each table row's mean update scaled by N / n_m, n_m the row's
feature heat (algorithms.heat). The same correction stacks on other
algorithms (`Training.stack`): FAIR's table update, CoLR's mean factor A (row
scaling commutes with B), FedAdam's mean. Client weights go with the heat:
'clients' (the paper: n_m counts clients, clients weigh equally) or
'examples' (the official code: both count training examples).
`max_correction` bounds the factor (ours: the paper's is unbounded, and
diverges on data where one client holds a row).
"""

import dataclasses

from tff_rec import registry
from tff_rec import settings
from tff_rec.aggregators import inner
from tff_rec.algorithms import heat


@dataclasses.dataclass(frozen=True)
class Options(heat.WeightingOptions):
  max_correction: float | None = settings.described(
      None, "A bound on each row's correction N / n_m (ours, not the paper's; none: the paper's "
      'unbounded factor). A row one client holds is scaled by N, so one round moves it by N / K '
      "times that client's update; with --heat=clients a bound of K (--clients_per_round) moves "
      "it by at most its holders' summed updates.")

  def __post_init__(self):
    super().__post_init__()
    if self.max_correction is not None and self.max_correction < 1:
      raise ValueError(f'max_correction must be >= 1, got {self.max_correction}')


def _with_correction(options: Options, training):
  """FedAvg's training with the correction stacked, bounded by `max_correction`."""
  return dataclasses.replace(
      training, stack=tuple(sorted({*training.stack, 'fedsubavg'})),
      max_correction=(training.max_correction if options.max_correction is None
                      else options.max_correction))


# FedAvg's builders on every kind of model, whichever module implements them.
registry.register('fedsubavg', registry.Algorithm(
    "FedSubAvg: each table row's mean update scaled by N / its feature heat",
    options=Options, base='fedavg', applies=_with_correction,
    aggregators=inner.NAMES))  # it is the correction: nothing to stack on it
