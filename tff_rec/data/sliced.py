"""A client's batches as row ranges of its examples, for loops over tf.range.

Inside a TF graph a tf.data iterator costs 3-9 ms per client on this machine
(its dataset functions are instantiated at each iterator), against under 1 ms
for a tf.range loop that slices the same batches: more than a small client's
training (FedMF at CoLR's setting: 60 clients of ~9 batches a round). Our own
training loop (training.functional) takes these as well as datasets;
tff.learning's client work needs datasets (`Plan.dataset`, `as_dataset`).

`Plan` describes a task's training batches once, for both: as a tf.data
pipeline (tff.learning's clients) and as Batches whose order numpy draws from
the round's client seed (the project's clients; shuffled before they reach
the client, so the client's graph only gathers). Batches hold the client's
examples once and the order as row numbers: a round sends E epochs of row
numbers rather than E copies of the examples, and the examples themselves are
fixed, so a worker can read them from files (client_files), and draw the same
plan's order there (`Plan.batches_tf`: TF's draws, not numpy's).
"""

import collections
import dataclasses
from typing import Any, NamedTuple, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import lean

FULL_SHUFFLE = 1 << 16  # tf.data's shuffle buffer holding any client's examples
ORDER_STREAM = -1  # Plan.batches_tf's seeds: [seed, -1] folded with each epoch


class Batches(NamedTuple):
  """Batch s is the examples rows[starts[s]:ends[s]] of every column. A
  NamedTuple: TFF keeps it as it passes between computations."""
  columns: Any  # a structure (e.g. an OrderedDict, or Keras's (x, y)) of [examples, ...]
  starts: tf.Tensor  # [steps] int32
  ends: tf.Tensor  # [steps] int32
  rows: tf.Tensor  # [ends[-1]] int32: the examples of the batches, one after another

  def steps(self) -> tf.Tensor:
    return tf.size(self.starts)

  def batch(self, step: tf.Tensor):
    rows = self.rows[self.starts[step]:self.ends[step]]
    return tf.nest.map_structure(lambda v: tf.gather(v, rows), self.columns)

  def first_rows(self, column: str) -> tf.Tensor:
    """Each batch's first value of `column`."""
    return tf.gather(self.columns[column], tf.gather(self.rows, self.starts))

  def where(self, keep: tf.Tensor) -> 'Batches':
    """The batches whose `keep` ([steps] bool) is true, in order."""
    return self._replace(starts=tf.boolean_mask(self.starts, keep),
                         ends=tf.boolean_mask(self.ends, keep))

  def as_dataset(self) -> tf.data.Dataset:
    return lean.lean(tf.data.Dataset.from_tensor_slices((self.starts, self.ends)).map(
        lambda start, end: tf.nest.map_structure(
            lambda v: tf.gather(v, self.rows[start:end]), self.columns)))


def tff_type(batches: Batches):
  """The TFF type of Batches like `batches` (numpy), of any number of rows and steps."""
  columns = tf.nest.map_structure(
      lambda v: tff.TensorType(v.dtype, [None, *v.shape[1:]]), batches.columns)
  rows = tff.TensorType(np.int32, [None])
  return tff.types.to_type(Batches(columns, rows, rows, rows))


class Joined(NamedTuple):
  """Batches of several parts over one copy of the columns (`joined`): a
  client's input costs per tensor it holds (TFF's runtimes convert each one, a
  client at a time), and MetaUA's three Batches of 11 tensors each took 0.12 s a
  round more than FedAvg's one (94 DCN clients). A NamedTuple: TFF keeps it."""
  batches: Batches
  part_ends: Any  # [parts] int32: the step where each part ends

  def parts(self) -> list[Batches]:
    """The parts as they were, numpy or tensors as the batches are (tensors: of
    a static count of parts)."""
    b, (concat, gather, _, _) = self.batches, _ops(self.batches.rows)
    row_ends = gather(concat([[0], b.ends]), self.part_ends)  # where each part's rows end
    count = int(self.part_ends.shape[0])
    steps = [0, *(self.part_ends[k] for k in range(count))]
    rows = [0, *(row_ends[k] for k in range(count))]
    return [Batches(b.columns, b.starts[steps[k]:steps[k + 1]] - rows[k],
                    b.ends[steps[k]:steps[k + 1]] - rows[k], b.rows[rows[k]:rows[k + 1]])
            for k in range(count)]


def joined(parts: Sequence[Batches]) -> Joined:
  """`parts` (each contiguous in its rows, as this module makes them) over the
  same columns (the same arrays or tensors) as one; Joined.parts undoes it."""
  columns = tf.nest.flatten(parts[0].columns)
  if any(any(a is not b for a, b in zip(tf.nest.flatten(p.columns), columns, strict=True))
         for p in parts):
    raise ValueError('joined Batches must share their columns (the same arrays)')
  concat, _, cumsum, size = _ops(parts[0].rows)
  numpy = isinstance(parts[0].rows, np.ndarray)  # tensors: made by this module, not checked
  if numpy and not all(np.array_equal(np.append(p.starts, len(p.rows)), np.insert(p.ends, 0, 0))
                       for p in parts):
    raise ValueError('joined Batches must each cover their rows in order, batch after batch')
  offsets = cumsum([0] + [size(p.rows) for p in parts[:-1]])
  return Joined(
      Batches(parts[0].columns, concat([p.starts + offsets[k] for k, p in enumerate(parts)]),
              concat([p.ends + offsets[k] for k, p in enumerate(parts)]),
              concat([p.rows for p in parts])),
      cumsum([size(p.starts) for p in parts]))


def _ops(array):
  """(concat, gather, cumsum, size) of int32 numpy arrays or tensors, as `array` is."""
  if isinstance(array, np.ndarray):
    return (lambda v: np.concatenate(v).astype(np.int32), np.take,
            lambda v: np.cumsum(v).astype(np.int32), len)
  return (lambda v: tf.concat(v, 0), tf.gather,
          lambda v: tf.cumsum(tf.cast(tf.stack(v), tf.int32)), tf.size)


def in_order(columns, batch_size: int, rows: np.ndarray | None = None) -> Batches:
  """One pass over numpy `columns` (over their `rows`, by default all), in order,
  the last batch partial."""
  columns = tf.nest.map_structure(np.asarray, columns)
  return _batched(columns, _all_rows(columns) if rows is None else np.asarray(rows), batch_size)


def _all_rows(columns) -> np.ndarray:
  return np.arange(len(tf.nest.flatten(columns)[0]))


@dataclasses.dataclass(frozen=True)
class Plan:
  """A client's training batches: `epochs` shuffled passes over its examples
  batched one after the other (a batch may span two epochs, as
  shuffle().repeat().batch() makes them), at most `steps` batches (0: all),
  the last one dropped if partial with `drop_remainder`. A `buffer` smaller
  than the examples shuffles as tf.data's buffer does: locally."""
  batch_size: int
  epochs: int = 1
  steps: int = 0
  drop_remainder: bool = False
  buffer: int = FULL_SHUFFLE

  def dataset(self, examples: tf.data.Dataset, seed) -> tf.data.Dataset:
    """The batches as tf.data makes them (shuffled by TF's seeded shuffle)."""
    batched = (examples.shuffle(self.buffer, seed=seed).repeat(self.epochs)
               .batch(self.batch_size, drop_remainder=self.drop_remainder))
    return batched.take(self.steps) if self.steps else batched

  def batches(self, columns, seed: int, rows: np.ndarray | None = None) -> Batches:
    """The batches of numpy `columns` (a structure of arrays of equal length; of
    their `rows`, by default all), shuffled by numpy from `seed`."""
    rows = _all_rows(columns) if rows is None else np.asarray(rows)
    rng = np.random.default_rng(seed)
    order = np.concatenate([_shuffled(len(rows), self.buffer, rng) for _ in range(self.epochs)]
                           or [np.zeros(0, np.int64)])
    size = len(order)
    if self.drop_remainder:
      size -= size % self.batch_size
    if self.steps:
      size = min(size, self.steps * self.batch_size)
    return _batched(tf.nest.map_structure(np.asarray, columns), rows[order[:size]],
                    self.batch_size)

  def batches_tf(self, columns, seed, rows: tf.Tensor | None = None) -> Batches:
    """The batches of `columns` (tensors; of their `rows`, by default all), the
    same plan drawn by TF from `seed` (int64): where a client trains from
    files, which TFF's worker cannot run numpy in. Stateless, so a seed gives
    the same batches on every runtime; they are not numpy's draws."""
    count = tf.shape(tf.nest.flatten(columns)[0])[0] if rows is None else tf.size(rows)
    # A stream of its own: draws from [seed, k] (a task's negatives) stay independent.
    order_seed = tf.stack([tf.cast(seed, tf.int64), tf.constant(ORDER_STREAM, tf.int64)])
    order = tf.concat([_shuffled_tf(count, self.buffer,
                                    tf.random.experimental.stateless_fold_in(order_seed, epoch))
                       for epoch in range(self.epochs)] or [tf.zeros([0], tf.int32)], 0)
    size = tf.size(order)
    if self.drop_remainder:
      size -= size % self.batch_size
    if self.steps:
      size = tf.minimum(size, self.steps * self.batch_size)
    order = order[:size]
    starts = tf.range(0, size, self.batch_size)
    return Batches(columns, starts, tf.minimum(starts + self.batch_size, size),
                   order if rows is None else tf.gather(tf.cast(rows, tf.int32), order))


def _shuffled_tf(rows: tf.Tensor, buffer: int, seed: tf.Tensor) -> tf.Tensor:
  """_shuffled's permutation of range(rows), drawn by TF from `seed` ([2] int64)."""
  def buffered():  # each draw takes a random held row and refills its slot
    def draw(step, held, order):
      slot = tf.random.stateless_uniform(
          [], tf.random.experimental.stateless_fold_in(seed, step), maxval=tf.size(held),
          dtype=tf.int32)
      order = order.write(step, held[slot])
      following = step + buffer
      refill = tf.where(following < rows, following, held[-1])  # or the last, moved
      held = tf.tensor_scatter_nd_update(held, [[slot]], [refill])
      return step + 1, held[:tf.size(held) - tf.cast(following >= rows, tf.int32)], order

    _, _, order = tf.while_loop(
        lambda step, *_: step < rows, draw,
        (0, tf.range(tf.minimum(rows, buffer)), tf.TensorArray(tf.int32, size=rows)),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]), None))
    return order.stack()

  return tf.cond(rows <= buffer, lambda: permutations_tf(1, rows, seed)[0], buffered)


def permutations_tf(count: int, size, seed: tf.Tensor) -> tf.Tensor:
  """[count, size]: `count` independent uniform permutations of range(size)."""
  return tf.argsort(tf.random.stateless_uniform([count, size], seed), axis=1)


def _batched(columns, rows: np.ndarray, batch_size: int) -> Batches:
  starts = np.arange(0, len(rows), batch_size, dtype=np.int32)
  return Batches(columns, starts, np.minimum(starts + batch_size, len(rows)).astype(np.int32),
                 rows.astype(np.int32))


def _shuffled(rows: int, buffer: int, rng: np.random.Generator) -> np.ndarray:
  """A permutation of range(rows) as a shuffle buffer of `buffer` draws it."""
  if buffer >= rows:
    return rng.permutation(rows)
  held = list(range(buffer))  # each draw takes a random held row and refills its slot
  order = []
  for following in range(buffer, rows + buffer):
    slot = int(rng.integers(len(held)))
    order.append(held[slot])
    if following < rows:
      held[slot] = following
    else:
      held[slot] = held[-1]
      held.pop()
  return np.asarray(order)
