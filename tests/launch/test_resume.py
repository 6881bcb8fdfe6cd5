"""Resuming past damaged checkpoints, and extending a run by more --rounds."""

import json

import numpy as np

from tests.launch import trainer


def _summary(out) -> dict:
  summary = json.loads((out / 'summary.json').read_text())
  return {k: v for k, v in summary.items() if not k.startswith(('memory/', 'train/round_'))}


def test_a_run_extends_by_more_rounds_past_an_unreadable_checkpoint(ranking_dir, tmp_path):
  flags = [f'--data_dir={ranking_dir}', *trainer.RANKING]  # 4 rounds, each checkpointed
  whole = trainer.train_here(*flags, f'--output_dir={tmp_path / "whole"}')
  assert whole.returncode == 0, whole.stderr[-3000:]
  out = tmp_path / 'out'
  short = trainer.train_here(*flags, '--rounds=2', f'--output_dir={out}')
  assert short.returncode == 0, short.stderr[-3000:]
  ended = _summary(out)
  assert 'may only grow (this run recorded 2)' in trainer.refusal(
      *flags, '--rounds=1', f'--output_dir={out}')
  assert 'other settings (eval_every); resume it' in trainer.refusal(  # rounds may grow
      *flags, '--rounds=6', '--eval_every=3', f'--output_dir={out}')
  latest = out / 'checkpoints' / 'state_2.npz'
  latest.write_bytes(latest.read_bytes()[:100])  # cut short, as a full disk leaves it

  done = trainer.train_here(*flags, f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert f'checkpoint {latest} is unreadable (BadZipFile' in done.stdout
  assert 'resumed from the checkpoint of round 1: round 2 on' in done.stdout
  assert _summary(out) == _summary(tmp_path / 'whole')
  assert json.loads((out / 'config.json').read_text())['rounds'] == 4
  assert {k: v for k, v in json.loads((out / 'summary_at_round_2.json').read_text()).items()
          if k in ended} == ended

  for saved in (out / 'checkpoints').glob('state_*.npz'):
    saved.write_bytes(b'')
  lost = trainer.train_here(*flags, '--rounds=5', f'--output_dir={out}')
  assert lost.returncode == 1
  assert f'no readable checkpoint in {out / "checkpoints"}: state_4.npz' in lost.stderr
  assert 'start afresh in a new --output_dir' in lost.stderr


def test_a_checkpoint_of_another_state_stops_the_run_naming_it(ranking_dir, tmp_path):
  """A readable checkpoint whose arrays do not fit the state (another version's form
  of the same algorithm's state) stops the run with the cure, not a traceback."""
  flags = [f'--data_dir={ranking_dir}', *trainer.RANKING, '--algorithm=colr', '--rank=2']
  out = tmp_path / 'out'
  short = trainer.train_here(*flags, '--rounds=2', f'--output_dir={out}')
  assert short.returncode == 0, short.stderr[-3000:]
  latest = out / 'checkpoints' / 'state_2.npz'
  with np.load(latest) as saved:
    leaves = [saved[f'leaf_{i}'] for i in range(len(saved.files))]
  np.savez(latest, **{f'leaf_{i}': leaf for i, leaf in enumerate(leaves[:-1])})
  stopped = trainer.train_here(*flags, f'--output_dir={out}')
  assert stopped.returncode == 1
  assert (f'error: {latest} holds {len(leaves) - 1} arrays; the state has {len(leaves)}: '
          'it was saved by another model or algorithm; resume it with the code that wrote '
          'it, or start afresh in a new --output_dir') in stopped.stderr
  assert 'Traceback' not in stopped.stderr
