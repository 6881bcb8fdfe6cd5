"""CTR rows from a user's own CSV / TSV file with declared columns.

The file has a header, or the caller names its fields (`names`). The caller
declares which column is the label (a number: > 0 is a click), which
identifies the client (user), which are id
features (one value per row: any string, e.g. Criteo's hashed categories) and
which are id-list features (values joined by `list_separator`, e.g. a DIN
behaviour history `12,7,30`), and optionally which marks the test rows (a
number: > 0 is test). Rows are kept in file order within each client (the
order a chronological split takes as time).

Each feature is factorized to ids 1..V in sorted order of its values; 0 is
padding (an empty field, and the padding of id lists). Columns declared in one
`shared_vocabularies` group are factorized together, so one value has one id
in all of them (DIN's candidate item and its history index one table).
"""

import dataclasses
import pathlib
import re
from typing import Sequence

import numpy as np
import pandas as pd

from tff_rec.data import ctr
from tff_rec.data import tables


@dataclasses.dataclass(frozen=True)
class Columns:
  label: str
  client: str
  features: tuple[str, ...] = ()
  list_features: tuple[str, ...] = ()
  list_separator: str = ','
  test: str | None = None
  shared_vocabularies: tuple[tuple[str, ...], ...] = ()

  def __post_init__(self):
    declared = [self.label, *self.features, *self.list_features,
                *([self.test] if self.test else [])]  # the client may be a feature
    repeated = sorted({c for c in declared if declared.count(c) > 1})
    if repeated:
      raise ValueError(f'columns {repeated} are declared more than once')
    if not self.features and not self.list_features:
      raise ValueError('declare at least one feature column (feature_columns or list_columns)')
    grouped = [c for group in self.shared_vocabularies for c in group]
    stray = sorted(set(grouped) - {*self.features, *self.list_features})
    if stray or len(grouped) != len(set(grouped)):
      raise ValueError(f'shared vocabularies {self.shared_vocabularies} must group declared '
                       'feature columns, each in one group at most'
                       + (f'; {stray} are not feature columns' if stray else ''))

  def vocabulary_groups(self) -> list[tuple[str, ...]]:
    """The feature columns, grouped by the vocabulary they share (alone: their own)."""
    grouped = {c for group in self.shared_vocabularies for c in group}
    return [*self.shared_vocabularies,
            *((c,) for c in (*self.features, *self.list_features) if c not in grouped)]


def _separator(path: pathlib.Path) -> str:
  return '\t' if '.tsv' in (s.lower() for s in path.suffixes) else ','  # x.tsv, x.tsv.gz


def read(path: str | pathlib.Path, columns: Columns, *, names: Sequence[str] = (),
         split: str = 'chronological', test_fraction: float = 0.1, seed: int = 0
         ) -> ctr.CtrExamples:
  """The file's rows as CTR examples; held out: the rows the test column marks, or
  each client's last (or a random) share without one. `names`: the fields of a
  file without a header, in order; without them the first line is the header.
  Every line must have as many fields as the header or `names` (a trailing
  delimiter aside)."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise tables.DataFormatError(f'{path}: no such CTR file')
  sep = _separator(path)
  if names:
    lines = tables.field_lines(path, sep, len(names), f'columns ({",".join(names)})')
    frame = tables.read_csv(path, sep=sep, engine='c', header=None, names=list(names))
    if columns.label in frame and len(frame) and not np.isfinite(
        pd.to_numeric(frame[columns.label].iloc[:1], errors='coerce')).all():
      raise tables.DataFormatError(
          f'{path}, line {lines[0]}: label column {columns.label}='
          f'{frame[columns.label].iloc[0]!r} is not a number. If that line is a header, '
          'leave columns out: the header names the fields')
  else:
    header = tables.first_fields(path, sep)
    lines = tables.field_lines(path, sep, len(header), 'its header')[1:]
    frame = tables.read_csv(path, sep=sep, engine='c')
  return from_frame(frame, columns, split=split, test_fraction=test_fraction, seed=seed,
                    path=path, lines=lines)


def from_frame(frame: pd.DataFrame, columns: Columns, *, split: str = 'chronological',
               test_fraction: float = 0.1, seed: int = 0, path='rows',
               lines: np.ndarray | None = None) -> ctr.CtrExamples:
  """CTR examples of rows as `read` reads them from a file (each cell a string;
  `path` names their source in errors, `lines` each row's line in it, by default
  2.. after a header)."""
  if frame.empty:
    raise tables.DataFormatError(f'{path}: no rows')
  lines = np.arange(2, len(frame) + 2) if lines is None else np.asarray(lines)
  header = list(frame.columns)
  for role, name in [('label', columns.label), ('client', columns.client),
                     *[('feature', c) for c in columns.features],
                     *[('list feature', c) for c in columns.list_features],
                     *([('test', columns.test)] if columns.test else [])]:
    if name not in header:
      raise tables.DataFormatError(f'{path}: no {role} column {name!r}; its columns: '
                                   f'{", ".join(header)}')
  labels = _numbers(frame, columns.label, 'label', path, lines)
  tests = _numbers(frame, columns.test, 'test', path, lines) > 0 if columns.test else None
  order = np.argsort(pd.factorize(frame[columns.client], sort=True)[0], kind='stable')
  frame = frame.iloc[order].reset_index(drop=True)
  lines = lines[order]  # file lines of the sorted rows
  lists = {c: _split_lists(frame[c], columns.list_separator, path, c, lines)
           for c in columns.list_features}
  values = {**{c: frame[c].to_numpy(str) for c in columns.features},
            **{c: items for c, (_, items) in lists.items()}}
  vocabularies = {}
  for group in columns.vocabulary_groups():
    distinct = pd.unique(np.concatenate([values[c] for c in group]))  # hashed: sorts V, not N
    vocabularies.update(dict.fromkeys(group, np.sort(distinct[distinct != ''])))
  features = {c: _ids(values[c], vocabularies[c]) for c in columns.features}
  for name in columns.list_features:  # left-aligned, 0-padded
    lengths = lists[name][0]
    rows = np.repeat(np.arange(len(frame)), lengths)
    places = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    features[name] = np.zeros((len(frame), max(1, lengths.max())), np.int32)
    features[name][rows, places] = _ids(values[name], vocabularies[name])
  vocab_sizes = {c: len(v) + 1 for c, v in vocabularies.items()}
  clients, user_ids = pd.factorize(frame[columns.client], sort=True)
  is_test = (tests[order] if columns.test
             else ctr.test_rows(clients, split, test_fraction, seed))
  return ctr.CtrExamples(features, (labels[order] > 0).astype(np.float32), clients, is_test,
                         vocab_sizes, np.asarray(user_ids), test_marked=bool(columns.test))


def _numbers(frame: pd.DataFrame, column: str, role: str, path, lines: np.ndarray
             ) -> np.ndarray:
  """The column of the file's rows (in file order) as numbers; a DataFormatError
  names the first line that is not one."""
  numbers = pd.to_numeric(frame[column], errors='coerce').to_numpy()
  bad = np.flatnonzero(~np.isfinite(numbers))
  if bad.size:
    raise tables.DataFormatError(f'{path}, line {lines[bad[0]]}: {role} column {column}='
                                 f'{frame[column].iloc[bad[0]]!r} is not a number')
  return numbers


def _ids(values: np.ndarray, vocabulary: np.ndarray) -> np.ndarray:
  """1-based ids of `values` in the sorted `vocabulary`; '' (not in it) -> 0, padding."""
  return (pd.Index(vocabulary).get_indexer(values) + 1).astype(np.int32)


def _split_lists(column: pd.Series, separator: str, path, name: str, lines
                 ) -> tuple[np.ndarray, np.ndarray]:
  """(each field's count of items, every item stripped, field after field); an
  empty field is an empty list. Split in one string (str.split runs in C: a
  field at a time, 10^6 fields took 15 s)."""
  texts = column.to_numpy()
  counts = np.fromiter((t.count(separator) + 1 if t else 0 for t in texts), np.int64,
                       len(texts))
  if len(separator) == 1:
    joined = separator.join(t for t in texts if t)
    items = joined.split(separator) if joined else []
    if re.search(r'\s', joined):
      items = [item.strip() for item in items]
  else:  # a longer one could form across two joined fields: split each on its own
    items = [item.strip() for t in texts if t for item in t.split(separator)]
  items = np.asarray(items, object)  # strings as pandas hashes them (a str array: 3x slower)
  empty = np.flatnonzero(items == '')
  if empty.size:
    row = np.repeat(np.arange(len(texts)), counts)[empty[0]]
    raise tables.DataFormatError(
        f'{path}, line {lines[row]}: list feature {name}={texts[row]!r} has an empty item; '
        f'separate items with {separator!r} and no empty ones')
  return counts, items
