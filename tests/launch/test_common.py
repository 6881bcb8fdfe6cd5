"""What a launcher writes and says when its run diverged."""

import json

import pytest

from launch import common
from tff_rec.training import loop


def test_a_diverged_summary_names_the_last_evaluated_round_not_the_round_before(
    tmp_path, capsys):
  """Evaluated every 2 rounds: the last finite evaluation is round 2, diverged at 5."""
  diverged = loop.Diverged(5, 'the training loss is nan', {'train/loss': float('nan')},
                           {'eval/test_auc': 0.61}, 2)
  with pytest.raises(SystemExit) as stopped:
    common.stop_diverged(diverged, tmp_path, '--client_learning_rate')
  assert stopped.value.code == common.DIVERGED_EXIT_CODE
  summary = json.loads((tmp_path / 'summary.json').read_text())
  assert summary == {'train/loss': None, 'diverged_at_round': 5,
                     'diverged': 'the training loss is nan', 'last_finite_round': 2,
                     'last_finite/eval/test_auc': 0.61}
  said = capsys.readouterr().err
  assert 'error: diverged at round 5: the training loss is nan; stopped.' in said
  assert 'Last finite evaluation (round 2): eval/test_auc 0.61.' in said


def test_a_run_with_no_finite_evaluation_says_so_and_names_no_last_round(tmp_path, capsys):
  diverged = loop.Diverged(1, 'no client trained an example', {}, {}, None, unit='epoch')
  with pytest.raises(SystemExit):
    common.stop_diverged(diverged, tmp_path, 'a lower --learning_rate')
  summary = json.loads((tmp_path / 'summary.json').read_text())
  assert summary == {'diverged_at_epoch': 1, 'diverged': 'no client trained an example'}
  assert 'No evaluation was finite before it.' in capsys.readouterr().err
