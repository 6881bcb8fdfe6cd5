"""launch.train as a user runs it: real processes, real files."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import conftest

FAST = ['--rounds=4', '--clients_per_round=5', '--eval_every=2', '--checkpoint_every=1',
        '--batch_size=4', '--loss=global_softmax']


def _train(*args, **kwargs):
  return subprocess.run([sys.executable, '-m', 'launch.train', *args], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=600, **kwargs)


def _start(*args):
  return subprocess.Popen([sys.executable, '-m', 'launch.train', *args], cwd=conftest.REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.parametrize('flag, message', [
    ('--loss=softmax', "flag --loss=softmax: value should be one of <batch_softmax|"),
    ('--algorithm=fedfoo', 'flag --algorithm=fedfoo: value should be one of <fedavg|fedsgd>'),
    ('--task=netflix', 'flag --task=netflix: value should be one of <movielens_next_item>'),
    ('--rounds=0', 'flag --rounds=0: 0 is not a positive integer'),
    ('--clients_per_round=0', 'flag --clients_per_round=0'),
    ('--clients_per_round=25', '--clients_per_round=25 is larger than the 24 training '
     'clients; use at most 24'),
])
def test_bad_flags_stop_before_training_naming_the_flag(flag, message, ml100k_dir, tmp_path):
  done = _train(f'--data_dir={ml100k_dir}', f'--output_dir={tmp_path / "out"}', flag)
  assert done.returncode != 0
  assert message in done.stderr + done.stdout
  assert not (tmp_path / 'out' / 'metrics.csv').exists()


def test_data_dir_without_movielens_files(tmp_path):
  done = _train(f'--data_dir={tmp_path}', f'--output_dir={tmp_path / "out"}')
  assert done.returncode != 0
  assert f'--data_dir={tmp_path}: {tmp_path}: not a MovieLens directory' in done.stderr
  assert 'launch.download' in done.stderr


def _rows(out):
  with open(out / 'metrics.csv') as f:
    return list(csv.DictReader(f))


def test_interrupted_run_resumes_to_the_same_metrics(ml100k_dir, tmp_path):
  flags = [f'--data_dir={ml100k_dir}', *FAST]
  whole = tmp_path / 'whole'
  done = _train(*flags, f'--output_dir={whole}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'round 4/4' in done.stdout and 'ETA' in done.stdout
  assert 'Traceback' not in done.stderr and 'Exception ignored' not in done.stderr
  summary = json.loads((whole / 'summary.json').read_text())
  assert 0 <= summary['test/recall_at_1'] <= summary['test/recall_at_10'] <= 1
  rows = _rows(whole)
  assert [r['round'] for r in rows] == ['1', '2', '3', '4']
  assert rows[1]['validation/recall_at_10'] != '' and rows[0]['validation/recall_at_10'] == ''
  assert (whole / 'tensorboard').is_dir()

  cut = tmp_path / 'cut'
  child = _start(*flags, f'--output_dir={cut}')
  for line in child.stdout:  # kill it once round 2 is checkpointed
    if line.startswith('round 2/4'):
      break
  child.send_signal(signal.SIGKILL)
  child.wait()
  done = _train(*flags, f'--output_dir={cut}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'resumed from checkpoint at round 3' in done.stdout
  assert [r['round'] for r in _rows(cut)] == ['1', '2', '3', '4']
  resumed = json.loads((cut / 'summary.json').read_text())
  for key, value in summary.items():
    if not key.startswith(('memory/', 'train/round_seconds')):
      assert resumed[key] == value, key


def test_inprocess_runtime_trains_to_the_native_numbers(ml100k_dir, tmp_path):
  flags = [f'--data_dir={ml100k_dir}', *FAST, '--rounds=2']
  summaries = {}
  for runtime in ('native', 'inprocess'):
    out = tmp_path / runtime
    done = _train(*flags, f'--runtime={runtime}', f'--output_dir={out}')
    assert done.returncode == 0, done.stderr[-3000:]
    summaries[runtime] = json.loads((out / 'summary.json').read_text())
  for key in ('train/client_work/train/loss', 'test/recall_at_10', 'validation/recall_at_5'):
    assert summaries['inprocess'][key] == pytest.approx(summaries['native'][key], rel=1e-4)


def test_resume_refuses_other_flags(ml100k_dir, tmp_path):
  out = tmp_path / 'out'
  out.mkdir()
  (out / 'config.json').write_text(json.dumps({'rounds': 99}))
  done = _train(f'--data_dir={ml100k_dir}', f'--output_dir={out}', *FAST)
  assert done.returncode != 0
  assert 'holds a run with other settings' in done.stderr
