"""Per-user item lists: one line per user, `uid item item ...` (LightGCN layout).

Two layouts of the same line format are read:
* a train.txt / test.txt pair (FAIR's Goodreads-100 and AmazonProduct-100,
  0-based ids), used as given;
* one sequence file, time-ordered (e.g. Amazon Beauty's Beauty.txt, 1-based
  ids): the last `test_fraction` of each user's items become its test items,
as do an interactions file's sequences and MovieLens' ratings (each an implicit
positive). The families that read sequences (leave-one-out, next item, DIN's
clicks) read a pair as each user's train items then its test items.
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
import pathlib

import numpy as np

from tff_rec.data import interactions
from tff_rec.data import item_lists
from tff_rec.data import movielens
from tff_rec.data import tables

EXPECTED = 'one line per user: "uid item item ..." (space-separated integers)'
PAIR = ('train.txt', 'test.txt')


@dataclasses.dataclass(frozen=True)
class UserItems:
  """Train and test item lists of the same users (user k is user_ids[k])."""
  user_ids: np.ndarray  # [users] the file's uids, ascending
  train: item_lists.ItemLists
  test: item_lists.ItemLists
  num_items: int
  renumbered: bool = False  # item ids renumbered 0.. (the file's left over 90% unused)


def read_lines(path: pathlib.Path) -> item_lists.Sequences:
  """The users of one file (plain or gzip), in file order; errors name the file
  and line."""
  try:
    with tables.open_text(path) as f:
      parsed = _parse_in_bulk(f)
  except UnicodeDecodeError:
    parsed = None  # which comes first, a bad line or the bad bytes: line by line
  if parsed is not None:
    return parsed
  try:
    return _read_line_by_line(path)
  except UnicodeDecodeError as e:
    raise tables.not_text(path, e) from None


CHUNK_CHARACTERS = 1 << 24
_LARGEST = np.iinfo(np.int64).max  # where numpy's parser clips an id past int64


def _parse_in_bulk(f) -> item_lists.Sequences | None:
  """The file's lines parsed by numpy, a chunk of lines at a time (10^6 users' 13M
  ids: 2.4 s, against 8.6 s line by line, and no array a user), or None where a line needs
  the line-by-line reader: one it would refuse, which it names, or one numpy
  cannot vouch for (a field other than [+-]digits, an id past int64)."""
  counts, values, pending = [], [], ''
  while True:
    chunk = f.read(CHUNK_CHARACTERS)
    text = pending + chunk
    cut = text.rfind('\n') + 1 if chunk else len(text)
    text, pending = text[:cut], text[cut:]
    if text.strip():
      fields = _integer_fields_per_line(text)
      if fields is None:
        return None
      parsed = np.fromstring(text, np.int64, sep=' ')  # every field an integer: all read
      counts.append(fields)
      values.append(parsed)
    if not chunk:
      break
  if not counts:
    return None
  counts, values = np.concatenate(counts), np.concatenate(values)
  firsts = np.cumsum(counts) - counts
  user_ids = values[firsts]
  if (values < 0).any() or (values == _LARGEST).any() or len(np.unique(user_ids)) < len(counts):
    return None
  is_item = np.ones(len(values), bool)
  is_item[firsts] = False
  return item_lists.Sequences(user_ids,
                              item_lists.ItemLists.from_counts(counts - 1, values[is_item]))


_SPACES = np.frombuffer(b' \t\n\v\f\r', np.uint8)  # ASCII whitespace but \x1c-\x1f


def _integer_fields_per_line(text: str) -> np.ndarray | None:
  """[non-blank lines] how many whitespace-separated fields each has, or None unless
  every field is an optional sign and digits (numpy reads a lone sign as 0)."""
  if not text.isascii():
    return None
  codes = np.frombuffer(text.encode('ascii'), np.uint8)
  space = np.isin(codes, _SPACES)
  digit = (codes >= ord('0')) & (codes <= ord('9'))
  sign = (codes == ord('+')) | (codes == ord('-'))
  before = np.concatenate([[True], space[:-1]])  # a field may start here
  then_digit = np.concatenate([digit[1:], [False]])
  if not (space | digit | sign).all() or (sign & ~(before & then_digit)).any():
    return None
  starts = np.flatnonzero(~space & before)
  lines = np.bincount(np.searchsorted(np.flatnonzero(codes == ord('\n')), starts))
  return lines[lines > 0]


def _read_line_by_line(path: pathlib.Path) -> item_lists.Sequences:
  """read_lines one line at a time: what names a bad line, and what reads the
  lines the bulk parse leaves to it."""
  users = {}
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
  if not users:
    raise tables.DataFormatError(f'{path}: no users; expected {EXPECTED}')
  return item_lists.Sequences.of(users)


def single_sequence_file(data_dir: str | pathlib.Path) -> pathlib.Path | None:
  """The sequence file `data_dir` names (any file but MovieLens' own ratings
  files), or the one *.txt of a directory with no MovieLens u.data."""
  root = pathlib.Path(data_dir)
  if root.is_file():
    return None if root.name in movielens.ratings_file_names() else root
  candidates = sorted(root.glob('*.txt')) if root.is_dir() else []
  return candidates[0] if len(candidates) == 1 and not (root / 'u.data').exists() else None


def sequences(data_dir: str | pathlib.Path, columns: interactions.Columns
              ) -> item_lists.Sequences | None:
  """Item sequences: of an interactions file when its columns are declared, else
  of `data_dir`'s sequence file (time-ordered), else of its train.txt/test.txt
  pair joined, each user's train items then its test items (the pair has no time
  order: a family that holds out a user's last items holds out test.txt's); None
  when it has none of these."""
  if columns.check_interactions():
    return interactions.read(data_dir, columns)
  if is_pair(data_dir, columns):  # before the sequence file: test.txt names its pair
    user_ids, train, test = _read_pair(data_dir)
    return item_lists.Sequences(user_ids, train.then(test))
  sequence = single_sequence_file(data_dir)
  return read_lines(sequence) if sequence else None


def _read_pair(data_dir: str | pathlib.Path
               ) -> tuple[np.ndarray, item_lists.ItemLists, item_lists.ItemLists]:
  """(every user id, ascending; their train lists; their test lists) of the pair."""
  root = _pair_root(data_dir)
  tables.require_files(root, list(PAIR), dataset='user-items')
  train, test = (read_lines(root / name) for name in PAIR)
  user_ids = np.union1d(train.user_ids, test.user_ids)
  return user_ids, train.aligned(user_ids), test.aligned(user_ids)


def movielens_sequences(data_dir: str | pathlib.Path) -> item_lists.Sequences:
  """Every MovieLens rating as an interaction (implicit positives), each user's in
  time order."""
  return item_lists.Sequences.of_ratings(movielens.load(data_dir).ratings)


def split_ends(lists: item_lists.ItemLists, fraction: float
               ) -> tuple[item_lists.ItemLists, item_lists.ItemLists]:
  """Each list's last ceil(fraction * len) items (at most len - 1, none of an empty
  list) apart: (the lists without them, those items)."""
  if not 0 < fraction < 1:
    raise ValueError(f'fraction must be in (0, 1), got {fraction}')
  counts = lists.counts
  held = np.maximum(0, np.minimum(np.ceil(fraction * counts).astype(np.int64), counts - 1))
  kept = lists.positions < np.repeat(counts - held, counts)
  return (item_lists.ItemLists.from_counts(counts - held, lists.items[kept]),
          item_lists.ItemLists.from_counts(held, lists.items[~kept]))


def _pair_root(data_dir: str | pathlib.Path) -> pathlib.Path:
  """The folder of `data_dir`'s train.txt/test.txt pair: it, or the folder of
  either file of the pair."""
  root = pathlib.Path(data_dir)
  return root.parent if root.is_file() and root.name in PAIR else root


def is_pair(data_dir: str | pathlib.Path, columns: interactions.Columns) -> bool:
  """Whether `load` reads `data_dir` as a train.txt/test.txt pair (split already)."""
  return (_pair_root(data_dir) / PAIR[0]).is_file() and not columns.check_interactions()


def load(data_dir: str | pathlib.Path, *, test_fraction: float = 0.3,
         columns: interactions.Columns = interactions.Columns()) -> UserItems:
  """The train.txt/test.txt pair of `data_dir` (the folder, or either file of
  the pair), or its sequence file (the file, or the folder's one *.txt) or
  interactions file (`columns` declared) split."""
  if not 0 < test_fraction < 1:
    raise ValueError(f'test_fraction must be in (0, 1), got {test_fraction}')
  root = _pair_root(data_dir)
  if is_pair(data_dir, columns):
    user_ids, train_lists, test_lists = _read_pair(data_dir)
  else:
    ordered = sequences(data_dir, columns)
    if ordered is None and movielens.holds_ratings(data_dir):
      ordered = movielens_sequences(data_dir)  # its errors name its file and line
    if ordered is None:
      found = ([c.name for c in sorted(root.glob('*.txt'))] if root.is_dir() else
               'a file' if root.exists() else 'no such file or directory')
      raise tables.DataFormatError(
          f'{root}: expected train.txt and test.txt, or one sequence file (the file '
          f'itself, or a folder with exactly one *.txt; found {found}); each with '
          f'{EXPECTED}; or a MovieLens folder (u.data or ratings.dat).')
    ordered = ordered.in_id_order()
    user_ids = ordered.user_ids
    train_lists, test_lists = split_ends(ordered.lists, test_fraction)
  items = np.unique(np.concatenate([train_lists.items, test_lists.items]))
  renumbered = 10 * len(items) < 1 + int(items[-1])  # over 90% of 0..max unused
  if renumbered:
    train_lists, test_lists = (
        item_lists.ItemLists(lists.offsets, np.searchsorted(items, lists.items))
        for lists in (train_lists, test_lists))
  return UserItems(user_ids, train_lists, test_lists,
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
                             train=data.train.take(kept), test=data.test.take(kept))


def validation_split(data: UserItems, fraction: float) -> UserItems:
  """The train lists split again: their last `fraction` (as load splits a
  sequence file) becomes the held-out part, and the test items are dropped."""
  train, held = split_ends(data.train, fraction)
  return dataclasses.replace(data, train=train, test=held)
