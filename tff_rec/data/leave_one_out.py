"""Leave-one-out implicit feedback (NCF's protocol, as CoLR uses it).

Every interaction is a positive. Each user's interactions are ordered by time;
the latest is held out for test, the one before for validation, the rest are
training positives. Evaluation ranks a held-out item among `num_candidates`
items the user never interacted with, drawn once with a seed (without
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


@dataclasses.dataclass(frozen=True)
class LeaveOneOut:
  """Users' training positives and held-out items (user k is user_ids[k])."""
  user_ids: np.ndarray          # [users] the dataset's user ids
  item_ids: np.ndarray          # [items] the dataset's id of each item index
  train: user_items.ItemLists   # training positives, oldest first
  held_out: dict[str, np.ndarray]    # 'validation' / 'test' -> [users] item index
  negatives: dict[str, np.ndarray]   # 'validation' / 'test' -> [users, C] item indices
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
  rng = np.random.default_rng(seed)
  # int32, written in place: at 10^6 users the two parts' 198 items a user are most
  # of the split's memory, and a list of per-user arrays stacked held three times it.
  negatives = {}
  for part in ('validation', 'test'):
    negatives[part] = np.empty((len(dense), num_negatives), np.int32)
    for row, s in zip(negatives[part], dense):
      row[:] = _unseen(s, len(item_ids), num_negatives, rng)
  return LeaveOneOut(
      user_ids=np.asarray(user_ids)[kept], item_ids=item_ids,
      train=user_items.ItemLists.from_lists([s[:-2] for s in dense]),
      held_out={'validation': np.array([s[-2] for s in dense]),
                'test': np.array([s[-1] for s in dense])},
      negatives=negatives, skipped_users=len(sequences) - len(kept))


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
