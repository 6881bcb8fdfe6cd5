"""Per-user item lists: one line per user, `uid item item ...` (LightGCN layout).

Two layouts of the same line format are read:
* a train.txt / test.txt pair (FAIR's Goodreads-100 and AmazonProduct-100,
  0-based ids), used as given;
* one sequence file, time-ordered (e.g. Amazon Beauty's Beauty.txt, 1-based
  ids): the last `test_fraction` of each user's items become its test items.
Item ids are used as they are: the catalogue is 0..max id (an unused id 0 of
a 1-based file is one never-seen item, harmless for ranking), unless the file's
ids leave over 90% of 0..max id unused (e.g. database keys from 10^6): then they are
renumbered 0.. in id order, so evaluation does not rank a catalogue of items
nobody has.

Two views of loaded data: the heaviest users only (how FAIR's paper cut its
-100 datasets), and a validation split that holds out the end of each train
list and drops the test items, for choosing settings without touching test.
"""

import dataclasses
import math
import pathlib

import numpy as np

from tff_rec.data import interactions
from tff_rec.data import movielens
from tff_rec.data import tables

EXPECTED = 'one line per user: "uid item item ..." (space-separated integers)'
PAIR = ('train.txt', 'test.txt')


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

  @classmethod
  def from_lists(cls, lists: list[np.ndarray]) -> 'ItemLists':
    offsets = np.zeros(len(lists) + 1, np.int64)
    offsets[1:] = np.cumsum([len(l) for l in lists])
    items = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, np.int64)
    return cls(offsets, items)


@dataclasses.dataclass(frozen=True)
class UserItems:
  """Train and test item lists of the same users (user k is user_ids[k])."""
  user_ids: np.ndarray  # [users] the file's uids, ascending
  train: ItemLists
  test: ItemLists
  num_items: int
  renumbered: bool = False  # item ids renumbered 0.. (the file's left over 90% unused)


def read_lines(path: pathlib.Path) -> dict[int, np.ndarray]:
  """uid -> items of one file (plain or gzip), in file order; errors name the file
  and line."""
  users = {}
  try:
    with tables.open_text(path) as f:
      for number, line in enumerate(f, 1):
        fields = line.split()
        if not fields:
          continue
        try:
          values = np.array([int(v) for v in fields], np.int64)
        except ValueError:
          raise tables.DataFormatError(
              f'{path}:{number}: non-integer field; expected {EXPECTED} (a CSV / TSV of '
              'interactions: declare its user_column and item_column)') from None
        except OverflowError:
          raise tables.DataFormatError(
              f'{path}:{number}: an id past 2^63 - 1; expected {EXPECTED} (for other ids, '
              'an interactions file with declared columns numbers them)') from None
        if (values < 0).any():
          raise tables.DataFormatError(f'{path}:{number}: negative id; expected {EXPECTED}')
        if values[0] in users:
          raise tables.DataFormatError(
              f'{path}:{number}: user {values[0]} appears twice; for a file of one '
              'interaction a line (e.g. `user item`), declare its columns (columns=user,item, '
              'user_column=user, item_column=item)')
        users[int(values[0])] = values[1:]
  except UnicodeDecodeError as e:
    raise tables.not_text(path, e) from None
  if not users:
    raise tables.DataFormatError(f'{path}: no users; expected {EXPECTED}')
  return users


def single_sequence_file(data_dir: str | pathlib.Path) -> pathlib.Path | None:
  """The sequence file `data_dir` names (any file but MovieLens' own ratings
  files), or the one *.txt of a directory with no MovieLens u.data."""
  root = pathlib.Path(data_dir)
  if root.is_file():
    return None if root.name in movielens.ratings_file_names() else root
  candidates = sorted(root.glob('*.txt')) if root.is_dir() else []
  return candidates[0] if len(candidates) == 1 and not (root / 'u.data').exists() else None


def sequences(data_dir: str | pathlib.Path, columns: interactions.Columns
              ) -> dict[int, np.ndarray] | None:
  """Time-ordered item sequences: of an interactions file when its columns are
  declared, else of `data_dir`'s sequence file; None when it has neither."""
  if columns.declared:
    return interactions.read(data_dir, columns)
  sequence = single_sequence_file(data_dir)
  return read_lines(sequence) if sequence else None


def split_sequences(sequences: dict[int, np.ndarray], test_fraction: float
                    ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
  """Each user's last ceil(fraction * len) items (at most len - 1, none of an empty
  list) go to test."""
  train, test = {}, {}
  for uid, items in sequences.items():
    held = max(0, min(math.ceil(test_fraction * len(items)), len(items) - 1))
    train[uid], test[uid] = items[:len(items) - held], items[len(items) - held:]
  return train, test


def load(data_dir: str | pathlib.Path, *, test_fraction: float = 0.3,
         columns: interactions.Columns = interactions.Columns()) -> UserItems:
  """The train.txt/test.txt pair of `data_dir` (the folder, or either file of
  the pair), or its sequence file (the file, or the folder's one *.txt) or
  interactions file (`columns` declared) split."""
  if not 0 < test_fraction < 1:
    raise ValueError(f'test_fraction must be in (0, 1), got {test_fraction}')
  root = pathlib.Path(data_dir)
  if root.is_file() and root.name in PAIR:
    root = root.parent
  if (root / PAIR[0]).is_file() and not columns.declared:
    tables.require_files(root, list(PAIR), dataset='user-items')
    train, test = (read_lines(root / name) for name in PAIR)
  else:
    ordered = sequences(data_dir, columns)
    if ordered is None:
      found = ([c.name for c in sorted(root.glob('*.txt'))] if root.is_dir() else
               'a file' if root.exists() else 'no such file or directory')
      raise tables.DataFormatError(
          f'{root}: expected train.txt and test.txt, or one sequence file (the file '
          f'itself, or a folder with exactly one *.txt; found {found}); each with '
          f'{EXPECTED}.')
    train, test = split_sequences(ordered, test_fraction)
  user_ids = np.array(sorted(set(train) | set(test)), np.int64)
  empty = np.zeros(0, np.int64)
  train_lists = [train.get(int(u), empty) for u in user_ids]
  test_lists = [test.get(int(u), empty) for u in user_ids]
  items = np.unique(np.concatenate(train_lists + test_lists))
  renumbered = 10 * len(items) < 1 + int(items[-1])  # over 90% of 0..max unused
  if renumbered:
    train_lists, test_lists = ([np.searchsorted(items, l) for l in lists]
                               for lists in (train_lists, test_lists))
  return UserItems(user_ids, ItemLists.from_lists(train_lists),
                   ItemLists.from_lists(test_lists),
                   len(items) if renumbered else 1 + int(items[-1]), renumbered)


def heaviest(data: UserItems, count: int) -> UserItems:
  """The `count` users with the most (train + test) items, ties to the lower uid;
  item ids and the catalogue stay as they are."""
  if not 1 <= count <= len(data.user_ids):
    raise ValueError(f'cannot keep the {count} heaviest users: there are '
                     f'{len(data.user_ids)} (keep 1 to {len(data.user_ids)})')
  totals = data.train.counts + data.test.counts
  kept = np.sort(np.argsort(-totals, kind='stable')[:count])
  return dataclasses.replace(data, user_ids=data.user_ids[kept],
                             train=_subset(data.train, kept), test=_subset(data.test, kept))


def validation_split(data: UserItems, fraction: float) -> UserItems:
  """The train lists split again: their last `fraction` (as split_sequences)
  becomes the held-out part, and the test items are dropped."""
  train, held = split_sequences({k: data.train.of(k) for k in range(len(data.user_ids))},
                                fraction)
  return dataclasses.replace(data, train=ItemLists.from_lists(list(train.values())),
                             test=ItemLists.from_lists(list(held.values())))


def _subset(lists: ItemLists, users: np.ndarray) -> ItemLists:
  return ItemLists.from_lists([lists.of(k) for k in users])
