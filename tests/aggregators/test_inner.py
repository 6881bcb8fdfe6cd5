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
