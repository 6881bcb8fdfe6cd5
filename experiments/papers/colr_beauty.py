"""CoLR's headline on Amazon Beauty, rendered from the records of the study
colr_beauty.toml beside this module: each method's client-rate grid on validation
(seed 0), then FedMF-64 against CoLR r = 4, each at its chosen rate, over the seeds,
with a popularity row, as experiments.papers.seeded_table renders its tables."""

import pathlib

from experiments import files
from experiments import study as study_lib
from experiments.papers import seeded_table

LABELS = {'colr': ('CoLR r=4', ('--algorithm=colr', '--rank=4')),
          'fedmf': ('FedMF-64', ('--algorithm=fedmf',))}
RATE = 'client_learning_rate'


def _table(study, title: str, metrics, rows: dict, popularity: str, **fields):
  """A seeded table of the study's setting (its caption: the flags its cells ran with)."""
  fedmf = study.methods['fedmf']
  settings = tuple((k, v) for k, v in study.task_settings.items() if k != 'embedding_dim')
  args = (f'--embedding_dim={study.task_settings["embedding_dim"]}',
          f'--clients_per_round={fedmf.settings["clients_per_round"]}',
          f'--item_average={fedmf.options["item_average"]}', f'--rounds={study.rounds}',
          f'--eval_every={study.eval_every}', f'--checkpoint_every={study.eval_every}')
  return seeded_table.Table(study.task, title, metrics, rows, args, popularity, settings,
                            **fields)


def _summaries(records: study_lib.Records, cells) -> list[dict]:
  return [records.summary(c) for c in cells
          if records.finished(c)]


def render(study, folder: pathlib.Path, plan: study_lib.Plan, task) -> None:
  """table.md into `folder`, from its records (popularity derived into them once)."""
  del task  # popularity is derived by seeded_table from the study's task settings
  records = study_lib.Records(folder)
  cells = folder / study_lib.RECORDS
  lines = ["# CoLR's headline on Amazon Beauty", '',
           'Built by `python -m launch.study --spec=experiments/papers/colr_beauty.toml` from '
           'the cell records. See README.md here for the reading.', '']
  for method, (label, _) in LABELS.items():
    rates = study.methods[method].grid[RATE]
    table = _table(study, f'Client learning rate: {label}, validation, seed 0',
                   (study.selection.metric, 'validation/ndcg_at_10'),
                   {r: (f'{label}, client SGD {r:g}', (), None) for r in rates}, 'validation')
    results = {'popularity': [seeded_table.popularity(table, 0, cells)]}
    results.update({r: _summaries(records, [study_lib.cell_name(method, {RATE: r}, 0)])
                    for r in rates})
    lines += seeded_table.render(table, [0], results)
  chosen = {m: plan.methods[m].chosen for m in ('fedmf', 'colr')}
  if None in chosen.values():
    lines.append('The headline rows wait for both sweeps.')
  else:
    seeds = list(study.seeds)
    labels = {m: f'{LABELS[m][0]} (client SGD {chosen[m][RATE]:g})' for m in chosen}
    table = _table(study, 'FedMF-64 against CoLR r = 4, each at its validated rate',
                   tuple(study.report), {m: (labels[m], (), None) for m in chosen}, 'test',
                   versus=('fedmf', 'popularity'))
    results = {'popularity': [seeded_table.popularity(table, s, cells) for s in seeds]}
    results.update({m: _summaries(records, [study_lib.cell_name(m, chosen[m], s)
                                            for s in seeds]) for m in chosen})
    lines += seeded_table.render(table, seeds, results)
  files.write_text(folder / 'table.md', '\n'.join(lines))
