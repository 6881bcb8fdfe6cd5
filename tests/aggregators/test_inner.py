"""The inner aggregation: mean, TFF's secure sum under a mean, TFF's DP mean.

The secure mean runs in tests/launch/test_matrix.py (in-process, to a metric)
and tests/launch/test_train.py (CoLR through the secure sum).
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_rec.aggregators import inner

VALUES = [np.array([0.5, -0.25], np.float32), np.array([0.1, 0.3], np.float32),
          np.array([-0.4, 0.2], np.float32)]
WEIGHTS = [np.float32(1), np.float32(3), np.float32(4)]


def _aggregate(factory):
  value_type = tff.TensorType(np.float32, [2])
  process = factory.create(value_type, tff.TensorType(np.float32))

  @tff.federated_computation(process.initialize.type_signature.result,
                             tff.FederatedType(value_type, tff.CLIENTS),
                             tff.FederatedType(np.float32, tff.CLIENTS))
  def run(state, values, weights):
    return process.next(state, values, weights).result

  return run, process.initialize


def test_mean_and_dp_without_noise_are_the_means_they_claim(tff_runtime):
  run, initialize = _aggregate(inner.InnerAggregator('mean').mean(3))
  np.testing.assert_allclose(run(initialize(), VALUES, WEIGHTS),
                             np.average(VALUES, axis=0, weights=WEIGHTS), rtol=1e-6)
  dp = inner.InnerAggregator('dp', dp_noise_multiplier=0.0, dp_clip=10.0).mean(3)
  run, initialize = _aggregate(dp)
  np.testing.assert_allclose(run(initialize(), VALUES, WEIGHTS), np.mean(VALUES, axis=0),
                             rtol=1e-5)  # DP weighs clients equally


def test_the_mean_of_a_cohort_that_trained_no_example_is_zero_not_nan(tff_runtime):
  run, initialize = _aggregate(inner.InnerAggregator('mean').mean(3))
  np.testing.assert_array_equal(run(initialize(), VALUES, [np.float32(0)] * 3), [0, 0])


@pytest.mark.parametrize('settings, message', [
    (dict(name='median'), "unknown aggregator 'median'"),
    (dict(name='secure', secure_bound=0.0), 'secure_bound must be > 0'),
    (dict(name='dp', dp_noise_multiplier=-1.0), 'dp_noise_multiplier must be >= 0'),
])
def test_bad_settings_are_refused(settings, message):
  with pytest.raises(ValueError, match=message):
    inner.InnerAggregator(**settings)


def test_dp_cannot_stand_in_for_a_plain_sum():
  with pytest.raises(ValueError, match='the DP aggregator averages'):
    inner.InnerAggregator('dp').sum()


def _dp_rounds(seed: int, rounds: int = 2):
  """The results of DP means of the same values over `rounds` rounds (noise only:
  the values are zero), and the last round's measurements."""
  process = inner.InnerAggregator('dp', dp_noise_multiplier=2.0, dp_clip=0.5,
                                  noise_seed=seed).mean(4).create(
                                      tff.TensorType(np.float32, [2000]),
                                      tff.TensorType(np.float32))
  state, results = process.initialize(), []
  for _ in range(rounds):
    output = process.next(state, [np.zeros(2000, np.float32)] * 2, [np.float32(1)] * 2)
    state = output.state
    results.append(output.result)
  return results, output.measurements


def test_dp_noise_repeats_with_its_seed_is_fresh_each_round_and_is_measured(tff_runtime):
  (first, second), measured = _dp_rounds(seed=7)
  (again, _), _ = _dp_rounds(seed=7)
  (other, _), _ = _dp_rounds(seed=8)
  np.testing.assert_array_equal(first, again)  # TFF's own query draws it unseeded
  assert not np.allclose(first, second) and not np.allclose(first, other)
  # stddev = clip x multiplier = 1.0 on the sum, over the expected cohort of 4
  assert np.std(first) == pytest.approx(0.25, rel=0.1)
  assert (measured['dp_clip'], measured['dp_stddev'], measured['dp_noise_multiplier']) == (
      0.5, 1.0, 2.0)
  metrics = {'train/aggregator/inner/dp_clip': 0.5, 'train/aggregator/inner/dp_stddev': 1.0}
  assert not inner.missing_evidence(inner.InnerAggregator(
      'dp', dp_noise_multiplier=2.0, dp_clip=0.5).evidence, metrics)
  assert inner.missing_evidence(inner.InnerAggregator('dp').evidence, metrics) == [
      'dp_clip [0.5] where the settings give 1.0']


def test_dp_noise_differs_between_tensors_of_the_same_shape(tff_runtime):
  """Each tensor of the update draws its own noise: two of one shape noised alike
  would correlate what DP adds to them."""
  value_type = tff.types.to_type({'a': tff.TensorType(np.float32, [100]),
                                  'b': tff.TensorType(np.float32, [100])})
  process = inner.InnerAggregator('dp', dp_noise_multiplier=1.0, dp_clip=1.0).mean(
      2).create(value_type, tff.TensorType(np.float32))
  zeros = {'a': np.zeros(100, np.float32), 'b': np.zeros(100, np.float32)}
  result = process.next(process.initialize(), [zeros] * 2, [np.float32(1)] * 2).result
  assert np.abs(result['a']).max() > 0 and not np.allclose(result['a'], result['b'])
