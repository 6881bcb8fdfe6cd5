"""MetaUA: the delayed meta-gradient, the aggregation, its ablations and FedNova."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks import ctr
from tff_rec import registry
from tff_rec.algorithms import metaua
from tff_rec.runtime import inprocess
from tff_rec.training import loop
from tff_rec.training import optimizers

SHAPES = [(3, 2), (2,), (4,)]
GROUPS = [0, 0, 1]  # a layer with kernel and bias, and a second layer


def _server(**options):
  config = metaua.Options(**{'attributes': ('local_loss', 'update_norm'), **options})
  return metaua.MetaUAServer(config, tff.learning.optimizers.build_adagrad(0.1), GROUPS)


def _round(rng, clients=5):
  reports = collections.OrderedDict(
      update=[rng.normal(size=(clients, *s)).astype(np.float32) for s in SHAPES],
      local_loss=rng.uniform(0.3, 0.9, clients).astype(np.float32),
      loss_ratio=rng.uniform(0.5, 1.0, clients).astype(np.float32),
      steps=rng.integers(1, 6, clients).astype(np.float32),
      query_count=rng.integers(1, 9, clients).astype(np.float32),
      support_count=rng.integers(5, 50, clients).astype(np.float32))
  attributes = np.stack([reports['support_count'], rng.uniform(size=clients),
                         rng.integers(1, 9, clients)], axis=1).astype(np.float32)
  return reports, attributes


def _state(server, rng):
  weights = [rng.normal(size=s).astype(np.float32) for s in SHAPES]
  optimizer = server.optimizer.initialize([tf.TensorSpec(s, tf.float32) for s in SHAPES])
  j = len(server.config.attributes)
  return collections.OrderedDict(
      weights=weights, optimizer=optimizer,
      meta=collections.OrderedDict(rho=np.array([0.3, -0.2], np.float32),
                                   theta_alpha=rng.normal(size=(2, j)).astype(np.float32)),
      previous=collections.OrderedDict(weights=weights, optimizer=optimizer,
                                       m0=[np.zeros(s, np.float32) for s in SHAPES],
                                       mj=[np.zeros((j, *s), np.float32) for s in SHAPES]),
      has_previous=np.array(False), skipped_total=np.float32(0))


def test_meta_gradient_is_the_gradient_of_the_full_softmax_aggregation():
  """Eq. 4 from round t-1's stored M0 / M_j equals autodiff of g . w_t with
  w_t recomputed from every client's update, softmax and optimizer."""
  rng = np.random.default_rng(0)
  server = _server()
  state = _state(server, rng)
  reports, attributes = _round(rng)
  after, _ = server.step(state, reports, attributes, [np.zeros(s, np.float32) for s in SHAPES])
  gradient = [rng.normal(size=s).astype(np.float32) for s in SHAPES]  # round t's g
  got = server.meta_gradient(state['meta'], after['previous'], gradient)

  z = server.attributes(reports, attributes)
  rho, theta = [tf.constant(state['meta'][k]) for k in ('rho', 'theta_alpha')]
  with tf.GradientTape() as tape:
    tape.watch([rho, theta])
    alpha = tf.nn.softmax(tf.einsum('kgj,gj->kg', z, theta), axis=0)
    update = [tf.sigmoid(rho[g]) * tf.tensordot(alpha[:, g], u, axes=1)
              for u, g in zip(reports['update'], GROUPS, strict=True)]
    _, weights = server.optimizer.next(state['optimizer'],
                                       [tf.constant(w) for w in state['weights']],
                                       [-u for u in update])
    objective = tf.add_n([tf.reduce_sum(g * w) for g, w in zip(gradient, weights, strict=True)])
  want = tape.gradient(objective, [rho, theta])
  for g, w in zip(got, want, strict=True):
    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-6)
  # And the state's weights are that round's w_t.
  for a, b in zip(after['weights'], weights, strict=True):
    np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-6)


@pytest.mark.parametrize('meta_loss', ['sum', 'mean'])
def test_a_meta_step_moves_the_meta_parameters_against_their_gradient(meta_loss):
  rng = np.random.default_rng(1)
  server = _server(meta_lr=0.5, meta_loss=meta_loss)
  state = _state(server, rng)
  state, _ = server.step(state, *_round(rng), [np.zeros(s, np.float32) for s in SHAPES])
  gradient = [rng.normal(size=s).astype(np.float32) for s in SHAPES]
  reports, attributes = _round(rng)
  scale = 1 / reports['query_count'].sum() if meta_loss == 'mean' else 1  # eq. 1's sum
  expected = server.meta_gradient(state['meta'], state['previous'],
                                  [g * scale for g in gradient])
  after, metrics = server.step(state, reports, attributes, gradient)
  np.testing.assert_allclose(after['meta']['rho'],
                             state['meta']['rho'] - 0.5 * expected[0].numpy(), rtol=1e-5)
  np.testing.assert_allclose(after['meta']['theta_alpha'],
                             state['meta']['theta_alpha'] - 0.5 * expected[1].numpy(),
                             rtol=1e-5)
  assert float(metrics['meta_skipped']) == 0


def test_a_non_finite_meta_gradient_is_skipped_counted_and_training_goes_on():
  rng = np.random.default_rng(2)
  server = _server()
  state, _ = server.step(_state(server, rng), *_round(rng),
                         [np.zeros(s, np.float32) for s in SHAPES])
  broken = [np.full(s, np.nan, np.float32) for s in SHAPES]
  cohort = _round(rng)
  after, metrics = server.step(state, *cohort, broken)
  np.testing.assert_array_equal(after['meta']['rho'], state['meta']['rho'])
  assert float(metrics['meta_skipped']) == 1 and float(after['skipped_total']) == 1
  # The round aggregates as one whose meta gradient is zero (no meta step).
  unmoved, _ = server.step(state, *cohort, [np.zeros(s, np.float32) for s in SHAPES])
  for w, expected in zip(after['weights'], unmoved['weights'], strict=True):
    np.testing.assert_allclose(w, expected, rtol=1e-6)


def test_client_weights_are_a_softmax_over_the_cohort_of_standardised_attributes():
  rng = np.random.default_rng(3)
  server = _server()
  reports, attributes = _round(rng, clients=7)
  z = server.attributes(reports, attributes).numpy()
  # z1 local_loss (each group alike), z3 each group's update norm; standardised.
  norms = np.stack([np.sqrt((reports['update'][0] ** 2).sum((1, 2))
                            + (reports['update'][1] ** 2).sum(1)),
                    np.sqrt((reports['update'][2] ** 2).sum(1))], axis=1)
  raw = np.stack([np.tile(reports['local_loss'][:, None], [1, 2]), norms], axis=-1)
  np.testing.assert_allclose(z, (raw - raw.mean(0)) / (raw.std(0) + 1e-6), rtol=1e-4,
                             atol=1e-5)
  alpha = server.weights(tf.zeros([2, 2]), z, reports['support_count']).numpy()
  np.testing.assert_allclose(alpha, 1 / 7, rtol=1e-6)  # theta_alpha = 0: uniform
  theta = np.array([[2.0, 0.0], [0.0, -1.0]], np.float32)
  alpha = server.weights(tf.constant(theta), z, reports['support_count']).numpy()
  logits = np.einsum('kgj,gj->kg', z, theta)
  softmax = np.exp(logits) / np.exp(logits).sum(0)  # over the cohort, per group
  np.testing.assert_allclose(alpha, softmax, rtol=1e-5)


def test_fednova_normalises_each_update_by_its_local_steps():
  rng = np.random.default_rng(4)
  server = metaua.MetaUAServer(metaua.FEDNOVA, tff.learning.optimizers.build_sgdm(1.0),
                               GROUPS, normalize_by_steps=True)
  state = _state(server, rng)
  reports, attributes = _round(rng)
  after, _ = server.step(state, reports, attributes, [np.zeros(s, np.float32) for s in SHAPES])
  shares = reports['support_count'] / reports['support_count'].sum()
  effective = (shares * reports['steps']).sum()
  for w, before, u in zip(after['weights'], state['weights'], reports['update'], strict=True):
    expected = before + np.tensordot(shares * effective / reports['steps'], u, axes=1)
    np.testing.assert_allclose(np.asarray(w), expected, rtol=1e-5, atol=1e-6)


def test_bad_configs_are_refused():
  with pytest.raises(ValueError, match='attributes must be a non-empty subset'):
    metaua.Options(attributes=('zip_code',))
  with pytest.raises(ValueError, match='FedNova normalises by local steps'):
    metaua.MetaUAServer(metaua.Options(), tff.learning.optimizers.build_sgdm(1.0), GROUPS,
                        normalize_by_steps=True)


def _ctr_task(data_dir, batch_size=8):
  return ctr.Task(ctr.Config(
      data_dir=str(data_dir), model='lr', batch_size=batch_size, local_epochs=1))


def _build(task, name, client=optimizers.OptimizerConfig('sgd', 0.05),
           server=optimizers.OptimizerConfig('adagrad', 0.1), runtime='native', **options):
  built = registry.build(name, task, registry.Training(client, server, runtime=runtime),
                         **options)
  return inprocess.for_runtime(built.process, runtime), built.client_ids, built.client_input


def _run(process, ids, client_input, rounds=2):
  return loop.run(process, client_ids=ids, client_input=client_input,
                  schedule=loop.Schedule(rounds=rounds, clients_per_round=6, eval_every=0),
                  evaluate=lambda w: {})


@pytest.mark.slow
def test_metaua_without_learning_is_fedadagrad_on_the_clients_data(ml100k_dir, tff_runtime):
  # One batch of all its examples a client: the same step whichever shuffle
  # orders them (numpy's for the project's clients, TF's for tff.learning's).
  task = _ctr_task(ml100k_dir, batch_size=1 << 12)
  sgd = optimizers.OptimizerConfig('sgd', 0.05)
  adagrad = optimizers.OptimizerConfig('adagrad', 0.1)
  process, ids, client_input = _build(
      task, 'metaua', sgd, adagrad, client_weighting=False, server_lr_scaling=False,
      query_fraction=0.0)
  meta_state, _ = _run(process, ids, client_input)
  fedadagrad, ids, client_input = _build(task, 'fedadagrad', sgd, adagrad,
                                         heat='examples')  # weighted by examples
  state, _ = _run(fedadagrad, ids, client_input)
  for got, want in zip(process.get_model_weights(meta_state).trainable,
                       fedadagrad.get_model_weights(state).trainable, strict=True):
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('name, options', [
    ('fednova', {}),
    # Attributes of each client's data too, passed with its input (and the default,
    # computed in training).
    ('metaua', dict(attributes=('local_loss', 'num_samples', 'positive_rate')))])
def test_metaua_and_fednova_run_in_process_to_the_native_numbers(ml100k_dir, tff_runtime,
                                                                 name, options):
  task = _ctr_task(ml100k_dir)
  states = {runtime: _run(*_build(task, name, runtime=runtime, **options))[0]
            for runtime in ('native', 'inprocess')}
  for a, b in zip(tf.nest.flatten(states['native']), tf.nest.flatten(states['inprocess']),
                  strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('options, runtime, message', [
    (dict(query_fraction=1.0), 'native', r'query_fraction must be in \[0, 1\)'),
    (dict(attributes=('age',)), 'native', 'attributes must be a non-empty subset'),
])
def test_metaua_bad_options_are_refused(ml100k_dir, options, runtime, message):
  task = _ctr_task(ml100k_dir)
  with pytest.raises(ValueError, match=message):
    _build(task, 'metaua', runtime=runtime, **options)


def test_a_client_computes_the_losses_and_query_gradient_the_server_reads(ml100k_dir):
  task = _ctr_task(ml100k_dir)
  client = max(task.train_client_ids, key=lambda c: len(task.client_examples(c)['label']))
  (train, support, query), _ = metaua.split_client(task, client, 0, 1, query_fraction=0.3)
  batches = tf.nest.map_structure(tf.convert_to_tensor, (train, support, query))
  model = task.keras_model()
  weights = [v.numpy() for v in model.trainable_variables]
  loss_fn = task.loss()

  def summed_loss(rows):  # the loss summed over examples, as one batch
    x, y = tf.nest.map_structure(lambda v: tf.gather(v, rows), support.columns)
    return loss_fn(y, model(x, training=False)) * len(rows)

  def work(**options):
    return tf.nest.map_structure(np.asarray, metaua._client_work(
        task.model_fn(), 0.05, weights, *batches, **options))

  report, gradient = work(learns=True, attributes=('local_loss', 'loss_ratio'))
  examples = len(support.rows) + len(query.rows)
  with tf.GradientTape() as tape:
    query_loss = summed_loss(query.rows)
  want_gradient = tape.gradient(query_loss, model.trainable_variables)
  before = (summed_loss(support.rows) + query_loss) / examples
  updates = np.split(report['update'], np.cumsum([w.size for w in weights])[:-1])
  for variable, weight, update in zip(model.trainable_variables, weights, updates, strict=True):
    variable.assign(weight + update.reshape(weight.shape))
  after = (summed_loss(support.rows) + summed_loss(query.rows)) / examples
  np.testing.assert_allclose(report['local_loss'], before, rtol=1e-5)
  np.testing.assert_allclose(report['loss_ratio'], after / before, rtol=1e-5)
  assert report['loss_ratio'] < 1  # training lowered the loss: after read the trained weights
  for got, want in zip(gradient, want_gradient, strict=True):
    np.testing.assert_allclose(got, tf.convert_to_tensor(want), rtol=1e-4, atol=1e-6)
  assert (report['support_count'], report['query_count']) == (len(support.rows),
                                                              len(query.rows))
  # Only what the server reads: no loss ratio unless weighed by it; FedNova nothing.
  report, _ = work(learns=True, attributes=('local_loss',))
  assert 'local_loss' in report and 'loss_ratio' not in report
  report, gradient = work(learns=False, attributes=('local_loss',))
  assert 'local_loss' not in report and not any(np.any(g) for g in gradient)


def test_a_clients_query_split_is_fixed_its_support_alone_trains_and_is_described(
    ml100k_dir):
  """On DIN's examples: their histories' padding 0 is not a feature value."""
  task = ctr.Task(ctr.Config(data_dir=str(ml100k_dir), model='din', batch_size=8,
                             local_epochs=1))
  client = max(task.train_client_ids, key=lambda c: len(task.client_examples(c)['label']))
  examples = task.client_examples(client)
  count = len(examples['label'])
  (train, support, query), described = metaua.split_client(task, client, 0, 1, 0.3)
  support_rows, query_rows = np.asarray(support.rows), np.asarray(query.rows)
  assert len(query_rows) == round(0.3 * count) > 0
  assert sorted([*support_rows, *query_rows]) == list(range(count))
  assert sorted(np.asarray(train.rows)) == sorted(support_rows)  # one epoch of the support
  (again, support_again, query_again), _ = metaua.split_client(task, client, 0, 2, 0.3)
  np.testing.assert_array_equal(query_again.rows, query_rows)  # fixed across rounds
  assert list(np.asarray(again.rows)) != list(np.asarray(train.rows))  # reshuffled
  distinct = sum(len(set(v[support_rows].ravel()) - {0}) for k, v in examples.items()
                 if k != 'label')
  assert any((v[support_rows] == 0).any() for k, v in examples.items() if k != 'label')
  np.testing.assert_allclose(described, [len(support_rows),
                                         examples['label'][support_rows].mean(), distinct])
  # Nearly all query (round(0.999 n) is n): one example is kept to train on.
  (_, support, _), _ = metaua.split_client(task, client, 0, 1, 0.999)
  assert len(np.asarray(support.rows)) == 1
