"""The inner aggregation every method wraps: a plain mean, TFF's secure sum, or TFF's DP.

The papers' factories (FedSubAvg's correction, FAIR's tier recovery, CoLR's
factor sum) each take an inner factory and only transform what goes in or
comes out, so this choice composes with all of them. Everything here is
TFF's own: `MeanFactory`, `SecureSumFactory` under a mean, and
`DifferentiallyPrivateFactory.gaussian_fixed` (DP-FedAvg: each client's
update clipped to an L2 norm, Gaussian noise added to the sum, divided by
the expected cohort; clients weigh equally, as DP needs).
"""

import dataclasses

import tensorflow_federated as tff

NAMES = ('mean', 'secure', 'dp')
# Client weights reach the secure sum as values in [0, 2^20 - 1] (TFF's own
# secure_aggregator does the same): examples per client stay far below it.
SECURE_WEIGHT_BOUND = float(2**20 - 1)


@dataclasses.dataclass(frozen=True)
class InnerAggregator:
  """mean | secure (values clipped to +-secure_bound before the secure sum) | dp."""
  name: str = 'mean'
  secure_bound: float = 1.0
  dp_noise_multiplier: float = 1.0
  dp_clip: float = 1.0

  def __post_init__(self):
    if self.name not in NAMES:
      raise ValueError(f'unknown aggregator {self.name!r}; choose one of {NAMES}')
    for field in ('secure_bound', 'dp_clip'):
      if not getattr(self, field) > 0:
        raise ValueError(f'{field} must be > 0, got {getattr(self, field)}')
    if self.dp_noise_multiplier < 0:
      raise ValueError(f'dp_noise_multiplier must be >= 0, got {self.dp_noise_multiplier}')

  def settings(self) -> dict:
    """What defines it, for a run's config (the plain mean has no parameter)."""
    if self.name == 'secure':
      return {'aggregator': 'secure', 'secure_bound': self.secure_bound}
    if self.name == 'dp':
      return {'aggregator': 'dp', 'dp_noise_multiplier': self.dp_noise_multiplier,
              'dp_clip': self.dp_clip}
    return {'aggregator': 'mean'}

  @property
  def needs_inprocess(self) -> bool:
    """TFF's native worker has no secure-sum intrinsic; the in-process runtime has."""
    return self.name == 'secure'

  def mean(self, clients_per_round: int) -> tff.aggregators.WeightedAggregationFactory:
    """The weighted mean of the clients' values through this aggregation."""
    if self.name == 'secure':
      return tff.aggregators.MeanFactory(
          value_sum_factory=self.sum(),
          weight_sum_factory=tff.aggregators.SecureSumFactory(SECURE_WEIGHT_BOUND, 0.0))
    if self.name == 'dp':
      return tff.aggregators.as_weighted_aggregator(self.dp_mean(clients_per_round))
    return tff.aggregators.MeanFactory()

  def dp_mean(self, clients_per_round: int) -> tff.aggregators.UnweightedAggregationFactory:
    """TFF's DP-FedAvg mean: clipped values, noised sum over the expected cohort."""
    return tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
        self.dp_noise_multiplier, clients_per_round, self.dp_clip)

  def unweighted(self, clients_per_round: int
                 ) -> tuple[tff.aggregators.UnweightedAggregationFactory, bool]:
    """For clients that weigh equally: (factory, whether its result is already a
    mean): the plain or secure sum, or TFF's DP mean over the expected cohort."""
    if self.name == 'dp':
      return self.dp_mean(clients_per_round), True
    return self.sum(), False

  def sum(self) -> tff.aggregators.UnweightedAggregationFactory:
    """The plain sum of the clients' values through this aggregation (not DP: TFF's
    DP factory returns a mean over the expected cohort, not a sum)."""
    if self.name == 'dp':
      raise ValueError('the DP aggregator averages; a method that needs a plain sum '
                       'cannot use it')
    if self.name == 'secure':
      return tff.aggregators.SecureSumFactory(self.secure_bound, -self.secure_bound)
    return tff.aggregators.SumFactory()
