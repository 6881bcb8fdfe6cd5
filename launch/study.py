r"""A study: methods compared on one task, each tuned on validation over its grid,
every seed run at its choice, floors and a baseline beside (experiments.study_file).

  python -m launch.study --spec=docs/studies/ml100k_ctr.toml --output_dir=studies/ctr
  python -m launch.study --spec=... --output_dir=... --only=none   # outputs from records
  python -m launch.study --spec=... --output_dir=... --set=rounds=10 --set=seeds=[0,1]

Every cell is a launch.train run under OUTPUT_DIR/runs (resumable) and, once
finished, a record under OUTPUT_DIR/cells; Ctrl-C and the same command resume
the study. Writes OUTPUT_DIR/table.md, results.json and curves.png (or what
the study's report.renderer writes: a paper's own table over the same records).
"""

import functools
import importlib
import os
import pathlib
import sys
import time

from absl import app
from absl import flags

from experiments import cell_pool
from experiments import run_records
from experiments import study as study_lib
from experiments import study_file
from experiments import study_report
from launch import common
from launch import imports
from launch import progress

flags.DEFINE_string('spec', None, 'The study file (TOML).')
flags.DEFINE_enum('only', None, ['none'], 'none: write the outputs from the records alone, '
                  'running nothing and reading no data.')
flags.DEFINE_integer('parallel', None, 'Cells run at once (default: one per core).',
                     lower_bound=1)
flags.DEFINE_multi_string('set', [], 'Override a field of the study file: PATH=VALUE with '
                          'PATH dotted (rounds=10, seeds=[0,1], '
                          'methods.fedavg.grid.client_learning_rate=[0.1,0.3]) and VALUE as '
                          'TOML writes it.')

FLAGS = flags.FLAGS


def _overrides() -> dict:
  overrides = {}
  for item in FLAGS.set:
    path, equals, value = item.partition('=')
    if not equals or not path:
      raise app.UsageError(f'--set={item}: give PATH=VALUE, e.g. --set=rounds=10')
    overrides[path.strip()] = study_file.parse_value(value.strip())
  return overrides


def _study() -> study_file.Study:
  common.require('spec', 'output_dir')
  overrides = _overrides()
  try:
    raw = study_file.read(FLAGS.spec, overrides)
  except study_file.StudyError as e:
    raise app.UsageError(str(e)) from None
  for module in raw.get('imports', []) if isinstance(raw.get('imports'), list) else []:
    try:
      imports.load(module)
    except Exception as e:  # pylint: disable=broad-except  # whatever the module raises
      raise app.UsageError(f'{FLAGS.spec}: imports: {module} could not be loaded: '
                           f'{type(e).__name__}: {e}') from None
  try:
    return study_file.load(FLAGS.spec, overrides)
  except study_file.StudyError as e:
    raise app.UsageError(str(e)) from None


def _floors(study: study_file.Study, folder: pathlib.Path, build, compute: bool) -> dict:
  """{floor: {metric: [a value per seed]}}: derived once from the data into the
  records (run_records.derived); with `compute` off, only what is recorded."""
  if not study.floors:
    return {}
  settings = ' '.join(f'--{k}={v}' for k, v in sorted(study.task_settings.items()))
  out = {}
  for seed in study.seeds:
    key = f'floors --task={study.task} {settings} --seed={seed} item={study.floor_item}'
    derived = folder / study_lib.RECORDS / run_records.DERIVED_FILE
    if not compute and not (derived.exists() and key in derived.read_text()):
      continue

    def values(seed=seed):
      task = build(seed)
      return task.floors(*([study.floor_item] if study.floor_item else []))

    for floor, metrics in run_records.derived(folder / study_lib.RECORDS, key, values).items():
      if floor in study.floors:
        for metric, value in metrics.items():
          out.setdefault(floor, {}).setdefault(metric, []).append(value)
  return out


def _task_builder(study: study_file.Study):
  """(seed, method) -> that method's task for that seed (the first method's by
  default; built once each): a renderer derives the values its table shows from
  the data only when the records lack them."""

  @functools.cache
  def build(seed: int, method: str | None = None):
    spec = study.spec(method or next(iter(study.methods)), {}, seed)
    return common.build_task(spec.task_config, spec.task)

  return build


def _caption(study: study_file.Study) -> str:
  settings = ''.join(f' --{k}={common.flag_value(v)}' for k, v in study.task_settings.items())
  return (f'`--task={study.task}{settings}`; {study.rounds} rounds, evaluated every '
          f'{study.eval_every}')


def _reporter(started: float):
  finished = []

  def report(cell: study_lib.Cell, score: float | None, plan: study_lib.Plan) -> None:
    finished.append(time.perf_counter())
    left = len(plan.ready) + sum(m.chosen is None for m in plan.methods.values())
    per_cell = (finished[-1] - started) / len(finished)
    shown = 'diverged' if score is not None and score != score else f'{score:.4f}'
    eta = progress.duration(per_cell * left / max(1, FLAGS.parallel or os.cpu_count()))
    print(f'[{len(finished)} done] {cell.name}: {shown}; at least {left} to run, ETA {eta}',
          flush=True)

  return report


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  study = _study()
  folder = pathlib.Path(FLAGS.output_dir)
  try:
    study_lib.check_folder(study, folder)
  except study_lib.StudyFolderError as e:
    raise app.UsageError(str(e)) from None
  records = study_lib.Records(folder)
  build = _task_builder(study)  # the floors' and the renderer's tasks, each built once
  running = FLAGS.only != 'none'
  if running:
    size = FLAGS.parallel or os.cpu_count() or 1
    print(f'study {study.path}: {len(study.methods)} methods, seeds {list(study.seeds)}, '
          f'{size} cells at once; output in {folder}', flush=True)
    started = time.perf_counter()
    try:
      with cell_pool.Pool(size, study.imports) as pool:
        # the first cells' workers import TensorFlow while the floors are derived here
        pool.start([c.spec.module for c in study_lib.plan(study, records).ready])
        floors = _floors(study, folder, build, compute=True)  # the data is read before any cell
        plan = study_lib.run(study, folder, pool, on_cell=_reporter(started))
    except KeyboardInterrupt:
      print('interrupted; the same command resumes the study (each cell from its last '
            'checkpoint)', file=sys.stderr, flush=True)
      raise SystemExit(130) from None
    except (study_lib.CellFailed, study_lib.StudyFolderError) as e:
      raise SystemExit(f'error: {e}') from None
    wall = time.perf_counter() - started
    if pool.run_seconds:  # how much of the study its cells' runs were
      print(f'the cells\' runs took {pool.run_seconds:.1f} s; the study {wall:.1f} s with '
            f'{size} at once ({wall * size / pool.run_seconds:.2f} x their sum / {size})',
            flush=True)
  else:
    floors = _floors(study, folder, build, compute=False)
    plan = study_lib.plan(study, records)
  if study.renderer:
    importlib.import_module(study.renderer).render(study, folder, plan, build)
  else:
    study_report.write(study, folder, plan, floors, _caption(study))
  print(f'done: {folder / "table.md"}' if plan.done else
        f'{folder / "table.md"} written; cells still to run: {len(plan.ready)} (and the '
        'grids they decide)', flush=True)


if __name__ == '__main__':
  common.run(main)
