"""The output folder: a run resumes only under the settings it started with."""

import json

from absl import app
import pytest

from launch import outputs


def test_a_run_resumes_under_its_tasks_new_name_and_no_other_settings(tmp_path):
  (tmp_path / 'config.json').write_text(json.dumps({'task': 'movielens_ranking', 'rounds': 3}))
  assert outputs.output_dir(str(tmp_path), {'task': 'loo_ranking', 'rounds': 3}) == tmp_path
  for other in ({'task': 'ranking', 'rounds': 3}, {'task': 'loo_ranking', 'rounds': 4}):
    with pytest.raises(app.UsageError, match='holds a run with other settings'):
      outputs.output_dir(str(tmp_path), other)
  assert len(json.loads((tmp_path / 'machines.json').read_text())) == 1  # one start
