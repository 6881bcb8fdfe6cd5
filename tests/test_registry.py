"""The registry: one entry per algorithm, options checked, refusals that say why."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks import ctr
from tasks import loo_ranking
from tasks import next_item
from tasks import ranking
from tff_rec import registry
from tff_rec import runner
from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import baselines
from tff_rec.algorithms import scaffold
from tff_rec.training import optimizers


def test_every_algorithm_has_a_summary_and_frozen_options_with_help():
  for name, algorithm in registry.algorithms().items():
    assert algorithm.summary, name
    assert dataclasses.is_dataclass(algorithm.options), name
    for field in dataclasses.fields(algorithm.options):
      assert field.metadata.get("help"), (name, field.name)


def test_shared_option_names_have_one_meaning():
  seen = {}
  for algorithm in registry.algorithms().values():
    for field in dataclasses.fields(algorithm.options):
      seen.setdefault(field.name, (field.type, field.default))
      assert seen[field.name] == (field.type, field.default), field.name


def test_options_of_another_algorithm_are_refused_by_name():
  with pytest.raises(registry.NotApplicable, match='--capacities does not apply to '
                     '--algorithm=fedavg'):
    registry.check_options('fedavg', {'capacities': '1x-2x'})
  with pytest.raises(ValueError, match="unknown algorithm 'fedfoo'"):
    registry.get('fedfoo')


def test_training_settings_layer_task_then_algorithm_then_overrides():
  task = ctr.Task
  adam = registry.training(task, 'fedadam')
  assert (adam.server_optimizer.name, adam.server_optimizer.learning_rate) == ('adam', 0.01)
  assert adam.clients_per_round == 50
  meta = registry.training(task, 'metaua', server_optimizer='sgd')
  assert meta.server_optimizer == optimizers.OptimizerConfig('sgd', 0.1)  # tau dropped
  assert registry.training(task, 'fedavg', clients_per_round=7).clients_per_round == 7


@pytest.mark.parametrize('task_module, config, algorithm, message', [
    (next_item, {}, 'fedmf', 'trains a matrix factorization whose user vectors stay'),
    (next_item, {'loss': 'batch_softmax_spreadout'}, 'colr',
     'adds a regularization loss'),
    (next_item, {'loss': 'batch_softmax_spreadout'}, 'fair',
     'adds a regularization loss'),
    (ranking, {}, 'fedmf', 'trains a matrix factorization whose user vectors stay'),
    # The L2 term of FedMF's private users' MF, given to an algorithm on the Keras MF
    # (which has none)
    (loo_ranking, {'l2': 1e-3}, 'fair',
     r'--l2 applies to the algorithms that train a matrix factorization whose '
     r'user vectors stay on their clients \(colr, fedavg, fedmf, fedsubavg, scolr, svd, '
     r'topk\), and --algorithm=fair trains a Keras model here: leave it out'),
    (loo_ranking, {'l2': 1e-3}, 'scaffold',
     "--l2 applies to .* trains a Keras model whose clients' batches are numpy"),
])
def test_cells_that_make_no_sense_name_algorithm_task_and_reason(
    task_module, config, algorithm, message, request):
  data = request.getfixturevalue('user_items_dir' if task_module is ranking
                                 else 'ranking_dir' if task_module is loo_ranking
                                 else 'ml100k_dir')
  task = task_module.Task(task_module.Config(data_dir=str(data), **config))
  with pytest.raises(registry.NotApplicable,
                     match=f'--algorithm={algorithm} does not apply to --task='
                           f'{task_module.Task.NAME}: .*{message}'):
    registry.build(algorithm, task, registry.training(task, algorithm))


def test_secure_aggregation_needs_the_inprocess_runtime_and_dp_is_refused_by_scolr(
    ranking_dir):
  task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir)))
  secure = inner.InnerAggregator('secure')
  with pytest.raises(registry.NotApplicable, match='native worker has no secure sum'):
    registry.build('colr', task, registry.training(task, 'colr', aggregator=secure),
                   user_state='reconstructed')
  dp = registry.training(task, 'scolr', aggregator=inner.InnerAggregator('dp'))
  with pytest.raises(registry.NotApplicable,
                     match='--aggregator=dp averages over the cohort, and scolr divides'):
    registry.build('scolr', task, dp)
  for aggregator in ('dp', 'secure'):  # the secure sum would replace DP, or its bound
    training = registry.training(task, 'colr', aggregator=inner.InnerAggregator(aggregator),
                                 runtime='inprocess')
    with pytest.raises(registry.NotApplicable, match='--secure_sum_bound is the secure sum '
                       f'itself, and --aggregator={aggregator} chooses'):
      registry.build('colr', task, training, secure_sum_bound=10.0)


def test_scolr_refuses_dp_on_a_keras_model_as_on_the_item_table(ml100k_dir):
  task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='dcn'))
  dp = registry.training(task, 'scolr', aggregator=inner.InnerAggregator('dp'))
  with pytest.raises(registry.NotApplicable,
                     match='--aggregator=dp averages over the cohort, and scolr divides'):
    registry.build('scolr', task, dp)


@pytest.mark.parametrize('user_state', ['stored', 'reconstructed'])
def test_fedmf_under_dp_without_noise_or_clipping_is_the_cohort_mean(ranking_dir,
                                                                      tff_runtime, user_state):
  task = loo_ranking.Task(loo_ranking.Config(
      data_dir=str(ranking_dir), embedding_dim=4, batch_size=64))
  weights = []
  for aggregator in (inner.InnerAggregator(),
                     inner.InnerAggregator('dp', dp_noise_multiplier=0.0, dp_clip=1e6)):
    training = registry.training(task, 'colr', aggregator=aggregator, clients_per_round=4)
    built = registry.build('colr', task, training, rank=2, user_state=user_state)
    state = built.process.initialize()
    output = built.process.next(state, [built.client_input(c, 0) for c in built.client_ids[:4]])
    model = built.process.get_model_weights(output.state)
    weights.append(np.asarray(model['items']))
  assert np.abs(weights[0] - task.initial_items).max() > 1e-4
  np.testing.assert_allclose(weights[1], weights[0], atol=1e-6)


def test_fedsubavg_on_fedmf_refuses_an_item_mean_over_its_touching_clients(ranking_dir):
  task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir)))
  with pytest.raises(registry.NotApplicable, match='--item_average=touched already averages'):
    registry.build('fedmf', task, registry.training(task, 'fedmf', stack=('fedsubavg',)),
                   item_average='touched')


def test_fedavg_on_matrix_factorization_is_fedmf(ranking_dir):
  task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir)))
  with pytest.raises(registry.NotApplicable, match="it is fedmf's round, which weighs "
                     'clients equally'):
    registry.build('fedavg', task, registry.training(task, 'fedavg'), heat='examples')
  fedavg = registry.build('fedavg', task, registry.training(task, 'fedavg'))
  fedmf = registry.build('fedmf', task, registry.training(task, 'fedmf'))
  assert type(fedavg.process) is type(fedmf.process)
  user, (rank, rows) = fedavg.client_input(fedavg.client_ids[3], 5)
  user2, (rank2, rows2) = fedmf.client_input(fedmf.client_ids[3], 5)
  assert (user, rank) == (user2, rank2)
  for a, b in zip(rows, rows2, strict=True):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('task_name, name, aggregator, fastest', [
    ('loo_ranking', 'fedmf', 'mean', 'inprocess'),
    ('loo_ranking', 'colr', 'mean', 'inprocess'),
    ('loo_ranking', 'fedavg', 'mean', 'inprocess'),  # FedMF's round
    ('loo_ranking', 'fedadam', 'mean', 'native'),  # the Keras MF
    ('ctr', 'colr', 'mean', 'native'),
    ('ctr', 'fedavg', 'mean', 'native'),
    ('ctr', 'fedavg', 'secure', 'inprocess'),
])
def test_the_fastest_runtime_is_in_process_for_fedmf_rounds_and_secure_sums(
    task_name, name, aggregator, fastest, request):
  module = loo_ranking if task_name == 'loo_ranking' else ctr
  data_dir = request.getfixturevalue('ranking_dir' if task_name == 'loo_ranking' else 'ml100k_dir')
  task = module.Task(module.Config(data_dir=str(data_dir)))
  training = registry.training(task, name, aggregator=inner.InnerAggregator(aggregator),
                               runtime='auto')
  assert runner.runtime_for(name, task, training).runtime == fastest


@pytest.mark.parametrize('name, settings, message', [
    ('metaua', dict(stack=('fedsubavg',)), '--stack=fedsubavg does not apply to '
     '--algorithm=metaua: it honours no --stack; its server weighs each client'),
    ('fednova', dict(aggregator=inner.InnerAggregator('dp')), '--aggregator=dp does not '
     'apply to --algorithm=fednova: it honours --aggregator=mean;'),
    ('scaffold', dict(stack=('fedsubavg',)), '--stack=fedsubavg does not apply to '
     '--algorithm=scaffold: it honours no --stack'),
    ('fedadam', dict(server_optimizer='sgd'), '--server_optimizer=sgd does not apply to '
     '--algorithm=fedadam: its server optimizer is adam'),
    ('fedsubavg', dict(stack=('fedsubavg',)), r'--stack=fedsubavg applies fedsubavg twice '
     r'\(--algorithm=fedsubavg is it\)'),
    ('fedavg', dict(stack=('fedsubavg', 'fedsubavg')),
     '--stack=fedsubavg,fedsubavg applies fedsubavg twice'),
])
def test_composition_an_algorithm_does_not_declare_is_refused_before_reading_any_task(
    name, settings, message):
  training = registry.training(ctr.Task, name, **settings)
  with pytest.raises(registry.NotApplicable, match=message):
    registry.check_composition(name, training)
  with pytest.raises(ValueError, match=r"cannot stack \['fair'\]"):
    registry.Training(stack=('fair',))


def test_an_undeclared_user_algorithm_honours_the_plain_mean_only(ml100k_dir):
  calls = []
  registry.register('echo', registry.Algorithm(
      'echo', {'keras': lambda *args, **kwargs: calls.append(args) or registry.Built(
          lambda model_aggregator: None, [], None)}))
  try:
    task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir)))
    for settings in (dict(aggregator=inner.InnerAggregator('dp')), dict(stack=('fedsubavg',))):
      with pytest.raises(registry.NotApplicable, match='does not apply to --algorithm=echo'):
        registry.build('echo', task, registry.training(task, 'echo', **settings))
    registry.build('echo', task, registry.training(task, 'echo'))
    assert len(calls) == 1
  finally:
    registry.unregister('echo')
  assert 'echo' not in registry.algorithms()


def test_parts_that_cannot_take_a_declared_composition_are_refused_as_composed(ml100k_dir):
  """A user's round of unweighted updates (SCAFFOLD's parts, built for a sum) that
  declares DP, whose aggregate is a mean, and FedSubAvg's stack, which it has no
  server step on named tables for: the composer refuses both rather than compose
  them wrongly."""
  def summing(task, options, training, *, name):
    del options  # none
    parts = scaffold.build_round(task.model_fn, api.batches_type(task),
                                 client_learning_rate=0.1, server_learning_rate=1.0,
                                 num_clients=len(task.train_client_ids), averaged=False)
    return registry.Built(parts, list(task.train_client_ids), None)

  registry.register('summing', registry.Algorithm(
      'takes a sum', {'keras_batches': summing}, aggregators=inner.NAMES,
      stacks=('fedsubavg',)))
  try:
    task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='lr'))
    for settings, refusal in (
        (dict(aggregator=inner.InnerAggregator('dp')), 'its round takes the unweighted '
         'aggregate as a sum, and --aggregator=dp gives a mean'),
        (dict(stack=('fedsubavg',)), 'declares --stack=fedsubavg, and its round has no '
         'server step on named tables to correct')):
      with pytest.raises(registry.NotHonoured, match=refusal):
        registry.build('summing', task, registry.training(task, 'summing', **settings))
  finally:
    registry.unregister('summing')


def test_a_build_that_drops_a_declared_aggregation_or_stack_is_refused(ml100k_dir):
  """A user's builder that declares DP and FedSubAvg's stack and puts a plain mean
  in tff.learning's aggregator slot in place of the composer's: registry.build reads
  what the built process reports. One that returns a process composed already is
  refused before that."""
  def ignoring(task, options, training, *, name):
    built = baselines.build_keras(task, options, training, name=name)
    return dataclasses.replace(
        built, process=lambda composed: built.process(tff.aggregators.MeanFactory()))

  def composing(task, options, training, *, name):
    built = baselines.build_keras(task, options, training, name=name)
    return dataclasses.replace(built, process=built.process(tff.aggregators.MeanFactory()))

  registry.register('ignoring', registry.Algorithm(
      'declares, ignores', {'keras': ignoring}, aggregators=inner.NAMES,
      stacks=('fedsubavg',)))
  registry.register('composing', registry.Algorithm('composes', {'keras': composing}))
  try:
    task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir)))
    with pytest.raises(TypeError, match="the builder of --algorithm=composing returned .* "
                       "as its process: return its round's parts"):
      registry.build('composing', task, registry.training(task, 'composing'))
    for settings, missing in ((dict(aggregator=inner.InnerAggregator('dp')),
                               '--aggregator=dp but its built process reports no dp_clip, '
                               'dp_stddev'),
                              (dict(stack=('fedsubavg',)),
                               '--stack=fedsubavg but its built process reports no '
                               'fedsubavg_max_scale')):
      with pytest.raises(registry.NotHonoured, match=f'--algorithm=ignoring declares {missing}'):
        registry.build('ignoring', task, registry.training(task, 'ignoring', **settings))
  finally:
    registry.unregister('ignoring')
    registry.unregister('composing')


def test_a_users_option_may_not_retype_another_algorithms_option():
  @dataclasses.dataclass(frozen=True)
  class Options:
    rank: str = 'mine'

  registry.register('retyping', registry.Algorithm('retyping', {'keras': print}, Options))
  try:
    with pytest.raises(ValueError, match="option 'rank' is .* in --algorithm=.* but .* in "
                       '--algorithm=.*: rename one'):
      registry.option_fields()
  finally:
    registry.unregister('retyping')
  assert registry.option_fields()['rank'].type is int


def test_the_kind_of_model_picks_the_implementation_most_specific_first(ranking_dir,
                                                                        user_items_dir):
  loo = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir)))
  goodreads = ranking.Task(ranking.Config(data_dir=str(user_items_dir)))
  table = registry.implementations()
  assert [registry.kind_for(n, loo) for n in ('fedavg', 'fedadam', 'colr', 'fair', 'fedsgd')
          ] == ['mf', 'keras_batches', 'mf', 'keras', 'keras']
  assert [registry.kind_for(n, goodreads) for n in ('fedavg', 'fedprox', 'colr')] == [
      'weight_tables', 'keras_batches', 'weight_tables']
  assert table['fedavg'] == {'mf': 'fedmf.build(default options)',
                             'weight_tables': 'fair.build(capacities=1x)',
                             'keras_batches': 'baselines.build_on_batches',
                             'keras': 'baselines.build_keras'}
  assert table['fedsubavg']['keras_batches'] == 'baselines.build_on_batches + fedsubavg'


def test_fair_runs_on_a_keras_model_with_declared_tables(ml100k_dir, tff_runtime):
  task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='lr',
                             batch_size=8))
  built = registry.build('fair', task, registry.training(task, 'fair'), capacities='1x-2x')
  assert built.evaluate is None  # the weights are the Keras model's: the task scores them
  state = built.process.initialize()
  weights = built.process.get_model_weights(state)
  first = task.evaluate(weights, 'eval')
  assert first['train_loss'] == pytest.approx(np.log(2), abs=1e-3)  # the Keras model's start
  output = built.process.next(state, [built.client_input(c, 2) for c in built.client_ids[:6]])
  assert sum(output.metrics['client_work']['clients'].values()) == 6
  # (its rounds' maths: tests/algorithms/test_maths_fair.py, on the same builder)
  # set_model_weights takes the same structure back: the start's weights restart it
  restarted = built.process.get_model_weights(built.process.set_model_weights(output.state,
                                                                              weights))
  for a, b in zip(restarted.trainable, weights.trainable, strict=True):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(registry.NotApplicable, match='FedHM cannot hold table age_x_movie'):
    registry.build('fedhm', task, registry.training(task, 'fedhm'), capacities='1x-2x')


@pytest.mark.parametrize('algorithm', ['fedavg', 'scaffold', 'metaua', 'fair', 'fedmf'])
def test_every_process_sets_the_model_weights_it_gives(algorithm, ml100k_dir, ranking_dir,
                                                       tff_runtime):
  if algorithm == 'fedmf':
    task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir),
                                               embedding_dim=4))
  else:
    task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='lr',
                               batch_size=8))
  built = registry.build(algorithm, task, registry.training(task, algorithm))
  state = built.process.initialize()
  shifted = tf.nest.map_structure(lambda w: np.asarray(w) + 0.5,
                                  built.process.get_model_weights(state))
  state = built.process.set_model_weights(state, shifted)
  tf.nest.map_structure(np.testing.assert_allclose,
                        built.process.get_model_weights(state), shifted)
  output = built.process.next(state, [built.client_input(c, 1) for c in built.client_ids[:3]])
  assert np.isfinite(tf.nest.flatten(built.process.get_model_weights(output.state))[0]).all()


@pytest.mark.parametrize('setting', ['client_optimizer', 'client_learning_rate'])
def test_a_setting_an_algorithm_has_no_use_for_is_refused_when_given(setting):
  value = {'client_optimizer': 'adam', 'client_learning_rate': 0.7}[setting]
  with pytest.raises(registry.NotApplicable, match=rf'--{setting} does not apply to '
                     '--algorithm=fedsgd: each client sends the gradient of its loss'):
    registry.training(ctr.Task, 'fedsgd', **{setting: value})
  registry.training(ctr.Task, 'fedavg', **{setting: value})
  assert registry.training(ctr.Task, 'fedsgd').server_optimizer.name  # the defaults stand
  with pytest.raises(ValueError, match=r"unused_settings must name training settings; got "
                     r"\['local_epochs'\]"):
    registry.Algorithm('x', {'keras': print}, unused_settings={'local_epochs': 'why'})
