"""Run records: the small files a finished run keeps (committed with results, so a
table rebuilds without the runs), and what tables read from them: curves, the
mean of a curve's last evaluations, whether a run diverged, values derived once
from the data."""

import functools
import json
import math
import pathlib

import numpy as np
import pandas as pd

from experiments import files


# What a finished cell keeps in its record: small files, committed with the
# results, so a table can be rebuilt without the runs (checkpoints, logs).
RECORD_FILES = ('config.json', 'machines.json', 'metrics.csv', 'summary.json')  # summary last: done


OPTIONAL_RECORD_FILES = ('machines.json',)  # runs started before it existed lack it


def record(run: pathlib.Path, record_dir: pathlib.Path) -> None:
  """Copies a finished run's RECORD_FILES into `record_dir` (summary.json last: a
  record with a summary is whole)."""
  record_dir.mkdir(parents=True, exist_ok=True)
  for file in RECORD_FILES:
    if file not in OPTIONAL_RECORD_FILES or (run / file).exists():
      files.copy_atomically(run / file, record_dir / file)


DERIVED_FILE = 'derived.json'


def derived(records_dir, key: str, compute):
  """A value a table shows that comes from the data, not from a run (a floor, the
  data's description): `compute()` once, recorded under `key` in the records'
  DERIVED_FILE, and read from there afterwards, so that a table rebuilds from its
  records alone (launch.rebuild_tables). A JSON value: tuples come back as lists.
  Delete the entry (or the file) to compute it again from the data."""
  path = pathlib.Path(records_dir) / DERIVED_FILE
  values = json.loads(path.read_text()) if path.exists() else {}
  if key not in values:
    values[key] = json.loads(json.dumps(compute()))  # the same value as read back later
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_json(path, values)
  return values[key]


def cell_file(runs_dir: str, name: str, file: str, records_dir: str | None = None
              ) -> pathlib.Path:
  """A cell's file: from its record when there is one, else from its run."""
  if records_dir and (pathlib.Path(records_dir) / name / file).exists():
    return pathlib.Path(records_dir) / name / file
  return pathlib.Path(runs_dir) / name / file


def read_curve(runs_dir: str, name: str, metric: str, records_dir: str | None = None
               ) -> pd.DataFrame | None:
  """The rows of a finished cell's metrics.csv where `metric` was evaluated before
  the run diverged (if it did), or None (a cell cut short is not read: its last
  row is not its result)."""
  if not cell_file(runs_dir, name, 'summary.json', records_dir).exists():
    return None
  path = cell_file(runs_dir, name, 'metrics.csv', records_dir)
  if not path.exists():
    return None
  stat = path.stat()
  rows = _metrics(str(path), stat.st_mtime_ns, stat.st_size)
  if metric not in rows:  # not evaluated yet
    return None
  summary = files.read_summary(cell_file(runs_dir, name, 'summary.json', records_dir))
  return _before_divergence(rows, summary)[lambda r: r[metric].notna()]  # not the cached frame


def _before_divergence(rows: pd.DataFrame, summary: dict) -> pd.DataFrame:
  """The rows before the round (epoch) the trainer stopped a diverging run at: it
  may have evaluated that round, an output overflowing, and those values are not
  its result. A run from before the trainer stopped diverging runs trained on and
  evaluated its NaN model (as zero hits): its rows end before the first round
  whose training loss is not finite (training rows always carry the loss, so a
  missing one is a NaN one)."""
  for unit in ('round', 'epoch'):
    if f'diverged_at_{unit}' in summary and unit in rows:
      return rows[rows[unit] < summary[f'diverged_at_{unit}']]
  loss = recorded(rows, TRAIN_LOSS, None)
  if loss is None:  # centralized runs record no federated training loss
    return rows
  bad = ~np.isfinite(loss.to_numpy())
  return rows.iloc[:int(bad.argmax())] if bad.any() else rows


@functools.lru_cache(maxsize=4096)
def _metrics(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
  """A metrics.csv, parsed once while it is unchanged: a table reads each cell's
  curve once per metric and row it shows (a rebuild read 434 curves from 154 files)."""
  del mtime_ns, size  # the cache's key: a rewritten file is read again
  return pd.read_csv(path)


TRAIN_LOSS = 'train/client_work/train/loss'  # every task's training loss after the last round


def diverged(summary: dict) -> bool:
  """Whether a finished run diverged: the trainer stopped it, or (a run from before
  the trainer stopped diverging runs) its training loss is NaN. Read from training,
  never from a test metric."""
  return (any(key.startswith('diverged_at_') for key in summary)  # a round or an epoch
          or not math.isfinite(recorded(summary, TRAIN_LOSS, 0.0)))


def cell_diverged(runs_dir: str, name: str, records_dir: str | None = None) -> bool:
  """Whether a cell finished and diverged."""
  summary = cell_file(runs_dir, name, 'summary.json', records_dir)
  return summary.exists() and diverged(files.read_summary(summary))


def mean_of_last(runs_dir: str, name: str, metric: str, k: int,
                 records_dir: str | None = None) -> float | None:
  """The mean of a finished cell's last `k` evaluations of `metric` (a sweep's score:
  one evaluation swings); NaN when it diverged, None when it has not finished."""
  if cell_diverged(runs_dir, name, records_dir):
    return math.nan
  rows = read_curve(runs_dir, name, metric, records_dir)
  return None if rows is None else float(rows[metric].tail(k).mean())


def first_reaching(steps, values, target: float, lower_is_better: bool) -> float | None:
  """The first of `steps` whose value reaches `target` (at or below it where lower is
  better, else at or above); None if none does."""
  reached = steps[values <= target if lower_is_better else values >= target]
  return float(reached.min()) if len(reached) else None


# Metrics that records written before FAIR's, FedMF's and the table forms' rounds
# took tff.learning's layout (rounds.round_metrics) hold under other names.
EARLIER_NAMES = {
    'train/client_work/train/loss': 'train/train/loss',
    'train/aggregator/bytes_down': 'train/bytes_down',  # FAIR's
    'train/aggregator/bytes_up': 'train/train/bytes_up',  # FedMF's
    'train/aggregator/bytes_down_update': 'train/train/bytes_down_update',
    'train/aggregator/secure_upper_clipped_count': 'train/aggregation/secure_upper_clipped_count',
    'train/aggregator/secure_lower_clipped_count': 'train/aggregation/secure_lower_clipped_count',
}


def recorded(record, key: str, *default):
  """record[key] of a summary dict or a metrics frame, from any committed record
  (`default`, if given, where the record has neither name)."""
  for name in (key, EARLIER_NAMES.get(key)):
    if name in record:
      return record[name]
  if default:
    return default[0]
  raise KeyError(key)
