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


@dataclasses.dataclass(frozen=True)
class _File:
  """How to read one MovieLens file."""
  name: str
  sep: str
  columns: tuple[str, ...]
  int_columns: tuple[str, ...]
  expected: str
  encoding: str = 'utf-8'


_RATING_COLUMNS = ('user_id', 'item_id', 'rating', 'timestamp')

# (ratings, users, items) files of each version.
_FORMATS = {
    'MovieLens 100K': (
        _File('u.data', '\t', _RATING_COLUMNS, _RATING_COLUMNS,
              'user id \\t item id \\t rating \\t timestamp'),
        _File('u.user', '|', ('user_id', 'age', 'gender', 'occupation', 'zip'),
              ('user_id', 'age'), 'user id | age | gender | occupation | zip code'),
        _File('u.item', '|', ('item_id', 'title', 'release_date',
                              'video_release_date', 'url') + ML_100K_GENRES,
              ('item_id',) + ML_100K_GENRES,
              'movie id | title | release date | video release date | url | '
              '19 genre flags (0/1)', encoding='latin-1'),
    ),
    'MovieLens 1M': (
        _File('ratings.dat', '::', _RATING_COLUMNS, _RATING_COLUMNS,
              'UserID::MovieID::Rating::Timestamp'),
        _File('users.dat', '::', ('user_id', 'gender', 'age', 'occupation', 'zip'),
              ('user_id', 'age'), 'UserID::Gender::Age::Occupation::Zip-code'),
        _File('movies.dat', '::', ('item_id', 'title', 'genres'), ('item_id',),
              'MovieID::Title::Genres', encoding='latin-1'),
    ),
}


def ratings_file_names() -> tuple[str, ...]:
  """The ratings file of each MovieLens release (u.data, ratings.dat)."""
  return tuple(files[0].name for files in _FORMATS.values())


def holds_ratings(data_dir: str | pathlib.Path) -> bool:
  """Whether `data_dir` is a MovieLens ratings file or a folder holding one."""
  root = pathlib.Path(data_dir)
  return (root.name in ratings_file_names() if root.is_file()
          else any((root / name).is_file() for name in ratings_file_names()))


def load(data_dir: str | pathlib.Path) -> MovieLens:
  """Reads MovieLens 100K or 1M from `data_dir` (the folder, or its ratings
  file), whichever files it holds."""
  root = pathlib.Path(data_dir)
  if root.is_file() and root.name in ratings_file_names():
    root = root.parent
  for dataset, files in _FORMATS.items():
    if (root / files[0].name).is_file():
      return _load(root, dataset, files)
  if root.is_file():
    raise tables.DataFormatError(f'{root}: a file, not MovieLens; expected a MovieLens '
                                 f'100K or 1M directory or its {" or ".join(ratings_file_names())}')
  if not root.is_dir():
    raise tables.DataFormatError(f'{root}: no such file or directory; expected a '
                                 'MovieLens 100K or 1M directory')
  raise tables.DataFormatError(
      f'{root}: not a MovieLens directory; expected ' + ' or '.join(
          f'{", ".join(f.name for f in files)} ({dataset})'
          for dataset, files in _FORMATS.items()))


def _load(root: pathlib.Path, dataset: str, files: tuple[_File, ...]) -> MovieLens:
  tables.require_files(root, [f.name for f in files], dataset=dataset)
  ratings, users, items = (
      tables.read_table(root / f.name, sep=f.sep, columns=f.columns,
                        int_columns=f.int_columns, expected=f.expected,
                        encoding=f.encoding) for f in files)
  if 'genres' not in items:  # 100K: genre flags -> '|'-joined names, as in 1M
    flags = items[list(ML_100K_GENRES)].to_numpy(dtype=bool)
    names = np.array(ML_100K_GENRES, dtype=object)
    items = items.assign(genres=['|'.join(names[row]) for row in flags])
  data = MovieLens(ratings, users[['user_id', 'age', 'gender', 'occupation', 'zip']],
                   items[['item_id', 'title', 'genres']])
  return _checked(data, root / files[0].name)


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
