"""MovieLens 100K and 1M: readers for the official files and their download.

Both versions are returned in one normalised shape, `MovieLens`:
  ratings: user_id, item_id, rating, timestamp (int64, the files' own ids)
  users:   user_id, age, gender, occupation, zip (occupation as a string)
  items:   item_id, title, genres ('|'-joined genre names, MovieLens 1M style)
"""

import dataclasses
import pathlib

import numpy as np
import pandas as pd

from tff_rec.data import archives
from tff_rec.data import tables

ML_100K_FILES = ('u.data', 'u.user', 'u.item')
ML_1M_FILES = ('ratings.dat', 'users.dat', 'movies.dat')

# Official GroupLens archives; checksums as published in TensorFlow Datasets'
# url_checksums/movielens.txt.
ARCHIVES = {
    'ml-100k': archives.Archive(
        url='https://files.grouplens.org/datasets/movielens/ml-100k.zip',
        sha256='50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229',
        folder='ml-100k'),
    'ml-1m': archives.Archive(
        url='https://files.grouplens.org/datasets/movielens/ml-1m.zip',
        sha256='a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20',
        folder='ml-1m'),
}

# u.item's 19 genre flags, in file order (u.genre).
ML_100K_GENRES = (
    'unknown', 'Action', 'Adventure', 'Animation', "Children's", 'Comedy',
    'Crime', 'Documentary', 'Drama', 'Fantasy', 'Film-Noir', 'Horror',
    'Musical', 'Mystery', 'Romance', 'Sci-Fi', 'Thriller', 'War', 'Western')


@dataclasses.dataclass(frozen=True)
class MovieLens:
  ratings: pd.DataFrame
  users: pd.DataFrame
  items: pd.DataFrame


def download(name: str, cache_dir: str | pathlib.Path, *,
             archive: archives.Archive | None = None) -> pathlib.Path:
  """Downloads and extracts an official archive ('ml-100k' or 'ml-1m').

  Returns the extracted directory, ready for `load`. `archive` overrides the
  official URL and checksum (a mirror, or a local file:// archive).
  """
  if archive is None:
    if name not in ARCHIVES:
      raise ValueError(f'unknown MovieLens archive {name!r}; choose one of '
                       f'{sorted(ARCHIVES)}')
    archive = ARCHIVES[name]
  return archives.fetch(archive, cache_dir)


def load(data_dir: str | pathlib.Path) -> MovieLens:
  """Reads MovieLens 100K or 1M from `data_dir`, whichever files it holds."""
  root = pathlib.Path(data_dir)
  if (root / 'u.data').is_file():
    return _load_100k(root)
  if (root / 'ratings.dat').is_file():
    return _load_1m(root)
  if not root.is_dir():
    raise tables.DataFormatError(f'{root}: no such directory; expected a '
                                 'MovieLens 100K or 1M directory')
  raise tables.DataFormatError(
      f'{root}: not a MovieLens directory; expected {", ".join(ML_100K_FILES)} '
      f'(100K) or {", ".join(ML_1M_FILES)} (1M)')


def _load_100k(root: pathlib.Path) -> MovieLens:
  tables.require_files(root, ML_100K_FILES, dataset='MovieLens 100K')
  ratings = tables.read_table(
      root / 'u.data', sep='\t',
      columns=('user_id', 'item_id', 'rating', 'timestamp'),
      int_columns=('user_id', 'item_id', 'rating', 'timestamp'),
      expected='user id \\t item id \\t rating \\t timestamp')
  users = tables.read_table(
      root / 'u.user', sep='|',
      columns=('user_id', 'age', 'gender', 'occupation', 'zip'),
      int_columns=('user_id', 'age'),
      expected='user id | age | gender | occupation | zip code')
  items = tables.read_table(
      root / 'u.item', sep='|', encoding='latin-1',
      columns=('item_id', 'title', 'release_date', 'video_release_date', 'url')
      + ML_100K_GENRES,
      int_columns=('item_id',) + ML_100K_GENRES,
      expected='movie id | title | release date | video release date | url | '
      '19 genre flags (0/1)')
  flags = items[list(ML_100K_GENRES)].to_numpy(dtype=bool)
  names = np.array(ML_100K_GENRES, dtype=object)
  genres = ['|'.join(names[row]) for row in flags]
  items = items[['item_id', 'title']].assign(genres=genres)
  return _checked(MovieLens(ratings, users, items), root / 'u.data')


def _load_1m(root: pathlib.Path) -> MovieLens:
  tables.require_files(root, ML_1M_FILES, dataset='MovieLens 1M')
  ratings = tables.read_table(
      root / 'ratings.dat', sep='::',
      columns=('user_id', 'item_id', 'rating', 'timestamp'),
      int_columns=('user_id', 'item_id', 'rating', 'timestamp'),
      expected='UserID::MovieID::Rating::Timestamp')
  users = tables.read_table(
      root / 'users.dat', sep='::',
      columns=('user_id', 'gender', 'age', 'occupation', 'zip'),
      int_columns=('user_id', 'age'),
      expected='UserID::Gender::Age::Occupation::Zip-code')
  items = tables.read_table(
      root / 'movies.dat', sep='::', encoding='latin-1',
      columns=('item_id', 'title', 'genres'), int_columns=('item_id',),
      expected='MovieID::Title::Genres')
  users = users[['user_id', 'age', 'gender', 'occupation', 'zip']]
  return _checked(MovieLens(ratings, users, items), root / 'ratings.dat')


def _checked(data: MovieLens, ratings_path: pathlib.Path) -> MovieLens:
  """Checks that every rating refers to a known user and item."""
  for column, table in (('user_id', data.users), ('item_id', data.items)):
    unknown = ~data.ratings[column].isin(table[column])
    if unknown.any():
      line = int(np.argmax(unknown.to_numpy())) + 1
      raise tables.DataFormatError(
          f'{ratings_path}, line {line}: {column} '
          f'{data.ratings[column].iloc[line - 1]} is not in the '
          f'{"users" if column == "user_id" else "items"} file')
  return data
