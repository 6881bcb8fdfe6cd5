"""Training examples from implicit feedback: sampled negatives, per-epoch batches."""

import collections

import numpy as np
import tensorflow as tf

from tff_rec.data import sliced


def unseen_items(seen: np.ndarray, count: int, num_items: int, rng) -> np.ndarray:
  """`count` items drawn uniformly (with replacement) from those not in `seen`.

  Rejection sampling: fast while `seen` is a small part of the catalogue.
  """
  draws = rng.integers(0, num_items, size=count)
  if not len(seen):
    return draws
  is_seen = _membership(seen, num_items)
  rejected = is_seen(draws)
  while rejected.any():
    draws[rejected] = rng.integers(0, num_items, size=int(rejected.sum()))
    rejected = is_seen(draws)
  return draws


LOOKUP_ITEMS = 1 << 16  # catalogues whose seen items a table of flags marks (64 KB at most)


def _membership(seen: np.ndarray, num_items: int):
  """ids -> whether each is in `seen`: a table of flags for a small catalogue (half
  of the draws' time on ML-100K), a binary search of the sorted ids otherwise."""
  if num_items <= LOOKUP_ITEMS:
    flags = np.zeros(num_items, bool)
    flags[seen] = True
    return lambda ids: flags[ids]
  seen = np.sort(seen)
  return lambda ids: seen[np.minimum(np.searchsorted(seen, ids), len(seen) - 1)] == ids


# The same draws in TF, for client work that draws them where it runs (a TFF
# worker runs TF ops, not numpy): stateless, so one seed gives the same draws on
# every runtime. They are not numpy's draws, so a run drawing here does not
# repeat one drawing on the trainer.

def seeds(seed: tf.Tensor, count: int) -> list[tf.Tensor]:
  """`count` independent stateless seeds from one int64 `seed`."""
  seed = tf.cast(seed, tf.int64)
  return [tf.stack([seed, tf.constant(k, tf.int64)]) for k in range(count)]


def unseen_items_tf(seen: tf.Tensor, count, num_items: int, seed: tf.Tensor) -> tf.Tensor:
  """`count` items drawn uniformly (with replacement) from those not in `seen`,
  exactly, without rejection: a draw u among the unseen becomes the u-th unseen
  item, u plus the number of seen items at or below it."""
  seen = tf.sort(tf.unique(tf.cast(seen, tf.int32)).y)
  free = num_items - tf.size(seen)
  draws = tf.random.stateless_uniform([count], seed, minval=0, maxval=free, dtype=tf.int32)
  below = seen - tf.range(tf.size(seen))  # unseen items below each seen one
  return draws + tf.searchsorted(below, draws, side='right')


def epoch_batches(columns: dict[str, tf.Tensor], epochs: int, batch_size: int
                  ) -> sliced.Batches:
  """Batches of `columns`, whose rows are `epochs` equal epochs one after the
  other; each epoch is batched on its own (its last batch may be partial), as
  a per-epoch DataLoader would."""
  rows = tf.shape(tf.nest.flatten(columns)[0])[0]
  per_epoch = rows // epochs
  epoch_starts = tf.range(epochs)[:, None] * per_epoch
  starts = tf.reshape(epoch_starts + tf.range(0, per_epoch, batch_size)[None, :], [-1])
  ends = tf.minimum(starts + batch_size, tf.reshape(
      tf.broadcast_to(epoch_starts + per_epoch, [epochs, tf.size(starts) // epochs]), [-1]))
  return sliced.Batches(collections.OrderedDict(
      (k, tf.convert_to_tensor(v)) for k, v in columns.items()), starts, ends, tf.range(rows))


def padded_batches(users_rows: list[tuple[np.ndarray, ...]], batch_size: int
                   ) -> tuple[list[np.ndarray], np.ndarray]:
  """Many users' epoch_batches side by side, for training them in lockstep.

  users_rows: per user, (epoch, column, column, ...) arrays of its rows,
  epochs one after the other. Returns ([users, steps, batch_size] arrays of
  each column, zero-padded) and the [users, steps, batch_size] 0/1 mask of
  real rows: user n's s-th batch is exactly its s-th batch of epoch_batches.
  """
  placed = []
  for epoch, *_ in users_rows:
    starts = np.flatnonzero(np.diff(epoch, prepend=-1))  # first row of each epoch
    lengths = np.diff(np.append(starts, len(epoch)))
    first_batch = np.concatenate([[0], np.cumsum(-(-lengths // batch_size))])[:-1]
    within = np.arange(len(epoch)) - np.repeat(starts, lengths)
    placed.append((np.repeat(first_batch, lengths) + within // batch_size,
                   within % batch_size))
  steps = max([int(b.max()) + 1 for b, _ in placed if len(b)] or [1])
  shape = (len(users_rows), steps, batch_size)
  mask = np.zeros(shape, np.float32)
  columns = [np.zeros(shape, np.asarray(c).dtype) for c in users_rows[0][1:]] if users_rows else []
  for n, ((batch, slot), (_, *values)) in enumerate(zip(placed, users_rows)):
    mask[n, batch, slot] = 1
    for column, value in zip(columns, values):
      column[n, batch, slot] = value
  return columns, mask
