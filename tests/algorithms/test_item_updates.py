"""Item-update forms: SCoLR's columns, compressions, payload bytes, ranks."""

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.algorithms import item_updates


def _seed(k):
  return tf.constant([k, 0], tf.int64)


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
