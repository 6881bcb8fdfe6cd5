"""Leave-one-out implicit feedback (NCF's protocol, as CoLR uses it).

Every interaction is a positive. Each user's interactions are ordered by time;
the latest is held out for test, the one before for validation, the rest are
training positives. Evaluation ranks a held-out item among `num_candidates`
items the user never interacted with, drawn with a seed (without
replacement), so every evaluation of every model sees the same candidates.
Users with fewer than `min_interactions` distinct items (CoLR keeps users
with at least 20) are skipped and counted, never an error.

Items are renumbered 0..n-1 over the items of the kept users, in id order.
"""

import dataclasses

import numpy as np
import pandas as pd

from tff_rec.data import item_lists

MIN_SPLIT = 3  # one training positive, the validation item and the test item
NEGATIVES_BLOCK = 4096  # users whose candidates one kept generator state draws again


@dataclasses.dataclass(frozen=True)
class Candidates:
  """One part's sampled candidates, [users, count] item indices, drawn again when
  read: at 10^6 users the two parts' 99 items a user held 755 MB, three times
  the user vectors. The split draws every user's once, in user order from one
  stream, keeping only the stream's state at every NEGATIVES_BLOCK-th user, so
  a slice reads back the very items that draw made. Index it with a user or a
  slice of users; np.asarray(candidates) draws them all."""
  train: item_lists.ItemLists
  held_out: tuple[np.ndarray, ...]  # [users] item index, each held-out part's
  num_items: int
  count: int
  states: tuple[dict, ...]  # the generator's state at users 0, NEGATIVES_BLOCK, ...

  @property
  def num_users(self) -> int:
    return len(self.held_out[0])

  def __len__(self) -> int:
    return self.num_users

  @property
  def shape(self) -> tuple[int, int]:
    return (self.num_users, self.count)

  def __getitem__(self, key):
    if isinstance(key, slice):
      start, stop, step = key.indices(self.num_users)
      if step != 1:
        raise IndexError('candidates are read by contiguous slices of users')
      return self._rows(start, max(start, stop))
    user = range(self.num_users)[key]  # an IndexError out of range
    return self._rows(user, user + 1)[0]

  def __array__(self, dtype=None, copy=None):
    del copy  # always a new array
    return self._rows(0, self.num_users).astype(dtype or np.int32, copy=False)

  def _rows(self, start: int, stop: int) -> np.ndarray:
    rows = np.empty((stop - start, self.count), np.int32)
    first = start - start % NEGATIVES_BLOCK
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = self.states[first // NEGATIVES_BLOCK]
    for user in range(first, stop):  # the block's earlier users advance the stream
      history = np.concatenate([self.train.of(user), [h[user] for h in self.held_out]])
      drawn = _unseen(history, self.num_items, self.count, rng)
      if user >= start:
        rows[user - start] = drawn
    return rows


@dataclasses.dataclass(frozen=True)
class LeaveOneOut:
  """Users' training positives and held-out items (user k is user_ids[k])."""
  user_ids: np.ndarray          # [users] the dataset's user ids
  item_ids: np.ndarray          # [items] the dataset's id of each item index
  train: item_lists.ItemLists   # training positives, oldest first
  held_out: dict[str, np.ndarray]    # 'validation' / 'test' -> [users] item index
  negatives: dict[str, Candidates]   # 'validation' / 'test' -> [users, C] item indices
  skipped_users: int            # users with fewer than min_interactions items

  @property
  def num_items(self) -> int:
    return len(self.item_ids)


def from_ratings(ratings: pd.DataFrame, **options) -> LeaveOneOut:
  """From a (user_id, item_id, timestamp) table; ties in time keep table order."""
  return from_sequences(item_lists.Sequences.of_ratings(ratings), **options)


def from_sequences(sequences: item_lists.Sequences, **options) -> LeaveOneOut:
  """From time-ordered per-user item lists (user_items.read_lines)."""
  ordered = sequences.in_id_order()
  return split(ordered.user_ids, ordered.lists, **options)


def split(user_ids: np.ndarray, sequences: item_lists.ItemLists, *, min_interactions: int = 20,
          num_negatives: int = 99, seed: int = 0) -> LeaveOneOut:
  """The leave-one-out split of time-ordered item sequences (user k's: sequences.of(k))."""
  if min_interactions < MIN_SPLIT:
    raise ValueError(f'min_interactions must be >= {MIN_SPLIT} (a training item, the '
                     f'validation item and the test item), got {min_interactions}')
  if num_negatives < 1:
    raise ValueError(f'num_negatives must be >= 1, got {num_negatives}')
  distinct = _latest_occurrences(sequences)
  kept = np.flatnonzero(distinct.counts >= min_interactions)
  if not len(kept):
    raise ValueError(f'no user has {min_interactions} or more distinct items; lower '
                     'min_interactions')
  if len(kept) < len(distinct.counts):
    distinct = distinct.take(kept)
  item_ids = np.unique(distinct.items)
  dense = item_lists.ItemLists(distinct.offsets, np.searchsorted(item_ids, distinct.items))
  too_few_unseen = dense.counts + num_negatives > len(item_ids)
  if too_few_unseen.any():
    raise ValueError(f'{too_few_unseen.sum()} users have fewer than {num_negatives} items '
                     f'they never interacted with (catalogue of {len(item_ids)}), and each '
                     f'held-out item is ranked among {num_negatives} of them: this needs a '
                     f'catalogue of at least {dense.counts.max() + num_negatives} items')
  ends = dense.offsets[1:]
  in_train = np.ones(len(dense.items), bool)
  in_train[ends - 1] = in_train[ends - 2] = False
  train = item_lists.ItemLists.from_counts(dense.counts - 2, dense.items[in_train])
  held_out = {'validation': dense.items[ends - 2], 'test': dense.items[ends - 1]}

  rng, negatives = np.random.default_rng(seed), {}
  for part in ('validation', 'test'):  # each user's drawn once here, for the states
    states = []
    for user in range(len(kept)):
      if user % NEGATIVES_BLOCK == 0:
        states.append(rng.bit_generator.state)
      _unseen(dense.of(user), len(item_ids), num_negatives, rng)
    negatives[part] = Candidates(train, tuple(held_out.values()), len(item_ids),
                                 num_negatives, tuple(states))
  return LeaveOneOut(
      user_ids=np.asarray(user_ids)[kept], item_ids=item_ids,
      train=train, held_out=held_out, negatives=negatives,
      skipped_users=len(sequences.counts) - len(kept))


DISTINCT_BLOCK = 1 << 20  # items a pass of _latest_occurrences sorts at once


def _latest_occurrences(sequences: item_lists.ItemLists) -> item_lists.ItemLists:
  """Each list's items once each, at their latest position (a repeat is a newer
  interaction), in order; a block of users at a time, so its sort's arrays stay
  small however many users there are."""
  kept, counts, start, users = [], [], 0, len(sequences.counts)
  while start < users:
    stop = max(start + 1, int(np.searchsorted(
        sequences.offsets, sequences.offsets[start] + DISTINCT_BLOCK, 'right')) - 1)
    first = sequences.offsets[start]
    block = item_lists.ItemLists(sequences.offsets[start:stop + 1] - first,
                                 sequences.items[first:sequences.offsets[stop]])
    rows, items = block.rows, block.items
    # By user, then item, the latest first among a user's repeats (lexsort is stable).
    order = len(items) - 1 - np.lexsort((items[::-1], rows[::-1]))
    latest = np.ones(len(order), bool)
    latest[1:] = (rows[order[1:]] != rows[order[:-1]]) | (items[order[1:]] != items[order[:-1]])
    local = np.sort(order[latest])
    kept.append(first + local)
    counts.append(np.bincount(rows[local], minlength=stop - start))
    start = stop
  if sum(map(len, kept)) == len(sequences.items):
    return sequences  # no repeats
  return item_lists.ItemLists.from_counts(np.concatenate(counts),
                                          sequences.items[np.concatenate(kept)])


def _unseen(seen: np.ndarray, num_items: int, count: int, rng) -> np.ndarray:
  """`count` distinct items not in `seen` (distinct), uniformly.

  The very draw of rng.choice over the unseen items' array, which picks ranks
  in it from its length alone, without building it: the rank-k unseen item is
  k plus the seen items at or below it (with s sorted, s[i] - i unseen items
  come before s[i]). Building the array took most of a split: 10^5 items a
  user, twice, for each of 10^6 users."""
  seen = np.sort(seen)
  ranks = rng.choice(num_items - len(seen), size=count, replace=False)
  return ranks + np.searchsorted(seen - np.arange(len(seen)), ranks, side='right')
