"""The centralized trainers from the command line: baselines, targets. The
module's commands run one after another in one process of
launch.centralized (tests/launch/launchers.py)."""

import json
import subprocess

import pandas as pd
import pytest

from tests import fixtures
from tests.launch import launchers


@pytest.fixture(scope='module')
def runs(tmp_path_factory) -> dict:
  """name -> (what the command returned, its output folder): run once for every
  test process."""
  def make(root):
    ml100k = fixtures.write_ml100k(root / 'ml-100k', fixtures.synthetic_ratings(30, 40), 30, 40)
    user_items = fixtures.write_user_items(root / 'user-items',
                                           *fixtures.synthetic_user_items(8, 40))
    commands = _commands(ml100k, user_items)
    done = launchers.run_in_one_process(
        'launch.centralized', [[*args, f'--output_dir={root / name}'] for name, args
                               in commands.items()])
    return {name: [d.returncode, d.stdout, d.stderr]
            for name, d in zip(commands, done, strict=True)}

  done, root = launchers.once_per_test_run(tmp_path_factory, 'centralized', make)
  return {name: (subprocess.CompletedProcess(name, *d), root / name) for name, d in done.items()}


def _commands(ml100k, user_items) -> dict[str, list[str]]:
  return {
      'next_item': [f'--data_dir={ml100k}', '--epochs=2', '--batch_size=8',
                    '--loss=batch_softmax', '--centralized_split=by_user',
                    '--remove_accidental_hits', '--logq_correction'],
      'ranking': ['--task=ranking', f'--data_dir={user_items}', '--epochs=3',
                  '--batch_size=8', '--factors=4', '--learning_rate=0.05', '--eval_every=0'],
      'ctr': ['--task=ctr', f'--data_dir={ml100k}', '--epochs=3', '--batch_size=40',
              '--steps_per_epoch=2', '--optimizer=sgd', '--learning_rate=0.5',
              '--target=eval/train_loss<=0.675'],
      'diverging': ['--task=ctr', '--model=dcn', f'--data_dir={ml100k}', '--epochs=3',
                    '--batch_size=40', '--steps_per_epoch=2', '--optimizer=sgd',
                    '--learning_rate=1e30'],
      'refused': ['--task=ctr', f'--data_dir={ml100k}', '--epochs=1', '--optimizer=lazy_adam'],
      'federated_flag': ['--task=ctr', f'--data_dir={ml100k}', '--epochs=1', '--local_steps=3'],
  }


@pytest.mark.slow
def test_centralized_baseline_reports_validation_and_test(runs):
  done, out = runs['next_item']
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'epoch 2/2' in done.stdout
  assert 'Traceback' not in done.stderr and 'Exception ignored' not in done.stderr
  summary = json.loads((out / 'summary.json').read_text())
  assert 'test_users/recall_at_10' not in summary  # it scored trained examples
  for part in ('validation', 'test'):
    assert 0 <= summary[f'{part}/recall_at_1'] <= summary[f'{part}/recall_at_10'] <= 1
  assert (out / 'metrics.csv').read_text().count('\n') == 3  # header + 2 epochs


def test_centralized_goodreads_reports_test_ndcg(runs):
  done, out = runs['ranking']
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'epoch 3/3' in done.stdout
  summary = json.loads((out / 'summary.json').read_text())
  # Two taste groups: a trained model ranks the user's own half first.
  assert summary['test/hr_at_20'] == 1.0
  assert summary['test/ndcg_at_20'] > 0.3
  assert (out / 'metrics.csv').read_text().count('\n') == 4


def test_central_sgd_rounds_with_a_target(runs):
  done, out = runs['ctr']
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((out / 'summary.json').read_text())
  losses = pd.read_csv(out / 'metrics.csv').set_index('epoch')['eval/train_loss']
  assert summary['rounds_to_target'] == next((e for e, v in losses.items() if v <= 0.675), None)
  assert summary['rounds_to_target'] > 1  # a target the first epoch does not meet
  assert 'eval/test_logloss' in summary
  config = json.loads((out / 'config.json').read_text())
  assert config['steps_per_epoch'] == 2


def test_a_centralized_run_that_diverges_stops_and_says_so(runs):
  done, out = runs['diverging']
  assert done.returncode == 3, done.stderr[-3000:]
  assert 'epoch 1/3' in done.stdout and 'epoch 2/3' not in done.stdout
  assert 'error: diverged at epoch 1: ' in done.stderr and '--learning_rate' in done.stderr
  summary = json.loads((out / 'summary.json').read_text())
  assert summary['diverged_at_epoch'] == 1 and 'train/loss is nan' in summary['diverged']


def test_a_run_refused_at_its_start_leaves_no_folder_to_block_the_corrected_command(runs):
  done, out = runs['refused']
  assert done.returncode == 1 and 'lazy_adam is a client optimizer' in done.stderr
  assert not out.exists()


def test_a_setting_only_federated_training_uses_is_refused(runs):
  done, out = runs['federated_flag']
  assert done.returncode == 1 and not out.exists()
  assert ('--local_steps applies to federated training only, not to centralized training '
          'of --task=ctr') in done.stderr
