"""Per-tier payloads -> FAIR's weighted mean in the full space, on the TFF runtime."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.aggregators import tier_recovery
from tff_rec.algorithms import capacities
from tff_rec.ops import hashed_embedding

ROWS, DIM = 30, 4


def _client_values(tiers, assignment, seed=0):
  rng = np.random.default_rng(seed)
  values = []
  for tier in assignment:
    tables = {name: tf.nest.map_structure(
        lambda spec: tf.constant(rng.normal(size=spec.shape).astype(np.float32)), form.spec())
              for name, form in tiers[tier].items()}
    values.append((tables, tier_recovery.client_payload(tiers, tier, tables)))
  return values


def test_recovered_mean_is_the_weighted_mean_of_recovered_clients(tff_runtime):
  tiers = capacities.hashed_tiers({'t': (ROWS, DIM)}, [1, 2, 8], seed=4)
  assignment = ['1x', '2x', '8x', '2x']
  weights = np.array([3.0, 1.0, 2.0, 4.0], np.float32)
  clients = _client_values(tiers, assignment)
  payloads = [{'tiers': tf.nest.map_structure(np.asarray, payload), 'dense': np.float32(k)}
              for k, (_, payload) in enumerate(clients)]
  value_type = tff.types.to_type(tf.nest.map_structure(
      lambda x: tff.TensorType(np.float32, x.shape), payloads[0]))
  with hashed_embedding.composite_only():  # the native worker loads no op
    process = tier_recovery.TierRecoveryFactory(tiers).create(
        value_type, tff.TensorType(np.float32))
  output = process.next(process.initialize(), payloads, list(weights))
  expected = sum(w * tiers[t]['t'].recover(tables['t'])
                 for w, t, (tables, _) in zip(weights, assignment, clients, strict=True)
                 ) / weights.sum()
  np.testing.assert_allclose(output.result['tiers']['t'], expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(output.result['dense'], weights @ np.arange(4) / weights.sum(),
                             rtol=1e-6)  # the rest of the update: the inner mean


def test_low_rank_payloads_are_summed_recovered():
  tiers = capacities.low_rank_tiers({'t': (ROWS, DIM)}, [1, 2])
  (tables, payload), = _client_values(tiers, ['2x'])
  left, right = tables['t']
  np.testing.assert_allclose(payload['2x']['t'], left @ right, rtol=1e-6)
  np.testing.assert_array_equal(payload['1x']['t'], np.zeros([ROWS, DIM]))


def test_tiers_must_hold_the_same_tables():
  tiers = capacities.hashed_tiers({'t': (ROWS, DIM)}, [1, 2], seed=0)
  tiers['2x'] = {'other': tiers['2x']['t']}
  with pytest.raises(ValueError, match='every tier must hold the same tables'):
    tier_recovery.TierRecoveryFactory(tiers)
