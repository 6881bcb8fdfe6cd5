"""RunSpec: the trainer's flags, its config.json and a record's settings, one spec."""

import json

import pytest

from experiments import spec as spec_lib
from launch import train as launcher
from tests.algorithms import small_ctr
from tests.launch import launchers


def _spec(path, **fields):
  values = dict(task='ctr', algorithm='fedprox',
                task_settings=dict(data_dir=str(path), model='lr', client_column='user',
                                   feature_columns=('item', 'genre'), test_column='test',
                                   batch_size=4, seed=2),
                options=dict(proximal_strength=0.5, heat='examples'),
                settings=dict(client_learning_rate=0.3, clients_per_round=3),
                aggregator='dp', aggregator_settings=dict(dp_clip=2.0, dp_noise_multiplier=0.0),
                stack=('fedsubavg',), rounds=2, eval_every=1, checkpoint_every=1)
  values.update(fields)
  return spec_lib.RunSpec(**values)


def test_its_flags_make_the_trainer_write_its_config(tmp_path):
  spec = _spec(small_ctr.write(tmp_path))
  out = tmp_path / 'run'
  done = launchers.run_here(launcher, *spec.to_flags(), f'--output_dir={out}')
  assert done.returncode == 0, done.stderr[-2000:]
  written = json.loads((out / 'config.json').read_text())
  assert written == spec.to_config(runtime=written['runtime'])
  assert written['client_optimizer'] == {'name': 'sgd', 'learning_rate': 0.3}  # ctr's sgd
  assert (written['dp_clip'], written['stack'], written['seed']) == (2.0, ['fedsubavg'], 2)
  assert spec.differences(written) == []


def test_differences_name_what_defines_a_run_and_ignore_how_it_ran(tmp_path):
  spec = _spec(tmp_path / 'clicks.csv', options=dict(proximal_strength=0.01))
  config = spec.to_config(runtime='native')
  assert spec.differences({**config, 'runtime': 'inprocess', 'threads': 4,
                           'checkpoint_every': 7}) == []
  # An option left out of a record is at its default (0.01 is FedProx's).
  assert spec.differences({k: v for k, v in config.items() if k != 'proximal_strength'}) == []
  # A dataset is its folder's (file's) name: records come from other checkouts.
  assert spec.differences({**config, 'data_dir': '/elsewhere/clicks.csv'}) == []
  # A setting a record predates is at its default; an optimizer field set to null
  # is one left out (records made before those existed).
  assert spec.differences({k: v for k, v in config.items() if k != 'list_separator'}) == []
  assert spec.differences({**config, 'client_optimizer': {
      **config['client_optimizer'], 'adaptivity': None}}) == []
  assert spec.differences({k: v for k, v in config.items() if k != 'batch_size'}) == [
      'batch_size: 16 -> 4']  # not at its default (16) here: a difference
  changed = {**config, 'client_optimizer': {'name': 'sgd', 'learning_rate': 0.1}, 'rounds': 3}
  assert spec.differences(changed) == [
      'client_optimizer: {"learning_rate": 0.1, "name": "sgd"} -> '
      '{"learning_rate": 0.3, "name": "sgd"}', 'rounds: 3 -> 2']


def test_a_central_spec_gives_the_centralized_launchers_flags_and_config(tmp_path):
  """What launch.centralized writes from these flags equals this config: the study
  runner checks it of every cell it runs (tests/launch/test_study.py runs one)."""
  spec = spec_lib.CentralSpec(
      task='ctr', task_settings=dict(
          data_dir=str(tmp_path), model='lr', batch_size=4, local_steps=3, seed=1),
      settings=dict(optimizer='sgd', learning_rate=0.5, steps_per_epoch=2), rounds=2,
      eval_every=1)
  assert 'local_steps' not in spec.task_settings  # federated training's only
  assert spec.to_flags() == [
      '--task=ctr', f'--data_dir={tmp_path}', '--model=lr', '--batch_size=4', '--seed=1',
      '--optimizer=sgd', '--learning_rate=0.5', '--steps_per_epoch=2', '--epochs=2',
      '--eval_every=1']
  config = spec.to_config()
  assert (config['epochs'], config['optimizer'], config['steps_per_epoch']) == (
      2, {'name': 'sgd', 'learning_rate': 0.5}, 2)
  assert spec.differences(config) == []
  assert spec.differences({**config, 'epochs': 3}) == ['epochs: 3 -> 2']
  with pytest.raises(ValueError, match='clients_per_round is not a setting of the centralized'):
    spec_lib.CentralSpec(task='ctr', settings={'clients_per_round': 3})


@pytest.mark.parametrize('fields, message', [
    (dict(options=dict(capacities='1x-2x')), '--capacities does not apply to --algorithm=fedprox'),
    (dict(aggregator='mean'), 'dp_noise_multiplier applies to aggregator=dp'),
    (dict(settings=dict(client_learning_rate=-1.0)), 'client_learning_rate must be > 0'),
    (dict(task_settings=dict(model='svm')), "unknown model 'svm'"),
    (dict(algorithm='metaua', options={}),
     '--aggregator=dp does not apply to --algorithm=metaua')])
def test_settings_it_cannot_resolve_are_refused_naming_them(tmp_path, fields, message):
  with pytest.raises(ValueError, match=message):
    _spec(tmp_path / 'clicks.csv', **fields).to_config()
