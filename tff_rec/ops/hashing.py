"""The hash of cc/hashing.h, in Python and pure TensorFlow, bit for bit.

Element (row, col) of a virtual n x dim table lives at memory[slot] times a
sign. Element mode hashes key = row * dim + col; chunk mode (ROBE-Z) hashes
key = row * (dim / Z) + col // Z and adds col % Z to the slot:

  h(key) = mix(a_h * key + b_h) >> 32       (mod 2^64 arithmetic)
  g(key) = -1 if the top bit of mix(a_g * key + b_g) is set, else +1
  slot   = (h(key) [+ col % Z]) mod m

(a_h, b_h, a_g, b_g) come from the seed by splitmix64, and mix is splitmix64's
finaliser (without it, consecutive keys collide in fixed translated pairs and
colliding entries' signs are correlated). h does not depend on m,
so for m_i dividing m, slot mod m_i == (slot mod m) mod m_i: memories of size
m, m/2, m/4, ... are nested (FAIR's consistent, collapsible subspaces).
"""

import dataclasses

import tensorflow as tf

_MASK = (1 << 64) - 1
MAX_MEMORY = 1 << 32  # h has 32 bits


@dataclasses.dataclass(frozen=True)
class HashParams:
  a_h: int
  b_h: int
  a_g: int
  b_g: int


_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def _mix64(z: int) -> int:
  z = ((z ^ (z >> 30)) * _MIX[0]) & _MASK
  z = ((z ^ (z >> 27)) * _MIX[1]) & _MASK
  return z ^ (z >> 31)


def _splitmix64(state: int) -> tuple[int, int]:
  state = (state + 0x9E3779B97F4A7C15) & _MASK
  return state, _mix64(state)


def params_from_seed(seed: int) -> HashParams:
  state = seed & _MASK
  values = []
  for _ in range(4):
    state, value = _splitmix64(state)
    values.append(value)
  return HashParams(a_h=values[0] | 1, b_h=values[1], a_g=values[2] | 1, b_g=values[3])


def locate_reference(row: int, col: int, *, dim: int, chunk: int, m: int,
                     seed: int) -> tuple[int, float]:
  """(slot, sign) of element (row, col), in plain Python integers."""
  p = params_from_seed(seed)
  if chunk:
    key, offset = row * (dim // chunk) + col // chunk, col % chunk
  else:
    key, offset = row * dim + col, 0
  key &= _MASK
  h = _mix64((p.a_h * key + p.b_h) & _MASK) >> 32
  sign = -1.0 if _mix64((p.a_g * key + p.b_g) & _MASK) >> 63 else 1.0
  return (h + offset) % m, sign


def locate(rows: tf.Tensor, *, dim: int, chunk: int, m: tf.Tensor,
           seed: int) -> tuple[tf.Tensor, tf.Tensor]:
  """Slots ([N, dim] int64) and signs ([N, dim] float32) of rows `rows` ([N]).

  Pure TF (uint64 ops), for graphs that cannot use the custom op. `m` is a
  scalar; rows must be non-negative (checked by the caller).
  """
  p = params_from_seed(seed)
  u64 = lambda v: tf.constant(v, tf.uint64)
  rows = tf.cast(rows, tf.uint64)[:, None]
  cols = tf.range(dim, dtype=tf.int64)
  if chunk:
    key = rows * u64(dim // chunk) + tf.cast(cols // chunk, tf.uint64)[None, :]
    offset = tf.cast(cols % chunk, tf.uint64)[None, :]
  else:
    key = rows * u64(dim) + tf.cast(cols, tf.uint64)[None, :]
    offset = u64(0)
  shift = tf.bitwise.right_shift

  def mix(z):
    z = tf.bitwise.bitwise_xor(z, shift(z, u64(30))) * u64(_MIX[0])
    z = tf.bitwise.bitwise_xor(z, shift(z, u64(27))) * u64(_MIX[1])
    return tf.bitwise.bitwise_xor(z, shift(z, u64(31)))

  h = shift(mix(u64(p.a_h) * key + u64(p.b_h)), u64(32))
  slots = tf.math.floormod(h + offset, tf.cast(m, tf.uint64))
  top = shift(mix(u64(p.a_g) * key + u64(p.b_g)), u64(63))
  signs = tf.where(tf.equal(top, u64(1)), -1.0, 1.0)
  return tf.cast(slots, tf.int64), signs
