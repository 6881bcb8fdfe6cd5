"""What the launchers share: task flags, the output directory, progress lines."""

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import types
import typing

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # before TensorFlow loads

from absl import app
from absl import flags
from absl import logging
import numpy as np
import pandas as pd

from launch import imports
import tasks
from tasks import setting
from tff_rec.algorithms import registry
from tff_rec.data import sequence_clicks
from tff_rec.data import tables
from tff_rec.data import user_items
from tff_rec.runtime import native

# A user's modules register their algorithms and tasks before any flag is made of them.
imports.load_all(sys.argv)
flags.DEFINE_multi_string(imports.FLAG, [], 'A module of your own that registers algorithms '
                          '(tff_rec.algorithms.registry.register) or tasks (tasks.register): '
                          'a module name or a .py file; repeatable.')
flags.DEFINE_enum('task', 'movielens_next_item', sorted(tasks.TASKS), 'Task to run.')
flags.DEFINE_string('target', None, 'Report in the summary the first round (epoch) whose '
                    'evaluation reaches a value, e.g. "eval/test_auc>=0.6" or '
                    '"eval/train_loss<=0.33".')
flags.DEFINE_string('output_dir', None, 'Where metrics, checkpoints and the '
                    'summary go; an interrupted run resumes from here.')

FLAGS = flags.FLAGS


def run(main) -> None:
  """app.run(main), after what every launcher sets up in its process (not at
  import: importing a launcher changes no TF, TFF or logging state): absl logging
  at WARNING (TFF logs every checkpoint at INFO), and TFF's own import-time
  context dropped (launchers run computations only inside a NativeRuntime; TFF's
  context, alive at exit, prints an error: see runtime.native)."""

  def set_up_then_main(argv):
    logging.set_verbosity(logging.WARNING)
    native.drop_tff_default_context()
    return main(argv)

  app.run(set_up_then_main)


def check_choices(flag: str, values, known) -> None:
  """A UsageError naming the values of list flag `flag` that are not in `known`."""
  unknown = [v for v in values if v not in known]
  if unknown:
    raise app.UsageError(f'--{flag}: unknown {unknown}; choose from {sorted(known)}')


def require(*names: str) -> None:
  """A UsageError unless every flag of `names` was given. Launchers check here,
  not with absl's required flags: those fail the parse of any other launcher in a
  process that imported this one (the tests run launchers in-process)."""
  for name in names:
    if FLAGS[name].value is None:
      raise app.UsageError(f'--{name} is needed')


def set_flags(names) -> dict:
  """The flags among `names` given a value (None means: the task's default)."""
  return {name: FLAGS[name].value for name in names if FLAGS[name].value is not None}


def task_config():
  """The chosen task's Config from the task flags that were set."""
  own = {field.name: field for field in setting.described(tasks.TASKS[FLAGS.task].Config)}
  foreign = sorted(set(set_flags(TASK_FLAGS)) - set(own))
  if foreign:
    raise app.UsageError(f'--{foreign[0]} does not apply to --task={FLAGS.task} (its '
                         f'settings: {", ".join(sorted(own))})')
  try:
    return tasks.TASKS[FLAGS.task].make_config(**option_values(own))
  except ValueError as e:
    raise app.UsageError(str(e)) from None


def build_task(config):
  """The task, or a UsageError naming --data_dir when its files are wrong."""
  try:
    return tasks.TASKS[FLAGS.task].Task(config)
  except tables.DataFormatError as e:
    if pathlib.Path(config.data_dir).is_file():  # a CTR file of the user's
      raise app.UsageError(f'--data_dir={config.data_dir}: {e}') from None
    raise app.UsageError(
        f'--data_dir={config.data_dir}: {e}\nFor MovieLens: '
        '`python -m launch.download --dataset=ml-100k --cache_dir=DIR` and '
        'pass --data_dir=DIR/ml-100k.') from None
  except ValueError as e:  # settings the data cannot take (e.g. a CTR file's columns)
    raise app.UsageError(str(e)) from None


def run_config(config, **settings) -> dict:
  """What defines a run: the task, its resolved config and the launcher's settings.

  As JSON would read it back (tuples as lists), to compare with a saved run.
  """
  return json.loads(json.dumps({'task': FLAGS.task, **dataclasses.asdict(config),
                                **settings}))


# Algorithm options -------------------------------------------------------------
# One flag per field of every algorithm's option dataclass (registry.option_fields):
# its type, choices and help come from the field; None means the field's default.


def _element_type(annotation):
  """The scalar type of a field annotation (`tuple[float, ...] | None` -> float)."""
  is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
  for candidate in typing.get_args(annotation) if is_union else (annotation,):
    if candidate is not type(None):
      inner = typing.get_args(candidate)
      return (inner[0] if inner else candidate), typing.get_origin(candidate) is tuple
  raise TypeError(f'no type in {annotation}')


def define_option_flags(fields: dict, helps: dict | None = None) -> None:
  """A flag per field; its help is the field's (metadata['help']) unless in `helps`."""
  for name, field in fields.items():
    kind, is_list = _element_type(field.type)
    help_text = (helps or {}).get(name) or field.metadata.get('help', name)
    if is_list:
      flags.DEFINE_list(name, None, help_text)
    elif 'choices' in field.metadata:
      flags.DEFINE_enum(name, None, list(field.metadata['choices']), help_text)
    else:
      define = {bool: flags.DEFINE_boolean, int: flags.DEFINE_integer,
                float: flags.DEFINE_float, str: flags.DEFINE_string}[kind]
      define(name, None, help_text)


def option_values(fields: dict) -> dict:
  """The option flags that were set, converted to their fields' types."""
  values = {}
  for name, value in set_flags(fields).items():
    kind, is_list = _element_type(fields[name].type)
    if is_list:
      try:
        value = tuple(kind(v) for v in value)
      except ValueError:
        raise app.UsageError(f'--{name} must be a list of {kind.__name__}s, got '
                             f'{",".join(value)}') from None
    values[name] = value
  return values


# Task settings ------------------------------------------------------------------
# One flag per described field of every task's Config (tasks.setting): the tasks
# declare their settings once. None means the task's default.


def task_settings() -> dict[str, list[tuple[str, dataclasses.Field]]]:
  """Setting name -> [(task name, its field)] over every task that has it."""
  settings = {}
  for name, module in sorted(tasks.TASKS.items()):
    for field in setting.described(module.Config):
      settings.setdefault(field.name, []).append((name, field))
  return settings


def _setting_help(owners: list[tuple[str, dataclasses.Field]]) -> str:
  helps = {f.metadata['help'] for _, f in owners}
  text = (owners[0][1].metadata['help'] if len(helps) == 1 else
          ' '.join(f'{task}: {f.metadata["help"]}' for task, f in owners))
  defaults = [f'{task} {_shown(f.default)}' for task, f in owners if f.default is not None]
  return f'{text} (default: {"; ".join(defaults)})' if defaults else text


def _shown(value) -> str:
  return _flag_value(value) or 'none'


def _flag_value(value) -> str:
  """A value as its flag takes it (a list flag: comma-joined)."""
  return ','.join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def define_task_flags() -> tuple[str, ...]:
  settings = task_settings()
  define_option_flags({name: owners[0][1] for name, owners in settings.items()},
                      helps={name: _setting_help(owners) for name, owners in settings.items()})
  return tuple(settings)


# What defines the task (a run's config.json includes them).
TASK_FLAGS = define_task_flags()


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
    done.check_returncode()
  return json.loads(summary.read_text())


def _task_args() -> list[str]:
  """The task flags given to this process, to pass on to a cell's launcher."""
  return [f'--task={FLAGS.task}', *(f'--{name}={_flag_value(value)}' for name, value
                                    in set_flags(TASK_FLAGS).items())]


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
                     f'{_flag_value(recorded) if recorded is not None else "unset"})')
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


NOT_RUN, CANNOT_RUN = 'not run', 'N/A'  # reproduction cells without a result
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
    return json.loads((record / 'summary.json').read_text())
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
        _copy_atomically(out / file, record / file)
  return summary


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
  """'mean ± std' (sample std) of a cell's seeds, each times `scale`."""
  if not values:
    return NOT_RUN
  values = [scale * v for v in values]
  std = f' ± {np.std(values, ddof=1):.{digits}f}' if len(values) > 1 else ''
  return f'{np.mean(values):.{digits}f}{std}'


def beyond_noise(a: list[float], b: list[float]) -> bool:
  """Whether two cells' means differ by more than the sum of their seeds' stds.

  The reading's rule: a difference inside the seeds' spread is called noise.
  """
  if len(a) < 2 or len(b) < 2:
    return False  # one seed has no spread to judge by
  return abs(np.mean(a) - np.mean(b)) > np.std(a, ddof=1) + np.std(b, ddof=1)


def versus(a: list[float], b: list[float], scale: float = 1.0, digits: int = 3) -> str:
  """Cell a against cell b over seeds: the difference of the means (times
  `scale`) where it is beyond noise (beyond_noise), else 'within noise'."""
  if not a or not b:
    return NOT_RUN
  if len(a) < 2 or len(b) < 2:
    return 'one seed: no spread'
  if not beyond_noise(a, b):
    return 'within noise'
  return f'{scale * (np.mean(a) - np.mean(b)):+.{digits}f}'


def _copy_atomically(source: pathlib.Path, target: pathlib.Path) -> None:
  temporary = target.with_suffix(target.suffix + '.tmp')
  shutil.copyfile(source, temporary)
  os.replace(temporary, target)


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
  rows = pd.read_csv(path) if path.exists() else None
  if rows is None or metric not in rows:  # not evaluated yet
    return None
  return rows.dropna(subset=[metric])


def output_dir(run_config: dict) -> pathlib.Path:
  """Creates --output_dir, or checks that the run there had the same config.

  A run resumes only under the flags it started with; anything else would
  mix two experiments in one metrics file.
  """
  root = pathlib.Path(FLAGS.output_dir)
  root.mkdir(parents=True, exist_ok=True)
  saved = root / 'config.json'
  if saved.exists():
    previous = json.loads(saved.read_text())
    if previous != run_config:
      changed = sorted(k for k in set(previous) | set(run_config)
                       if previous.get(k) != run_config.get(k))
      raise app.UsageError(
          f'--output_dir={root} holds a run with other settings '
          f'({", ".join(changed)}); resume it with the same flags or choose a '
          'new --output_dir.')
  else:
    write_json(saved, run_config)
  starts = root / 'machines.json'
  write_json(starts, [*(json.loads(starts.read_text()) if starts.exists() else []),
                      {'started': datetime.datetime.now(datetime.timezone.utc).isoformat(
                          timespec='seconds'), **machine()}])
  return root


# The CPU features that select TF's (oneDNN's) kernels. On one machine a seed
# reruns to every digit; on another CPU the kernels, and so the order of each
# sum, may differ: capping oneDNN at AVX2 here moves a run's first-epoch loss in
# the fourth digit (results/dual_encoder_beauty/README.md).
VECTOR_EXTENSIONS = ('avx2', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'amx_tile')
PACKAGES = ('tensorflow', 'tensorflow-federated', 'numpy')
KERNEL_SETTINGS = ('TF_ENABLE_ONEDNN_OPTS', 'ONEDNN_MAX_CPU_ISA', 'OMP_NUM_THREADS')


def machine() -> dict:
  """What a run's last digits depend on beyond its flags: the CPU, its cores,
  the packages and any kernel settings in the environment."""
  cpuinfo = pathlib.Path('/proc/cpuinfo')  # Linux; elsewhere what platform knows
  fields = {}
  for line in (cpuinfo.read_text() if cpuinfo.exists() else '').splitlines():
    name, _, value = line.partition(':')
    fields.setdefault(name.strip(), value.strip())  # the first CPU's
  flags_of_cpu = fields.get('flags', '').split()
  cores = (len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
           else os.cpu_count())
  return {'cpu': fields.get('model name') or platform.processor(),
          'vector_extensions': [f for f in VECTOR_EXTENSIONS if f in flags_of_cpu],
          'cores': cores, 'python': platform.python_version(),
          **{name: importlib.metadata.version(name) for name in PACKAGES},
          **{name: os.environ[name] for name in KERNEL_SETTINGS if name in os.environ}}


def write_json(path: pathlib.Path, value) -> None:
  """Writes JSON atomically: never half-written."""
  write_text(path, json.dumps(value, indent=2, sort_keys=True))


def write_text(path: pathlib.Path, text: str) -> None:
  """Writes a file atomically (temp file + rename): never half-written."""
  with tempfile.NamedTemporaryFile('w', dir=path.parent, delete=False,
                                   suffix='.tmp') as f:
    f.write(text)
  os.replace(f.name, path)


def clicks_file(sequences: str | pathlib.Path, out: pathlib.Path, *, seed: int,
                history_length: int = 10) -> pathlib.Path:
  """`out`, a CTR file in DIN's form (tff_rec.data.sequence_clicks) of a
  `uid item item ...` sequence file. It is written again unless `out` exists
  with a record (out.json) of these very sequences, history length and seed:
  they fix its rows."""
  made_from = {'sequences_sha256': hashlib.sha256(pathlib.Path(sequences).read_bytes())
               .hexdigest(), 'history_length': history_length, 'seed': seed}
  record = out.with_suffix(out.suffix + '.json')
  if not (out.exists() and record.exists() and json.loads(record.read_text()) == made_from):
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = sequence_clicks.din_rows(user_items.read_lines(pathlib.Path(sequences)),
                                    history_length=history_length, seed=seed)
    write_text(out, rows.to_csv(index=False))
    write_json(record, made_from)
  return out


# The task settings that read a clicks_file.
CLICKS_FILE_COLUMNS = dict(client_column='user', feature_columns=('user', 'item'),
                           list_columns=('history',), test_column='test')


def clicks_task(sequences: str | pathlib.Path, runs_dir: str, seed: int) -> dict:
  """movielens_ctr's settings for one seed's clicks_file of `sequences`, kept
  under runs_dir/data: each seed draws its own non-clicks."""
  name = f'{pathlib.Path(sequences).stem.lower()}_clicks_s{seed}.csv'
  path = clicks_file(sequences, pathlib.Path(runs_dir) / 'data' / name, seed=seed)
  return dict(data_dir=str(path), **CLICKS_FILE_COLUMNS)


def flag_args(values: dict) -> list[str]:
  """Settings as command-line flags."""
  return [f'--{name}={_flag_value(value)}' for name, value in values.items()]


class Progress:
  """Prints one line per step: chosen metrics, time per step and an ETA.

  `shown` maps a short label to a metric key; absent metrics are skipped.
  The first step seen may be past 1 (a resumed run): the ETA counts from it.
  """

  def __init__(self, total: int, unit: str, shown: dict[str, str]):
    self.total, self.unit, self.shown = total, unit, shown
    self.first = None
    self.started = time.monotonic()  # the first step's time includes set-up

  def __call__(self, step: int, metrics: dict[str, float]) -> None:
    if self.first is None:
      self.first = step
      if step > 1:
        print(f'resumed from checkpoint at {self.unit} {step}', flush=True)
    per_step = (time.monotonic() - self.started) / (step - self.first + 1)
    eta = per_step * (self.total - step)
    values = '  '.join(f'{label} {metrics[key]:.4g}'
                       for label, key in self.shown.items() if key in metrics)
    print(f'{self.unit} {step}/{self.total}  {values}  '
          f'{per_step:.2f} s/{self.unit}  ETA {_duration(eta)}', flush=True)


def parse_target(text: str | None) -> tuple[str, str, float] | None:
  """'metric>=value' or 'metric<=value' -> (metric, op, value); a UsageError otherwise."""
  if text is None:
    return None
  for op in ('>=', '<='):
    metric, found, value = text.partition(op)
    if found:
      try:
        return metric.strip(), op, float(value)
      except ValueError:
        break
  raise app.UsageError(f'--target={text}: expected METRIC>=VALUE or METRIC<=VALUE, '
                       'e.g. eval/test_auc>=0.6')


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


def first_reached(metrics_csv: pathlib.Path, step: str, target) -> dict:
  """The first `step` (round, epoch) in a run's metrics.csv that reached the target.

  Read back from the CSV, so a resumed run counts the rounds before its
  restart. Returns the summary entries: target, rounds_to_target (None if
  not reached).
  """
  metric, op, value = target
  table = pd.read_csv(metrics_csv)
  if metric not in table:
    raise app.UsageError(f'--target metric {metric!r} was never reported; evaluated '
                         f'metrics: {", ".join(c for c in table if "/" in c)}')
  values = table[metric]
  reached = table[step][values >= value if op == '>=' else values <= value]
  first = int(reached.min()) if len(reached) else None
  print(f'target {metric}{op}{value:g}: ' + (f'reached at {step} {first}' if first else
        f'not reached in {int(table[step].max())} {step}s'), flush=True)
  return {'target': f'{metric}{op}{value:g}', 'rounds_to_target': first}


def _duration(seconds: float) -> str:
  minutes, seconds = divmod(int(seconds), 60)
  hours, minutes = divmod(minutes, 60)
  return f'{hours}h{minutes:02d}m' if hours else f'{minutes}m{seconds:02d}s'

