"""Item-update forms: compressions, payload bytes, additivity."""

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.aggregators import factor_sum
from tff_rec.algorithms import item_updates


def _seed(k):
  return tf.constant([k, 0], tf.int64)


def test_the_mean_of_low_rank_factors_times_b_is_the_mean_of_the_updates():
  """CoLR's aggregate is a plain sum of payloads; the SVD's and top-k's are not."""
  rng = np.random.default_rng(0)
  basis = factor_sum.correlated_basis(_seed(3), 3, 8).numpy()
  factors = [rng.normal(size=(20, 3)) for _ in range(5)]
  np.testing.assert_allclose(np.mean(factors, 0) @ basis,
                             np.mean([a @ basis for a in factors], 0), atol=1e-12)
  # SVD payloads (U S, V) of five rank-3 updates: summing the factors is not
  # summing the updates (a product is needed per client).
  updates = [rng.normal(size=(20, 3)) @ rng.normal(size=(3, 8)) for _ in range(5)]
  svd = [np.linalg.svd(u, full_matrices=False) for u in updates]
  us, vs = [u[:, :3] * s[:3] for u, s, _ in svd], [v[:3] for _, _, v in svd]
  wrong = np.sum(us, 0) @ np.sum(vs, 0)
  error = np.linalg.norm(wrong - np.sum(updates, 0)) / np.linalg.norm(np.sum(updates, 0))
  assert error > 0.5


def test_scolr_trains_the_first_local_rank_columns_of_a_shared_permutation():
  scolr = item_updates.UpdateForm('scolr', 8)
  masks = [item_updates.low_rank_columns(scolr, _seed(5), r).numpy() for r in (1, 3, 8)]
  assert [m.sum() for m in masks] == [1, 3, 8]
  assert (masks[0] <= masks[1]).all() and (masks[1] <= masks[2]).all()  # nested
  other = item_updates.low_rank_columns(scolr, _seed(6), 3).numpy()
  assert other.sum() == 3
  colr = item_updates.low_rank_columns(item_updates.UpdateForm('colr', 8), _seed(5), 1)
  assert colr.numpy().sum() == 8  # colr trains every column


def test_svd_and_top_k_compressions():
  rng = np.random.default_rng(2)
  matrix = rng.normal(size=(30, 6)).astype(np.float32)
  low = item_updates.svd_compress(tf.constant(matrix), 2).numpy()
  u, s, vt = np.linalg.svd(matrix, full_matrices=False)
  np.testing.assert_allclose(low, (u[:, :2] * s[:2]) @ vt[:2], atol=1e-4)
  sparse = item_updates.top_k_compress(tf.constant(matrix), 7).numpy()
  kept = np.abs(matrix) >= np.sort(np.abs(matrix).ravel())[-7]
  assert (sparse != 0).sum() == 7
  np.testing.assert_array_equal(sparse[kept], matrix[kept])


def test_payload_bytes_per_client():
  n, d = 1000, 64
  sizes = {name: item_updates.payload_bytes(item_updates.UpdateForm(name, 4), n, d)
           for name in item_updates.FORMS}
  assert sizes['full']['up'] == sizes['full']['down_model'] == n * d * 4
  assert sizes['colr'] == dict(up=n * 4 * 4, down_update=n * 4 * 4 + 16,
                               down_model=n * d * 4 + 8)
  assert sizes['scolr']['up'] == n * 4  # per trained column
  assert sizes['svd']['up'] == 4 * (n + d) * 4
  assert sizes['topk']['up'] == sizes['colr']['up']  # k = n r / 2 entries of value + index
  assert item_updates.UpdateForm('topk', 4).top_k(n) == 2000


@pytest.mark.parametrize('rank', [0, 65])
def test_a_rank_outside_1_to_d_is_refused(rank):
  with pytest.raises(ValueError, match='rank must be in 1..64'):
    item_updates.UpdateForm('colr', rank).validate(64)
