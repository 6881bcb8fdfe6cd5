"""The reproduction scripts' summaries of seeds (mean ± std, the noise rule) and
their finished cells' settings."""

import json

from absl import app
import pytest

from launch import common


def test_spread_is_mean_and_sample_std_of_the_seeds():
  assert common.spread([0.1, 0.2, 0.3]) == '0.200 ± 0.100'
  assert common.spread([0.1234], scale=100, digits=1) == '12.3'
  assert common.spread([]) == common.NOT_RUN


@pytest.mark.parametrize('a, b, expected', [
    ([0.30, 0.31, 0.32], [0.20, 0.21, 0.22], '+0.100'),  # gap 0.1 > stds 0.01 + 0.01
    ([0.30, 0.35, 0.40], [0.25, 0.30, 0.35], 'within noise'),  # gap 0.05 < 0.05 + 0.05
    ([0.3], [0.2, 0.21], 'one seed: no spread'),
    ([], [0.2], common.NOT_RUN),
])
def test_versus_calls_a_difference_real_only_beyond_both_stds(a, b, expected):
  assert common.versus(a, b) == expected


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
])
def test_a_finished_run_is_reused_under_the_flags_it_was_made_with(tmp_path, args):
  run = _finished_run(
      tmp_path / 'cell', epochs=3, data_dir='../shared/data/ml-100k', logq_correction=False,
      capacities='1x-2x', optimizer={'name': 'adam', 'learning_rate': 0.01},
      examples={'context_length': 10}, stack=['fedsubavg', 'fair'], top_k=None)
  common.check_same_settings(run, args)


@pytest.mark.parametrize('args, named', [
    (('--epochs=5',), '--epochs=5 (recorded: 3)'),
    (('--client_learning_rate=0.1',), '--client_learning_rate=0.1 (recorded: 0.01)'),
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
    common.check_same_settings(run, args)
  assert named in str(refused.value)


@pytest.mark.usefixtures('reproduction_flags')
def test_a_recorded_cell_under_other_flags_is_refused_not_tabulated(tmp_path):
  _finished_run(tmp_path / 'cells' / 'a', rounds=100, seed=0, task='movielens_ranking')
  assert common.run_cell(str(tmp_path / 'runs'), 'a', 'launch.train', '--rounds=100',
                         '--seed=0', records_dir=str(tmp_path / 'cells')) == {'test/hr': 0.5}
  with pytest.raises(app.UsageError, match=r'--rounds=200 \(recorded: 100\)'):
    common.run_cell(str(tmp_path / 'runs'), 'a', 'launch.train', '--rounds=200',
                    '--seed=0', records_dir=str(tmp_path / 'cells'))


@pytest.mark.usefixtures('reproduction_flags')
def test_a_shared_record_is_found_only_where_its_settings_match(tmp_path):
  # Two tables hold a cell of the same name, made with other --epochs.
  _finished_run(tmp_path / 'three' / 'c', epochs=3, task='movielens_ranking')
  _finished_run(tmp_path / 'ten' / 'c', epochs=10, task='movielens_ranking')
  folders = [str(tmp_path / 'three'), str(tmp_path / 'ten')]
  assert common.recorded_in(folders, 'c', '--epochs=10') == str(tmp_path / 'ten')
  assert common.recorded_in(folders, 'c', '--epochs=3') == str(tmp_path / 'three')
  assert common.recorded_in(folders, 'c', '--epochs=5') is None
  assert common.recorded_in(folders, 'other', '--epochs=3') is None


def test_a_clicks_file_is_written_again_only_when_its_sequences_or_seed_change(tmp_path):
  sequences = tmp_path / 'seq.txt'
  sequences.write_text('1 5 6 7\n2 6 8\n')
  out = tmp_path / 'data' / 'clicks_s3.csv'
  assert common.clicks_file(sequences, out, seed=3) == out
  lines = out.read_text().splitlines()
  assert lines[0] == 'user,item,history,label,test' and len(lines) == 1 + 2 * 3
  assert lines[1:3] == ['1,6,5,1,0', '1,8,5,0,0']  # 8: the one item user 1 never had
  written = out.stat().st_mtime_ns
  common.clicks_file(sequences, out, seed=3)  # the same sequences and seed: kept
  assert out.stat().st_mtime_ns == written
  sequences.write_text('1 5 6\n2 6 7\n')  # other sequences: written again
  common.clicks_file(sequences, out, seed=3)
  assert len(out.read_text().splitlines()) == 1 + 2 * 2
