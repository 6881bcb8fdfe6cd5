"""The output folder: a run resumes only under the settings it started with."""

import json
import subprocess
import sys
import textwrap

from absl import app
import pytest

from launch import outputs


def test_a_run_resumes_under_its_tasks_new_name_and_no_other_settings(tmp_path):
  (tmp_path / 'config.json').write_text(json.dumps({'task': 'movielens_ranking', 'rounds': 3}))
  assert outputs.output_dir(str(tmp_path), {'task': 'loo_ranking', 'rounds': 3}) == tmp_path
  for other in ({'task': 'ranking', 'rounds': 3}, {'task': 'loo_ranking', 'rounds': 2},
                {'task': 'ranking', 'rounds': 4}):
    with pytest.raises(app.UsageError, match='holds a run with other settings'):
      outputs.output_dir(str(tmp_path), other)
  assert len(json.loads((tmp_path / 'machines.json').read_text())) == 1  # one start
  (tmp_path / 'summary.json').write_text('{"test/hr_at_10": 0.5}')
  outputs.output_dir(str(tmp_path), {'task': 'loo_ranking', 'rounds': 4})  # extended
  assert json.loads((tmp_path / 'config.json').read_text())['rounds'] == 4
  assert not (tmp_path / 'summary.json').exists()
  assert (tmp_path / 'summary_at_round_3.json').read_text() == '{"test/hr_at_10": 0.5}'


def test_an_option_given_at_its_default_is_the_same_run_either_way(tmp_path):
  """Options are recorded only when given: absent reads as the default given."""
  defaults = {'rank': 4, 'heat': None}
  (tmp_path / 'config.json').write_text(json.dumps({'task': 'ctr', 'rounds': 3}))
  for same in ({'rank': 4}, {'heat': None}, {}):
    outputs.check_resumable(str(tmp_path), {'task': 'ctr', 'rounds': 3, **same}, defaults)
  with pytest.raises(app.UsageError, match=r'other settings \(rank\)'):
    outputs.check_resumable(str(tmp_path), {'task': 'ctr', 'rounds': 3, 'rank': 2}, defaults)
  outputs.output_dir(str(tmp_path), {'task': 'ctr', 'rounds': 5, 'rank': 4}, defaults)
  assert json.loads((tmp_path / 'config.json').read_text())['rounds'] == 5  # extended
  (tmp_path / 'config.json').write_text(json.dumps({'task': 'ctr', 'rounds': 3, 'rank': 4}))
  outputs.check_resumable(str(tmp_path), {'task': 'ctr', 'rounds': 3}, defaults)


def test_a_folder_another_process_runs_in_is_refused(tmp_path):
  outputs.output_dir(str(tmp_path), {'task': 'ctr', 'rounds': 3})  # held by this process
  # Another trainer's hold, as outputs holds a folder: a plain Python process, so
  # that the test pays no TensorFlow import for it.
  other = tmp_path / 'other'
  other.mkdir()
  held = subprocess.Popen([sys.executable, '-c', textwrap.dedent(f'''
      import fcntl, os, sys
      lock = open({str(other / '.lock')!r}, 'a+')
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
      lock.write(f'pid {{os.getpid()}}')
      lock.flush()
      print('holding', flush=True)
      sys.stdin.read()
      ''')], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert held.stdout.readline() == 'holding\n'
    with pytest.raises(app.UsageError,
                       match=f'is in use by a running trainer \\(pid {held.pid}\\)'):
      outputs.check_resumable(str(other), {'task': 'ctr', 'rounds': 3})
  finally:
    held.communicate('')
  outputs.check_resumable(str(other), {'task': 'ctr', 'rounds': 3})  # released at its exit
  held = subprocess.run([sys.executable, '-c', textwrap.dedent(f'''
      import fcntl
      fcntl.flock(open({str(tmp_path / '.lock')!r}, 'a+'), fcntl.LOCK_EX | fcntl.LOCK_NB)
      ''')], capture_output=True, text=True, check=False)
  assert held.returncode == 1 and 'BlockingIOError' in held.stderr  # this process holds it


@pytest.mark.parametrize('damage, message', [
    ('config', 'holds checkpoints but no config.json'),
    ('metrics', 'holds checkpoints but no metrics.csv'),
    ('broken', 'config.json is not the JSON a run writes'),
])
def test_a_run_whose_record_was_damaged_is_not_resumed(tmp_path, damage, message):
  (tmp_path / 'checkpoints').mkdir()
  (tmp_path / 'checkpoints' / 'state_2.npz').write_bytes(b'')
  (tmp_path / 'metrics.csv').write_text('round\n1\n2\n')
  (tmp_path / 'config.json').write_text('{"rounds": 3}')
  {'config': lambda: (tmp_path / 'config.json').unlink(),
   'metrics': lambda: (tmp_path / 'metrics.csv').unlink(),
   'broken': lambda: (tmp_path / 'config.json').write_text('{broken')}[damage]()
  with pytest.raises(app.UsageError, match=message):
    outputs.check_resumable(str(tmp_path), {'rounds': 3})


def test_the_same_command_again_keeps_the_finished_runs_summary_in_place(tmp_path):
  config = {'task': 'loo_ranking', 'rounds': 3}
  outputs.output_dir(str(tmp_path), config)
  (tmp_path / 'summary.json').write_text('{"test/hr_at_10": 0.5}')
  outputs.output_dir(str(tmp_path), config)  # not an extension: the same rounds
  assert (tmp_path / 'summary.json').read_text() == '{"test/hr_at_10": 0.5}'
  assert not list(tmp_path.glob('summary_at_round_*'))
