"""The README's "Adding an algorithm" example, run as written."""

import re

import numpy as np
import pytest

from tasks import movielens_ctr
from tests import conftest
from tff_rec.algorithms import registry

README = (conftest.REPO / 'README.md').read_text()


def _code_after(heading: str) -> str:
  section = README[README.index(heading):]
  return re.search(r'```python\n(.*?)```', section, re.S).group(1)


@pytest.fixture
def example_registered():
  exec(compile(_code_after('### Adding an algorithm'), 'README.md', 'exec'), {})  # pylint: disable=exec-used
  yield registry.get('fedavg_robust')
  del registry.algorithms()['fedavg_robust']


def test_the_added_algorithm_trains_and_takes_its_option(example_registered, ml100k_dir,
                                                         tff_runtime):
  assert [f.name for f in __import__('dataclasses').fields(example_registered.options)] == [
      'clipping']
  task = movielens_ctr.Task(movielens_ctr.Config(data_dir=str(ml100k_dir), model='lr',
                                                 batch_size=8))
  built = registry.build('fedavg_robust', task, registry.training(task, 'fedavg_robust'),
                         clipping=False)
  state = built.process.initialize()
  before = built.process.get_model_weights(state).trainable
  output = built.process.next(state, [built.client_input(c, 1) for c in built.client_ids[:4]])
  after = built.process.get_model_weights(output.state).trainable
  assert max(np.abs(a - b).max() for a, b in zip(after, before)) > 1e-4
  assert 'zeroing' in str(output.metrics['aggregator'])
  with pytest.raises(ValueError, match='registered already'):
    registry.register('fedavg_robust', example_registered)
