"""launch.sequence_clicks: sequences in, a CTR file out (its main() in this
process, as tests.launch.launchers runs it)."""

import pandas as pd
import pytest

from launch import sequence_clicks
from tests.launch import launchers


def _run(*args):
  return launchers.run_here(sequence_clicks, *args)


def test_sequences_become_a_ctr_file_and_an_existing_one_is_not_overwritten(tmp_path):
  sequences, out = tmp_path / 'seq.txt', tmp_path / 'clicks.csv'
  sequences.write_text('1 5 6 7 8\n2 6 9\n')
  done = _run(f'--sequences={sequences}', f'--out={out}', '--history_length=2', '--seed=1')
  assert done.returncode == 0, done.stderr[-2000:]
  assert 'wrote' in done.stdout and '8 rows' in done.stdout
  rows = pd.read_csv(out, dtype=str)
  assert list(rows['history'][rows['user'] == '1']) == ['5', '5', '5,6', '5,6', '6,7', '6,7']
  again = _run(f'--sequences={sequences}', f'--out={out}')
  assert again.returncode != 0 and f'--out={out} exists' in again.stderr


@pytest.mark.parametrize('text, message', [
    (None, 'No such file'),
    ('1 5 x\n', 'non-integer field'),
])
def test_a_missing_or_malformed_sequence_file_is_named(text, message, tmp_path):
  sequences = tmp_path / 'seq.txt'
  if text is not None:
    sequences.write_text(text)
  done = _run(f'--sequences={sequences}', f'--out={tmp_path / "clicks.csv"}')
  assert done.returncode != 0
  assert f'--sequences={sequences}' in done.stderr and message in done.stderr
