"""What the launchers share: the task and option flags, turned into a task's
Config and built; `run`, every launcher's entry. The rest of their common work
is by job: outputs (the output folder), progress (the progress line, targets)."""

import dataclasses
import json
import pathlib
import sys
import types
import typing

from absl import app
from absl import flags
from absl import logging

from experiments import files
from launch import imports
from launch import quiet_start
from launch import usage
import tasks
from tasks import setting
from tff_rec import registry
from tff_rec.data import tables
from tff_rec.runtime import native
from tff_rec.training import loop

# Every launcher's TFF compiles (remote workers, DP's rounds): Grappler's logs of
# round pieces that compute nothing are not errors.
native.compiler = quiet_start.quiet_compiler(native.compiler)

# A user's modules register their algorithms and tasks before any flag is made of them.
imports.load_all(sys.argv)
flags.DEFINE_multi_string(imports.FLAG, [], 'A module of your own that registers algorithms '
                          '(tff_rec.registry.register) or tasks (tasks.register): '
                          'a module name or a .py file; repeatable.')


class _TaskParser(flags.EnumParser):
  """--task: a task's name, or an alias (tasks.ALIASES) read as that name."""

  def parse(self, argument):
    return tasks.canonical(super().parse(argument))


flags.DEFINE(_TaskParser([*sorted(tasks.TASKS), *sorted(tasks.ALIASES)]), 'task', 'next_item',
             f'Task to run: one of {", ".join(sorted(tasks.TASKS))} (older names: '
             f'{", ".join(f"{a} = {n}" for a, n in sorted(tasks.ALIASES.items()))}).',
             serializer=flags.ArgumentSerializer())
flags.DEFINE_string('target', None, 'Report in the summary the first round (epoch) whose '
                    'evaluation reaches a value, e.g. "eval/test_auc>=0.6" or '
                    '"eval/train_loss<=0.33".')
flags.DEFINE_string('output_dir', None, 'Where metrics, checkpoints and the '
                    'summary go; an interrupted run resumes from here.')

FLAGS = flags.FLAGS
# A launcher's exit status when its run diverged: it finished, and its summary says so.
DIVERGED_EXIT_CODE = 3


def run(main) -> None:
  """app.run(main), after what every launcher sets up in its process (not at
  import: importing a launcher changes no TF, TFF or logging state): absl logging
  at WARNING (TFF logs every checkpoint at INFO), and TFF's own import-time
  context dropped (launchers run computations only inside a NativeRuntime; TFF's
  context, alive at exit, prints an error: see runtime.native)."""

  logging.set_verbosity(logging.WARNING)
  native.drop_tff_default_context()  # before parsing: a flag error exits too
  app.run(usage.brief_usage_errors(main))


def stop_diverged(diverged: loop.Diverged, out: pathlib.Path, cures: str) -> None:
  """Writes the summary of a run that diverged, says so, and exits non-zero."""
  last, unit = diverged.last_evaluation, diverged.unit
  files.write_summary(out / 'summary.json', {
      **diverged.metrics, f'diverged_at_{unit}': diverged.round_num,
      'diverged': diverged.what,
      **({f'last_finite_{unit}': diverged.last_evaluated_round} if last else {}),
      **{f'last_finite/{k}': v for k, v in last.items()}})
  shown = ', '.join(f'{k} {v:.4g}' for k, v in sorted(last.items())
                    if not k.startswith('memory/'))
  print(f'error: {diverged}; stopped. '
        + (f'Last finite evaluation ({unit} {diverged.last_evaluated_round}): {shown}. '
           if last else 'No evaluation was finite before it. ')
        + f'What usually cures it: {cures}. Summary: {out / "summary.json"}', file=sys.stderr,
        flush=True)
  raise SystemExit(DIVERGED_EXIT_CODE)


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


def task_config(training: str | None = None):
  """The chosen task's Config from the task flags that were set; under `training`
  ('federated', 'centralized'), a set flag only the other kind uses is refused."""
  return checked_config(lambda: tasks.module(FLAGS.task).make_config(
      **task_setting_values(training)))


def task_setting_values(training: str | None = None) -> dict:
  """The chosen task's settings given as flags (their fields' types), checked: a
  flag of another task, or (under `training`) of the other kind of training, is
  refused."""
  own = {field.name: field for field in setting.described(tasks.module(FLAGS.task).Config)}
  foreign = sorted(set(set_flags(TASK_FLAGS)) - set(own))
  if foreign:
    raise app.UsageError(f'--{foreign[0]} does not apply to --task={FLAGS.task} (its '
                         f'settings: {", ".join(sorted(own))})')
  other = sorted(name for name in set_flags(own)
                 if own[name].metadata.get('training', training) != training)
  if training and other:
    raise app.UsageError(f'--{other[0]} applies to {own[other[0]].metadata["training"]} '
                         f'training only, not to {training} training of --task={FLAGS.task}')
  return option_values(own)


def as_usage_error(make):
  """make(), its ValueError (a setting the library refuses) a UsageError."""
  try:
    return make()
  except ValueError as e:
    raise app.UsageError(str(e)) from None


def checked_config(make):
  """make() -> a task's Config, its ValueError a UsageError; a negative seed refused."""
  config = as_usage_error(make)
  if getattr(config, 'seed', 0) < 0:  # numpy's generators take no negative seed
    raise app.UsageError(f'--seed must be >= 0, got {config.seed}')
  return config


def build_task(config, task: str | None = None):
  """Task `task` (default --task's), or a UsageError naming --data_dir when its files
  are wrong."""
  module = tasks.module(task or FLAGS.task)
  try:
    return module.Task(config)
  except tables.DataFormatError as e:
    movielens_task = 'ml-100k' in getattr(module, 'DEFAULT_DATA_DIR', '')
    if pathlib.Path(config.data_dir).is_file() or not movielens_task:  # a file of the user's
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


def exit_at_import(message: str) -> None:
  """Exits a launcher that cannot define its flags (a user's module at fault)."""
  sys.exit(f'error: {message}')


def define_option_flags(fields: dict, helps: dict | None = None) -> None:
  """A flag per field; its help is the field's (metadata['help']) unless in `helps`."""
  for name, field in fields.items():
    if name in FLAGS:
      owners = ', '.join(f'--algorithm={n}' for n, a in registry.algorithms().items()
                         if name in {f.name for f in dataclasses.fields(a.options)})
      exit_at_import(f'two flags are named --{name}: an algorithm option ({owners or "?"}) '
                     'takes a name the launcher (or a training setting) has; rename the '
                     'option')
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
  defaults = [f'{task} {flag_value(f.default) or "none"}' for task, f in owners
              if f.default is not None]
  return f'{text} (default: {"; ".join(defaults)})' if defaults else text


def flag_value(value) -> str:
  """A value as its flag takes it (a list flag: comma-joined)."""
  return ','.join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def define_task_flags() -> tuple[str, ...]:
  settings = task_settings()
  define_option_flags({name: owners[0][1] for name, owners in settings.items()},
                      helps={name: _setting_help(owners) for name, owners in settings.items()})
  return tuple(settings)


# What defines the task (a run's config.json includes them).
TASK_FLAGS = define_task_flags()


def flag_args(values: dict) -> list[str]:
  """Settings as command-line flags."""
  return [f'--{name}={flag_value(value)}' for name, value in values.items()]


