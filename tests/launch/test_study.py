"""launch.study refuses a study that cannot run before any cell (a study run whole:
tests/test_docs.py runs docs/studies.md's)."""

import subprocess
import sys

import pytest

from tests import conftest
from tests.algorithms import small_ctr

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
  spec.write_text(spec.read_text().replace('algorithm = "fedprox"', 'algorithm = "fedproxx"'))
  done = _study(f'--spec={spec}', f'--output_dir={tmp_path / "out"}')
  assert done.returncode == 1
  assert (f'{spec}: methods.fedprox.algorithm: unknown algorithm \'fedproxx\''
          in done.stderr), done.stderr
  assert not (tmp_path / 'out' / 'runs').exists()
