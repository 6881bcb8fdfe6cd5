"""The output folder: a run resumes only under the settings it started with."""

import json

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
