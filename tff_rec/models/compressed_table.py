"""Forms a client can hold an [n, d] embedding table in, and the maps to and from it.

Each form has parameters (`spec`), `reduce` (server: full table -> the form's
parameters), `rows` (client: look up rows from the parameters, differentiable)
and `recover` (server: parameters -> full table). FAIR's tiers are Full (1x)
and Hashed (cx: n*d/c floats, HashedNet's signed hashing through the hashed
embedding op; reduce = signed slot means S^T theta / S^T 1, recover = S psi);
FedHM's are Full and LowRank (W = B C, B n x k, C k x d, from a rank-k SVD).
"""

import dataclasses

import tensorflow as tf

from tff_rec.ops import hashed_embedding
from tff_rec.ops import subspaces

BYTES_PER_FLOAT = 4


@dataclasses.dataclass(frozen=True)
class Full:
  num_rows: int
  dim: int

  def spec(self):
    return tf.TensorSpec([self.num_rows, self.dim], tf.float32)

  @property
  def num_floats(self) -> int:
    return self.num_rows * self.dim

  def reduce(self, table):
    return table

  def rows(self, params, ids):
    return tf.gather(params, ids)

  def recover(self, params):
    return params


@dataclasses.dataclass(frozen=True)
class Hashed:
  """The table's n*d elements hashed into `memory_size` floats (mode 'element').

  Tiers that share a seed and whose memory sizes divide each other are
  consistent and collapsible: slot mod m_small == (slot mod m_big) mod m_small.
  `impl` picks the lookup kernel ('composite' on TFF's native runtime).
  """
  num_rows: int
  dim: int
  memory_size: int
  seed: int
  impl: str = 'auto'

  def __post_init__(self):
    if self.memory_size < 1:
      raise ValueError(f'a hashed table needs at least 1 slot, got memory_size='
                       f'{self.memory_size} (table {self.num_rows} x {self.dim})')

  def spec(self):
    return tf.TensorSpec([self.memory_size], tf.float32)

  @property
  def num_floats(self) -> int:
    return self.memory_size

  def reduce(self, table):
    return subspaces.project(table, memory_size=self.memory_size, seed=self.seed)

  def rows(self, params, ids):
    return hashed_embedding.hashed_embedding_lookup(params, ids, dim=self.dim,
                                                    seed=self.seed, impl=self.impl)

  def recover(self, params):
    return subspaces.recover(params, num_rows=self.num_rows, dim=self.dim,
                             seed=self.seed, impl=self.impl)


@dataclasses.dataclass(frozen=True)
class LowRank:
  """W ~ B C with B = U sqrt(S) [n, k], C = sqrt(S) V^T [k, d] (FedHM)."""
  num_rows: int
  dim: int
  rank: int

  def __post_init__(self):
    if not 1 <= self.rank <= min(self.num_rows, self.dim):
      raise ValueError(f'rank must be in [1, {min(self.num_rows, self.dim)}] for a '
                       f'{self.num_rows} x {self.dim} table, got {self.rank}')

  def spec(self):
    return (tf.TensorSpec([self.num_rows, self.rank], tf.float32),
            tf.TensorSpec([self.rank, self.dim], tf.float32))

  @property
  def num_floats(self) -> int:
    return (self.num_rows + self.dim) * self.rank

  def reduce(self, table):
    # Exact truncated SVD (d is small); FedHM's code uses torch.svd_lowrank.
    s, u, v = tf.linalg.svd(table)
    root = tf.sqrt(s[:self.rank])
    return (u[:, :self.rank] * root, tf.transpose(v[:, :self.rank] * root))

  def rows(self, params, ids):
    left, right = params
    return tf.matmul(tf.gather(left, ids), right)

  def recover(self, params):
    left, right = params
    return tf.matmul(left, right)


def fedhm_rank(num_rows: int, dim: int, capacity: int) -> int:
  """FedHM's rank for a table at 1/capacity of its size: int(n d / (c (n + d)))."""
  return int(num_rows * dim / (capacity * (num_rows + dim)))


def zeros(form) -> object:
  return tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), form.spec())


def num_bytes(form) -> int:
  return BYTES_PER_FLOAT * form.num_floats
