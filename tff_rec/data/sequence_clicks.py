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

import numpy as np
import pandas as pd

from tff_rec.data import ctr_file
from tff_rec.data import implicit
from tff_rec.data import item_lists
from tff_rec.data import tables

COLUMNS = ('user', 'item', 'history', 'label', 'test')
# How tff_rec.data.ctr_file reads these rows.
CTR_COLUMNS = ctr_file.Columns(label='label', client='user', features=('user', 'item'),
                               list_features=('history',), test='test')


def din_rows(sequences: item_lists.Sequences, *, history_length: int = 10,
             seed: int = 0) -> pd.DataFrame:
  """A click and a sampled non-click per interaction after each user's first."""
  if history_length < 1:
    raise ValueError(f'history_length must be >= 1, got {history_length}')
  catalogue = np.unique(sequences.lists.items)
  if not (sequences.lists.counts >= 2).any():
    raise tables.DataFormatError('no user has two interactions: no click has a history')
  rng = np.random.default_rng(seed)
  users, items, histories, tests = [], [], [], []
  for user, sequence in sequences.per_user():
    n = len(sequence)
    if n < 2:
      continue  # no interaction with an earlier one
    seen = np.searchsorted(catalogue, sequence)
    if len(np.unique(seen)) == len(catalogue):
      raise tables.DataFormatError(f'user {user} has every item of the catalogue: there is '
                                   'no unseen item to sample as a non-click')
    negatives = catalogue[implicit.unseen_items(seen, n - 1, len(catalogue), rng)]
    # Each history is a slice of the user's items joined once (a join per row took
    # most of the time on 10^6 rows): item j spans text[begin[j]:end[j]].
    text = ','.join(map(str, sequence))
    end = np.cumsum([len(str(item)) + 1 for item in sequence]) - 1
    begin = end - [len(str(item)) for item in sequence]
    ks = np.arange(1, n)
    for first, last in zip(begin[np.maximum(0, ks - history_length)].tolist(),
                           end[ks - 1].tolist()):
      histories += [text[first:last]] * 2  # the click's and the non-click's
    users.append(np.full(2 * (n - 1), user))
    items.append(np.stack([sequence[1:], negatives], axis=1).reshape(-1))
    tests.append(np.repeat(ks == n - 1, 2).astype(np.int64))
  users, items, tests = (np.concatenate(part) for part in (users, items, tests))
  labels = np.tile(np.array([1, 0], np.int64), len(users) // 2)
  return pd.DataFrame(dict(zip(COLUMNS, (users, items, histories, labels, tests))))
