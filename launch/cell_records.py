"""Reproduction cells: each a launcher run in its own process and folder,
recorded (config, metrics, summary) once finished, found again by name, and
never mixed with a run of other settings."""

import fnmatch
import functools
import json
import math
import pathlib
import subprocess
import sys

from absl import app
from absl import flags
import pandas as pd

from experiments import seed_stats
from launch import common
from launch import outputs
import tasks  # pylint: disable=g-bad-import-order
from tff_rec.algorithms import registry
from tff_rec.runtime import native


# Every cell name a reproduction asked `wanted` about, for --only's check.
_ASKED = set()


def wanted(name: str, only: list[str] | None) -> bool:
  """Whether --only selects cell `name`: every cell without it, else the cells its
  names or patterns (fnmatch: fair_1x-*) match ('none': no cell)."""
  _ASKED.add(name)
  return only is None or any(fnmatch.fnmatchcase(name, p) for p in only)


def checking_only(main):
  """A reproduction's main with its --only checked: an empty --only= is refused
  (it would otherwise run every cell), and names that matched no cell are named
  once the tables are written (exit 1), not passed over in silence."""

  @functools.wraps(main)
  def checked(argv):
    only = flags.FLAGS.only
    if only is not None and not only:
      raise app.UsageError('--only= names no cell; leave it out to run every cell, or '
                           'give --only=none to rebuild the tables from the records')
    main(argv)
    missed = [p for p in only or () if p != 'none'
              and not any(fnmatch.fnmatchcase(n, p) for n in _ASKED)]
    if missed:
      raise SystemExit(f'error: --only={",".join(missed)} matched no cell (cells are named '
                       f'e.g. {", ".join(sorted(_ASKED)[:4])})')

  return checked


WORKER_RETRIES = 2  # restarts of a cell whose TFF worker died


def launch_once(module: str, out: pathlib.Path, *args: str) -> dict[str, float]:
  """Runs a launcher (module) into `out` unless it already finished; its summary.

  Reproduction scripts run each cell in its own process and directory, so an
  interrupted reproduction resumes where it stopped (and a cut run resumes
  from its checkpoints; one whose TFF worker died is restarted, twice at
  most). The task flags given to the caller are passed on.
  """
  summary = out / 'summary.json'
  args = (*_task_args(), *args)
  if summary.exists():
    check_same_settings(out, args)
  for attempt in range(1, WORKER_RETRIES + 2):
    if summary.exists():
      break
    print(f'\n== {module} -> {out}', flush=True)
    done = subprocess.run([sys.executable, '-m', module, *args, f'--output_dir={out}'])
    if done.returncode == native.WORKER_DIED_EXIT_CODE and attempt <= WORKER_RETRIES:
      print(f'the TFF worker died; resuming {out} from its checkpoint', flush=True)
      continue
    if done.returncode == common.DIVERGED_EXIT_CODE and summary.exists():
      break  # a result: the summary says where it diverged
    done.check_returncode()
  return outputs.read_summary(summary)


def _task_args() -> list[str]:
  """The task flags given to this process, to pass on to a cell's launcher."""
  return [f'--task={common.FLAGS.task}', *(f'--{name}={common.flag_value(value)}' for name, value
                                    in common.set_flags(common.TASK_FLAGS).items())]


# Flags that a run's config.json holds under another key (run_config's optimizers).
RECORDED_AS = {
    'optimizer': ('optimizer', 'name'), 'learning_rate': ('optimizer', 'learning_rate'),
    'client_optimizer': ('client_optimizer', 'name'),
    'client_learning_rate': ('client_optimizer', 'learning_rate'),
    'server_optimizer': ('server_optimizer', 'name'),
    'server_learning_rate': ('server_optimizer', 'learning_rate'),
    'server_adaptivity': ('server_optimizer', 'adaptivity'),
}


def check_same_settings(run: pathlib.Path, args) -> None:
  """A UsageError when the finished run (or record) in `run` was made with other
  values of launcher arguments `args` than these.

  Finished cells are found by name, so without this a reproduction rerun with,
  say, another --epochs would tabulate the old cells as if they had it.
  An algorithm option its config.json lacks was unset (train.py records the
  set ones); other arguments it does not hold are not checked.
  """
  changed = changed_settings(run, args)
  if changed:
    raise app.UsageError(
        f'{run} finished with other settings than this run asks for: '
        f'{", ".join(changed)}. Pass the flags it was made with, or give the '
        'reproduction another --results_dir and --runs_dir to run these cells anew.')


def changed_settings(run: pathlib.Path, args) -> list[str]:
  """The arguments of `args` that the run (or record) in `run` was made with
  other values of, as '--name=value (recorded: old)'; see check_same_settings."""
  config = json.loads((run / 'config.json').read_text())
  changed = []
  given = dict(_parsed(arg, config) for arg in args)  # the last of a repeated flag wins
  for name, value in given.items():
    recorded = _recorded_setting(config, name)
    if recorded is _UNKNOWN and name in registry.option_fields():
      recorded = None
    if recorded is not _UNKNOWN and not _same_setting(name, recorded, value):
      changed.append(f'--{name}={value} (recorded: '
                     f'{common.flag_value(recorded) if recorded is not None else "unset"})')
  return changed


def recorded_in(records_dirs, name: str, *args: str) -> str | None:
  """The first of `records_dirs` holding a record of cell `name` made with these
  launcher arguments (and task flags), or None: another reproduction's record
  of the very same cell, read where it is instead of copied."""
  for folder in records_dirs:
    record = pathlib.Path(folder) / name
    if (record / 'summary.json').exists() and not changed_settings(
        record, (*_task_args(), *args)):
      return str(folder)
  return None


_UNKNOWN = object()  # an argument that a config.json does not record


def _parsed(arg: str, config: dict) -> tuple[str, str]:
  """'--name=value' -> (name, value); absl's '--name' / '--noname' booleans too."""
  name, has_value, value = arg.removeprefix('--').partition('=')
  if has_value:
    return name, value
  if (name.startswith('no') and _recorded_setting(config, name) is _UNKNOWN
      and (_recorded_setting(config, name[2:]) is not _UNKNOWN
           or name[2:] in registry.option_fields())):
    return name[2:], 'false'
  return name, 'true'


def _recorded_setting(config: dict, name: str):
  """The value a config.json holds for flag `name`: at the top, under its
  RECORDED_AS key, or as the one field of that name in a nested setting."""
  if name in config:
    return config[name]
  if name in RECORDED_AS:
    outer, inner = RECORDED_AS[name]
    return config.get(outer, {}).get(inner, _UNKNOWN)
  nested = [value[name] for value in config.values()
            if isinstance(value, dict) and name in value]
  return nested[0] if len(nested) == 1 else _UNKNOWN


def _same_setting(name: str, recorded, text: str) -> bool:
  """Whether flag text `text` gives the value `recorded` in a config.json."""
  if name == 'task':  # records made before the tasks took their family names hold aliases
    return tasks.canonical(str(recorded)) == tasks.canonical(text)
  if name == 'data_dir':  # the dataset's folder: a run may name it from elsewhere
    return pathlib.Path(str(recorded)).name == pathlib.Path(text).name
  if recorded is None:
    return text.lower() in ('', 'none')
  if isinstance(recorded, bool):
    return recorded == (text.lower() in ('true', '1'))
  if isinstance(recorded, (int, float)):
    try:
      return math.isclose(float(text), recorded, rel_tol=1e-9)
    except ValueError:
      return False
  if isinstance(recorded, list):
    parts = text.split(',') if text else []
    return len(parts) == len(recorded) and all(
        _same_setting(name, r, p) for r, p in zip(recorded, parts))
  if isinstance(recorded, dict):
    return True  # a composite setting: no single flag gives it
  return str(recorded) == text


NOT_RUN, CANNOT_RUN = seed_stats.NOT_RUN, 'N/A'  # reproduction cells without a result


# What a finished cell keeps in its record: small files, committed with the
# results, so a table can be rebuilt without the runs (checkpoints, logs).
RECORD_FILES = ('config.json', 'machines.json', 'metrics.csv', 'summary.json')  # summary last: done


OPTIONAL_RECORD_FILES = ('machines.json',)  # runs started before it existed lack it


def run_cell(runs_dir: str, name: str, module: str, *args: str, wanted: bool = True,
             records_dir: str | None = None) -> dict | str:
  """A reproduction cell: its finished run's summary, CANNOT_RUN (the launcher
  refused it) or NOT_RUN (not wanted this time and not run before).

  With `records_dir`, a cell whose record is there is not run again, and a
  cell that finishes is recorded there (RECORD_FILES).
  """
  record = pathlib.Path(records_dir) / name if records_dir else None
  if record and (record / 'summary.json').exists():
    check_same_settings(record, (*_task_args(), *args))
    return outputs.read_summary(record / 'summary.json')
  out = pathlib.Path(runs_dir) / name
  if not (out / 'summary.json').exists() and not wanted:
    return NOT_RUN
  try:
    summary = launch_once(module, out, *args)
  except subprocess.CalledProcessError:
    print(f'{name}: could not run (see the error above): {CANNOT_RUN}', flush=True)
    return CANNOT_RUN
  if record:
    record.mkdir(parents=True, exist_ok=True)
    for file in RECORD_FILES:
      if file not in OPTIONAL_RECORD_FILES or (out / file).exists():
        outputs.copy_atomically(out / file, record / file)
  return summary


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
    outputs.write_json(path, values)
  return values[key]


def cell_file(runs_dir: str, name: str, file: str, records_dir: str | None = None
              ) -> pathlib.Path:
  """A cell's file: from its record when there is one, else from its run."""
  if records_dir and (pathlib.Path(records_dir) / name / file).exists():
    return pathlib.Path(records_dir) / name / file
  return pathlib.Path(runs_dir) / name / file


def read_curve(runs_dir: str, name: str, metric: str, records_dir: str | None = None
               ) -> pd.DataFrame | None:
  """The rows of a finished cell's metrics.csv where `metric` was evaluated, or
  None (a cell cut short is not read: its last row is not its result)."""
  if not cell_file(runs_dir, name, 'summary.json', records_dir).exists():
    return None
  path = cell_file(runs_dir, name, 'metrics.csv', records_dir)
  if not path.exists():
    return None
  stat = path.stat()
  rows = _metrics(str(path), stat.st_mtime_ns, stat.st_size)
  if metric not in rows:  # not evaluated yet
    return None
  return rows[rows[metric].notna()]  # a new frame: the cached one is never handed out


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
  return 'diverged_at_round' in summary or math.isnan(recorded(summary, TRAIN_LOSS, 0.0))


def mean_of_last(runs_dir: str, name: str, metric: str, k: int,
                 records_dir: str | None = None) -> float | None:
  """The mean of a finished cell's last `k` evaluations of `metric` (a sweep's score:
  one evaluation swings); NaN when it diverged, None when it has not finished."""
  summary = cell_file(runs_dir, name, 'summary.json', records_dir)
  if summary.exists() and diverged(outputs.read_summary(summary)):
    return math.nan
  rows = read_curve(runs_dir, name, metric, records_dir)
  return None if rows is None else float(rows[metric].tail(k).mean())


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
