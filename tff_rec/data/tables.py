"""Reading delimited data files with errors that name the file, line and format."""

import csv
import gzip
import io
import pathlib
from typing import Sequence

import numpy as np
import pandas as pd


class DataFormatError(ValueError):
  """A data file is missing or does not have the expected format."""


GZIP_MAGIC = b'\x1f\x8b'


def gzipped(path: pathlib.Path) -> bool:
  """Whether the file is gzip-compressed (by its first bytes, whatever its name)."""
  with path.open('rb') as f:
    return f.read(2) == GZIP_MAGIC


def open_text(path: pathlib.Path):
  """The file as UTF-8 text (a byte-order mark skipped), gunzipped if it is gzip."""
  return (gzip.open(path, 'rt', encoding='utf-8-sig') if gzipped(path)
          else path.open(encoding='utf-8-sig'))


def not_text(path: pathlib.Path, error: UnicodeDecodeError) -> DataFormatError:
  """The error for a file that is not UTF-8 text (nor gzip of it)."""
  return DataFormatError(f'{path}: not UTF-8 text ({error.reason} at byte {error.start}); '
                         'save it as UTF-8 (plain or gzip-compressed)')


def read_csv(path: pathlib.Path, *, sep: str, **options) -> pd.DataFrame:
  """A delimited file of a user's (plain or gzip, UTF-8, a byte-order mark skipped)
  as strings, empty fields kept; pandas' errors as DataFormatErrors naming it.
  `options`: pandas' header, engine."""
  try:
    # index_col=False: a trailing delimiter on every row must not turn the first
    # column into the index and shift the others
    return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, index_col=False,
                       encoding='utf-8-sig', compression='gzip' if gzipped(path) else None,
                       **options)
  except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
    raise DataFormatError(f'{path}: {str(e).strip()}') from None
  except UnicodeDecodeError as e:
    raise not_text(path, e) from None


CHUNK_BYTES = 1 << 24  # field counting reads this much at a time
BLANK = b' \t\r\f\v'  # a line of these alone is skipped, as read_csv skips it


def first_fields(path: pathlib.Path, sep: str) -> list[str]:
  """The fields of the file's first non-blank line (a header's names), a trailing
  delimiter's empty field left out."""
  try:
    with open_text(path) as f:
      fields = next((row for _, row in _csv_rows(f, sep) if row), [])
  except UnicodeDecodeError as e:
    raise not_text(path, e) from None
  return fields[:-1] if len(fields) > 1 and fields[-1] == '' else fields


def field_lines(path: pathlib.Path, sep: str, fields: int, names: str) -> np.ndarray:
  """The line numbers of the file's non-blank lines (its rows as read_csv reads them,
  a header included), after checking each has `fields` fields (or one more, empty:
  a trailing delimiter). We count them ourselves because pandas pads a short line
  with empty fields, which would read as padding ids. Raises a DataFormatError
  naming the first line that differs and `names` (what gives the number of fields).
  Lines end at a newline, a carriage return and newline, or a lone carriage return."""
  def agrees(count, trailing_empty):  # numbers or numpy arrays of them
    return (count == fields) | (trailing_empty & (count == fields + 1))

  def check(line: int, count: int, trailing_empty: bool) -> None:
    if not agrees(count, trailing_empty):
      raise DataFormatError(f'{path}, line {line}: {count} fields, but {names} names '
                            f'{fields}')

  blank = np.frombuffer(BLANK.replace(sep.encode(), b''), np.uint8)
  lines, first, rest = [], 1, b''
  with (gzip.open(path, 'rb') if gzipped(path) else path.open('rb')) as f:
    while True:
      more = f.read(CHUNK_BYTES)
      data = rest + more
      if b'"' in data:  # quoted fields may hold the separator: csv's reading (slower)
        return _quoted_field_lines(path, sep, check)
      # whole lines only: not after a final \r, whose \n may come next
      cut = (max(data.rfind(b'\n'), data.rfind(b'\r', 0, len(data) - 1)) + 1 if more
             else len(data))
      data, rest = data[:cut], data[cut:]
      if data:
        raw = np.frombuffer(data, np.uint8)
        lone_cr = (raw == ord('\r')) & np.append(raw[1:] != ord('\n'), True)
        ends = np.flatnonzero((raw == ord('\n')) | lone_cr)
        if not len(ends) or ends[-1] != len(raw) - 1:
          ends = np.append(ends, len(raw))
        starts = np.concatenate([[0], ends[:-1] + 1])
        stops = ends - ((ends > starts) & (raw[np.maximum(ends - 1, 0)] == ord('\r')))
        separators = np.concatenate([[0], np.cumsum(raw == ord(sep))])
        shown = np.concatenate([[0], np.cumsum(~np.isin(raw, blank))])
        counts = separators[stops] - separators[starts] + 1
        filled = shown[stops] > shown[starts]
        trailing = filled & (raw[np.maximum(stops - 1, 0)] == ord(sep))
        numbers = first + np.arange(len(starts))
        bad = filled & ~agrees(counts, trailing)
        if bad.any():
          k = int(np.argmax(bad))
          check(int(numbers[k]), int(counts[k]), bool(trailing[k]))
        lines.append(numbers[filled])
        first += len(starts)
      if not more:
        break
  return np.concatenate(lines) if lines else np.zeros(0, np.int64)


def _csv_rows(f, sep: str):
  """(line number where the row starts, its fields) of a text file, csv's way;
  a blank line's (BLANK alone, as read_csv skips it) fields empty."""
  csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))  # csv's 128 KiB: a long history
  reader, start = csv.reader(f, delimiter=sep), 1
  blank = BLANK.decode().replace(sep, '')
  for row in reader:
    yield start, (row if len(row) > 1 or (row and row[0].strip(blank)) else [])
    start = reader.line_num + 1


def _quoted_field_lines(path: pathlib.Path, sep: str, check) -> np.ndarray:
  lines, start = [], 1
  with open_text(path) as f:
    try:
      for start, row in _csv_rows(f, sep):
        if row:
          check(start, len(row), row[-1] == '')
          lines.append(start)
    except csv.Error as e:  # e.g. a quote never closed
      raise DataFormatError(f'{path}, after line {start}: {e}') from None
  return np.asarray(lines, np.int64)


def require_files(data_dir: str | pathlib.Path, names: Sequence[str], *,
                  dataset: str) -> pathlib.Path:
  """Returns `data_dir` as a Path if it holds every file in `names`."""
  root = pathlib.Path(data_dir)
  missing = [n for n in names if not (root / n).is_file()]
  if missing:
    raise DataFormatError(
        f'{root}: missing {", ".join(missing)}; a {dataset} directory must hold '
        f'{", ".join(names)}. Point the data directory at the extracted '
        'dataset (or download it with tff_rec.data.movielens.download).')
  return root


def file_of(data_dir: str | pathlib.Path, suffixes: Sequence[str], what: str) -> pathlib.Path:
  """`data_dir` if it is a file, else the one file of its folder with one of
  `suffixes`; a DataFormatError names what it found."""
  root = pathlib.Path(data_dir)
  if root.is_file():
    return root
  if not root.is_dir():
    raise DataFormatError(f'{root}: no such file or directory; expected the {what} or a '
                          'folder holding it')
  found = sorted(p.name for p in root.iterdir() if p.suffix.lower() in suffixes)
  if len(found) != 1:
    raise DataFormatError(f'{root}: expected one {what} ({", ".join(suffixes)}), found '
                          f'{", ".join(found) if found else "none"}; name the file itself')
  return root / found[0]


def read_table(path: pathlib.Path, *, sep: str, columns: Sequence[str],
               int_columns: Sequence[str], expected: str,
               encoding: str = 'utf-8') -> pd.DataFrame:
  """Reads a headerless delimited file into a DataFrame.

  Args:
    path: the file.
    sep: the field separator; multi-character separators (MovieLens 1M's
      '::') are rewritten to a tab first so pandas' C parser does the work.
    columns: the column names, one per field; a line with another number of
      fields is an error.
    int_columns: columns that must parse as integers (int64).
    expected: a human description of one line, for error messages.
    encoding: text encoding of the file.

  Raises:
    DataFormatError: naming the file, the first bad line and `expected`.
  """
  text = path.read_text(encoding=encoding)
  if len(sep) > 1:
    if '\t' in text:
      raise DataFormatError(f'{path}: unexpected tab character; expected {expected}')
    text, sep = text.replace(sep, '\t'), '\t'
  try:
    frame = pd.read_csv(io.StringIO(text), sep=sep, header=None, dtype=str,
                        keep_default_na=False, quoting=3, engine='c')
  except pd.errors.ParserError as e:
    raise DataFormatError(f'{path}: {str(e).strip()}; expected {expected}') from None
  except pd.errors.EmptyDataError:
    raise DataFormatError(f'{path}: file is empty; expected {expected}') from None
  if frame.shape[1] != len(columns):
    raise DataFormatError(f'{path}: found {frame.shape[1]} fields per line; '
                          f'expected {len(columns)}: {expected}')
  frame.columns = list(columns)
  for name in int_columns:
    values = pd.to_numeric(frame[name], errors='coerce')
    bad = values.isna().to_numpy() | (values.to_numpy() % 1 != 0)
    if bad.any():
      line = int(np.argmax(bad)) + 1
      raise DataFormatError(
          f'{path}, line {line}: {name}={frame[name].iloc[line - 1]!r} is not '
          f'an integer; expected {expected}')
    frame[name] = values.astype(np.int64)
  return frame
