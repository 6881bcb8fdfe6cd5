"""Users' item lists in one CSR over every user (offsets into one items array),
not an array a user: a million users' small arrays held as much again in Python
objects, and once freed stayed resident (glibc keeps them), so a population's
reading peaked at twice what it kept."""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class ItemLists:
  """Users' item lists in CSR form: user k's items are items[offsets[k]:offsets[k+1]]."""
  offsets: np.ndarray  # [users + 1] int64
  items: np.ndarray    # [interactions] int64

  def of(self, user: int) -> np.ndarray:
    return self.items[self.offsets[user]:self.offsets[user + 1]]

  @property
  def counts(self) -> np.ndarray:
    return np.diff(self.offsets)

  @property
  def rows(self) -> np.ndarray:
    """[interactions] the user of each item."""
    return np.repeat(np.arange(len(self.offsets) - 1), self.counts)

  @property
  def positions(self) -> np.ndarray:
    """[interactions] each item's place in its user's list."""
    return np.arange(len(self.items)) - np.repeat(self.offsets[:-1], self.counts)

  def take(self, users: np.ndarray) -> 'ItemLists':
    """The lists of `users` (indices), in that order."""
    users = np.asarray(users, np.int64)
    counts = self.counts[users]
    if (np.diff(users) > 0).all():  # a subset in order: chosen by a mask over the users
      chosen = np.zeros(len(self.counts), bool)
      chosen[users] = True
      return ItemLists.from_counts(counts, self.items[np.repeat(chosen, self.counts)])
    taken = ItemLists.from_counts(counts, np.zeros(0, np.int64))
    index = np.arange(taken.offsets[-1])
    index += np.repeat(self.offsets[users] - taken.offsets[:-1], counts)
    return ItemLists(taken.offsets, self.items[index])

  @classmethod
  def from_counts(cls, counts: np.ndarray, items: np.ndarray) -> 'ItemLists':
    """The lists of `counts[k]` items each, one after another in `items`."""
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return cls(offsets, np.asarray(items, np.int64))

  @classmethod
  def from_lists(cls, lists: list[np.ndarray]) -> 'ItemLists':
    items = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    return cls.from_counts([len(l) for l in lists], items)

  def then(self, other: 'ItemLists') -> 'ItemLists':
    """Each user's list followed by its list in `other` (of the same users)."""
    rows = np.concatenate([self.rows, other.rows])
    items = np.concatenate([self.items, other.items])[np.argsort(rows, kind='stable')]
    return ItemLists.from_counts(self.counts + other.counts, items)


@dataclasses.dataclass(frozen=True)
class Sequences:
  """Users' item lists as a file gives them: user_ids[k]'s are lists.of(k), in the
  file's order."""
  user_ids: np.ndarray  # [users] int64, distinct
  lists: ItemLists

  @classmethod
  def of(cls, lists: dict[int, np.ndarray]) -> 'Sequences':
    """uid -> items, in the dict's order."""
    return cls(np.array(list(lists), np.int64),
               ItemLists.from_lists([np.asarray(l, np.int64) for l in lists.values()]))

  @classmethod
  def in_time_order(cls, users: np.ndarray, items: np.ndarray, times: np.ndarray
                    ) -> 'Sequences':
    """Interactions (user, item, time) as each user's items in time order (ties in
    the order given), users ascending."""
    if not len(users):
      return cls(np.zeros(0, np.int64), ItemLists.from_counts([], []))
    order = np.lexsort((times, users))  # stable
    users, items = users[order], items[order]
    starts = np.flatnonzero(np.diff(users, prepend=users[0] - 1))
    return cls(users[starts].astype(np.int64, copy=False), ItemLists(
        np.append(starts, len(users)).astype(np.int64, copy=False),
        items.astype(np.int64, copy=False)))

  @classmethod
  def of_ratings(cls, ratings) -> 'Sequences':
    """A (user_id, item_id, timestamp) table's rows as in_time_order's sequences."""
    return cls.in_time_order(
        *(ratings[c].to_numpy(np.int64) for c in ('user_id', 'item_id', 'timestamp')))

  def __len__(self) -> int:
    return len(self.user_ids)

  def per_user(self):
    """(uid, its items) of every user, in order."""
    for k, uid in enumerate(self.user_ids):
      yield int(uid), self.lists.of(k)

  def in_id_order(self) -> 'Sequences':
    order = np.argsort(self.user_ids, kind='stable')
    if (order == np.arange(len(order))).all():
      return self
    return Sequences(self.user_ids[order], self.lists.take(order))

  def aligned(self, user_ids: np.ndarray) -> ItemLists:
    """The lists of `user_ids` (ascending, every id of ours among them), empty for
    the ids we do not have."""
    places = np.searchsorted(user_ids, self.user_ids)
    counts = np.zeros(len(user_ids), np.int64)
    counts[places] = self.lists.counts
    return ItemLists.from_counts(counts, self.lists.take(np.argsort(places)).items)
