"""A run's output folder and files: its settings checked on resume, the machine
of each start recorded, every file written atomically (never half-written)."""

import datetime
import fcntl
import importlib.metadata
import json
import os
import pathlib
import platform
from typing import Any, Mapping

from absl import app

from experiments import files

import tasks


# The open lock files of this process's runs, by folder: held until it exits (a
# process that runs again in the same folder, as a test's resume, holds it already).
_HELD = {}


def _lock(root: pathlib.Path) -> None:
  """Holds --output_dir for this process (an advisory lock, released at exit), or a
  UsageError when another trainer holds it: two runs in one folder would interleave
  their rounds in one metrics file and overwrite each other's checkpoints."""
  if root.resolve() in _HELD:
    return
  handle = (root / '.lock').open('a+')
  try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    handle.seek(0)
    holder = handle.read().strip() or 'another process'
    handle.close()
    raise app.UsageError(f'--output_dir={root} is in use by a running trainer ({holder}); '
                         'wait for it, or choose another --output_dir') from None
  handle.seek(0)
  handle.truncate()
  handle.write(f'pid {os.getpid()}')
  handle.flush()
  _HELD[root.resolve()] = handle


def check_resumable(path: str, run_config: dict,
                    defaults: Mapping[str, Any] | None = None) -> dict | None:
  """The config of the run --output_dir holds (None: no run yet), or a UsageError
  when it is another: a run resumes only under the flags it started with
  (anything else would mix two experiments in one metrics file), except
  --rounds, which may grow to extend a finished or interrupted run. A setting
  absent from either config reads as its value in `defaults` (options recorded
  only when given), so giving a default's value is no other setting. Checked
  before anything is built."""
  check_folder(path)
  if pathlib.Path(path).is_dir():  # a run there: held before the minutes of building
    _lock(pathlib.Path(path))
  saved = _saved_config(pathlib.Path(path))
  if saved is None:
    return None
  previous, run_config = _filled(saved, defaults), _filled(run_config, defaults)
  if _extends(previous, run_config):
    return saved
  changed = sorted(k for k in set(previous) | set(run_config)
                   if previous.get(k) != run_config.get(k))
  if 'rounds' in changed and len(changed) > 1 and run_config['rounds'] > previous['rounds']:
    changed.remove('rounds')  # growing them is allowed: the other settings are at fault
  if changed:
    grows = (f'; --rounds may only grow (this run recorded {previous["rounds"]})'
             if 'rounds' in changed and len(changed) == 1 else '')
    raise app.UsageError(
        f'--output_dir={path} holds a run with other settings '
        f'({", ".join(changed)}){grows}; resume it with the same flags or choose a '
        'new --output_dir.')
  return saved


def check_folder(path: str) -> None:
  """A UsageError unless --output_dir names a folder that is, or can be, written."""
  if not path.strip():
    raise app.UsageError('--output_dir is empty; name the folder the run writes to')
  root = pathlib.Path(path)
  existing = next(p for p in (root, *root.parents) if p.exists())
  problem = ('is a file, not a folder' if not existing.is_dir()
             else 'cannot be written' if not os.access(existing, os.W_OK | os.X_OK) else None)
  if problem:
    raise app.UsageError(f'--output_dir={path}: {existing} {problem}')


def _saved_config(root: pathlib.Path) -> dict | None:
  saved = root / 'config.json'
  checkpointed = (root / 'checkpoints').is_dir() and any((root / 'checkpoints').iterdir())
  if not saved.exists():
    if checkpointed:
      raise app.UsageError(f'--output_dir={root} holds checkpoints but no config.json: the '
                           'settings they were made with cannot be checked; choose a new '
                           '--output_dir')
    return None
  try:
    previous = json.loads(saved.read_text())
  except json.JSONDecodeError as e:
    raise app.UsageError(f'{saved} is not the JSON a run writes ({e}); restore it or choose '
                         'a new --output_dir') from None
  if checkpointed and not (root / 'metrics.csv').exists():
    raise app.UsageError(f'--output_dir={root} holds checkpoints but no metrics.csv: the '
                         'rounds before them are lost (a resumed run would count from its '
                         'restart); choose a new --output_dir')
  if 'task' in previous:  # runs made before the tasks took their family names
    previous['task'] = tasks.canonical(previous['task'])
  return previous


def _filled(config: dict, defaults: Mapping[str, Any] | None) -> dict:
  """`config` with `defaults` for the settings it leaves out."""
  return {**(defaults or {}), **config}


def _extends(previous: dict, run_config: dict) -> bool:
  """Whether run_config is the saved run's with more rounds."""
  rounds = previous.get('rounds')
  return (rounds is not None and run_config.get('rounds', rounds) > rounds
          and {**previous, 'rounds': run_config['rounds']} == run_config)


def output_dir(path: str, run_config: dict,
               defaults: Mapping[str, Any] | None = None) -> pathlib.Path:
  """Creates --output_dir with its config.json, or checks that the run there had
  the same config (check_resumable, `defaults` as there); records this start in
  machines.json. A run extended by more --rounds records them, its earlier
  summary kept beside as summary_at_round_<N>.json."""
  previous = check_resumable(path, run_config, defaults)
  extended = previous is not None and _extends(_filled(previous, defaults),
                                                _filled(run_config, defaults))
  root = pathlib.Path(path)
  try:
    root.mkdir(parents=True, exist_ok=True)
  except OSError as e:  # e.g. a read-only file system, which os.access does not see
    raise app.UsageError(f'--output_dir={path}: {e.strerror}') from None
  _lock(root)
  if previous is None or extended:
    files.write_json(root / 'config.json', run_config)
  summary = root / 'summary.json'
  if extended and summary.exists():
    os.replace(summary, root / f'summary_at_round_{previous["rounds"]}.json')
  starts = root / 'machines.json'
  files.write_json(starts, [*(json.loads(starts.read_text()) if starts.exists() else []),
                      {'started': datetime.datetime.now(datetime.timezone.utc).isoformat(
                          timespec='seconds'), **machine()}])
  return root


def discard_unstarted(root: pathlib.Path) -> None:
  """Removes what a new run wrote before it stopped at its first step, refused
  (its config, start record, empty metrics and lock; the folder if nothing else
  is there): the corrected command then starts afresh."""
  metrics = root / 'metrics.csv'
  if metrics.exists() and len(metrics.read_text().splitlines()) > 1:
    return  # a step was recorded: a result, kept
  for name in ('config.json', 'machines.json', 'metrics.csv', '.lock'):
    (root / name).unlink(missing_ok=True)
  _HELD.pop(root.resolve(), None)
  if not any(root.iterdir()):
    root.rmdir()


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
