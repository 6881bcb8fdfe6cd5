r"""Large populations on Amazon Beauty: round time, memory and its slope, metric.

  python -m launch.reproduce_scale                 # run what is missing, tabulate
  python -m launch.reproduce_scale --only=none     # the table from the records

Amazon Beauty 5-core (22,363 users as clients, 12,101 items), 100 rounds:
* leave-one-out ranking (`loo_ranking` on the sequence file,
  `--min_interactions=5`: every user), d = 64, stored user vectors, 1,000 clients
  a round: FedMF and CoLR r = 4. CoLR again on the 2,189 users with 15 or more
  items: the same cohort size from a population ten times smaller, to show that
  memory does not grow with the population beyond the data itself.
* FAIR 1x-2x-4x-8x (`ranking` on the sequence file, chronological 30%
  test split, NeuMF, fresh client Adam), 200 clients a round.

Each cell runs `launch.train` with its runtime's default (`--runtime=auto`) and
is recorded in results/scale_amazon_beauty/cells. Memory is the trainer's
resident set, and its TFF worker's on the native runtime, after each round;
each one's slope is a least-squares line over rounds 21-100 (after the first
evaluation, at round 20, has allocated its buffers).
"""

import dataclasses
import json
import pathlib

from absl import app
from absl import flags
import numpy as np
import pandas as pd

from experiments import files
from experiments import run_records
from experiments.papers import cell_records
from launch import common

flags.DEFINE_string('runs_dir', 'runs/scale', 'Where the individual runs go.')
flags.DEFINE_string('results_dir', 'results/scale_amazon_beauty', 'Where the results go.')
flags.DEFINE_list('seeds', ['0'], 'Seeds of every cell.')
flags.DEFINE_enum('only', 'all', ['all', 'none'], 'none: tabulate the records, run nothing.')
FLAGS = flags.FLAGS
BEAUTY = '../shared/data/amazon-beauty'
ROUNDS = 100
# The slope is fitted from here: after the first evaluation (round 20), which
# allocates its scoring buffers once.
SLOPE_FROM = 21


@dataclasses.dataclass(frozen=True)
class Cell:
  label: str
  task: str
  metric: str
  args: tuple[str, ...]
  task_flags: tuple[tuple[str, object], ...] = ()


MF = ('--embedding_dim=64', '--clients_per_round=1000', f'--rounds={ROUNDS}',
      '--eval_every=20', '--checkpoint_every=20')
FAIR = ('--algorithm=fair', '--capacities=1x-2x-4x-8x', '--clients_per_round=200',
        f'--rounds={ROUNDS}', '--eval_every=20', '--checkpoint_every=20')
CELLS = {
    'fedmf': Cell('FedMF d=64', 'loo_ranking', 'test/hr_at_10',
                  ('--algorithm=fedmf', *MF), (('min_interactions', 5),)),
    'colr_r4': Cell('CoLR r=4', 'loo_ranking', 'test/hr_at_10',
                    ('--algorithm=colr', '--rank=4', *MF), (('min_interactions', 5),)),
    'colr_r4_2k': Cell('CoLR r=4, users with >= 15 items', 'loo_ranking',
                       'test/hr_at_10', ('--algorithm=colr', '--rank=4', *MF),
                       (('min_interactions', 15),)),
    'fair_1x-8x': Cell('FAIR 1x-2x-4x-8x', 'ranking', 'test/ndcg_at_20', FAIR),
    'fair_1x-8x_inprocess': Cell('FAIR 1x-2x-4x-8x, in-process (the op)', 'ranking',
                                 'test/ndcg_at_20', (*FAIR, '--runtime=inprocess')),
}


def _use_task(cell: Cell, seed: int):
  """Points the shared task flags (passed on to launch.train) at the cell's task."""
  FLAGS.task, FLAGS.data_dir, FLAGS.seed = cell.task, BEAUTY, seed
  FLAGS.min_interactions = dict(cell.task_flags).get('min_interactions')


def _run(name: str, seed: int) -> dict | str:
  cell = CELLS[name]
  _use_task(cell, seed)
  return cell_records.run_cell(f'{FLAGS.runs_dir}', f'{name}_s{seed}', 'launch.train', *cell.args,
                         wanted=FLAGS.only == 'all',
                         records_dir=str(pathlib.Path(FLAGS.results_dir) / 'cells'))


def _task_facts(name: str, seed: int) -> list:
  """[the number of training clients, the popularity row's metric]: derived
  once into the records (cells/derived.json), so the table rebuilds without the data."""
  cell = CELLS[name]

  def compute() -> tuple[int, float]:
    _use_task(cell, seed)
    task = common.build_task(common.task_config())
    values = task.objective.popularity('test')
    return len(task.train_client_ids), values[cell.metric.split('/')[-1]]

  return run_records.derived(str(pathlib.Path(FLAGS.results_dir) / 'cells'),
                              f'task_facts_{name}_s{seed}', compute)


def _cell_file(name: str, seed: int, file: str) -> pathlib.Path:
  return run_records.cell_file(FLAGS.runs_dir, f'{name}_s{seed}', file,
                          str(pathlib.Path(FLAGS.results_dir) / 'cells'))


def _timing_and_memory(name: str, seed: int) -> dict[str, float]:
  """Mean s/round after round 1; peak RSS MB and its slope MB/round from
  SLOPE_FROM, of the trainer and of its TFF worker (NaN in-process: there is none)."""
  rows = pd.read_csv(_cell_file(name, seed, 'metrics.csv'))
  later = rows['round'] >= SLOPE_FROM
  facts = {'seconds': rows.loc[rows['round'] > 1, 'train/round_seconds'].mean()}
  for part, column in (('trainer', 'memory/rss_mb'), ('worker', 'memory/children_rss_mb')):
    worker = column in rows and rows[column].fillna(0).any()  # in-process: no worker
    rss = rows[column] if part == 'trainer' or worker else pd.Series(np.nan, index=rows.index)
    facts[f'{part}_peak'] = rss.max()
    facts[f'{part}_slope'] = (np.polyfit(rows['round'][later], rss[later], 1)[0]
                              if rss.notna().all() else np.nan)
  return facts


def _mb(value: float, sign: str = '') -> str:
  return '-' if np.isnan(value) else f'{value:{sign}.{2 if sign else 0}f}'


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  seeds = [int(s) for s in FLAGS.seeds]
  lines = ['# Amazon Beauty at scale', '',
           'Built by `python -m launch.reproduce_scale` from the cell records '
           f'(seeds {seeds}; one value per seed). See README.md here for the reading.', '',
           '| cell | clients (population) | clients / round | runtime | s / round | '
           'peak RSS MB: trainer / TFF worker | RSS slope MB / round (21-100): trainer / '
           'worker | metric at round 100 | popularity |', '|---|---|---|---|---|---|---|---|---|']
  for name, cell in CELLS.items():
    for seed in seeds:
      summary = _run(name, seed)
      if not isinstance(summary, dict):
        lines.append(f'| {cell.label} (seed {seed}) | | | | {summary} | | | | |')
        continue
      facts = _timing_and_memory(name, seed)
      config = json.loads(_cell_file(name, seed, 'config.json').read_text())
      population, popularity = _task_facts(name, seed)
      lines.append(
          f'| {cell.label} (seed {seed}) | {population} | {config["clients_per_round"]} | '
          f'{config["runtime"]} | {facts["seconds"]:.2f} | {_mb(facts["trainer_peak"])} / '
          f'{_mb(facts["worker_peak"])} | {_mb(facts["trainer_slope"], "+")} / '
          f'{_mb(facts["worker_slope"], "+")} | '
          f'{cell.metric.split("/")[-1]} {summary[cell.metric]:.4f} | {popularity:.4f} |')
  out = pathlib.Path(FLAGS.results_dir)
  out.mkdir(parents=True, exist_ok=True)
  files.write_text(out / 'table.md', '\n'.join(lines) + '\n')
  print('\n'.join(lines), flush=True)
  print(f'done: {out / "table.md"}', flush=True)

