"""Reproduction cells: a finished cell is reused only under the settings it was
made with, and a record is found only where its settings match."""

import json
import math
import re
import types

from absl import app
import pytest

from experiments import run_records
from experiments.papers import cell_records


def _finished_run(path, **config):
  path.mkdir(parents=True)
  (path / 'config.json').write_text(json.dumps(config))
  (path / 'summary.json').write_text(json.dumps({'test/hr': 0.5}))
  return path


@pytest.mark.parametrize('args', [
    ('--epochs=3', '--learning_rate=1e-2', '--optimizer=adam', '--data_dir=/elsewhere/ml-100k'),
    ('--nologq_correction', '--capacities=1x-2x', '--context_length=10', '--epochs=5',
     '--epochs=3'),  # the last of a repeated flag counts, as in absl
    ('--output_dir=x', '--stack=fedsubavg,fair', '--top_k=none'),  # not recorded; lists; None
    ('--drop_remainder=True', '--learning_rate=0.01'),  # absl's spellings of a value
])
def test_a_finished_run_is_reused_under_the_flags_it_was_made_with(tmp_path, args):
  run = _finished_run(
      tmp_path / 'cell', epochs=3, data_dir='../shared/data/ml-100k', logq_correction=False,
      capacities='1x-2x', optimizer={'name': 'adam', 'learning_rate': 0.01},
      examples={'context_length': 10}, stack=['fedsubavg', 'fair'], top_k=None,
      drop_remainder=True)
  cell_records.check_same_settings(run, args)


@pytest.mark.parametrize('args, named', [
    (('--epochs=5',), '--epochs=5 (recorded: 3)'),
    (('--client_learning_rate=0.1',), '--client_learning_rate=0.1 (recorded: 0.01)'),
    (('--client_learning_rate=0.0101',), '--client_learning_rate=0.0101 (recorded: 0.01)'),
    (('--server_adaptivity=0.01',), '--server_adaptivity=0.01 (recorded: 0.001)'),
    (('--data_dir=../shared/data/amazon-beauty',), '--data_dir=../shared/data/amazon-beauty'),
    (('--drop_remainder',), '--drop_remainder=true (recorded: False)'),
    (('--noremove_accidental_hits',), '--remove_accidental_hits=false (recorded: True)'),
    (('--stack=fedsubavg',), '--stack=fedsubavg (recorded: fedsubavg,fair)'),
    # algorithm options are recorded only when set
    (('--heat=examples',), '--heat=examples (recorded: unset)'),
    (('--noclient_weighting',), '--client_weighting=false (recorded: unset)'),
])
def test_a_finished_run_made_with_other_flags_is_refused_naming_them(tmp_path, args, named):
  run = _finished_run(
      tmp_path / 'cell', epochs=3, data_dir='../shared/data/ml-100k', drop_remainder=False,
      examples={'remove_accidental_hits': True}, client_optimizer={'name': 'sgd', 'learning_rate': 0.01},
      server_optimizer={'name': 'adagrad', 'learning_rate': 0.1, 'adaptivity': 0.001},
      stack=['fedsubavg', 'fair'])
  with pytest.raises(app.UsageError, match='finished with other settings') as refused:
    cell_records.check_same_settings(run, args)
  assert named in str(refused.value)


def test_a_record_made_under_a_tasks_older_name_matches_its_new_name(tmp_path):
  run = _finished_run(tmp_path / 'cell', task='movielens_ranking')
  for task in ('loo_ranking', 'movielens_ranking'):
    cell_records.check_same_settings(run, (f'--task={task}',))
  with pytest.raises(app.UsageError, match=r'--task=ranking \(recorded: movielens_ranking\)'):
    cell_records.check_same_settings(run, ('--task=ranking',))


@pytest.mark.usefixtures('reproduction_flags')
def test_a_recorded_cell_under_other_flags_is_refused_not_tabulated(tmp_path):
  _finished_run(tmp_path / 'cells' / 'a', rounds=100, seed=0, task='loo_ranking')
  assert cell_records.run_cell(str(tmp_path / 'runs'), 'a', 'launch.train', '--rounds=100',
                         '--seed=0', records_dir=str(tmp_path / 'cells')) == {'test/hr': 0.5}
  with pytest.raises(app.UsageError, match=r'--rounds=200 \(recorded: 100\)'):
    cell_records.run_cell(str(tmp_path / 'runs'), 'a', 'launch.train', '--rounds=200',
                    '--seed=0', records_dir=str(tmp_path / 'cells'))


@pytest.mark.usefixtures('reproduction_flags')
def test_a_shared_record_is_found_only_where_its_settings_match(tmp_path):
  # Two tables hold a cell of the same name, made with other --epochs.
  _finished_run(tmp_path / 'three' / 'c', epochs=3, task='loo_ranking')
  _finished_run(tmp_path / 'ten' / 'c', epochs=10, task='loo_ranking')
  folders = [str(tmp_path / 'three'), str(tmp_path / 'ten')]
  assert cell_records.recorded_in(folders, 'c', '--epochs=10') == str(tmp_path / 'ten')
  assert cell_records.recorded_in(folders, 'c', '--epochs=3') == str(tmp_path / 'three')
  assert cell_records.recorded_in(folders, 'c', '--epochs=5') is None
  assert cell_records.recorded_in(folders, 'other', '--epochs=3') is None


def test_a_derived_value_is_computed_once_and_read_back_as_json(tmp_path):
  calls = []

  def compute():
    calls.append(1)
    return (0.25, 'ten users')

  first = run_records.derived(tmp_path / 'cells', 'floors s0', compute)
  again = run_records.derived(tmp_path / 'cells', 'floors s0', compute)
  assert first == again == [0.25, 'ten users'] and len(calls) == 1
  assert json.loads((tmp_path / 'cells' / 'derived.json').read_text()) == {
      'floors s0': [0.25, 'ten users']}


def test_a_sweep_cell_scores_the_mean_of_its_last_evaluations_nan_if_it_diverged(tmp_path):
  run = _finished_run(tmp_path / 'runs' / 'cell')
  (run / 'metrics.csv').write_text('round,eval/auc\n1,0.1\n2,\n3,0.5\n4,0.6\n5,1.0\n')
  score = run_records.mean_of_last(str(tmp_path / 'runs'), 'cell', 'eval/auc', 3)
  assert score == pytest.approx(0.7)  # rounds 3-5: a round without evaluation is not one
  assert run_records.mean_of_last(str(tmp_path / 'runs'), 'other', 'eval/auc', 3) is None
  assert run_records.mean_of_last(str(tmp_path / 'runs'), 'cell', 'eval/ndcg', 3) is None
  (run / 'summary.json').write_text(json.dumps({'diverged_at_round': 5}))
  assert math.isnan(run_records.mean_of_last(str(tmp_path / 'runs'), 'cell', 'eval/auc', 3))
  # A run from before the trainer stopped diverging runs: its training loss is NaN.
  (run / 'summary.json').write_text(json.dumps({run_records.TRAIN_LOSS: math.nan}))
  assert math.isnan(run_records.mean_of_last(str(tmp_path / 'runs'), 'cell', 'eval/auc', 3))
  # Under the name records held it before the rounds took tff.learning's layout.
  (run / 'summary.json').write_text(json.dumps({'train/train/loss': math.nan}))
  assert math.isnan(run_records.mean_of_last(str(tmp_path / 'runs'), 'cell', 'eval/auc', 3))
  # A centralized run stopped at an epoch; a loss that overflowed.
  for summary in ({'diverged_at_epoch': 2}, {run_records.TRAIN_LOSS: math.inf}):
    (run / 'summary.json').write_text(json.dumps(summary))
    assert run_records.cell_diverged(str(tmp_path / 'runs'), 'cell')


def test_a_diverged_runs_curve_ends_before_the_round_it_was_stopped_at(tmp_path):
  """Its evaluation of that round (an output overflowed) is not its result."""
  run = _finished_run(tmp_path / 'runs' / 'cell')
  (run / 'metrics.csv').write_text('epoch,eval/auc\n1,0.6\n2,0.7\n3,0.2\n')
  (run / 'summary.json').write_text(json.dumps({'diverged_at_epoch': 3}))
  curve = run_records.read_curve(str(tmp_path / 'runs'), 'cell', 'eval/auc')
  assert curve['eval/auc'].tolist() == [0.6, 0.7]


def test_a_curve_read_again_after_its_run_rewrote_it_is_the_new_one(tmp_path):
  """Curves are parsed once per file while it is unchanged (a table reads each
  many times); a run that rewrote its metrics.csv (resumed, extended) is read anew."""
  run = _finished_run(tmp_path / 'runs' / 'cell')
  (run / 'metrics.csv').write_text('round,eval/auc\n1,0.1\n2,0.3\n')
  first = run_records.read_curve(str(tmp_path / 'runs'), 'cell', 'eval/auc')
  first.loc[:, 'eval/auc'] = 0.0  # a caller's change to what it got stays its own
  assert list(run_records.read_curve(str(tmp_path / 'runs'), 'cell', 'eval/auc')[
      'eval/auc']) == [0.1, 0.3]
  (run / 'metrics.csv').write_text('round,eval/auc\n1,0.1\n2,0.3\n3,0.6\n')
  assert list(run_records.read_curve(str(tmp_path / 'runs'), 'cell', 'eval/auc')[
      'eval/auc']) == [0.1, 0.3, 0.6]


@pytest.mark.parametrize('only, outcome', [
    (None, ['a_1', 'a_2', 'b_1']), (['a_*'], ['a_1', 'a_2']), (['b_1', 'none'], ['b_1']),
    (['none'], []), (['a_1', 'c_*'], 'error: --only=c_* matched no cell'),
    ([], '--only= names no cell'),
])
def test_only_selects_cells_by_name_or_pattern_and_names_what_matched_none(
    monkeypatch, only, outcome):
  monkeypatch.setattr(cell_records, 'flags', types.SimpleNamespace(
      FLAGS=types.SimpleNamespace(only=only)))
  monkeypatch.setattr(cell_records, '_ASKED', set())
  ran = []

  def main(argv):
    del argv
    ran.extend(n for n in ('a_1', 'a_2', 'b_1') if cell_records.wanted(n, only))

  reproduce = cell_records.checking_only(main)
  if isinstance(outcome, list):
    reproduce([])
    assert ran == outcome
  else:
    with pytest.raises((SystemExit, app.UsageError), match=re.escape(outcome)):
      reproduce([])


@pytest.mark.slow
@pytest.mark.usefixtures('reproduction_flags')
def test_a_cell_whose_run_diverged_is_recorded_as_its_result(ranking_dir, tmp_path):
  """A real trainer process that stops at round 1 (exit 3): its summary is the cell's
  result, recorded with the run's files, not CANNOT_RUN."""
  args = ('launch.train', f'--data_dir={ranking_dir}', '--rounds=3', '--clients_per_round=5',
          '--batch_size=32', '--embedding_dim=8', '--client_learning_rate=1e9')
  result = cell_records.run_cell(str(tmp_path / 'runs'), 'cell', *args,
                                 records_dir=str(tmp_path / 'cells'))
  assert result['diverged_at_round'] == 1 and run_records.diverged(result)
  record = tmp_path / 'cells' / 'cell'
  assert sorted(p.name for p in record.iterdir()) == sorted(run_records.RECORD_FILES)
  assert cell_records.run_cell(str(tmp_path / 'elsewhere'), 'cell', *args, wanted=False,
                               records_dir=str(tmp_path / 'cells')) == result
