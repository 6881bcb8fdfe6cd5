"""The papers' study files describe their committed records: the plan needs no cell
the records lack, and every record is a cell of its study (a point its grid tried,
at one of its seeds: some are kept for what a README cites) run with the settings
the study gives that cell. (launch.rebuild_tables checks the tables.) And how FedSubAvg's
tables read a diverged seed."""

import json
import pathlib

import numpy as np
import pytest

from experiments import study as study_lib
from experiments import rebuilds
from experiments import study_file
from experiments.papers import fedsubavg_movielens
from tests import conftest

STUDIES = {r.folder: next(a.split('=', 1)[1] for a in r.args if a.startswith('--spec='))
           for r in rebuilds.REBUILDS if r.module == 'launch.study'}


@pytest.mark.parametrize('folder', sorted(STUDIES))
def test_every_record_is_a_cell_of_its_study_with_its_settings(folder):
  study = study_file.load(STUDIES[folder])
  results = conftest.REPO / 'results' / folder
  records = study_lib.Records(results)
  plan = study_lib.plan(study, records)
  assert plan.done, f'cells the records lack: {[c.name for c in plan.ready]}'
  planned, cells = set(), {}
  for name, state in plan.methods.items():
    method = study.methods[name]
    grid = {study_lib.grid_cell_name(method, dict(k)): (name, dict(k), method.seeds[0], True)
            for k in state.tried}
    tried = plan.methods[method.choice_of or name].tried
    for point in [dict(k) for k in tried] + [state.chosen]:
      cells.update({study_lib.cell_name(name, point, s): (name, point, s, False)
                    for s in method.seeds})
    cells.update(grid)
    planned |= set(grid) | {study_lib.cell_name(name, state.chosen, s) for s in method.seeds}
  recorded = {p.name for p in (results / study_lib.RECORDS).iterdir() if p.is_dir()}
  assert planned <= recorded and recorded <= set(cells), sorted(recorded - set(cells))
  for cell in sorted(recorded):
    name, point, seed, grid_run = cells[cell]
    config = json.loads((records.path(cell) / 'config.json').read_text())
    spec = study.spec(name, point, seed, grid=grid_run)
    assert spec.differences(config) == [], cell


def test_the_folder_keeps_the_study_file_it_ran():
  for folder, spec in STUDIES.items():
    kept = pathlib.Path(conftest.REPO / 'results' / folder / study_lib.SPEC_FILE)
    assert study_file.read(kept) == study_file.read(spec), folder


def test_fedsubavgs_tables_read_a_diverged_seed_at_its_last_evaluation_and_count_it():
  """Seed 1 diverged after two evaluations (0.60, then 0.58): the column's mean keeps
  it at 0.58, never drops it, and says so."""
  finals = {'s0': 0.70, 's1': float('nan'), 's2': 0.72}
  curves = {'s0': [0.6, 0.7], 's1': [0.60, 0.58, float('nan')], 's2': [0.6, 0.72]}

  def final_value(name, metric):
    del metric
    return finals.get(name)

  def curve(name, metric):
    del metric
    values = np.array(curves.get(name, []))
    return np.arange(len(values)), values

  assert fedsubavg_movielens.result(final_value, curve, 's1', 'm') == 0.58
  assert fedsubavg_movielens.final_cell(final_value, curve, ['s0', 's1', 's2'], 'm') == (
      '0.6667 ± 0.0757 (1 of 3 seeds diverged, each read at its last evaluation before)')
  assert fedsubavg_movielens.final_cell(final_value, curve, ['not run'], 'm') == 'not run'
