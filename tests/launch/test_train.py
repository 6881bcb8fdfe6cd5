"""launch.train as a user runs it: real processes, real files."""

import csv
import json
import re
import textwrap

import numpy as np
import pandas as pd
import pytest

from launch import progress
from tasks import ctr
from tests.launch import trainer
from tests.launch.trainer import FAST
from tests.launch.trainer import RANKING
from tff_rec.data import client_files


@pytest.mark.parametrize('flag, message', [
    ('--loss=softmax', "flag --loss=softmax: value should be one of <batch_softmax|"),
    ('--algorithm=fedfoo', 'flag --algorithm=fedfoo: value should be one of <colr|fair|'),
    ('--algorithm=fedmf', '--algorithm=fedmf does not apply to --task=next_item: '
     'it trains a matrix factorization whose user vectors stay on their clients'),
    ('--algorithm=fair --loss=hinge_spreadout', '--algorithm=fair does not apply to '
     '--task=next_item: its Keras model adds a regularization loss'),
    ('--capacities=1x-2x', '--capacities does not apply to --algorithm=fedavg'),
    ('--runtime=native --aggregator=secure',
     "--aggregator=secure: TFF's native worker has no secure sum"),
    ('--dp_clip=2', '--dp_clip applies to --aggregator=dp'),
    ('--factors=4', '--factors does not apply to --task=next_item'),
    ('--task=netflix', 'flag --task=netflix: value should be one of '
     '<ctr|loo_ranking|next_item|ranking|goodreads_ranking|movielens_ctr|'
     'movielens_next_item|movielens_ranking>'),
    ('--rounds=0', 'flag --rounds=0: 0 is not a positive integer'),
    ('--rounds=4 --checkpoint_every=2 --stop_after_round=3',
     '--stop_after_round=3 must be a multiple of --checkpoint_every=2 below --rounds=4'),
    ('--clients_per_round=0', 'clients_per_round must be >= 1, got 0'),
    ('--client_learning_rate=-1', 'client_learning_rate must be > 0, got -1.0'),
    ('--client_learning_rate=0', 'client_learning_rate must be > 0, got 0.0'),
    ('--server_learning_rate=nan', 'server_learning_rate must be > 0, got nan'),
    ('--clients_per_round=25', '--clients_per_round=25 is larger than the 24 training '
     'clients; use at most 24'),
    ('--threads=2', '--threads applies to --runtime=inprocess'),
    ('--runtime=native --lockstep=on', '--lockstep applies to --runtime=inprocess'),
    ('--runtime=inprocess --lockstep=on --loss=batch_softmax', '--lockstep=on: the Keras '
     "model cannot train in lockstep: its loss (BatchSoftmax) is not one of Keras's "
     'per-example losses'),
    ('--runtime=inprocess --worker_growth_limit_mb=100',
     '--worker_growth_limit_mb applies to --runtime=native'),
    ('--runtime=native --worker_growth_limit_mb=-1',
     'flag --worker_growth_limit_mb=-1: -1.0 is not a non-negative number'),
    ('--runtime=inprocess --threads=0', 'flag --threads=0: 0 is not a positive integer'),
    ('--runtime=inprocess --clients_per_round=5 --clients_per_call=6',
     '--clients_per_call=6 is more than the 5 clients per round; use at most 5'),
    ('--workers=localhost:8000', '--workers applies to --runtime=remote'),
    ('--runtime=remote', '--runtime=remote needs --workers=host:port'),
    ('--runtime=remote --workers=nohost', "--workers: worker address 'nohost' is not "
     'host:port'),
    ('--seed=-1', '--seed must be >= 0, got -1'),
    ('--centralized_split=by_user', '--centralized_split applies to centralized training '
     'only, not to federated training of --task=next_item'),
])
def test_bad_flags_stop_before_training_naming_the_flag(flag, message, ml100k_dir, tmp_path):
  _assert_refused(message, tmp_path, f'--data_dir={ml100k_dir}', *flag.split())


@pytest.mark.parametrize('flags, message', [
    ('--user_column=user', 'needs both user_column and item_column'),
    ('--user_column=user --item_column=item',
     "u.data: no column 'user' (user_column); its columns: "),
    ('--columns=user,item --user_column=user --item_column=item',
     'u.data: 4 fields per line, but columns names 2: user,item'),
    ('--columns=u,i,r,t --user_column=u --item_column=i --time_column=r --min_rating=4',
     'min_rating and rating_column go together'),
    ('--columns=user,item,rating,time', 'columns names the fields of a file without a header '
     '(user,item,rating,time); say which are its users and items with user_column'),
])
def test_an_interactions_file_refused_names_the_file_the_setting_and_what_it_holds(
    flags, message, ml100k_dir, tmp_path):
  _assert_refused(message, tmp_path, '--task=loo_ranking',
                  f'--data_dir={ml100k_dir / "u.data"}', *flags.split())


def test_a_run_without_an_output_dir_is_refused(ml100k_dir):
  assert '--output_dir is needed' in trainer.refusal(f'--data_dir={ml100k_dir}')


def test_a_client_data_dir_of_other_examples_is_refused_naming_the_flag(ml100k_dir, tmp_path):
  clients = tmp_path / 'clients'
  clients.mkdir()
  (clients / client_files.MANIFEST).write_text(json.dumps({'fingerprint': 'f' * 64}))
  message = trainer.refusal(f'--data_dir={ml100k_dir}', '--task=ctr', '--rounds=1',
                            f'--client_data_dir={clients}', f'--output_dir={tmp_path / "o"}')
  assert f'--client_data_dir={clients}: {clients} holds other client files' in message


def test_a_worker_without_the_client_files_or_with_others_stops_naming_them(
    ml100k_dir, tmp_path):
  clients = tmp_path / 'clients'
  task = ctr.Task(ctr.make_config(data_dir=str(ml100k_dir), model='lr'))
  # as the trainer writes them for tff.learning's FedSGD (which reads the task's datasets)
  client_files.ReadWhereTrained(task, clients).files.write()
  flags = [f'--data_dir={ml100k_dir}', '--task=ctr', '--model=lr', '--algorithm=fedsgd',
           '--rounds=1',
           '--clients_per_round=30', '--batch_size=8', '--runtime=native',
           f'--client_data_dir={clients}']
  (clients / '0.tensors').unlink()  # what a worker without the files would see
  stopped = trainer.train_here(*flags, f'--output_dir={tmp_path / "missing"}')
  assert stopped.returncode == 1
  assert (f'error: a worker cannot read the client files: {clients}/0.tensors; No such '
          'file or directory') in stopped.stderr
  (clients / 'fingerprint').write_text('files of another dataset')  # another worker's files
  stopped = trainer.train_here(*flags, f'--output_dir={tmp_path / "other"}')
  assert stopped.returncode == 1
  assert (f'error: a worker cannot read the client files: {clients}/fingerprint: the folder '
          'holds other client files than the trainer wrote') in stopped.stderr


def _assert_refused(message, tmp_path, *args):
  assert message in trainer.refusal(f'--output_dir={tmp_path / "out"}', *args)
  assert not (tmp_path / 'out' / 'metrics.csv').exists()


def test_ctrl_c_says_the_same_command_resumes(ml100k_dir, tmp_path, monkeypatch):
  shown = progress.Progress.__call__

  def interrupted_after_round_2(self, step, metrics):
    shown(self, step, metrics)
    if step == 2:
      raise KeyboardInterrupt  # as Ctrl-C would, after round 2's checkpoint

  monkeypatch.setattr(progress.Progress, '__call__', interrupted_after_round_2)
  out = tmp_path / 'out'
  done = trainer.train_here(f'--data_dir={ml100k_dir}', *FAST, f'--output_dir={out}')
  assert done.returncode == 130 and 'Traceback' not in done.stderr
  assert ('interrupted; the same command resumes from the last checkpoint in '
          f'{out / "checkpoints"}') in done.stderr
  assert (out / 'checkpoints').is_dir() and not (out / 'summary.json').exists()


def test_an_output_dir_that_cannot_be_written_is_refused_before_reading_data(tmp_path):
  afile = tmp_path / 'afile'
  afile.write_text('')
  for folder, message in [(afile, f'{afile} is a file, not a folder'),
                          (afile / 'sub', f'{afile} is a file, not a folder'),
                          ('', '--output_dir is empty')]:
    done = trainer.train_here('--data_dir=/nonexistent', f'--output_dir={folder}')
    assert done.returncode == 1 and message in done.stderr, done.stderr[-2000:]


def test_data_dir_without_movielens_files(tmp_path):
  done = trainer.train_here(f'--data_dir={tmp_path}', f'--output_dir={tmp_path / "out"}')
  assert done.returncode == 1
  assert f'--data_dir={tmp_path}: {tmp_path}: not a MovieLens directory' in done.stderr
  assert 'launch.download' in done.stderr


def _rows(out):
  with open(out / 'metrics.csv') as f:
    return list(csv.DictReader(f))


def _stop_after_round_2_and_resume(flags, out):
  """Runs a 4-round run to its round-2 checkpoint (--stop_after_round: an
  interruption at a known point), then the same command again."""
  stopped = trainer.train_here(*flags, '--stop_after_round=2', f'--output_dir={out}')
  assert stopped.returncode == 0, stopped.stderr[-3000:]
  assert 'stopped after round 2' in stopped.stdout and 'round 3/4' not in stopped.stdout
  assert not (out / 'summary.json').exists()
  done = trainer.train_here(*flags, f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'resumed from the checkpoint of round 2: round 3 on' in done.stdout


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_metrics(ml100k_dir, tmp_path):
  flags = [f'--data_dir={ml100k_dir}', *FAST]
  whole = tmp_path / 'whole'
  done = trainer.train(*flags, f'--output_dir={whole}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'round 4/4' in done.stdout and 'ETA' in done.stdout
  assert 'Traceback' not in done.stderr and 'Exception ignored' not in done.stderr
  assert not re.search(r'^\S+ \S+: E ', done.stderr, re.M), done.stderr  # TF's error lines
  summary = json.loads((whole / 'summary.json').read_text())
  assert 0 <= summary['test/recall_at_1'] <= summary['test/recall_at_10'] <= 1
  rows = _rows(whole)
  assert [r['round'] for r in rows] == ['1', '2', '3', '4']
  assert rows[1]['validation/recall_at_10'] != '' and rows[0]['validation/recall_at_10'] == ''
  assert (whole / 'tensorboard').is_dir()

  cut = tmp_path / 'cut'
  _stop_after_round_2_and_resume(flags, cut)
  assert [r['round'] for r in _rows(cut)] == ['1', '2', '3', '4']
  # Each start lists the machine it ran on: what a rerun's last digits depend on.
  starts = [json.loads((run / 'machines.json').read_text()) for run in (whole, cut)]
  assert [len(s) for s in starts] == [1, 2]
  assert starts[1][0]['cores'] >= 1 and 'vector_extensions' in starts[1][1]
  resumed = json.loads((cut / 'summary.json').read_text())
  for key, value in summary.items():
    if not key.startswith(('memory/', 'train/round_seconds')):
      assert resumed[key] == value, key
  # Cut after the last checkpoint, before the summary: the rerun writes it.
  (whole / 'summary.json').unlink()
  again = trainer.train_here(*flags, f'--output_dir={whole}')
  assert again.returncode == 0 and 'every round was already done' in again.stdout
  # The summary is the last round's metrics.csv row; the worker's replacements, counted
  # by the process that ran the rounds, are not in it.
  del summary['memory/worker_restarts']
  assert json.loads((whole / 'summary.json').read_text()) == pytest.approx(summary, rel=1e-12)


@pytest.mark.slow
def test_inprocess_runtime_trains_to_the_native_numbers(ml100k_dir, tmp_path):
  flags = [f'--data_dir={ml100k_dir}', *FAST, '--rounds=2']
  summaries = {}
  for runtime, parallel in (('native', []),
                            ('inprocess', ['--threads=1', '--clients_per_call=2'])):
    out = tmp_path / runtime
    done = trainer.train_here(*flags, f'--runtime={runtime}', *parallel, f'--output_dir={out}')
    assert done.returncode == 0, done.stderr[-3000:]
    summaries[runtime] = json.loads((out / 'summary.json').read_text())
  for key in ('train/client_work/train/loss', 'test/recall_at_10', 'validation/recall_at_5'):
    assert summaries['inprocess'][key] == pytest.approx(summaries['native'][key], rel=1e-4)
  # TFF's worker, replaced when it grows too much: how often, in the native run's summary
  assert summaries['native']['memory/worker_restarts'] == 0
  assert 'memory/worker_restarts' not in summaries['inprocess']


@pytest.mark.slow
def test_resume_refuses_other_flags(ml100k_dir, tmp_path):
  out = tmp_path / 'out'
  out.mkdir()
  (out / 'config.json').write_text(json.dumps({'rounds': 99}))
  done = trainer.train(f'--data_dir={ml100k_dir}', f'--output_dir={out}', *FAST)
  assert done.returncode != 0
  assert 'holds a run with other settings' in done.stderr
  assert 'Exception ignored' not in done.stderr  # TFF's executor, alive at exit


@pytest.mark.parametrize('flag, message', [
    ('--capacities=1x-3x', "capacity '3x' in scheme '1x-3x' is not a power of two"),
    ('--capacities=1x-2x-4x-8x-16x-32x-64x-128x-256x', 'the scheme has 9 tiers but there '
     'are only 8 clients'),
    ('--algorithm=fedhm --capacities=1x-64x', 'FedHM cannot hold table item_gmf'),
    ('--capacity_fractions=0.5,x', '--capacity_fractions must be a list of floats'),
    ('--algorithm=fair_hom --capacity_fractions=0.5,0.5', '--capacity_fractions and '
     '--capacity_assignment split the clients into capacity groups, and fair_hom has one'),
    ('--capacities=1x --capacity_assignment=random', 'and --capacities=1x has one'),
    ('--algorithm=colr --local_ranks=1-2', '--algorithm=colr: --local_ranks applies to scolr '
     'only'),
    ('--algorithm=fedavg --heat=clients', '--heat applies where --algorithm=fedavg trains a '
     "Keras model; on --task=ranking it is fair's round, which weighs clients by their "
     'training examples'),
    ('--loss=global_softmax', '--loss does not apply to --task=ranking'),
    ('--clients_per_round=9', '--clients_per_round=9 is larger than the 8 training clients'),
])
def test_goodreads_bad_flags_stop_before_training(flag, message, user_items_dir, tmp_path):
  _assert_refused(message, tmp_path, '--task=ranking', f'--data_dir={user_items_dir}',
                  '--algorithm=fair', *flag.split())


@pytest.mark.slow
def test_goodreads_fair_trains_in_process_with_tier_metrics(user_items_dir, tmp_path):
  out = tmp_path / 'out'
  done = trainer.train_here(
      '--task=ranking', f'--data_dir={user_items_dir}', '--algorithm=fair',
      '--capacities=1x-2x-4x', '--capacity_assignment=random', '--rounds=2',
      '--clients_per_round=4', '--eval_every=1', '--batch_size=4', '--factors=4',
      '--local_epochs=1', '--runtime=inprocess', f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'round 2/2' in done.stdout and 'ndcg_at_20' in done.stdout
  summary = json.loads((out / 'summary.json').read_text())
  assert 0 <= summary['test/ndcg_at_20'] <= 1
  assert sum(summary[f'train/client_work/clients/{t}'] for t in ('1x', '2x', '4x')) == 4
  assert summary['train/aggregator/bytes_down'] > 0
  config = json.loads((out / 'config.json').read_text())
  assert (config['capacities'], config['batch_size'], config['client_optimizer']) == (
      '1x-2x-4x', 4, {'name': 'adam', 'learning_rate': 1e-3})
  # CoLR's --secure_sum_bound is a secure sum: the runtime chosen for it (auto) is
  # the in-process one (resolved without the option, it was TFF's native worker,
  # which then refused the secure sum).
  done = trainer.train_here(
      '--task=ranking', f'--data_dir={user_items_dir}', '--algorithm=colr', '--rank=2',
      '--secure_sum_bound=2', '--rounds=1', '--clients_per_round=4',
      f'--output_dir={tmp_path / "colr"}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert json.loads((tmp_path / 'colr' / 'config.json').read_text())['runtime'] == 'inprocess'


@pytest.mark.parametrize('flag, message', [
    ('--model=xgboost', 'flag --model=xgboost: value should be one of <lr|dcn|din>'),
    ('--heat=rows', 'flag --heat=rows: value should be one of <clients|examples>'),
    ('--target=auc>0.6', '--target=auc>0.6: expected METRIC>=VALUE or METRIC<=VALUE'),
    ('--target=test/auc>=0.6', "--target metric 'test/auc': this run reports metrics under "
     'eval/, train/ only'),
    ('--algorithm=fedadam --server_optimizer=sgd', '--server_optimizer=sgd does not apply to '
     '--algorithm=fedadam: its server optimizer is adam'),
    ('--capacities=1x-2x', '--capacities does not apply to --algorithm=fedavg'),
    ('--algorithm=scaffold --server_optimizer=adam', "scaffold takes SGD steps at the "
     "clients and the server; this run's are sgd / adam (as given, else the task's "
     'defaults): give --client_optimizer=sgd --server_optimizer=sgd'),
    ('--algorithm=fedavg --server_adaptivity=0.001', '--server_optimizer=sgd: adaptivity '
     'applies to adagrad and adam, not sgd'),
])
def test_ctr_bad_flags_stop_before_training(flag, message, ml100k_dir, tmp_path):
  _assert_refused(message, tmp_path, '--task=ctr', f'--data_dir={ml100k_dir}',
                  *flag.split())


def test_a_target_metric_never_evaluated_stops_at_the_first_evaluation(ml100k_dir, tmp_path):
  done = trainer.train_here('--task=ctr', f'--data_dir={ml100k_dir}', '--rounds=5',
                            '--eval_every=1', '--clients_per_round=5',
                            '--target=eval/test_acu>=0.6', f'--output_dir={tmp_path}')
  assert done.returncode == 1
  assert "--target metric 'eval/test_acu' is not among the evaluated metrics: " in done.stderr
  assert 'round 1/5' in done.stdout and 'round 2/5' not in done.stdout


def test_ctr_fedsubavg_reports_rounds_to_target_and_submodel_bytes(ml100k_dir, tmp_path):
  out = tmp_path / 'out'
  done = trainer.train_here(
      '--task=ctr', f'--data_dir={ml100k_dir}', '--algorithm=fedsubavg',
      '--model=lr', '--split=random', '--rounds=3', '--clients_per_round=10',
      '--eval_every=1', '--local_steps=5', '--batch_size=8',
      '--client_learning_rate=0.5', '--target=eval/train_loss<=0.67',
      f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((out / 'summary.json').read_text())
  losses = [float(r['eval/train_loss']) for r in _rows(out)]
  reached = [r for r, loss in enumerate(losses, 1) if loss <= 0.67]
  assert summary['rounds_to_target'] == (reached[0] if reached else None)
  assert summary['rounds_to_target'] > 1  # a target the first round does not meet
  assert summary['target'] == 'eval/train_loss<=0.67'
  assert 0 < summary['train/aggregator/submodel_bytes'] < summary['train/aggregator/model_bytes']
  assert 0 <= summary['eval/test_auc'] <= 1


def _ctr_file(tmp_path):
  """A DIN-style CTR file: label, user, item, history; 12 users of 6 rows."""
  rng = np.random.default_rng(0)
  lines = ['label,user,item,history']
  for user in range(12):
    for _ in range(6):
      history = ','.join(str(i) for i in rng.choice(20, rng.integers(0, 4), replace=False))
      lines.append(f'{int(rng.random() < 0.4)},u{user},{rng.integers(20)},"{history}"')
  path = tmp_path / 'clicks.csv'
  path.write_text('\n'.join(lines) + '\n')
  return path


CTR_FILE = ['--task=ctr', '--client_column=user', '--feature_columns=user,item',
            '--list_columns=history']


@pytest.mark.slow
def test_ctr_file_of_ones_own_trains_fedsubavg_on_dins_declared_tables(tmp_path):
  """(LR's: tests/algorithms/test_maths_fedavg.py, against FedSubAvg's maths.)"""
  model = 'din'
  out = tmp_path / 'out'
  done = trainer.train_here(*CTR_FILE, f'--data_dir={_ctr_file(tmp_path)}',
                            '--algorithm=fedsubavg', f'--model={model}', '--rounds=2',
                            '--clients_per_round=4', '--eval_every=1', '--batch_size=4',
                            f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert '12 clients' in done.stdout and f'model {model}' in done.stdout
  summary = json.loads((out / 'summary.json').read_text())
  assert 0 <= summary['eval/test_auc'] <= 1
  assert 0 < summary['train/aggregator/submodel_bytes'] < summary['train/aggregator/model_bytes']


@pytest.mark.parametrize('flags, message', [
    (['--feature_columns=item,price'], "no feature column 'price'; its columns: label, "
     'user, item, history'),
    (['--client_column=None'], "no client column 'None'"),
    (['--model=din', '--feature_columns=item'], '--model=din on a CTR file reads '
     '--feature_columns=USER,ITEM and --list_columns=HISTORY'),
])
def test_ctr_file_bad_columns_stop_before_training(flags, message, tmp_path):
  _assert_refused(message, tmp_path, *CTR_FILE, f'--data_dir={_ctr_file(tmp_path)}', *flags)


@pytest.mark.parametrize('flags, message', [  # the task's other refusals: tests/tasks
    ('--algorithm=colr --rank=0', 'rank must be in 1..8 (the embedding dimension) for colr'),
    ('--algorithm=colr --client_optimizer=adam', '--algorithm=colr trains with SGD'),
    ('--algorithm=metaua --aggregator=dp', '--aggregator=dp does not apply to --algorithm='
     "metaua: it honours --aggregator=mean; its server weighs each client's update "
     'individually'),
])
def test_ranking_bad_flags_stop_before_training(flags, message, ranking_dir, tmp_path):
  _assert_refused(message, tmp_path, *RANKING, f'--data_dir={ranking_dir}', *flags.split())


@pytest.mark.slow
def test_ranking_colr_trains_in_process_through_secure_sum(ranking_dir, tmp_path):
  """CoLR's factors through TFF's secure sum (bounds that never bite) train to the
  plain sum's numbers: a client the sum dropped would move them."""
  flags = [*RANKING, f'--data_dir={ranking_dir}', '--algorithm=colr', '--rank=2',
           '--user_state=reconstructed', '--runtime=inprocess']
  done = trainer.train_here(*flags, f'--output_dir={tmp_path / "plain"}')
  assert done.returncode == 0, done.stderr[-3000:]
  out = tmp_path / 'out'
  done = trainer.train_here(*flags, '--secure_sum_bound=2', f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'round 4/4' in done.stdout and 'val hr' in done.stdout
  summary = json.loads((out / 'summary.json').read_text())
  plain = json.loads((tmp_path / 'plain' / 'summary.json').read_text())
  for key in ('train/client_work/train/loss', 'test/hr_at_10', 'validation/ndcg_at_10'):
    assert summary[key] == pytest.approx(plain[key], rel=1e-4), key
  assert summary['train/aggregator/bytes_up'] == 200 * 2 * 4  # A: items x rank floats
  assert summary['train/aggregator/secure_upper_clipped_count'] == 0
  assert summary['train/aggregator/secure_upper_threshold'] == 2.0
  assert 'warning' not in done.stderr
  # A bound that bites, in a process as a user runs it, with stored users: the run
  # says so once, naming the round, the count and the cure, and prints no error line
  # (compiling the secure sum's state in-process logged a Grappler error that was not).
  stored = [f for f in flags if f != '--user_state=reconstructed']
  done = trainer.train(*stored, '--secure_sum_bound=1e-4', f'--output_dir={tmp_path / "b"}')
  assert done.returncode == 0, done.stderr[-3000:]
  clipped = pd.read_csv(tmp_path / 'b' / 'metrics.csv')
  first = clipped[['train/aggregator/secure_upper_clipped_count',
                   'train/aggregator/secure_lower_clipped_count']].iloc[0].max()
  assert first > 0 and done.stderr.count('warning: ') == 1, done.stderr[-2000:]
  assert (f'warning: round 1: the secure sum clipped the values of {first:g} clients to '
          '[-0.0001, 0.0001] (') in done.stderr and '--secure_sum_bound' in done.stderr
  assert not re.search(r'^\S+ \S+: E |Traceback', done.stderr, re.M), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize('runtime', ['native', 'inprocess'])
def test_ranking_stored_users_resume_to_the_same_metrics(ranking_dir, tmp_path, runtime):
  flags = [*RANKING, f'--data_dir={ranking_dir}', '--algorithm=scolr', '--rank=4',
           f'--runtime={runtime}']
  whole = tmp_path / 'whole'
  done = trainer.train_here(*flags, f'--output_dir={whole}')
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((whole / 'summary.json').read_text())
  cut = tmp_path / 'cut'
  _stop_after_round_2_and_resume(flags, cut)
  resumed = json.loads((cut / 'summary.json').read_text())
  for key in ('test/hr_at_10', 'validation/ndcg_at_10', 'train/client_work/train/loss',
              'train/aggregator/bytes_up'):
    assert resumed[key] == summary[key], key


# A user's algorithm that declares DP and fills tff.learning's aggregator slot itself,
# with a DP clip other than the settings' instead of the composer's (one that drops DP
# is refused as it is built: test_registry.py).
CLIPS_ELSEWHERE = '''
import dataclasses

from tff_rec import registry
from tff_rec.aggregators import inner
from tff_rec.algorithms import baselines


def clipping_at_5(task, options, training, *, name):
  built = baselines.build_keras(task, options, training, name=name)
  clip = dataclasses.replace(training.aggregator, dp_clip=5.0).mean(training.clients_per_round)
  return dataclasses.replace(built, process=lambda composed: built.process(clip))


registry.register('fedavg_clipping_at_5', registry.Algorithm(
    'declares DP, clips elsewhere', {'keras': clipping_at_5}, aggregators=inner.NAMES))
'''


@pytest.mark.slow
def test_an_aggregation_that_shows_no_effect_stops_the_run(ml100k_dir, tmp_path):
  """What a run with DP records, the matrix checks on real runs (test_matrix.py)."""
  module = tmp_path / 'clipping.py'
  module.write_text(CLIPS_ELSEWHERE)
  done = trainer.train(*FAST, f'--data_dir={ml100k_dir}', '--rounds=1', '--aggregator=dp',
                       f'--import={module}', '--algorithm=fedavg_clipping_at_5',
                       f'--output_dir={tmp_path / "clipped"}')
  assert done.returncode != 0
  assert ('the aggregation took no visible effect in round 1 (--aggregator=dp: dp_clip [5.0] '
          'where the settings give 1.0; --aggregator=dp: dp_stddev [5.0] where the settings '
          'give 1.0): stopped') in done.stderr, done.stderr[-2000:]
  assert not (tmp_path / 'clipped' / 'summary.json').exists()


def test_a_users_option_named_as_a_trainer_flag_stops_the_trainer_cleanly(tmp_path):
  module = tmp_path / 'clashing.py'
  module.write_text(textwrap.dedent("""
      import dataclasses
      from tff_rec import registry

      @dataclasses.dataclass(frozen=True)
      class Options:
        rounds: int = 3

      registry.register('clashing', registry.Algorithm('mine', {'keras': print}, Options))
      """))
  done = trainer.train(f'--import={module}', '--algorithm=clashing', '--output_dir=unused')
  assert done.returncode == 1
  assert done.stderr.endswith('error: two flags are named --rounds: an algorithm option '
                              '(--algorithm=clashing) takes a name the launcher (or a '
                              'training setting) has; rename the option\n'
                              ), done.stderr[-2000:]  # no TFF error after it


@pytest.mark.slow
@pytest.mark.parametrize('runtime', ['native', 'inprocess'])
def test_a_run_that_diverges_stops_at_that_round_and_says_so(runtime, ml100k_dir, tmp_path,
                                                             capfd):
  """Client SGD 10 on DCN: round 1 evaluates finite (log loss about 5; at 20 it
  overflowed in round 1 on one CPU and not another), round 2's loss overflows. What
  TF logs goes to the process's stderr (capfd): TFF's compile of a Keras round for
  the in-process runtime logged grappler errors that were not errors."""
  out = tmp_path / 'out'
  done = trainer.train_here(
      '--task=ctr', '--model=dcn', f'--data_dir={ml100k_dir}', '--client_learning_rate=10',
      '--rounds=3', '--eval_every=1', '--clients_per_round=5', f'--runtime={runtime}',
      f'--output_dir={out}')
  logged = capfd.readouterr().err
  assert done.returncode == 3, done.stderr[-2000:]
  assert 'round 1/3' in done.stdout and 'round 2/3' not in done.stdout
  assert 'error: diverged at round 2: ' in done.stderr and '--client_learning_rate' in done.stderr
  assert not re.search(r'^\S+ \S+: E |Traceback', logged + done.stderr, re.M), logged
  summary = json.loads((out / 'summary.json').read_text(), parse_constant=_not_strict_json)
  assert (summary['diverged_at_round'], summary['last_finite_round']) == (2, 1)
  if runtime == 'native':  # its round's loss overflowed (in-process: the weights only)
    assert summary['train/client_work/train/loss'] is None  # recorded as null: strict JSON
  first = _rows(out)[0]
  assert summary['last_finite/eval/test_auc'] == float(first['eval/test_auc'])
  assert [r['round'] for r in _rows(out)] == ['1', '2']  # the diverged round is recorded


def _not_strict_json(constant: str):
  raise AssertionError(f'{constant} is not strict JSON')
