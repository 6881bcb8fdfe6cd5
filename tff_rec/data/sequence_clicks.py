"""Click rows from time-ordered interaction sequences, in DIN's Amazon form.

DIN (Zhou et al. 2018) builds its Amazon CTR data from reviews alone: each
user's items i_1..i_n, in time order, give for k = 2..n a click on i_k and a
non-click on an item the user never interacted with, drawn uniformly from the
catalogue (the items of all sequences), both with the user's earlier items as
the behaviour history. The last pair (k = n) is the user's test pair. Clicks
are real interactions; non-clicks are sampled, so the click rate is 0.5 by
construction.

The rows are a CTR file's (tff_rec.data.ctr_file): columns user, item,
history (the last `history_length` earlier items, oldest first, joined by
','), label and test (1 marks the test pair).
"""

import dataclasses

import numpy as np
import pandas as pd

from tff_rec.data import ctr
from tff_rec.data import ctr_file
from tff_rec.data import implicit
from tff_rec.data import item_lists
from tff_rec.data import tables

COLUMNS = ('user', 'item', 'history', 'label', 'test')
# How tff_rec.data.ctr_file reads these rows.
CTR_COLUMNS = ctr_file.Columns(label='label', client='user', features=('user', 'item'),
                               list_features=('history',), test='test')


@dataclasses.dataclass(frozen=True)
class _Clicks:
  """DIN's rows as numbers: row r is users[r]'s click (labels[r] 1) or non-click on
  items[r], with sequences.lists.items[begin[r]:end[r]] as its history."""
  users: np.ndarray
  items: np.ndarray
  begin: np.ndarray
  end: np.ndarray
  labels: np.ndarray
  tests: np.ndarray


def _clicks(sequences: item_lists.Sequences, history_length: int, seed: int) -> _Clicks:
  """A click and a sampled non-click per interaction after each user's first."""
  if history_length < 1:
    raise ValueError(f'history_length must be >= 1, got {history_length}')
  catalogue = np.unique(sequences.lists.items)
  if not (sequences.lists.counts >= 2).any():
    raise tables.DataFormatError('no user has two interactions: no click has a history')
  rng = np.random.default_rng(seed)
  users, items, begin, end, tests = [], [], [], [], []
  for (user, sequence), offset in zip(sequences.per_user(), sequences.lists.offsets):
    n = len(sequence)
    if n < 2:
      continue  # no interaction with an earlier one
    seen = np.searchsorted(catalogue, sequence)
    if len(np.unique(seen)) == len(catalogue):
      raise tables.DataFormatError(f'user {user} has every item of the catalogue: there is '
                                   'no unseen item to sample as a non-click')
    negatives = catalogue[implicit.unseen_items(seen, n - 1, len(catalogue), rng)]
    ks = np.arange(1, n)
    users.append(np.full(2 * (n - 1), user))
    items.append(np.stack([sequence[1:], negatives], axis=1).reshape(-1))
    begin.append(np.repeat(offset + np.maximum(0, ks - history_length), 2))
    end.append(np.repeat(offset + ks, 2))
    tests.append(np.repeat(ks == n - 1, 2).astype(np.int64))
  users, items, begin, end, tests = (np.concatenate(part)
                                     for part in (users, items, begin, end, tests))
  labels = np.tile(np.array([1, 0], np.int64), len(users) // 2)
  return _Clicks(users, items, begin, end, labels, tests)


def din_rows(sequences: item_lists.Sequences, *, history_length: int = 10,
             seed: int = 0) -> pd.DataFrame:
  """A click and a sampled non-click per interaction after each user's first."""
  clicks = _clicks(sequences, history_length, seed)
  # Each history is a slice of every item joined once (a join per row took most of
  # the time on 10^6 rows): item j spans text[first[j]:last[j]].
  texts = sequences.lists.items.astype(str)
  text, lengths = ','.join(texts), np.char.str_len(texts)
  last = np.cumsum(lengths + 1) - 1
  first = last - lengths
  histories = [text[a:b] for a, b in zip(first[clicks.begin].tolist(),
                                         last[clicks.end - 1].tolist())]
  return pd.DataFrame(dict(zip(COLUMNS, (clicks.users, clicks.items, histories,
                                         clicks.labels, clicks.tests))))


def din_examples(sequences: item_lists.Sequences, *, history_length: int = 10, seed: int = 0,
                 shared_vocabularies: tuple[tuple[str, ...], ...] = ()) -> ctr.CtrExamples:
  """The examples ctr_file reads from din_rows' rows (CTR_COLUMNS, with these
  shared vocabularies): the same rows, order, ids and vocabularies, made from the
  numbers. Through the rows' strings it took 9 of Goodreads-100's 12 s."""
  columns = dataclasses.replace(CTR_COLUMNS, shared_vocabularies=shared_vocabularies)
  clicks = _clicks(sequences, history_length, seed)
  # users and items as indices of one catalogue: a shared vocabulary is the union
  # of its columns' strings
  catalogue = np.unique(np.concatenate([sequences.user_ids, sequences.lists.items]))
  users = np.searchsorted(catalogue, clicks.users)
  user_ids, (client_ids,) = _ids_as_read([users], catalogue)
  order = np.argsort(client_ids, kind='stable')  # by client, as ctr_file sorts its rows
  begin, end = clicks.begin[order], clicks.end[order]
  lengths = end - begin
  starts = np.cumsum(lengths) - lengths
  places = np.arange(lengths.sum()) - np.repeat(starts, lengths)
  in_catalogue = np.searchsorted(catalogue, sequences.lists.items)
  values = {'user': users[order],
            'item': np.searchsorted(catalogue, clicks.items[order]),
            'history': in_catalogue[np.repeat(begin, lengths) + places]}
  ids, vocab_sizes = {}, {}
  for group in columns.vocabulary_groups():
    vocabulary, group_ids = _ids_as_read([values[c] for c in group], catalogue)
    ids.update(zip(group, group_ids))
    vocab_sizes.update(dict.fromkeys(group, len(vocabulary) + 1))
  histories = np.zeros((len(order), max(1, lengths.max())), np.int32)  # left-aligned
  histories[np.repeat(np.arange(len(order)), lengths), places] = ids['history']
  return ctr.CtrExamples(
      {'user': ids['user'], 'item': ids['item'], 'history': histories},
      (clicks.labels[order] > 0).astype(np.float32), client_ids[order].astype(np.int64) - 1,
      clicks.tests[order] > 0, vocab_sizes, user_ids, test_marked=True)


def _ids_as_read(columns: list[np.ndarray], catalogue: np.ndarray
                 ) -> tuple[np.ndarray, list[np.ndarray]]:
  """(their vocabulary, each column's 1-based ids in it) of columns of integers
  catalogue[indices] as ctr_file reads them from a file: their decimal strings,
  sorted as strings. (Marks, not np.unique: sorting 10^7 history items took 7 s.)"""
  present = np.zeros(len(catalogue), bool)
  for indices in columns:
    present[indices] = True
  distinct = np.flatnonzero(present)
  texts = catalogue[distinct].astype(str).astype(object)
  order = np.argsort(texts, kind='stable')
  ids = np.zeros(len(catalogue), np.int32)
  ids[distinct[order]] = np.arange(1, len(order) + 1)
  return texts[order], [ids[indices] for indices in columns]
