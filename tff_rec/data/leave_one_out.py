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

from tff_rec.data import user_items

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
  train: user_items.ItemLists
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
  train: user_items.ItemLists   # training positives, oldest first
  held_out: dict[str, np.ndarray]    # 'validation' / 'test' -> [users] item index
  negatives: dict[str, Candidates]   # 'validation' / 'test' -> [users, C] item indices
  skipped_users: int            # users with fewer than min_interactions items

  @property
  def num_items(self) -> int:
    return len(self.item_ids)


def from_ratings(ratings: pd.DataFrame, **options) -> LeaveOneOut:
  """From a (user_id, item_id, timestamp) table; ties in time keep table order."""
  ordered = ratings.sort_values(['user_id', 'timestamp'], kind='stable')
  users, starts = np.unique(ordered['user_id'].to_numpy(), return_index=True)
  sequences = np.split(ordered['item_id'].to_numpy(np.int64), starts[1:])
  return split(users, sequences, **options)


def from_sequences(sequences: dict[int, np.ndarray], **options) -> LeaveOneOut:
  """From time-ordered per-user item lists (user_items.read_lines)."""
  users = np.array(sorted(sequences), np.int64)
  return split(users, [sequences[int(u)] for u in users], **options)


def split(user_ids: np.ndarray, sequences: list[np.ndarray], *, min_interactions: int = 20,
          num_negatives: int = 99, seed: int = 0) -> LeaveOneOut:
  """The leave-one-out split of time-ordered item sequences (one per user)."""
  if min_interactions < MIN_SPLIT:
    raise ValueError(f'min_interactions must be >= {MIN_SPLIT} (a training item, the '
                     f'validation item and the test item), got {min_interactions}')
  if num_negatives < 1:
    raise ValueError(f'num_negatives must be >= 1, got {num_negatives}')
  sequences = [_latest_occurrences(s) for s in sequences]
  kept = [k for k, s in enumerate(sequences) if len(s) >= min_interactions]
  if not kept:
    raise ValueError(f'no user has {min_interactions} or more distinct items; lower '
                     'min_interactions')
  item_ids = np.unique(np.concatenate([sequences[k] for k in kept]))
  dense = [np.searchsorted(item_ids, sequences[k]) for k in kept]
  too_few_unseen = [len(s) + num_negatives > len(item_ids) for s in dense]
  if any(too_few_unseen):
    raise ValueError(f'{sum(too_few_unseen)} users have fewer than {num_negatives} items '
                     f'they never interacted with (catalogue of {len(item_ids)}), and each '
                     f'held-out item is ranked among {num_negatives} of them: this needs a '
                     f'catalogue of at least {max(map(len, dense)) + num_negatives} items')
  train = user_items.ItemLists.from_lists([s[:-2] for s in dense])
  held_out = {'validation': np.array([s[-2] for s in dense]),
              'test': np.array([s[-1] for s in dense])}

  rng, negatives = np.random.default_rng(seed), {}
  for part in ('validation', 'test'):  # each user's drawn once here, for the states
    states = []
    for user, s in enumerate(dense):
      if user % NEGATIVES_BLOCK == 0:
        states.append(rng.bit_generator.state)
      _unseen(s, len(item_ids), num_negatives, rng)
    negatives[part] = Candidates(train, tuple(held_out.values()), len(item_ids),
                                 num_negatives, tuple(states))
  return LeaveOneOut(
      user_ids=np.asarray(user_ids)[kept], item_ids=item_ids,
      train=train, held_out=held_out, negatives=negatives,
      skipped_users=len(sequences) - len(kept))


def _latest_occurrences(sequence: np.ndarray) -> np.ndarray:
  """Each item once, at its latest position (a repeat is a newer interaction)."""
  sequence = np.asarray(sequence, np.int64)
  _, last_from_end = np.unique(sequence[::-1], return_index=True)
  return sequence[np.sort(len(sequence) - 1 - last_from_end)]


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
