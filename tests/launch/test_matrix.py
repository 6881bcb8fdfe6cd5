"""launch.matrix on the real ML-100K: OK cells carry a metric, N/A cells a reason."""

import json
import re
import subprocess
import sys

import pytest

from experiments import matrix_table
from tests import conftest
from tests.launch import launchers


@pytest.mark.slow(seconds=30)
def test_matrix_runs_cells_records_them_and_rebuilds_the_table(real_ml100k, tmp_path):
  del real_ml100k  # the matrix reads ../shared/data itself
  records, table = tmp_path / 'cells', tmp_path / 'matrix.md'
  # A cell recorded by an earlier run is not run again (its record is kept as is).
  recorded = records / 'ml100k_ctr' / 'fedsgd-mean-inprocess.json'
  recorded.parent.mkdir(parents=True)
  recorded.write_text(json.dumps({'status': 'OK', 'metric': 'eval/test_auc', 'value': 0.4321,
                                  'train_loss': 0.69, 'evidence': {}, 'seconds': 1.0,
                                  'rounds': 1}))
  # One of other --rounds is run again.
  (records / 'ml100k_ctr' / 'fedsgd-mean-native.json').write_text(json.dumps(
      {'status': 'OK', 'metric': 'eval/test_auc', 'value': 0.1234, 'train_loss': 0.69,
       'evidence': {}, 'seconds': 1.0, 'rounds': 3}))
  # A cell that failed is run again (its cause may be fixed since).
  (records / 'ml100k_ctr' / 'fedsgd-dp-native.json').write_text(json.dumps(
      {'status': 'FAIL', 'reason': 'RuntimeError: since fixed', 'rounds': 1}))
  args = [sys.executable, '-m', 'launch.matrix', '--rounds=1', '--tasks=ml100k_ctr',
          '--algorithms=fedsgd,colr', f'--records={records}', f'--output={table}']
  done = subprocess.run(args, cwd=conftest.REPO, capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  assert not re.search(r'^\S+ \S+: E |Traceback', done.stderr, re.M), done.stderr[-3000:]
  assert 'fedsgd-mean-inprocess' not in done.stdout and json.loads(recorded.read_text())[
      'value'] == 0.4321
  cell = json.loads((records / 'ml100k_ctr' / 'fedsgd-mean-native.json').read_text())
  assert cell['status'] == 'OK' and 0.3 < cell['value'] < 0.7  # AUC after one round
  assert cell['rounds'] == 1 and '== ml100k_ctr/fedsgd-mean-native' in done.stdout
  secure = json.loads((records / 'ml100k_ctr' / 'fedsgd-secure-inprocess.json').read_text())
  assert secure['status'] == 'OK'
  assert secure['evidence']['train/aggregator/inner/mean_value/secure_upper_threshold'] == 1.0
  dp = json.loads((records / 'ml100k_ctr' / 'fedsgd-dp-native.json').read_text())
  assert dp['status'] == 'OK' and dp['evidence']['train/aggregator/inner/dp_clip'] == 1.0
  stacked = json.loads((records / 'ml100k_ctr' / 'fedsgd-mean-native-fedsubavg.json').read_text())
  assert stacked['status'] == 'OK' and stacked['value'] != cell['value']
  text = table.read_text()
  row = re.search(r'\| fedsgd \| (.*) \|', text).group(1).split(' | ')
  assert row[0] == f"OK {cell['value']:.3f}" and all(c.startswith('OK') for c in row)
  assert row[1] == 'OK 0.432'  # the recorded cell
  assert len(row) == 5 and '| mean / native + fedsubavg |' in text
  assert re.search(r'\| colr \| N/A \[1\] \| N/A \[1\] \| N/A \[1\] \| N/A \[1\] '
                   r'\| N/A \[1\] \|', text)
  # LR's tables are one weight wide: nothing to compress at rank 4
  assert '[1] --algorithm=colr: table movie (1683 x 1): rank must be in 1..1' in text
  assert _rebuilt(records) == text  # the table is its records' (--only=none; in this process)
  # A cell whose training blew up is marked, not shown as a number; a DP cell
  # recorded without what showed its effect is not shown as OK.
  cell['train_loss'] = float('nan')
  (records / 'ml100k_ctr' / 'fedsgd-mean-native.json').write_text(json.dumps(cell))
  del dp['evidence']
  (records / 'ml100k_ctr' / 'fedsgd-dp-native.json').write_text(json.dumps(dp))
  row = re.search(r'\| fedsgd \| (.*) \|', _rebuilt(records)).group(1).split(' | ')
  assert row[0] == 'OK diverged (train loss nan)' and row[3] == 'not run'


REFUSED = {
    '--data_dir=/nonexistent': '--data_dir does not apply to launch.matrix: each task runs '
                               'on its fixed settings',
    '--seed=7': '--seed does not apply to launch.matrix',
    '--records=/nonexistent/cells': '--records=/nonexistent/cells: no such folder, so no '
                                    'cell to build the table from',
}


def test_flags_that_would_be_ignored_are_refused(tmp_path):
  """Each refusal as its command line gives it, the three in one process (each
  process would import TF and TFF again)."""
  done = launchers.run_in_one_process('launch.matrix', [
      ['--only=none', f'--records={tmp_path}', flag, f'--output={tmp_path / "m.md"}']
      for flag in REFUSED])
  for (flag, message), refused in zip(REFUSED.items(), done, strict=True):
    assert refused.returncode == 1 and not (tmp_path / 'm.md').exists(), flag
    assert message in refused.stderr, refused.stderr[-2000:]


def _rebuilt(records) -> str:
  """What `launch.matrix --only=none` writes for the test's cells."""
  return matrix_table.table(matrix_table.read_records(records), ['fedsgd', 'colr'],
                            ['ml100k_ctr'], rounds=1, records_dir='cells')
