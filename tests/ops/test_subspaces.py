import numpy as np
import pytest
import tensorflow as tf

from tff_rec.ops import hashing
from tff_rec.ops import subspaces


def _sign_matrix(n, dim, m, seed, chunk=0):
  """S as a dense (n*dim) x m matrix: entry (element, slot) = sign."""
  slots, signs = hashing.locate(tf.range(n, dtype=tf.int64), dim=dim, chunk=chunk,
                                m=tf.constant(m, tf.int64), seed=seed)
  s = np.zeros((n * dim, m), np.float32)
  s[np.arange(n * dim), slots.numpy().ravel()] = signs.numpy().ravel()
  return s


@pytest.mark.parametrize('chunk_size', [None, 2])
def test_project_is_the_signed_mean_per_slot(chunk_size):
  n, dim, m = 50, 4, 37
  theta = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)
  s = _sign_matrix(n, dim, m, seed=4, chunk=chunk_size or 0)
  counts = np.abs(s).sum(0)
  want = np.divide(s.T @ theta.ravel(), counts, out=np.zeros(m, np.float32),
                   where=counts > 0)
  mode = 'chunk' if chunk_size else 'element'
  got = subspaces.project(theta, memory_size=m, seed=4, mode=mode, chunk_size=chunk_size,
                          rows_per_block=7)  # blocks must not change the result
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_recover_is_s_psi_and_project_inverts_it_on_the_subspace():
  n, dim, m = 40, 4, 64
  psi = np.random.default_rng(1).normal(size=m).astype(np.float32)
  theta = subspaces.recover(tf.constant(psi), num_rows=n, dim=dim, seed=2,
                            rows_per_block=16, impl='composite')
  s = _sign_matrix(n, dim, m, seed=2)
  np.testing.assert_allclose(theta.numpy().ravel(), s @ psi, atol=1e-6)
  # A table that lies in the subspace projects back to psi (slots in use).
  back = subspaces.project(theta, memory_size=m, seed=2)
  used = np.abs(s).sum(0) > 0
  np.testing.assert_allclose(back.numpy()[used], psi[used], atol=1e-5)
  assert np.all(back.numpy()[~used] == 0)


def test_recover_with_op_equals_composite():
  psi = tf.constant(np.random.default_rng(2).normal(size=100).astype(np.float32))
  args = dict(num_rows=300, dim=8, seed=9, rows_per_block=128)
  np.testing.assert_array_equal(subspaces.recover(psi, impl='op', **args),
                                subspaces.recover(psi, impl='composite', **args))


def test_memory_size_is_checked():
  with pytest.raises(ValueError, match=r'memory_size must be in \[1, 2\^32\]'):
    subspaces.project(np.zeros((2, 2), np.float32), memory_size=0, seed=0)
