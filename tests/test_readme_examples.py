"""The docs pages' "Adding an algorithm" and "Adding a task" examples
(docs/plugins.md), the Python API and the table of implementations
(docs/algorithms.md), run and checked as written."""

import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
import tensorflow_federated as tff

from launch import common
import tasks
from tasks import ctr
from tests import conftest
from tff_rec import composer
from tff_rec import registry
from tff_rec.aggregators import inner
from tff_rec.training import loop
from tff_rec.training import optimizers

PLUGINS, ALGORITHMS = ('docs/plugins.md', 'docs/algorithms.md')


def _page(page: str) -> str:
  return (conftest.REPO / page).read_text()


def _code_after(heading: str, page: str = PLUGINS) -> str:
  text = _page(page)
  return re.search(r'```python\n(.*?)```', text[text.index(heading):], re.S).group(1)


@pytest.fixture
def example_registered():
  code = compile(_code_after('## Adding an algorithm'), PLUGINS, 'exec')
  exec(code, {})  # pylint: disable=exec-used
  yield registry.get('fedavg_robust')
  registry.unregister('fedavg_robust')


def test_the_added_algorithm_trains_and_takes_its_option(example_registered, ml100k_dir,
                                                         tff_runtime):
  assert [f.name for f in __import__('dataclasses').fields(example_registered.options)] == [
      'clipping']
  task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='lr',
                             batch_size=8))
  built = registry.build('fedavg_robust', task, registry.training(task, 'fedavg_robust'),
                         clipping=False)
  state = built.process.initialize()
  before = built.process.get_model_weights(state).trainable
  output = built.process.next(state, [built.client_input(c, 1) for c in built.client_ids[:4]])
  after = built.process.get_model_weights(output.state).trainable
  assert max(np.abs(a - b).max() for a, b in zip(after, before, strict=True)) > 1e-4
  assert 'zeroing' in str(output.metrics['aggregator'])
  with pytest.raises(ValueError, match='registered already'):
    registry.register('fedavg_robust', example_registered)


def test_an_added_round_gets_the_composers_aggregation_and_clips_its_updates(ml100k_dir,
                                                                            tff_runtime):
  """The page's own round: under DP and FedSubAvg's stack it reports both (composed by
  the registry, not by its code); with the plain mean, the model moves by the mean of
  updates of norm <= 1 (at the same rate unclipped it moves further)."""
  exec(compile(_code_after('### An algorithm with its own round'), PLUGINS, 'exec'), {})
  try:
    task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='lr', batch_size=8))
    moved = {}
    for name in ('fedavg_clipped', 'fedavg'):
      built = registry.build(name, task, registry.training(
          task, name, client_learning_rate=5.0, clients_per_round=4))
      state = built.process.initialize()
      output = built.process.next(state, [built.client_input(c, 1)
                                          for c in built.client_ids[:4]])
      moved[name] = np.sqrt(sum(np.sum((a - b)**2) for a, b in zip(
          built.process.get_model_weights(output.state).trainable,
          built.process.get_model_weights(state).trainable, strict=True)))
    assert 0.1 < moved['fedavg_clipped'] <= 1.0 + 1e-5 < moved['fedavg'], moved
    built = registry.build('fedavg_clipped', task, registry.training(
        task, 'fedavg_clipped', aggregator=inner.InnerAggregator('dp'), stack=('fedsubavg',)))
    assert {'dp_clip', 'fedsubavg_max_scale'} <= composer.metric_names(built.process)
  finally:
    registry.unregister('fedavg_clipped')


def test_the_added_algorithm_joins_the_trainer_by_import_and_refuses_what_it_ignores(
    ml100k_dir, tmp_path):
  """The page's algorithm and task, each a module of the user's: the task's settings
  and the algorithm's options are flags, and what the algorithm does not honour stops
  the run before training."""
  module = tmp_path / 'my_algorithms.py'
  module.write_text(_code_after('## Adding an algorithm'))
  task = tmp_path / 'my_task.py'
  task.write_text(_code_after('## Adding a task') + "\nimport sys\nimport tasks\n"
                  "tasks.register('movielens_rating', sys.modules[__name__])\n")
  done = subprocess.run(
      [sys.executable, '-m', 'launch.train', f'--import={module}', f'--import={task}',
       '--task=movielens_rating', f'--data_dir={ml100k_dir}', '--embedding_dim=4',
       f'--output_dir={tmp_path / "out"}', '--algorithm=fedavg_robust', '--clipping=false',
       '--aggregator=dp'],
      cwd=conftest.REPO, capture_output=True, text=True, timeout=300)
  assert done.returncode != 0
  assert ('--aggregator=dp does not apply to --algorithm=fedavg_robust: it honours '
          '--aggregator=mean') in done.stderr, done.stderr[-2000:]
  assert not (tmp_path / 'out').exists()


def test_the_added_algorithm_runs_as_a_module_of_the_package(tmp_path):
  """Placed in tff_rec/algorithms/ and listed in BUILTIN_MODULES, the page's code
  loads with the package's own algorithms (no circular import); the script, which
  runs no runtime, exits without TFF's error about its import-time context."""
  (tmp_path / 'fedavg_robust.py').write_text(_code_after('## Adding an algorithm'))
  script = textwrap.dedent(f"""
      import tff_rec.algorithms
      tff_rec.algorithms.__path__.append({str(tmp_path)!r})
      from tff_rec import registry
      registry.BUILTIN_MODULES += ('fedavg_robust',)
      print(sorted(registry.algorithms()).index('fedavg_robust') >= 0,
            registry.implementations()['fedavg_robust'])
      """)
  done = subprocess.run([sys.executable, '-c', script], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "True {'keras': 'fedavg_robust.build'}" in done.stdout
  assert 'Exception ignored' not in done.stderr, done.stderr[-2000:]


@pytest.fixture
def example_task(monkeypatch):
  """The docs' task module, registered as tasks would have it."""
  module = types.ModuleType('movielens_rating')
  code = compile(_code_after('## Adding a task'), PLUGINS, 'exec')
  exec(code, vars(module))  # pylint: disable=exec-used
  monkeypatch.setitem(tasks.TASKS, 'movielens_rating', module)
  return module


def test_the_added_task_trains_fedavg_and_fedsubavg_and_its_settings_are_flags(
    example_task, ml100k_dir, tff_runtime):
  task = example_task.Task(example_task.make_config(data_dir=str(ml100k_dir), batch_size=8))
  assert [(t.name, t.rows, t.width) for t in task.tables] == [('users', 31, 8),
                                                               ('items', 41, 8)]
  untrained = task.evaluate(tff.learning.models.ModelWeights.from_model(task.keras_model()))
  for name in ('fedavg', 'fedsubavg'):
    built = registry.build(name, task, registry.training(task, name, clients_per_round=10))
    _, metrics = loop.run(built.process, client_ids=built.client_ids,
                          client_input=built.client_input,
                          schedule=loop.Schedule(rounds=5, clients_per_round=10, eval_every=0),
                          evaluate=task.evaluate)
    assert metrics['rmse'] < untrained['rmse'] - 0.5, name  # ratings 1-5 from a ~0 start
  for first, again in zip(task.keras_model().get_weights(), task.keras_model().get_weights(),
                          strict=True):
    np.testing.assert_array_equal(first, again)  # seeded: the same flags repeat a run
  central = task.train_centralized(optimizers.OptimizerConfig('adam', 0.01), epochs=1,
                                   eval_every=1, on_epoch=lambda epoch, metrics: None)
  assert central['test/rmse'] < untrained['rmse']  # named as the trainer names it
  # its objective's floor, by the trainer's metric name: the training mean predicted
  test_ratings = task.objective.parts['test'].labels
  mean = task.client_arrays.pooled()[1].mean()  # every training client's ratings
  assert task.floors()['mean']['test/rmse'] == pytest.approx(
      np.sqrt(np.mean((test_ratings - mean) ** 2)), rel=1e-6)
  settings = common.task_settings()
  assert [task for task, _ in settings['embedding_dim']] == [
      'ctr', 'loo_ranking', 'movielens_rating', 'next_item']
  help_text = common._setting_help(settings['embedding_dim'])  # pylint: disable=protected-access
  assert 'Embedding dimension.' in help_text


def test_the_docs_table_of_implementations_is_the_registrys():
  for name, implementation in registry.implementations().items():
    algorithm = registry.get(name)
    cells = [f'`{implementation[k]}`' if k in implementation else '-'
             for k in ('mf', 'weight_tables', 'keras_batches', 'keras')]
    row = (f'| {name} | ' + ' | '.join(cells) + f' | {", ".join(algorithm.aggregators)} | '
           f'{", ".join(algorithm.stacks) or "-"} |')
    assert row in _page(ALGORITHMS), row


def test_the_python_api_runs_as_printed(ml100k_dir, capsys):
  code = _code_after("The launchers' Python API", ALGORITHMS).replace("'../shared/data/ml-100k'",
                                                          repr(str(ml100k_dir)))
  namespace = {}
  exec(compile(code, ALGORITHMS, 'exec'), namespace)  # pylint: disable=exec-used
  metrics = namespace['metrics']
  assert capsys.readouterr().out.strip() == str(metrics['eval/test_auc'])
  assert metrics['train/client_work/train/loss'] > 0  # the last of 5 rounds trained
