"""MovieLens as click-through-rate examples: categorical features, labels, splits.

One example per rating, label = rating >= 4 (FedSubAvg's and MetaUA's
binarisation). Every feature is an int id with 0 reserved for padding, so a
table of vocabulary size V has rows 0..V-1 and row 0 is never a real value:
  user, movie, gender, age (ML-1M's 7 age buckets; ML-100K ages bucketed the
  same way), occupation, zip (its first `zip_prefix` characters);
  genres [G]: the movie's genres, left-aligned, 0-padded;
  history [L]: the user's last L clicked movies strictly before this example
  (chronological order; ties in timestamp broken by file order), 0-padded on
  the left, as DIN's behaviour sequence;
  gender_x_movie, age_x_movie: the crosses of FedSubAvg's MovieLens LR.
Each user is a client; a split marks test examples per user: chronological
(the last fraction of each user's examples, MetaUA) or random (a fraction of
all examples drawn with a seed, FedSubAvg). A validation part, when asked for,
is carved from the training examples by the same rule (`with_validation`).
"""

import dataclasses

import numpy as np
import pandas as pd

from tff_rec.data import movielens

SPLITS = ('chronological', 'random')
PARTS = ('train', 'validation', 'test')
# MovieLens 1M's age codes (users.dat): each is the lower end of its bucket.
AGE_BUCKETS = (1, 18, 25, 35, 45, 50, 56)
SINGLE_FIELDS = ('user', 'movie', 'gender', 'age', 'occupation', 'zip')
CROSSES = {'gender_x_movie': ('gender', 'movie'), 'age_x_movie': ('age', 'movie')}
CLICK_RATING = 4


@dataclasses.dataclass(frozen=True)
class CtrExamples:
  """Examples sorted by (client, time); `features[name]` is [n] or [n, width] int32."""
  features: dict[str, np.ndarray]
  labels: np.ndarray  # [n] float32, 1.0 = click
  clients: np.ndarray  # [n] int, index into user_ids
  is_test: np.ndarray  # [n] bool
  vocab_sizes: dict[str, int]  # per feature, including the padding id 0
  user_ids: np.ndarray  # the files' user ids, by client index
  # [n] bool, rows carved from the training side; None: no validation part
  is_validation: np.ndarray | None = None
  # Whether the data marked the test rows (a file's test column; DIN's clicks: each
  # user's last pair) rather than a split rule: they then come in units
  test_marked: bool = False

  def rows(self, part: str) -> np.ndarray:
    """Rows of one part (PARTS), grouped by client, in time order."""
    validation = (np.zeros_like(self.is_test) if self.is_validation is None
                  else self.is_validation)
    marks = {'train': ~self.is_test & ~validation, 'validation': validation,
             'test': self.is_test}
    if part not in marks:
      raise ValueError(f'unknown part {part!r}; choose one of {PARTS}')
    return np.flatnonzero(marks[part])

  def client_rows(self, part: str = 'train') -> dict[int, np.ndarray]:
    """Client index -> its rows of one part (clients with none are absent)."""
    rows = self.rows(part)
    clients, starts = np.unique(self.clients[rows], return_index=True)
    return dict(zip(clients.tolist(), np.split(rows, starts[1:])))

  def take(self, rows: np.ndarray, columns=None) -> dict[str, np.ndarray]:
    """The chosen feature columns (all by default) of `rows`."""
    return {name: self.features[name][rows] for name in (columns or self.features)}

  def with_validation(self, split: str, fraction: float, seed: int) -> 'CtrExamples':
    """These examples with a validation part taken from the training rows by the
    test part's rule (`test_rows`), so that settings are chosen without test data.

    Test rows the data marked (`test_marked`) come in units (DIN's clicks: a click
    and its sampled non-click), so each client's validation is then its last whole
    units of its test's size (ceil(fraction x training rows / that) of them, one
    left for training), never half a pair.
    """
    if not 0 < fraction < 1:
      raise ValueError(f'validation fraction must be in (0, 1), got {fraction}')
    train = self.rows('train')
    clients = self.clients[train]
    if self.test_marked:
      unit = np.maximum(np.bincount(self.clients[self.is_test], minlength=len(self.user_ids)), 1)
      counts = np.bincount(clients, minlength=len(self.user_ids))
      chosen = _last_rows(clients, np.minimum(unit * np.ceil(fraction * counts / unit),
                                              counts - unit))
    else:  # a draw of its own: the random split's test draw used `seed`
      chosen = test_rows(clients, split, fraction, [seed, 1])
    marks = np.zeros(len(self.labels), bool)
    marks[train[chosen]] = True
    return dataclasses.replace(self, is_validation=marks)


def check_ids(features: dict[str, np.ndarray], vocab_sizes: dict[str, int]) -> None:
  """Raises ValueError naming the feature when an id is outside [0, vocab size)."""
  for name, ids in features.items():
    if name not in vocab_sizes:
      raise ValueError(f'feature {name!r} has no vocabulary; known: {sorted(vocab_sizes)}')
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_sizes[name]):
      bad = ids[(ids < 0) | (ids >= vocab_sizes[name])].flat[0]
      raise ValueError(f'feature {name!r}: id {bad} is outside its vocabulary '
                       f'[0, {vocab_sizes[name]}); rebuild the examples from the '
                       'same files the vocabulary came from')


def make_examples(data: movielens.MovieLens, *, split: str = 'chronological',
                  test_fraction: float = 0.1, history_length: int = 10,
                  zip_prefix: int = 3, seed: int = 0) -> CtrExamples:
  """CTR examples of every rating in `data`, with a per-user test split."""
  if split not in SPLITS:
    raise ValueError(f'unknown split {split!r}; choose one of {SPLITS}')
  if not 0 < test_fraction < 1:
    raise ValueError(f'test_fraction must be in (0, 1), got {test_fraction}')
  if history_length < 1 or zip_prefix < 1:
    raise ValueError('history_length and zip_prefix must be >= 1, got '
                     f'{history_length} and {zip_prefix}')
  ratings = data.ratings.reset_index(drop=True)
  ratings = ratings.iloc[np.lexsort((np.arange(len(ratings)), ratings['timestamp'],
                                     ratings['user_id']))].reset_index(drop=True)
  users = data.users.set_index('user_id').loc[ratings['user_id']]
  items = data.items.set_index('item_id').loc[ratings['item_id']]
  ages = np.asarray(AGE_BUCKETS)[np.searchsorted(AGE_BUCKETS, users['age'], 'right') - 1]
  raw = {'user': ratings['user_id'], 'movie': ratings['item_id'],
         'gender': users['gender'], 'age': ages, 'occupation': users['occupation'],
         'zip': users['zip'].astype(str).str[:zip_prefix]}
  features, vocab_sizes = {}, {}
  for name, values in raw.items():
    codes, uniques = pd.factorize(np.asarray(values), sort=True)
    features[name], vocab_sizes[name] = codes.astype(np.int32) + 1, len(uniques) + 1
  for name, (a, b) in CROSSES.items():
    features[name] = ((features[a] - 1) * (vocab_sizes[b] - 1) + features[b]).astype(np.int32)
    vocab_sizes[name] = (vocab_sizes[a] - 1) * (vocab_sizes[b] - 1) + 1
  features['genres'], vocab_sizes['genres'] = _genres(items['genres'])
  labels = (ratings['rating'].to_numpy() >= CLICK_RATING).astype(np.float32)
  clients = features['user'] - 1
  features['history'] = _history(features['movie'], labels > 0, clients, history_length)
  vocab_sizes['history'] = vocab_sizes['movie']
  is_test = test_rows(clients, split, test_fraction, seed)
  user_ids = np.sort(ratings['user_id'].unique())
  return CtrExamples(features, labels, clients, is_test, vocab_sizes, user_ids)


def _genres(genres: pd.Series) -> tuple[np.ndarray, int]:
  """'|'-joined genre names -> [n, max genres] ids (1-based, 0-padded), vocab size."""
  lists = genres.fillna('').str.split('|')
  names = sorted({g for row in lists for g in row if g})
  index = {g: k + 1 for k, g in enumerate(names)}
  width = max(1, max(len(row) for row in lists))
  out = np.zeros((len(lists), width), np.int32)
  for r, row in enumerate(lists):
    ids = [index[g] for g in row if g]
    out[r, :len(ids)] = ids
  return out, len(names) + 1


def _history(movies: np.ndarray, clicked: np.ndarray, clients: np.ndarray,
             length: int) -> np.ndarray:
  """[n, length]: each row's client's last `length` clicks before it, 0-padded left.

  Rows are sorted by (client, time). Clicks of all clients are laid out in
  one array in that order; a row sees the clicks of its client whose position
  is before its own exclusive click count.
  """
  click_movies = movies[clicked]
  before = np.cumsum(clicked) - clicked  # clicks (of any client) before each row
  first_row = np.searchsorted(clients, clients)  # first row of each row's client
  client_start = before[first_row]  # its first click's position in click_movies
  seen = before - client_start  # this client's clicks before the row
  offsets = np.arange(-length, 0)
  positions = before[:, None] + offsets  # the last `length` clicks before the row
  valid = offsets[None, :] >= -seen[:, None]
  padded = np.concatenate([click_movies, [0]]).astype(np.int32)
  return np.where(valid, padded[np.where(valid, positions, len(click_movies))], 0)


def test_rows(clients: np.ndarray, split: str, fraction: float, seed) -> np.ndarray:
  """Test marks: each client's last ceil(fraction * n) rows (keeping >= 1 train
  row; `clients` sorted), or a seeded random fraction of all rows."""
  if split == 'random':
    test = np.zeros(len(clients), bool)
    test[np.random.default_rng(seed).permutation(len(clients))[:round(fraction * len(clients))]] = True
    return test
  counts = np.bincount(clients)
  return _last_rows(clients, np.minimum(np.ceil(fraction * counts), counts - 1))


def _last_rows(clients: np.ndarray, taken: np.ndarray) -> np.ndarray:
  """Marks of each client's last taken[client] rows (`clients` sorted)."""
  counts = np.bincount(clients, minlength=len(taken))
  position = np.arange(len(clients)) - np.searchsorted(clients, clients)
  return position >= (counts - taken)[clients]
