"""launch.study refuses a study that cannot run before any cell (a study run whole:
tests/test_docs.py runs docs/studies.md's)."""

import json
import subprocess
import sys

import pytest

from launch import study
from tests import conftest
from tests.algorithms import small_ctr
from tests.launch import launchers

STUDY = '''
rounds = 4
eval_every = 2
seeds = [0]
baseline = "fedavg"
floors = ["click_rate", "constant"]

[task]
name = "ctr"
data_dir = "{data}"
model = "lr"
client_column = "user"
feature_columns = ["item", "genre"]
test_column = "test"
validation_fraction = 0.2
batch_size = 4

[selection]
metric = "eval/validation_auc"
last = 2
extend = 1

[report]
metrics = ["eval/test_auc", "eval/test_logloss"]

[methods.fedavg]
algorithm = "fedavg"
settings = {{ clients_per_round = 3 }}
grid = {{ client_learning_rate = [0.5] }}

[methods.fedprox]
algorithm = "fedprox"
options = {{ proximal_strength = 0.5 }}
settings = {{ clients_per_round = 3 }}
grid = {{ client_learning_rate = [0.5] }}
'''


def _study(*args) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'launch.study', *args], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=900)


@pytest.fixture
def spec(tmp_path):
  path = tmp_path / 'study.toml'
  path.write_text(STUDY.format(data=small_ctr.write(tmp_path)))
  return path


def test_a_study_that_cannot_run_is_refused_before_any_cell(tmp_path, spec):
  """Its flag parsing and main() here (a process of its own would import TF and TFF
  again); the test below runs its command line."""
  spec.write_text(spec.read_text().replace('algorithm = "fedprox"', 'algorithm = "fedproxx"'))
  done = launchers.run_here(study, f'--spec={spec}', f'--output_dir={tmp_path / "out"}')
  assert done.returncode == 1
  assert (f'{spec}: methods.fedprox.algorithm: unknown algorithm \'fedproxx\''
          in done.stderr), done.stderr
  assert not (tmp_path / 'out' / 'runs').exists()


@pytest.mark.slow(seconds=31)
def test_short_grid_runs_and_a_centralized_method_run_side_by_side(tmp_path, spec):
  """fedavg's grid runs 1 round then its choice 2; CentralSGD (launch.centralized,
  in a worker of its own: its flags collide with the trainer's) beside it, each
  worker started for the first cells. The runner
  checks each cell's config.json against its spec (a difference stops the study)."""
  text = spec.read_text().split('[methods.fedprox]')[0].replace(
      'rounds = 4\neval_every = 2', 'rounds = 2\neval_every = 1').replace(
          'extend = 1', 'extend = 0\nrounds = 1').replace('last = 2', 'last = 1')
  spec.write_text(text + '''
[methods.central]
algorithm = "central"
settings = { optimizer = "sgd" }
grid = { learning_rate = [0.5] }
''')
  out = tmp_path / 'out'
  done = _study(f'--spec={spec}', f'--output_dir={out}', '--parallel=2')
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
  chosen = json.loads((out / 'results.json').read_text())['methods']['fedavg']['chosen']
  cells = sorted(p.name for p in (out / 'cells').iterdir() if p.is_dir())
  assert chosen == {'client_learning_rate': 0.5}
  assert cells == ['central-learning_rate=0.5-s0', 'fedavg-client_learning_rate=0.5-s0',
                   'sweep-central-learning_rate=0.5-s0',
                   'sweep-fedavg-client_learning_rate=0.5-s0']
  central = json.loads((out / 'cells' / 'central-learning_rate=0.5-s0' / 'config.json').read_text())
  assert (central['epochs'], central['optimizer']) == (2, {'name': 'sgd', 'learning_rate': 0.5})
  sweep = json.loads((out / 'cells' / 'sweep-fedavg-client_learning_rate=0.5-s0' / 'config.json')
                     .read_text())
  assert (sweep['rounds'], sweep['eval_every']) == (1, 1)
  table = (out / 'table.md').read_text()
  assert '| central | learning_rate=0.5 |' in table, table
  assert "the cells' runs took" in done.stdout
