"""FAIR's reduction and recovery between a full table and its hashed memory.

With S the n*dim x m matrix of signs placing element (row, col) in slot j:
  project(theta) = psi,  psi[j] = (sum of sign * theta over the entries in j)
                                  / (number of entries in j)   (0 if none)
  recover(psi)   = S psi, the rows the lookup reads back.
Both go through the table in blocks of rows, so working memory stays bounded
(n = 1.35M rows never builds an n*dim index tensor at once).
"""

import tensorflow as tf

from tff_rec.ops import hashed_embedding
from tff_rec.ops import hashing

ROWS_PER_BLOCK = 1 << 16


def project(theta: tf.Tensor, *, memory_size: int, seed: int, mode: str = 'element',
            chunk_size: int | None = None, rows_per_block: int = ROWS_PER_BLOCK
            ) -> tf.Tensor:
  """theta [n, dim] (static n) -> psi [memory_size], the signed slot means."""
  theta = tf.convert_to_tensor(theta, tf.float32)
  n, dim = theta.shape
  chunk = hashed_embedding.chunk_attr(dim, mode, chunk_size)
  if not 1 <= memory_size <= hashing.MAX_MEMORY:
    raise ValueError(f'memory_size must be in [1, 2^32], got {memory_size}')
  sums = tf.zeros([memory_size])
  counts = tf.zeros([memory_size])
  m = tf.constant(memory_size, tf.int64)
  for start in range(0, n, rows_per_block):
    stop = min(start + rows_per_block, n)
    slots, signs = hashing.locate(tf.range(start, stop, dtype=tf.int64), dim=dim,
                                  chunk=chunk, m=m, seed=seed)
    slots = tf.reshape(slots, [-1])
    sums += tf.math.unsorted_segment_sum(tf.reshape(theta[start:stop] * signs, [-1]),
                                         slots, memory_size)
    counts += tf.math.unsorted_segment_sum(tf.ones_like(slots, tf.float32), slots,
                                           memory_size)
  return tf.math.divide_no_nan(sums, counts)


def recover(psi: tf.Tensor, *, num_rows: int, dim: int, seed: int,
            mode: str = 'element', chunk_size: int | None = None,
            impl: str = 'auto', rows_per_block: int = ROWS_PER_BLOCK) -> tf.Tensor:
  """psi [m] -> theta rows [num_rows, dim] = S psi, read in blocks of rows."""
  blocks = [
      hashed_embedding.hashed_embedding_lookup(
          psi, tf.range(start, min(start + rows_per_block, num_rows), dtype=tf.int64),
          dim=dim, seed=seed, mode=mode, chunk_size=chunk_size, impl=impl)
      for start in range(0, num_rows, rows_per_block)]
  return tf.concat(blocks, axis=0)
