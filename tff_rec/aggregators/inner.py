"""The inner aggregation every method wraps: a plain mean, TFF's secure sum, or TFF's DP.

The papers' factories (FedSubAvg's correction, FAIR's tier recovery, CoLR's
factor sum) each take an inner factory and only transform what goes in or
comes out, so this choice composes with all of them. Everything here is
TFF's own: `MeanFactory`, `SecureSumFactory` under a mean, and
`DifferentiallyPrivateFactory.gaussian_fixed` (DP-FedAvg: each client's
update clipped to an L2 norm, Gaussian noise added to the sum, divided by
the expected cohort; clients weigh equally, as DP needs).

Every round's metrics hold what the aggregation did, so a run shows that it
took effect (`missing_evidence`): TFF's secure sum reports its
bounds and clipped counts; its DP factory keeps the clip and noise it applies
in its state, which MeasuredDPFactory adds to its measurements.

DP's noise is drawn from (the run's seed, the round): TFF's Gaussian query
draws it unseeded, so no DP run could be repeated (SeededGaussianSumQuery). A
deployment would keep that seed secret.
"""

import collections
import dataclasses
from typing import Mapping

import dp_accounting
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tensorflow_privacy as tfp  # where TFF's own DP queries come from

NAMES = ('mean', 'secure', 'dp')
# Client weights reach the secure sum as values in [0, 2^20 - 1] (TFF's own
# secure_aggregator does the same): examples per client stay far below it.
SECURE_WEIGHT_BOUND = float(2**20 - 1)


@dataclasses.dataclass(frozen=True)
class InnerAggregator:
  """mean | secure (values clipped to +-secure_bound before the secure sum; under a
  weighted mean, as TFF's MeanFactory sums them, each value times its client's
  weight) | dp."""
  name: str = 'mean'
  secure_bound: float = 1.0
  dp_noise_multiplier: float = 1.0
  dp_clip: float = 1.0
  noise_seed: int = 0  # DP's noise: drawn from (noise_seed, round)

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
    """The weighted mean of the clients' values through this aggregation; 0 where
    their weights sum to 0 (a cohort that trained no example: TFF's default, 0 / 0,
    would make the model NaN)."""
    if self.name == 'secure':
      return tff.aggregators.MeanFactory(
          value_sum_factory=self.sum(),
          weight_sum_factory=tff.aggregators.SecureSumFactory(SECURE_WEIGHT_BOUND, 0.0),
          no_nan_division=True)
    if self.name == 'dp':
      return tff.aggregators.as_weighted_aggregator(self.dp_mean(clients_per_round))
    return tff.aggregators.MeanFactory(no_nan_division=True)

  def dp_mean(self, clients_per_round: int) -> tff.aggregators.UnweightedAggregationFactory:
    """TFF's DP-FedAvg mean: clipped values, noised sum over the expected cohort."""
    query = tfp.NormalizedQuery(
        SeededGaussianSumQuery(self.dp_clip, self.dp_clip * self.dp_noise_multiplier,
                               self.noise_seed),
        denominator=float(clients_per_round))
    return MeasuredDPFactory(tff.aggregators.DifferentiallyPrivateFactory(query))

  @property
  def evidence(self) -> dict[str, float | None]:
    """The measurements a round shows of this aggregation, each with the value its
    settings give (None: any): the secure sum's bounds; the DP clip and noise."""
    return {'secure': {'secure_upper_threshold': None},
            'dp': {'dp_clip': self.dp_clip,
                   'dp_stddev': self.dp_clip * self.dp_noise_multiplier}}.get(self.name, {})

  @property
  def averages(self) -> bool:
    """Whether its aggregate of values sent unweighted is a mean over the expected
    cohort (TFF's DP), not a sum."""
    return self.name == 'dp'

  def unweighted(self, clients_per_round: int) -> tff.aggregators.UnweightedAggregationFactory:
    """For clients that weigh equally: the plain or secure sum, or TFF's DP mean over
    the expected cohort (`averages`)."""
    return self.dp_mean(clients_per_round) if self.averages else self.sum()

  def sum(self) -> tff.aggregators.UnweightedAggregationFactory:
    """The plain sum of the clients' values through this aggregation (not DP: TFF's
    DP factory returns a mean over the expected cohort, not a sum)."""
    if self.name == 'dp':
      raise ValueError('the DP aggregator averages; a method that needs a plain sum '
                       'cannot use it')
    if self.name == 'secure':
      return tff.aggregators.SecureSumFactory(self.secure_bound, -self.secure_bound)
    return tff.aggregators.SumFactory()


CLIPPED_COUNTS = ('secure_upper_clipped_count', 'secure_lower_clipped_count')


def secure_clipping(metrics: Mapping[str, float]) -> tuple[float, float, float] | None:
  """(the most clients whose values one of a round's secure sums clipped, that sum's
  lower and upper bounds), from the round's flattened metrics; None where no sum
  clipped."""
  worst = None
  for key, value in metrics.items():
    prefix, _, name = key.rpartition('/')
    if name in CLIPPED_COUNTS and value > 0 and (worst is None or value > worst[0]):
      worst = (value, *(metrics.get(f'{prefix}/secure_{side}_threshold', float('nan'))
                        for side in ('lower', 'upper')))
  return worst


class SeededGaussianSumQuery(tfp.GaussianSumQuery):
  """tensorflow_privacy's Gaussian sum query (what TFF's gaussian_fixed builds), its
  noise drawn from (seed, round) instead of unseeded: a DP run repeats exactly."""

  _GlobalState = collections.namedtuple('_GlobalState',
                                        ['l2_norm_clip', 'stddev', 'seed', 'round'])

  def __init__(self, l2_norm_clip: float, stddev: float, seed: int):
    super().__init__(l2_norm_clip, stddev)
    self._seed = seed

  def make_global_state(self, l2_norm_clip, stddev):
    return self._GlobalState(tf.cast(l2_norm_clip, tf.float32), tf.cast(stddev, tf.float32),
                             tf.constant(self._seed, tf.int64), tf.constant(0, tf.int64))

  def get_noised_result(self, sample_state, global_state):
    leaves = tf.nest.flatten(sample_state)
    round_seed = tf.stack([global_state.seed, global_state.round])
    noised = [v + tf.cast(tf.random.stateless_normal(
        tf.shape(v), tf.random.experimental.stateless_fold_in(round_seed, i),
        stddev=global_state.stddev), v.dtype) for i, v in enumerate(leaves)]
    event = dp_accounting.GaussianDpEvent(global_state.stddev / global_state.l2_norm_clip)
    return (tf.nest.pack_sequence_as(sample_state, noised),
            global_state._replace(round=global_state.round + 1), event)


class MeasuredDPFactory(tff.aggregators.UnweightedAggregationFactory):
  """TFF's DifferentiallyPrivateFactory, its measurements adding the clip and noise
  it applied this round (dp_clip, dp_stddev, dp_noise_multiplier), read from its
  own state: TFF's reports none of them."""

  def __init__(self, factory: tff.aggregators.DifferentiallyPrivateFactory):
    self._factory = factory

  def create(self, value_type) -> tff.templates.AggregationProcess:
    process = self._factory.create(value_type)
    state_type = process.initialize.type_signature.result.member
    measurements_type = process.next.type_signature.result.measurements.member

    @tff.tensorflow.computation(measurements_type, state_type)
    def measured(measurements, state):
      query = state.query_state.numerator_state
      return collections.OrderedDict(
          **collections.OrderedDict(measurements), dp_clip=query.l2_norm_clip,
          dp_stddev=query.stddev,
          dp_noise_multiplier=tf.cast(state.dp_event.noise_multiplier, tf.float32))

    @tff.federated_computation(process.next.type_signature.parameter)
    def next_fn(state, value):
      output = process.next(state, value)
      return tff.templates.MeasuredProcessOutput(
          state=output.state, result=output.result,
          measurements=tff.federated_map(measured, (output.measurements, state)))

    return tff.templates.AggregationProcess(process.initialize, next_fn)


def missing_evidence(evidence: Mapping[str, float | None], metrics: Mapping[str, float]
                     ) -> list[str]:
  """What a round's flattened metrics should show (`evidence`: measurement name ->
  the value the settings give, None: any; an InnerAggregator's, a stacked
  correction's) and do not."""
  missing = []
  for name, value in evidence.items():
    found = [v for k, v in metrics.items() if k.rsplit('/', 1)[-1] == name]
    if not found:
      missing.append(f'no {name} in the round\'s metrics')
    elif value is not None and not np.allclose(found, value, rtol=1e-6):
      missing.append(f'{name} {found} where the settings give {value}')
  return missing
