"""Table forms: reduce / rows / recover, and FedHM's rank rule."""

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.models import compressed_table
from tff_rec.ops import subspaces

ROWS, DIM = 50, 4


def _table(seed=0):
  return tf.constant(np.random.default_rng(seed).normal(size=(ROWS, DIM)).astype(np.float32))


def test_full_is_the_identity():
  form = compressed_table.Full(ROWS, DIM)
  table = _table()
  np.testing.assert_array_equal(form.recover(form.reduce(table)), table)
  np.testing.assert_array_equal(form.rows(table, [3, 3]), tf.gather(table, [3, 3]))
  assert compressed_table.num_bytes(form) == 4 * ROWS * DIM


def test_hashed_rows_read_the_recovered_table():
  form = compressed_table.Hashed(ROWS, DIM, memory_size=37, seed=5, impl='composite')
  psi = form.reduce(_table())
  assert psi.shape == [37]
  np.testing.assert_allclose(psi, subspaces.project(_table(), memory_size=37, seed=5))
  np.testing.assert_allclose(form.rows(psi, tf.constant([0, 49, 7])),
                             tf.gather(form.recover(psi), [0, 49, 7]))


def test_hashed_reduce_then_recover_is_a_projection():
  # S psi is fixed by another round trip: reduce(recover(psi)) == psi.
  form = compressed_table.Hashed(ROWS, DIM, memory_size=64, seed=1, impl='composite')
  psi = form.reduce(_table())
  np.testing.assert_allclose(form.reduce(form.recover(psi)), psi, atol=1e-6)


def test_low_rank_is_the_best_rank_k_approximation():
  form = compressed_table.LowRank(ROWS, DIM, rank=2)
  table = _table()
  left, right = form.reduce(table)
  assert left.shape == [ROWS, 2] and right.shape == [2, DIM]
  u, s, vt = np.linalg.svd(table.numpy(), full_matrices=False)
  np.testing.assert_allclose(form.recover((left, right)), (u[:, :2] * s[:2]) @ vt[:2],
                             atol=1e-5)
  np.testing.assert_allclose(form.rows((left, right), [4]), tf.gather(form.recover((left, right)), [4]),
                             atol=1e-6)
  assert form.num_floats == (ROWS + DIM) * 2


def test_fedhm_rank_matches_the_paper_on_goodreads():
  n, d = 359_014, 8
  assert [compressed_table.fedhm_rank(n, d, c) for c in (1, 2, 4, 8)] == [7, 3, 1, 0]


@pytest.mark.parametrize('make, message', [
    (lambda: compressed_table.Hashed(ROWS, DIM, 0, seed=0), 'at least 1 slot'),
    (lambda: compressed_table.LowRank(ROWS, DIM, 0), r'rank must be in \[1, 4\]'),
    (lambda: compressed_table.LowRank(ROWS, DIM, 5), r'rank must be in \[1, 4\]'),
])
def test_bad_forms(make, message):
  with pytest.raises(ValueError, match=message):
    make()
