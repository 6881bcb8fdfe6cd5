"""Interactions from a user's own CSV / TSV export with declared columns, read as
the time-ordered item sequences a sequence file gives (user_items.read_lines),
so they feed the ranking and next-item tasks exactly as one does.

The file (plain or gzip-compressed UTF-8) has a header, or its fields are named
by `columns` (MovieLens' u.data: user, item, rating, time). Fields are split on
'::' when the first line has it (MovieLens 1M's ratings.dat), else on tabs when
it has one, else on commas when it has one, else on spaces (a `user item` pairs
file). A user's items are ordered by the time column (numbers, or dates of one
format), ties and files without one in file order. With `min_rating`, only
interactions rated at least that are kept (implicit positives). Integer ids
(digits, at most 18, no leading zero) are kept as they are (a sequence file's,
MovieLens'); others (e.g. Amazon's 'A2SUAM1J3GNN3B', '007', ids past int64) are
numbered 1.. in order of first appearance. An empty id is refused.
"""

import dataclasses
import pathlib
import warnings

import numpy as np
import pandas as pd

from tff_rec import settings
from tff_rec.data import item_lists
from tff_rec.data import tables

SUFFIXES = ('.csv', '.tsv', '.tab', '.txt', '.data', '.dat')  # a folder's candidate files


@dataclasses.dataclass(frozen=True)
class Columns:
  # their metadata 'help': a task that nests these makes them its settings
  user_column: str | None = settings.described(
      None, 'Interactions file (CSV/TSV; --data_dir names it): the user column. Declaring it '
      'and --item_column reads --data_dir as one.')
  item_column: str | None = settings.described(None, 'Interactions file: the item column.')
  time_column: str | None = settings.described(
      None, "Interactions file: orders each user's items (numbers, or dates); without it, "
      'file order.')
  rating_column: str | None = settings.described(
      None, 'Interactions file: the rating column (--min_rating).')
  min_rating: float | None = settings.described(
      None, 'Interactions file: keep only interactions rated at least this (implicit '
      'positives).')
  columns: tuple[str, ...] = settings.described(
      (), "A file without a header (an interactions file, or a CTR file): its fields' "
      'names, in order (e.g. user,item,rating,time for MovieLens u.data).')

  def __post_init__(self):
    if self.columns and len(set(self.columns)) < len(self.columns):
      raise ValueError(f'columns names a field twice: {list(self.columns)}')
    if not self.declared:  # columns alone names a file's fields, whichever reader reads it
      return
    if self.user_column is None or self.item_column is None:
      raise ValueError('an interactions file needs both user_column and item_column; got '
                       f'user_column={self.user_column}, item_column={self.item_column}')
    if (self.min_rating is None) != (self.rating_column is None):
      raise ValueError('min_rating and rating_column go together (keep the interactions '
                       f'rated at least min_rating); got rating_column={self.rating_column}, '
                       f'min_rating={self.min_rating}')
    used = [c for c in (self.user_column, self.item_column, self.time_column,
                        self.rating_column) if c is not None]
    if len(set(used)) < len(used):
      raise ValueError(f'user, item, time and rating columns must differ; got {used}')

  @property
  def declared(self) -> bool:
    """Whether any column's role is declared: the data is an interactions file."""
    return any(getattr(self, f.name) is not None for f in dataclasses.fields(self)
               if f.name != 'columns')

  def check_interactions(self) -> bool:
    """Whether the data is an interactions file (`declared`); names alone are
    refused: they say what a file's fields are called, not which is the user."""
    if self.columns and not self.declared:
      raise ValueError(f'columns names the fields of a file without a header '
                       f'({",".join(self.columns)}); say which are its users and items with '
                       'user_column and item_column')
    return self.declared


def nested(values: dict) -> dict:
  """Flat settings (a task's flags) with Columns' fields gathered into 'interactions'."""
  names = [f.name for f in dataclasses.fields(Columns)]
  declared = {n: values.pop(n) for n in names if n in values}
  return {**values, 'interactions': Columns(**declared)} if declared else values


def file_of(data_dir: str | pathlib.Path) -> pathlib.Path:
  """`data_dir` if it is a file, else its one interactions file (by SUFFIXES)."""
  return tables.file_of(data_dir, SUFFIXES, 'interactions file (CSV/TSV)')


def read(data_dir: str | pathlib.Path, columns: Columns) -> item_lists.Sequences:
  """Each user's item ids in time order (ties and no time: file order), users in
  id order."""
  path = file_of(data_dir)
  frame = _frame(path, columns)
  if columns.rating_column is not None:
    ratings = _numbers(frame, columns.rating_column, path, 'rating_column')
    frame = frame[ratings >= columns.min_rating]
    if frame.empty:
      raise tables.DataFormatError(f'{path}: no interaction is rated {columns.min_rating:g} '
                                   f'or more ({columns.rating_column})')
  users = _ids(frame[columns.user_column])
  items = _ids(frame[columns.item_column])
  time = (_times(frame, columns.time_column, path) if columns.time_column is not None
          else np.zeros(len(frame)))
  return item_lists.Sequences.in_time_order(users, items, time)


def _frame(path: pathlib.Path, columns: Columns) -> pd.DataFrame:
  try:
    with tables.open_text(path) as f:
      first = f.readline()
  except UnicodeDecodeError as e:
    raise tables.not_text(path, e) from None
  names = list(columns.columns) or None
  separator = ('::' if '::' in first else '\t' if '\t' in first else ',' if ',' in first
               else r'\s+')
  frame = tables.read_csv(path, sep=separator, header=None if names else 0,
                          engine='c' if len(separator) == 1 else 'python')
  if names:
    if frame.shape[1] != len(names):
      raise tables.DataFormatError(
          f'{path}: {frame.shape[1]} fields per line, but columns names {len(names)}: '
          f'{",".join(names)}')
    frame.columns = names
    if not frame.empty and {columns.user_column, columns.item_column} <= set(
        frame.iloc[0].str.strip()):
      raise tables.DataFormatError(
          f'{path}: its first line is a header ({first.strip()}); with a header, leave '
          'columns out (the header names the fields)')
  if frame.empty:
    raise tables.DataFormatError(f'{path}: no interactions')
  for setting in ('user_column', 'item_column', 'time_column', 'rating_column'):
    name = getattr(columns, setting)
    if name is not None and name not in frame.columns:
      raise tables.DataFormatError(
          f'{path}: no column {name!r} ({setting}); its columns: {", ".join(frame.columns)}'
          + ('' if names else ' (a file without a header: name its fields with columns)'))
  for setting in ('user_column', 'item_column'):
    name = getattr(columns, setting)
    _check_parsed(frame[name].mask(frame[name].str.strip() == ''), frame, name, path,
                  setting, 'an id')
  return frame


def _ids(values: pd.Series) -> np.ndarray:
  """Integer ids as they are; other ids numbered 1.. by first appearance. Only
  plain digits count as integers: through floats, ids past 2^53 would merge."""
  text = values.str.strip()
  if text.str.fullmatch(r'0|[1-9]\d{0,17}').all():
    return text.astype(np.int64).to_numpy()
  return pd.factorize(text)[0].astype(np.int64) + 1


def _numbers(frame: pd.DataFrame, column: str, path: pathlib.Path, setting: str) -> np.ndarray:
  numbers = pd.to_numeric(frame[column], errors='coerce')
  _check_parsed(numbers, frame, column, path, setting, 'a number')
  return numbers.to_numpy(np.float64)


def _times(frame: pd.DataFrame, column: str, path: pathlib.Path) -> np.ndarray:
  """Numbers as they are, else dates (as nanoseconds): the first row decides which.
  Dates are ISO 8601, or all of one format, month-first or day-first, whichever
  reads every row (one at a time, 02/01 and 13/01 would be read one month-first
  and the other day-first); a file that reads both ways, differently, is refused."""
  values = frame[column]
  numbers = pd.to_numeric(values, errors='coerce')
  if pd.notna(numbers.iloc[0]):
    _check_parsed(numbers, frame, column, path, 'time_column',
                  'a number (as the first row\'s time is)')
    return numbers.to_numpy(np.float64)
  dates = pd.to_datetime(values, errors='coerce', format='ISO8601')
  if dates.isna().any():
    with warnings.catch_warnings():  # "could not infer format": the error below says it
      warnings.simplefilter('ignore', UserWarning)
      month_first, day_first = (pd.to_datetime(values, errors='coerce', dayfirst=day)
                                for day in (False, True))
    both = month_first.notna().all() and day_first.notna().all()
    if both and not month_first.equals(day_first):
      row = int(np.argmax((month_first != day_first).to_numpy()))
      raise tables.DataFormatError(
          f'{path}: {column} (time_column) reads month-first and day-first alike (data row '
          f'{frame.index[row] + 1}: {values.iloc[row]!r}); write its dates as ISO 8601 '
          '(YYYY-MM-DD)')
    dates = day_first if day_first.notna().all() and not both else month_first
  _check_parsed(dates, frame, column, path, 'time_column',
                'a number or a date in one format (month-first or day-first)')
  return dates.to_numpy('datetime64[ns]').astype(np.int64)


def _check_parsed(parsed: pd.Series, frame: pd.DataFrame, column: str, path: pathlib.Path,
                  setting: str, expected: str) -> None:
  bad = parsed.isna().to_numpy()
  if bad.any():
    row = int(np.argmax(bad))
    raise tables.DataFormatError(
        f'{path}: {column} ({setting}) of data row {frame.index[row] + 1} is '
        f'{frame[column].iloc[row]!r}, not {expected}')
