"""Targets: parsed from the flag, and the first round that reached one, read back
from a run's metrics.csv (a resumed run counts every round)."""

import pytest

from launch import progress
from tff_rec.training import loop


@pytest.mark.parametrize('target, first', [
    ('eval/train_loss<=0.66', 3),  # 0.70, 0.69, 0.65: round 3, though round 4 rises again
    ('eval/test_auc>=0.6', 2),
    ('eval/test_auc>=0.9', None),
])
def test_the_first_round_that_reached_the_target_counts(tmp_path, target, first):
  csv = tmp_path / 'metrics.csv'  # round 2 evaluated nothing of the loss
  csv.write_text('round,eval/train_loss,eval/test_auc\n1,0.70,0.55\n2,,0.61\n3,0.65,0.58\n'
                 '4,0.67,0.62\n')
  summary = progress.first_reached(csv, 'round', progress.parse_target(target))
  assert summary == {'target': target, 'rounds_to_target': first}


def test_a_progress_line_shows_four_digits_of_each_metric_trailing_zeros_kept(capsys):
  shown = progress.Progress(20, 'round', {'loss': 'train/loss', 'rss MB': 'memory/rss_mb',
                                          'val auc': 'eval/auc', 'bytes': 'train/bytes'})
  shown(1, {'train/loss': 6.8, 'memory/rss_mb': 689.0, 'eval/auc': 0.034661,
            'train/bytes': 3200.0})
  line = capsys.readouterr().out
  assert line.startswith(
      'round 1/20  loss 6.800  rss MB 689.0  val auc 0.03466  bytes 3200  '), line
  assert ' s/round  ETA ' in line, line


def test_a_round_that_trained_no_example_says_so_and_shows_no_loss(capsys):
  shown = progress.Progress(20, 'round', {'loss': loop.TRAIN_LOSS, 'val auc': 'eval/auc'})
  shown(3, {loop.TRAIN_LOSS: 0.0, loop.TRAIN_EXAMPLES: 0.0, 'eval/auc': 0.5})
  shown(4, {loop.TRAIN_LOSS: 0.25, loop.TRAIN_EXAMPLES: 8.0})
  nothing, trained = capsys.readouterr().out.splitlines()[-2:]
  assert nothing.startswith("round 3/20  no example trained (none of the cohort's clients "
                            'holds a batch)  val auc 0.5000  '), nothing
  assert 'loss' not in nothing and trained.startswith('round 4/20  loss 0.2500  '), trained


def test_the_eta_leaves_out_the_first_steps_set_up(capsys, monkeypatch):
  clock = iter([0.0, 30.0, 32.0, 34.0])  # set-up and step 1: 30 s; then 2 s a step
  monkeypatch.setattr(progress.time, 'monotonic', lambda: next(clock))
  shown = progress.Progress(10, 'round', {})
  for step in (1, 2, 3):
    shown(step, {})
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].endswith('30.00 s/round  ETA 4m30s'), lines[0]
  assert lines[2].endswith('2.00 s/round  ETA 0m14s'), lines[2]
