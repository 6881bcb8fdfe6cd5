"""Result files: written atomically with the mode open() gives, summaries as strict
JSON read back with NaN."""

import json
import math
import pathlib

import pytest

from experiments import files


def test_results_are_written_with_the_mode_open_gives_not_a_temporary_files(tmp_path):
  files.write_text(tmp_path / 'table.md', 'x')
  (tmp_path / 'plain.md').write_text('x')
  assert (tmp_path / 'table.md').stat().st_mode == (tmp_path / 'plain.md').stat().st_mode


def test_a_summary_is_strict_json_and_reads_back_not_finite_values_as_nan(tmp_path):
  path = tmp_path / 'summary.json'
  files.write_summary(path, {'loss': float('nan'), 'grad': float('-inf'), 'auc': 0.5,
                               'diverged_at_round': 2, 'diverged': 'the loss'})
  assert json.loads(path.read_text()) == {'loss': None, 'grad': None, 'auc': 0.5,
                                          'diverged_at_round': 2, 'diverged': 'the loss'}
  read = files.read_summary(path)
  assert math.isnan(read['loss']) and math.isnan(read['grad']) and read['auc'] == 0.5
  path.write_text('{"loss": NaN}')  # a record written before summaries were strict
  assert math.isnan(files.read_summary(path)['loss'])


def test_a_record_copy_cut_short_leaves_no_record_file(tmp_path, monkeypatch):
  """A copy that fails half-way (a full disk) never leaves a half file under the name."""
  (tmp_path / 'metrics.csv').write_text('round,loss\n1,0.5\n')

  def cut_short(source, target):
    pathlib.Path(target).write_text('round,lo')
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(files.shutil, 'copyfile', cut_short)
  with pytest.raises(OSError, match='No space left'):
    files.copy_atomically(tmp_path / 'metrics.csv', tmp_path / 'record.csv')
  assert not (tmp_path / 'record.csv').exists()
