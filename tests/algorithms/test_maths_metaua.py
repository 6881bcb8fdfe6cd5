"""MetaUA and FedNova as launch.train runs them, against their maths in numpy.

MetaUA (Liu et al.): per layer A, the server steps by sigmoid(rho_A) sum_k
alpha_kA dw_kA, alpha_A a softmax over the cohort of theta_A . z_kA (z the
clients' attributes, standardised over the cohort); before aggregating round t
it takes an SGD step on (rho, theta) along d(G_t . w_t) / d(rho, theta), w_t the
previous round's server step as a function of them and G_t the cohort's query
gradient at w_t. The reference computes that derivative by central differences
of the exact aggregation, and each client's split, attributes, losses and
query gradient from its own examples. FedNova (Wang et al.): updates weighed
n_k / n, each divided by its local steps tau_k, the sum times sum_k tau_k n_k / n.
Two rounds of 4 of the 6 clients of a small CTR file (tests/algorithms/small_ctr.py),
client by client and, in some cases, in lockstep (keras_lockstep).
"""

import numpy as np
import pytest

from tests.algorithms import as_trained
from tests.algorithms import reference
from tests.algorithms import small_ctr

# MetaUA's server: FedAdagrad at 0.1 (the paper's); its tau is a case's.
SERVER_RATE = 0.1
MODEL = reference.LogisticRegression(small_ctr.COLUMNS)
GROUPS = len(small_ctr.COLUMNS) + 1  # LR's layers: a table per column, the bias


def _rows(examples, rows):
  return {c: examples[c][rows] for c in small_ctr.COLUMNS}, examples['label'][rows]


def _loss_sum(weights, examples, rows) -> float:
  if not len(rows):
    return 0.0
  features, labels = _rows(examples, rows)
  return MODEL.gradient(weights, features, labels)[0] * len(rows)


def _split(task, position: int, query_fraction: float):
  """(support rows, query rows) of a client's training examples: round(f n) of
  them, at most n - 1, held out by a permutation seeded by (task seed, position)."""
  count = len(task.client_examples(task.train_client_ids[position])['label'])
  query = min(int(round(query_fraction * count)), count - 1)
  order = np.random.default_rng([task.config.seed, position]).permutation(count)
  return np.sort(order[query:]), np.sort(order[:query])


def _train_batches(client_input, support):
  """The round's training batches of a client's input (its first part), checked to
  be whole epochs over its support rows only."""
  (batches, part_ends), _ = client_input
  columns, starts, ends, rows = batches
  steps = int(part_ends[0])
  trained = rows[:ends[steps - 1]] if steps else rows[:0]
  epochs = len(trained) // max(len(support), 1)
  np.testing.assert_array_equal(np.sort(trained), np.repeat(support, epochs))
  return steps, reference.batches_of((columns, starts[:steps], ends[:steps], rows))


def _client(run, client, client_input, weights, options):
  """What a client of the round gives the server: its update, local steps, support
  count, query gradient (summed over its query examples) and attributes."""
  task = run.task
  examples = task.client_examples(client)
  support, query = _split(task, task.train_client_ids.index(client), options['query_fraction'])
  steps, batches = _train_batches(client_input, support)
  trained, _, _, _ = reference.local_training(MODEL.gradient, weights, batches,
                                              reference.SGD(small_ctr.CLIENT_RATE))
  update = [t - w for t, w in zip(trained, weights)]
  if len(query):
    _, gradient = MODEL.gradient(weights, *_rows(examples, query))
    gradient = [g * len(query) for g in gradient]
  else:
    gradient = [np.zeros_like(w) for w in weights]
  everything = max(len(support) + len(query), 1)
  before = (_loss_sum(weights, examples, support) + _loss_sum(weights, examples, query)
            ) / everything
  after = (_loss_sum(trained, examples, support) + _loss_sum(trained, examples, query)
           ) / everything
  labels = examples['label'][support]
  per_client = dict(
      num_samples=len(support), positive_rate=labels.mean(), local_loss=before,
      loss_ratio=after / max(before, 1e-12),
      unique_features=sum(len(np.unique(examples[c][support][examples[c][support] != 0]))
                          for c in small_ctr.COLUMNS))
  attributes = np.array([[np.linalg.norm(u) if name == 'update_norm' else per_client[name]
                          for name in options['attributes']] for u in update])  # [G, J]
  return dict(update=update, steps=steps, count=len(support), gradient=gradient,
              query=len(query), attributes=attributes)


def _standardised(z):
  return (z - z.mean(0)) / (z.std(0) + 1e-6)


def _aggregate(rho, theta, clients, options):
  """sigmoid(rho_A) sum_k alpha_kA dw_kA per layer A (a variable of LR each)."""
  z = _standardised(np.stack([c['attributes'] for c in clients]))  # [K, G, J]
  counts = np.array([c['count'] for c in clients], np.float64)
  if options['client_weighting']:
    logits = np.einsum('kgj,gj->kg', z, theta)
    alpha = np.exp(logits - logits.max(0))
    alpha /= alpha.sum(0)
  else:
    alpha = np.tile((counts / counts.sum())[:, None], [1, GROUPS])
  scale = 1 / (1 + np.exp(-rho)) if options['server_lr_scaling'] else np.ones(GROUPS)
  return [scale[a] * sum(alpha[k, a] * c['update'][a] for k, c in enumerate(clients))
          for a in range(GROUPS)]


def _server_step(optimizer, state, weights, update):
  return optimizer.step(state, weights, [-u for u in update])


def _meta_gradient(theta_and_rho, previous, gradient, options):
  """d(G . w_t) / d(rho, theta) at their values, by central differences of the
  previous round's exact aggregation and server step."""
  optimizer = _server(options)
  flat = np.concatenate([p.ravel() for p in theta_and_rho])

  def objective(values):
    rho, theta = values[:GROUPS], values[GROUPS:].reshape(GROUPS, -1)
    _, stepped = _server_step(optimizer, previous['state'], previous['weights'],
                              _aggregate(rho, theta, previous['clients'], options))
    return sum(float(np.sum(g * w)) for g, w in zip(gradient, stepped))

  step = 1e-6
  grad = np.array([(objective(flat + step * e) - objective(flat - step * e)) / (2 * step)
                   for e in np.eye(len(flat))])
  return grad[:GROUPS], grad[GROUPS:].reshape(GROUPS, -1)


def _server(options):
  tau = options['server_adaptivity']
  return reference.Adagrad(SERVER_RATE, initial=tau**2, epsilon=tau**2)


def _metaua(run, options):
  """(the model after the run's rounds, each round's clients' contributions)."""
  optimizer = _server(options)
  weights = run.initial
  rounds = []
  state = optimizer.start(weights)
  rho, theta = np.zeros(GROUPS), np.zeros((GROUPS, len(options['attributes'])))
  previous = None
  learns = options['client_weighting'] or options['server_lr_scaling']
  for cohort in run.rounds:
    clients = [_client(run, c.id, c.input, weights, options) for c in cohort]
    rounds.append(clients)
    if previous and learns:
      gradient = [sum(c['gradient'][i] / (max(c['query'], 1) if options['meta_loss'] ==
                                           'client_mean' else 1) for c in clients)
                  for i in range(GROUPS)]
      if options['meta_loss'] == 'mean':
        gradient = [g / max(sum(c['query'] for c in clients), 1) for g in gradient]
      d_rho, d_theta = _meta_gradient((rho, theta), previous, gradient, options)
      rho, theta = rho - options['meta_lr'] * d_rho, theta - options['meta_lr'] * d_theta
    previous = dict(weights=weights, state=state, clients=clients)
    state, weights = _server_step(optimizer, state, weights,
                                  _aggregate(rho, theta, clients, options))
  return weights, rounds


DEFAULTS = dict(attributes=('local_loss',), meta_loss='sum', meta_lr=2.0, query_fraction=0.2,
                client_weighting=True, server_lr_scaling=True, server_adaptivity=1e-3)


# The cohort in lockstep (keras_lockstep) in some cases, client by client in the others.
LOCKSTEP = dict(runtime='inprocess', lockstep='on')


# Each data attribute alone in a case (beside others): attributes read from one
# another's column change that case's weights (a swap inside one case would not).
@pytest.mark.parametrize('options', [
    {},
    dict(attributes=('num_samples', 'loss_ratio'), meta_loss='client_mean', meta_lr=40.0,
         **LOCKSTEP),
    dict(attributes=('positive_rate',), meta_loss='mean', meta_lr=400.0,
         query_fraction=0.1, **LOCKSTEP),  # the smallest clients hold no query example
    dict(attributes=('unique_features', 'update_norm'), meta_loss='mean', meta_lr=400.0,
         query_fraction=0.4),
    dict(client_weighting=False, server_adaptivity=0.1, meta_lr=20.0),
    dict(server_lr_scaling=False, meta_lr=20.0)],
    ids=['paper', 'num_samples', 'positive_rate', 'unique_features', 'server_scale_only',
         'client_weights_only'])
def test_metaua_learns_client_weights_and_server_scale_from_the_next_rounds_query(
    monkeypatch, tmp_path, options):
  options = {**DEFAULTS, **options}
  flags = {k: ','.join(v) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool)
           else v for k, v in options.items()}
  run = as_trained.train(monkeypatch, tmp_path, *small_ctr.flags(
      small_ctr.write(tmp_path), algorithm='metaua', **flags))
  weights, rounds = _metaua(run, options)
  unlearned, _ = _metaua(run, {**options, 'meta_lr': 0.0})
  # What the meta step learned moved the model far beyond the tolerance.
  assert max(np.abs(w - u).max() for w, u in zip(weights, unlearned)) > 1e-3
  reference.assert_matches(run, weights)
  # Each client uploads its update and its query gradient.
  assert run.metrics['train/aggregator/bytes_up'] == 2 * 4 * sum(w.size for w in weights)
  assert run.metrics['train/client_work/clients_without_query'] == sum(
      not client['query'] for client in rounds[-1])


@pytest.mark.parametrize('flags', [{}, LOCKSTEP])
def test_fednova_normalises_each_update_by_its_local_steps(monkeypatch, tmp_path, flags):
  run = as_trained.train(monkeypatch, tmp_path, *small_ctr.flags(
      small_ctr.write(tmp_path), algorithm='fednova', **flags))
  assert run.training.runtime == flags.get('runtime', 'native')
  weights = run.initial
  for cohort in run.rounds:
    updates, steps, counts = [], [], []
    for client in cohort:
      everything = np.arange(len(run.task.client_examples(client.id)['label']))
      tau, batches = _train_batches(client.input, everything)  # no query set
      trained, examples, _, _ = reference.local_training(
          MODEL.gradient, weights, batches, reference.SGD(small_ctr.CLIENT_RATE))
      updates.append([t - w for t, w in zip(trained, weights)])
      steps.append(tau)
      counts.append(examples)
    shares = np.array(counts) / sum(counts)
    assert len(set(steps)) > 1  # unequal local steps: the normalisation shows
    effective = float(np.sum(shares * steps))
    weights = [w + sum(p * effective / t * u[i] for p, t, u in zip(shares, steps, updates))
               for i, w in enumerate(weights)]  # the task's server: SGD at 1
  reference.assert_matches(run, weights)
