import logging

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.ops import hashed_embedding as he
from tff_rec.ops import hashing

CASES = [dict(mode='element', chunk_size=None), dict(mode='chunk', chunk_size=4)]


def test_the_op_library_is_built_and_loads():
  assert he.load_library() is not None, 'run `python -m tff_rec.ops.build` (make setup does)'


def _memory(m, seed=0):
  return tf.Variable(np.random.default_rng(seed).normal(size=m).astype(np.float32))


@pytest.mark.parametrize('case', CASES)
@pytest.mark.parametrize('dtype', [tf.int32, tf.int64])
def test_op_equals_composite_and_reference(case, dtype):
  memory = _memory(1009)
  ids = tf.constant([[0, 5, 5], [12345, 7, 1008]], dtype)  # repeats, 2-d
  op = he.hashed_embedding_lookup(memory, ids, dim=8, seed=3, impl='op', **case)
  composite = he.hashed_embedding_lookup(memory, ids, dim=8, seed=3, impl='composite', **case)
  assert op.shape == (6, 8)
  np.testing.assert_array_equal(op, composite)
  chunk = case['chunk_size'] or 0
  for i, row in enumerate(np.ravel(ids)):
    for col in range(8):
      slot, sign = hashing.locate_reference(int(row), col, dim=8, chunk=chunk, m=1009, seed=3)
      assert op[i, col] == sign * memory[slot]


@pytest.mark.parametrize('case', CASES)
def test_op_gradient_equals_composite_gradient(case):
  memory = _memory(257)
  rng = np.random.default_rng(1)
  ids = tf.constant(rng.integers(0, 300, size=4000))  # many collisions in 257 slots
  weights = tf.constant(rng.normal(size=(4000, 16)).astype(np.float32))
  grads = []
  for impl in ('op', 'composite'):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(weights * he.hashed_embedding_lookup(
          memory, ids, dim=16, seed=5, impl=impl, **case))
    grads.append(tf.convert_to_tensor(tape.gradient(loss, memory)))
  np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-4)
  assert float(tf.reduce_sum(tf.abs(grads[0]))) > 100


@pytest.mark.parametrize('case', CASES)
def test_op_gradient_is_sparse_the_slots_read_with_their_signed_gradients(case):
  """IndexedSlices of n x dim entries, not an m-float tensor: equal to the dense
  reference after densifying (np.add.at over the reference slots)."""
  m, dim, chunk = 100_003, 8, case['chunk_size'] or 0
  memory = _memory(m)
  ids = tf.constant([3, 70_000, 3, 12], tf.int64)  # a repeated id: repeated slots
  weights = tf.constant(np.random.default_rng(2).normal(size=(4, dim)).astype(np.float32))
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(weights * he.hashed_embedding_lookup(
        memory, ids, dim=dim, seed=7, impl='op', **case))
  grad = tape.gradient(loss, memory)
  assert isinstance(grad, tf.IndexedSlices)
  assert grad.indices.shape == (4 * dim,) and int(grad.dense_shape[0]) == m
  reference = np.zeros(m, np.float32)
  for i, row in enumerate(ids.numpy()):
    for col in range(dim):
      slot, sign = hashing.locate_reference(int(row), col, dim=dim, chunk=chunk, m=m, seed=7)
      assert (grad.indices[i * dim + col], grad.values[i * dim + col]) == (
          slot, sign * weights[i, col])
      np.add.at(reference, slot, sign * weights.numpy()[i, col])
  np.testing.assert_array_equal(tf.convert_to_tensor(grad), reference)


def test_op_gradient_inside_tf_function_and_with_edge_ids():
  memory = _memory(10)
  ids = tf.constant([0, 2**62 // 4, 2**63 // 4 - 1], tf.int64)  # keys up to ~2^63

  @tf.function
  def grad(impl):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(he.hashed_embedding_lookup(memory, ids, dim=4, seed=0, impl=impl))
    return tf.convert_to_tensor(tape.gradient(loss, memory))

  np.testing.assert_allclose(grad('op'), grad('composite'), atol=1e-6)
  # Every element contributes +-1 to one slot: 12 entries in total.
  assert float(tf.reduce_sum(tf.abs(grad('op')))) <= 12


@pytest.mark.parametrize('impl', ['op', 'composite'])
def test_negative_ids_are_an_error(impl):
  with pytest.raises(tf.errors.InvalidArgumentError, match='ids must be non-negative'):
    he.hashed_embedding_lookup(_memory(8), tf.constant([1, 2, -1]), dim=2, seed=0, impl=impl)


@pytest.mark.parametrize('impl', ['op', 'composite'])
def test_empty_memory_is_an_error(impl):
  with pytest.raises(tf.errors.InvalidArgumentError, match='memory size must be'):
    he.hashed_embedding_lookup(tf.zeros([0]), tf.constant([1]), dim=2, seed=0, impl=impl)


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(dim=0), ValueError, 'dim must be a positive integer'),
    (dict(mode='chunk', chunk_size=3), ValueError, 'chunk_size Z dividing dim=4'),
    (dict(mode='robe'), ValueError, "unknown mode 'robe'"),
    (dict(impl='cuda'), ValueError, "unknown impl 'cuda'"),
])
def test_bad_arguments(kwargs, error, message):
  args = dict(dim=4, seed=0) | kwargs
  with pytest.raises(error, match=message):
    he.hashed_embedding_lookup(_memory(8), tf.constant([1]), **args)


def test_bad_tensors():
  with pytest.raises(TypeError, match='ids must be integers'):
    he.hashed_embedding_lookup(_memory(8), tf.constant([1.0]), dim=2, seed=0)
  with pytest.raises(ValueError, match='memory must be a vector'):
    he.hashed_embedding_lookup(tf.zeros([2, 4]), tf.constant([1]), dim=2, seed=0)


def test_missing_library_falls_back_to_the_composite_and_says_so_once(monkeypatch, caplog):
  monkeypatch.setattr(he, 'LIBRARIES', ('_no_such_library.so',))
  he.load_library.cache_clear()
  try:
    with caplog.at_level(logging.WARNING):
      for _ in range(2):
        out = he.hashed_embedding_lookup(_memory(8), tf.constant([1, 2]), dim=2, seed=0)
    assert out.shape == (2, 2)
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert 'using the pure-TF composite' in caplog.records[0].message
    with pytest.raises(RuntimeError, match='impl="op" but the hashed embedding op library'):
      he.hashed_embedding_lookup(_memory(8), tf.constant([1]), dim=2, seed=0, impl='op')
  finally:
    he.load_library.cache_clear()


@pytest.mark.parametrize('memory, ids, attrs, message', [
    (tf.zeros([2, 4]), [1], dict(dim=2), r'memory must be a vector, got shape \[2,4\]'),
    (tf.zeros([8]), [1], dict(dim=4, chunk=3), 'chunk size Z=3 must divide dim=4'),
    (tf.zeros([8]), [0, -7], dict(dim=2), r'ids must be non-negative; ids\[1\] = -7'),
    (tf.zeros([0]), [1], dict(dim=2), r'memory size must be in \[1, 2\^32\], got 0'),
])
def test_the_raw_op_checks_its_inputs_too(memory, ids, attrs, message):
  """Without the Python wrapper in front, the C++ kernel still refuses."""
  module = he.load_library()
  with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=message):
    module.hashed_embedding_lookup(memory, tf.constant(ids, tf.int64), seed=0, **attrs)


def test_the_raw_gradient_op_checks_the_gradient_shape():
  module = he.load_library()
  with pytest.raises(tf.errors.InvalidArgumentError, match=r'grad must have shape \[2, 4\]'):
    module.hashed_embedding_lookup_grad(tf.zeros([2, 3]), tf.constant([1, 2], tf.int64),
                                        tf.constant(8, tf.int64), dim=4, seed=0)
