"""CTR rows from a user's own CSV / TSV file with declared columns.

The file has a header. The caller declares which column is the label (a
number: > 0 is a click), which identifies the client (user), which are id
features (one value per row: any string, e.g. Criteo's hashed categories) and
which are id-list features (values joined by `list_separator`, e.g. a DIN
behaviour history `12,7,30`). Rows are kept in file order within each client
(the order a chronological split takes as time).

Each feature is factorized to ids 1..V in sorted order of its values; 0 is
padding (an empty field, and the padding of id lists).
"""

import dataclasses
import pathlib

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

  def __post_init__(self):
    declared = [self.label, *self.features, *self.list_features]  # the client may be a feature
    repeated = sorted({c for c in declared if declared.count(c) > 1})
    if repeated:
      raise ValueError(f'columns {repeated} are declared more than once')
    if not self.features and not self.list_features:
      raise ValueError('declare at least one feature column')


def _separator(path: pathlib.Path) -> str:
  return '\t' if path.suffix.lower() == '.tsv' else ','


def read(path: str | pathlib.Path, columns: Columns, *, split: str = 'chronological',
         test_fraction: float = 0.1, seed: int = 0) -> ctr.CtrExamples:
  """The file's rows as CTR examples, each client's last (or a random) share held out."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise tables.DataFormatError(f'{path}: no such CTR file')
  try:
    frame = pd.read_csv(path, sep=_separator(path), dtype=str, keep_default_na=False,
                        engine='c')
  except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
    raise tables.DataFormatError(f'{path}: {str(e).strip()}') from None
  if frame.empty:
    raise tables.DataFormatError(f'{path}: a header but no rows')
  header = list(frame.columns)
  for role, name in [('label', columns.label), ('client', columns.client),
                     *[('feature', c) for c in columns.features],
                     *[('list feature', c) for c in columns.list_features]]:
    if name not in header:
      raise tables.DataFormatError(f'{path}: no {role} column {name!r}; the header has '
                                   f'{", ".join(header)}')
  labels = pd.to_numeric(frame[columns.label], errors='coerce').to_numpy()
  bad = np.flatnonzero(~np.isfinite(labels))
  if bad.size:
    raise tables.DataFormatError(
        f'{path}, line {bad[0] + 2}: label {columns.label}={frame[columns.label].iloc[bad[0]]!r}'
        ' is not a number')
  order = np.argsort(pd.factorize(frame[columns.client], sort=True)[0], kind='stable')
  frame = frame.iloc[order].reset_index(drop=True)
  lines = order + 2  # file lines of the sorted rows (the header is line 1)
  lists = {c: _split_lists(frame[c], columns.list_separator, path, c, lines)
           for c in columns.list_features}
  features, vocab_sizes = {}, {}
  for name in columns.features:
    values = frame[name].to_numpy().astype(str)
    vocabulary = np.unique(values[values != ''])
    features[name], vocab_sizes[name] = _ids(values, vocabulary), len(vocabulary) + 1
  for name in columns.list_features:
    flat = [item for items in lists[name] for item in items]
    values = np.unique(np.asarray(flat, str))
    width = max(1, max(len(items) for items in lists[name]))
    padded = np.zeros((len(frame), width), np.int32)
    for row, items in enumerate(lists[name]):
      padded[row, :len(items)] = _ids(np.asarray(items, str), values)
    features[name] = padded
    vocab_sizes[name] = len(values) + 1
  clients, user_ids = pd.factorize(frame[columns.client], sort=True)
  is_test = ctr.test_rows(clients, split, test_fraction, seed)
  return ctr.CtrExamples(features, (labels[order] > 0).astype(np.float32), clients, is_test,
                         vocab_sizes, np.asarray(user_ids))


def _ids(values: np.ndarray, vocabulary: np.ndarray) -> np.ndarray:
  """1-based ids of `values` in the sorted `vocabulary`; '' -> 0 (padding)."""
  ids = np.searchsorted(vocabulary, values) + 1
  return np.where(values == '', 0, ids).astype(np.int32)


def _split_lists(column: pd.Series, separator: str, path, name: str, lines) -> list:
  """Each field split into its items; an empty field is an empty list."""
  out = []
  for row, text in enumerate(column.to_numpy()):
    items = text.split(separator) if text else []
    if any(not item.strip() for item in items):
      raise tables.DataFormatError(
          f'{path}, line {lines[row]}: list feature {name}={text!r} has an empty item; '
          f'separate items with {separator!r} and no empty ones')
    out.append([item.strip() for item in items])
  return out
