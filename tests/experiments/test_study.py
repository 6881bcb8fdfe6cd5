"""A study's plan from its records: each grid on seed 0, a rate extended past a winning
edge, every seed at the choice; the folder keeps its study; the report's numbers.
Records are written here in the trainer's formats (summary.json, metrics.csv)."""

import json
import math

import pytest

from experiments import study as study_lib
from experiments import study_file
from experiments import study_report
from tests.experiments import test_study_file

METRIC = 'eval/validation_auc'


def _study(tmp_path, **overrides):
  path = tmp_path / 'study.toml'
  path.write_text(test_study_file.STUDY)
  return study_file.load(path, overrides)


def _record(folder, cell, validation, test=0.6, *, diverged=False):
  """A finished cell: its curves (last two evaluations: `validation`, and that minus
  0.01 before) and summary."""
  record = folder / study_lib.RECORDS / cell
  record.mkdir(parents=True)
  rows = [f'{r},{v},{test}' for r, v in ((5, validation - 0.01), (10, validation))]
  (record / 'metrics.csv').write_text('round,eval/validation_auc,eval/test_auc\n'
                                      + '\n'.join(rows) + '\n')
  summary = {'eval/test_auc': test, 'train/client_work/train/loss': 0.5}
  if diverged:
    summary['diverged_at_round'] = 10
  (record / 'summary.json').write_text(json.dumps(summary))


def _one_method(tmp_path, grid, extend=2):
  """The study with fedavg alone, its grid over the client rate."""
  text = test_study_file.STUDY.split('[methods.prox]')[0].replace(
      'baseline = "fedavg"\n', '')
  path = tmp_path / 'one.toml'
  path.write_text(text)
  return study_file.load(path, {'methods.fedavg.grid.client_learning_rate': grid,
                                'selection.extend': extend, 'rounds': 10})


def _cells(plan):
  return sorted(c.name for c in plan.ready)


def test_the_grid_runs_first_then_a_winning_edge_extends_then_every_seed(tmp_path):
  study = _one_method(tmp_path, [0.1, 0.3])
  records = study_lib.Records(tmp_path)
  plan = study_lib.plan(study, records)
  assert _cells(plan) == ['fedavg-client_learning_rate=0.1-s0',
                          'fedavg-client_learning_rate=0.3-s0']
  _record(tmp_path, 'fedavg-client_learning_rate=0.1-s0', 0.60)
  _record(tmp_path, 'fedavg-client_learning_rate=0.3-s0', 0.70)  # the upper edge wins
  assert _cells(study_lib.plan(study, records)) == ['fedavg-client_learning_rate=1-s0']
  _record(tmp_path, 'fedavg-client_learning_rate=1-s0', 0.75)  # wins again, at the new edge
  assert _cells(study_lib.plan(study, records)) == ['fedavg-client_learning_rate=3-s0']
  _record(tmp_path, 'fedavg-client_learning_rate=3-s0', 0.72)
  plan = study_lib.plan(study, records)
  assert plan.methods['fedavg'].chosen == {'client_learning_rate': 1.0}  # now inside
  assert _cells(plan) == ['fedavg-client_learning_rate=1-s1']  # seed 0 ran already
  # the score read is the mean of the last 2 evaluations
  assert records.score('fedavg-client_learning_rate=1-s0', study.selection) == pytest.approx(0.745)


@pytest.mark.parametrize('extend, past_edge, chosen', [
    (2, dict(validation=0.9, diverged=True), 0.3),  # diverged past the edge: 0.3 stands
    (1, dict(validation=0.8), 1.0),  # its one extension wins, and the limit is reached
    (0, None, 0.3)])  # no extension
def test_an_edge_stays_where_the_rate_past_it_diverges_or_extensions_run_out(
    tmp_path, extend, past_edge, chosen):
  study = _one_method(tmp_path, [0.1, 0.3], extend)
  records = study_lib.Records(tmp_path)
  _record(tmp_path, 'fedavg-client_learning_rate=0.1-s0', 0.60)
  _record(tmp_path, 'fedavg-client_learning_rate=0.3-s0', 0.70)
  if past_edge:
    _record(tmp_path, 'fedavg-client_learning_rate=1-s0', **past_edge)
  plan = study_lib.plan(study, records)
  assert plan.methods['fedavg'].chosen == {'client_learning_rate': chosen}
  past = records.score('fedavg-client_learning_rate=1-s0', study.selection)
  assert (past is not None and math.isnan(past)) == (extend == 2)


def test_a_method_at_another_ones_choice_waits_for_it_then_runs_every_seed(tmp_path):
  study = _one_method(tmp_path, [0.1, 0.3], extend=0)
  text = (tmp_path / 'one.toml').read_text() + (
      '\n[methods.secure]\nalgorithm = "fedavg"\naggregator = { name = "secure", '
      'secure_bound = 5.0 }\nchoice_of = "fedavg"\n')
  (tmp_path / 'one.toml').write_text(text)
  study = study_file.load(tmp_path / 'one.toml', {
      'methods.fedavg.grid.client_learning_rate': [0.1, 0.3], 'selection.extend': 0,
      'rounds': 10})
  records = study_lib.Records(tmp_path)
  plan = study_lib.plan(study, records)
  assert plan.methods['secure'].chosen is None and not plan.done
  assert all(c.method == 'fedavg' for c in plan.ready)
  _record(tmp_path, 'fedavg-client_learning_rate=0.1-s0', 0.70)
  _record(tmp_path, 'fedavg-client_learning_rate=0.3-s0', 0.60)
  plan = study_lib.plan(study, records)
  assert plan.methods['secure'].chosen == {'client_learning_rate': 0.1}
  secure = [c for c in plan.ready if c.method == 'secure']
  assert [c.name for c in secure] == ['secure-client_learning_rate=0.1-s0',
                                      'secure-client_learning_rate=0.1-s1']
  assert secure[0].spec.settings['client_learning_rate'] == 0.1
  assert secure[0].spec.aggregator_settings == {'secure_bound': 5.0}
  assert list(plan.methods) == ['fedavg', 'secure']  # the file's order


def test_short_grid_runs_are_cells_of_their_own_before_the_seeds_run(tmp_path):
  study = _one_method(tmp_path, [0.1, 0.3], extend=0)
  study = study_file.load(tmp_path / 'one.toml', {
      'methods.fedavg.grid.client_learning_rate': [0.1, 0.3], 'selection.extend': 0,
      'rounds': 10, 'selection.last': 1, 'selection.rounds': 4})
  records = study_lib.Records(tmp_path)
  plan = study_lib.plan(study, records)
  assert _cells(plan) == ['sweep-fedavg-client_learning_rate=0.1-s0',
                          'sweep-fedavg-client_learning_rate=0.3-s0']
  assert {(c.spec.rounds, c.spec.eval_every) for c in plan.ready} == {(4, 4)}
  _record(tmp_path, 'sweep-fedavg-client_learning_rate=0.1-s0', 0.60)
  _record(tmp_path, 'sweep-fedavg-client_learning_rate=0.3-s0', 0.70)
  plan = study_lib.plan(study, records)
  assert _cells(plan) == ['fedavg-client_learning_rate=0.3-s0',  # seed 0 runs anew, whole
                          'fedavg-client_learning_rate=0.3-s1']
  assert {(c.spec.rounds, c.spec.eval_every) for c in plan.ready} == {(10, 5)}


def test_integer_grids_are_not_extended_and_lower_can_be_better(tmp_path):
  _one_method(tmp_path, [0.1, 0.3])  # writes one.toml
  path = tmp_path / 'ints.toml'
  path.write_text((tmp_path / 'one.toml').read_text().replace(
      'grid = { client_learning_rate = [0.1, 0.3] }', 'grid = { local_epochs = [1, 2] }'))
  study = study_file.load(path, {'selection.goal': 'min', 'rounds': 10})
  records = study_lib.Records(tmp_path)
  _record(tmp_path, 'fedavg-local_epochs=1-s0', 0.60)
  _record(tmp_path, 'fedavg-local_epochs=2-s0', 0.70)
  plan = study_lib.plan(study, records)
  assert plan.methods['fedavg'].chosen == {'local_epochs': 1}  # lower wins; no 3 tried
  assert _cells(plan) == ['fedavg-local_epochs=1-s1']


def test_a_folder_keeps_its_study_and_refuses_one_that_changes_its_cells(tmp_path):
  study = _study(tmp_path)
  folder = tmp_path / 'out'
  study_lib.check_folder(study, folder)
  study_lib.check_folder(_study(tmp_path, seeds=[0, 1, 2]), folder)  # a seed added
  study_lib.check_folder(_study(tmp_path, seeds=[0, 1, 2],
                                **{'report.metrics': ['eval/test_logloss']}), folder)
  with pytest.raises(study_lib.StudyFolderError, match=r'whose rounds, seeds differ'):
    study_lib.check_folder(_study(tmp_path, rounds=30, seeds=[1]), folder)
  with pytest.raises(study_lib.StudyFolderError,
                     match=r'methods.fedavg.grid.client_learning_rate differ'):
    study_lib.check_folder(_study(tmp_path, seeds=[0, 1, 2], **{
        'methods.fedavg.grid.client_learning_rate': [0.1]}), folder)
  added = tmp_path / 'added.toml'
  added.write_text(test_study_file.STUDY + '\n[methods.sgd]\nalgorithm = "fedsgd"\n')
  study_lib.check_folder(study_file.load(added, {'seeds': [0, 1, 2]}), folder)  # a method added
  study_lib.check_folder(study_file.load(added, {'seeds': [0, 1, 2], 'methods.sgd.seeds': [
      0, 1, 2, 7]}), folder)  # a method's own seed added
  with pytest.raises(study_lib.StudyFolderError, match=r'whose methods.sgd.rounds differ'):
    study_lib.check_folder(study_file.load(added, {'seeds': [0, 1, 2], 'methods.sgd.seeds': [
        0, 1, 2, 7], 'methods.sgd.rounds': 40}), folder)


def test_the_report_reads_each_seed_and_marks_floors_and_baseline(tmp_path):
  study = _one_method(tmp_path, [0.1])
  for seed, (validation, test) in enumerate([(0.70, 0.61), (0.71, 0.63)]):
    _record(tmp_path, f'fedavg-client_learning_rate=0.1-s{seed}', validation, test)
  plan = study_lib.plan(study, study_lib.Records(tmp_path))
  assert plan.done
  numbers = study_report.write(study, tmp_path, plan,
                               {'click_rate': {'eval/test_auc': [0.7, 0.7]}}, 'caption')
  assert numbers['methods']['fedavg']['seeds'] == {
      0: {'diverged': False, 'eval/test_auc': 0.61},
      1: {'diverged': False, 'eval/test_auc': 0.63}}
  table = (tmp_path / 'table.md').read_text()
  # two seeds 0.02 apart cannot tell 0.08 below the floor at p < 0.05 (Welch: 1 df)
  assert ('| fedavg | client_learning_rate=0.1 | 0.620 ± 0.014 | undecided (-0.080, p = '
          '0.079, equivalence p = 0.957) | 0.610, 0.630 |') in table
  assert '| click_rate (floor) |  | 0.700 ± 0.000 |' in table
  assert '| fedavg | **client_learning_rate=0.1** | 0.6950 |' in table
  assert json.loads((tmp_path / 'results.json').read_text())['methods']['fedavg'][
      'chosen'] == {'client_learning_rate': 0.1}
  assert (tmp_path / 'curves.png').stat().st_size > 1000


def test_a_diverged_seed_counts_at_its_evaluations_before_it_diverged(tmp_path):
  study = _one_method(tmp_path, [0.1])
  _record(tmp_path, 'fedavg-client_learning_rate=0.1-s0', 0.70, 0.61)
  _record(tmp_path, 'fedavg-client_learning_rate=0.1-s1', 0.71, 0.55, diverged=True)
  records = study_lib.Records(tmp_path)
  assert math.isnan(records.score('fedavg-client_learning_rate=0.1-s1', study.selection))
  plan = study_lib.plan(study, records)
  numbers = study_report.write(study, tmp_path, plan, {}, 'caption')
  assert numbers['methods']['fedavg']['seeds'][1] == {'diverged': True, 'eval/test_auc': 0.55}
  table = (tmp_path / 'table.md').read_text()
  assert ('| fedavg | client_learning_rate=0.1 | 0.580 ± 0.042 | 0.610, 0.550 (diverged) '
          '(1 of 2 diverged: each counted at its last evaluations before it did) |') in table

