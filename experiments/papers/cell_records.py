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

from experiments import files
from experiments import run_records
from experiments import seed_stats
from launch import common
import tasks  # pylint: disable=g-bad-import-order
from tff_rec import registry
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
  return files.read_summary(summary)


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
    return files.read_summary(record / 'summary.json')
  out = pathlib.Path(runs_dir) / name
  if not (out / 'summary.json').exists() and not wanted:
    return NOT_RUN
  try:
    summary = launch_once(module, out, *args)
  except subprocess.CalledProcessError:
    print(f'{name}: could not run (see the error above): {CANNOT_RUN}', flush=True)
    return CANNOT_RUN
  if record:
    run_records.record(out, record)
  return summary


