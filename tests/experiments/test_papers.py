"""The papers' study files describe their committed records: the plan needs no cell
the records lack, and every record is a cell of its study (a point its grid tried,
at one of its seeds: some are kept for what a README cites) run with the settings
the study gives that cell. (launch.rebuild_tables checks the tables.)"""

import json
import pathlib

import pytest

from experiments import study as study_lib
from experiments import rebuilds
from experiments import study_file
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
