r"""Every algorithm on every task, on the real data, for a few rounds: what runs where.

  python -m launch.matrix --rounds=2
  python -m launch.matrix --rounds=2 --tasks=ml100k_ctr --algorithms=fedsubavg,metaua

Each cell is an algorithm on a dataset's task with one aggregator (mean,
secure, dp) on one runtime (native; and in-process where it applies; secure
runs in-process only), and with FedSubAvg's correction stacked (--stack). A
cell is OK with its headline test metric after the last round, or N/A with
the reason the registry gives, before any training. A secure or DP cell is
OK only if its rounds' metrics show the aggregation took effect (the secure
sum's bounds; the DP clip and noise, equal to the settings): the record keeps
what they showed.
Each finished cell is recorded as JSON in --records (a rerun skips recorded
cells, except FAIL ones; --only=none rebuilds the table from the records alone) and the table
goes to --output.
"""

import contextlib
import os
import pathlib

from absl import app
from absl import flags

from experiments import files
from experiments import matrix_table
from launch import common
from launch import progress
import tasks
from tff_rec import registry
from tff_rec.runtime import native

flags.DEFINE_integer('rounds', 2, 'Rounds per cell.', lower_bound=1)
flags.DEFINE_list('tasks', list(matrix_table.DATASETS), 'Dataset tasks (rows of the table).')
flags.DEFINE_list('algorithms', None, 'Algorithms (default: every registered one).')
flags.DEFINE_string('records', 'results/matrix/cells', 'Where each cell is recorded.')
flags.DEFINE_string('output', 'results/matrix/table.md', 'The table.')
flags.DEFINE_enum('only', 'all', ['all', 'none'], 'none: rebuild the table from the '
                  'records, running nothing.')
FLAGS = flags.FLAGS


def _to_run(records: dict[str, dict], dataset: str, algorithm: str, cell) -> bool:
  """A cell not recorded (with these --rounds), recorded as FAIL (its cause may be
  fixed since), or recorded OK without what showed its aggregation."""
  record = records.get(matrix_table.cell_name(dataset, algorithm, *cell))
  return not matrix_table.current(record, FLAGS.rounds) or record['status'] == 'FAIL' or (
      record['status'] == 'OK' and not matrix_table.shows_effect(record, cell[0]))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  given = sorted(common.set_flags(common.TASK_FLAGS))
  if given:
    raise app.UsageError(f'--{given[0]} does not apply to launch.matrix: each task runs on '
                         f'its fixed settings, on the data in {matrix_table.SHARED}')
  common.check_choices('tasks', FLAGS.tasks, matrix_table.DATASETS)
  algorithms = FLAGS.algorithms or list(registry.algorithms())
  common.check_choices('algorithms', algorithms, registry.algorithms())
  root = pathlib.Path(FLAGS.records)
  if FLAGS.only == 'none' and not root.is_dir():  # a table of "not run" would say nothing
    raise app.UsageError(f'--records={root}: no such folder, so no cell to build the table '
                         'from; name the records folder (or run cells: --only=all)')
  records = matrix_table.read_records(root)
  if FLAGS.only == 'all':
    todo = [(d, a, *cell) for d in FLAGS.tasks for a in algorithms
            for cell in matrix_table.CELLS if _to_run(records, d, a, cell)]
    show_progress = progress.Progress(len(todo), 'cell', {})
    runtime = native.NativeRuntime() if todo else contextlib.nullcontext()
    with runtime:
      loaded = {}
      for done, (dataset, algorithm, aggregator, runtime_name, stack) in enumerate(todo, 1):
        spec = matrix_table.DATASETS[dataset]
        if dataset not in loaded:
          module = tasks.module(spec.task)
          loaded = {dataset: module.Task(module.make_config(
              data_dir=str(matrix_table.SHARED / spec.data_dir), **spec.config))}
        name = matrix_table.cell_name(dataset, algorithm, aggregator, runtime_name, stack)
        print(f'== {name}', flush=True)
        records[name] = {**matrix_table.run_cell(
            loaded[dataset], spec, algorithm, aggregator, runtime_name, stack, FLAGS.rounds),
                         'rounds': FLAGS.rounds}
        print(f"   {records[name]['status']} {records[name].get('value', '')}"
              f"{records[name].get('reason', '')}", flush=True)
        (root / dataset).mkdir(parents=True, exist_ok=True)
        files.write_json(root / f'{name}.json', records[name])
        show_progress(done, {})
  output = pathlib.Path(FLAGS.output)
  files.write_text(output, matrix_table.table(
      records, algorithms, FLAGS.tasks, rounds=FLAGS.rounds,
      records_dir=os.path.relpath(root, output.parent)))
  print(f'done: {FLAGS.output}', flush=True)


if __name__ == '__main__':
  common.run(main)
