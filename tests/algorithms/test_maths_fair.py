"""FAIR and its baselines (FAIR-HOM, FULL-TRN, FedHM, inconsistent subspaces) as
launch.train runs them, against FAIR's Algorithm 1 in numpy.

A client of capacity c holds the item table theta (n x d) as psi = S^T theta /
S^T 1 in n d / c slots (the signed mean of the elements hashed to each slot;
1x: theta itself; FedHM: U sqrt(S), sqrt(S) V^T of its rank-k SVD), trains it
from a fresh optimizer for the local epochs, and returns it; the server takes
the mean of the recovered tables S psi weighted by the examples trained, and
steps its optimizer on theta minus that mean. Every tier hashes with one seed
(consistent; the ablation: a seed per tier), so a slot of m / c is a slot of m
mod m / c. Tiers: clients in id order split into equal groups (or by fractions,
or after a seeded shuffle). The model: leave-one-out ranking's Keras MF, its
user table trained in full (a client's own row), its 200-item table hashed.
The hash itself is tff_rec.ops.hashing.locate_reference, the plain-integer
definition its own tests pin (tests/ops/test_hashing.py).
"""

import numpy as np
import pytest

from tests.algorithms import as_trained
from tests.algorithms import reference
from tff_rec.ops import hashing

SEED = 5
DIM = 3  # n d = 600 items' elements: not a multiple of 16, so m rounds down


def _flags(path, **settings):
  values = dict(task='loo_ranking', data_dir=path, embedding_dim=DIM, batch_size=32,
                local_epochs=2, num_negatives=2, rounds=2, clients_per_round=12, eval_every=0,
                seed=SEED)
  values.update(settings)
  return [f'--{k}={v}' for k, v in values.items() if v is not None]


def _mf_gradient(users, items, features, labels):
  """(mean BCE, d users, d items) of the Keras MF: logit = <user row, item row>."""
  u, i, y = features['user'], features['item'], np.asarray(labels).reshape(-1)
  logits = np.sum(users[u] * items[i], axis=1)
  error = (reference.sigmoid(logits) - y) / len(y)
  grad_users, grad_items = np.zeros_like(users), np.zeros_like(items)
  np.add.at(grad_users, u, error[:, None] * items[i])
  np.add.at(grad_items, i, error[:, None] * users[u])
  return reference.bce(y, logits), grad_users, grad_items


class Hashed:
  """theta[r, c] = sign(r, c) psi[slot(r, c)], psi in `memory` slots."""

  def __init__(self, rows, dim, memory, seed):
    located = [hashing.locate_reference(r, c, dim=dim, chunk=0, m=memory, seed=seed)
               for r in range(rows) for c in range(dim)]
    self.slots = np.array([s for s, _ in located]).reshape(rows, dim)
    self.signs = np.array([g for _, g in located]).reshape(rows, dim)
    self.memory = memory

  def reduce(self, theta):
    sums = np.bincount(self.slots.ravel(), (self.signs * theta).ravel(), self.memory)
    counts = np.bincount(self.slots.ravel(), minlength=self.memory)
    return [np.divide(sums, counts, out=np.zeros(self.memory), where=counts > 0)]

  def recover(self, params):
    return self.signs * params[0][self.slots]

  def gradient(self, params, grad_theta):
    return [np.bincount(self.slots.ravel(), (self.signs * grad_theta).ravel(), self.memory)]


class Full:
  def reduce(self, theta):
    return [theta]

  def recover(self, params):
    return params[0]

  def gradient(self, params, grad_theta):
    return [grad_theta]


class LowRank:
  """FedHM: theta ~ B C, B = U sqrt(S), C = sqrt(S) V^T of the rank-k SVD."""

  def __init__(self, rank):
    self.rank = rank

  def reduce(self, theta):
    u, s, vt = np.linalg.svd(theta, full_matrices=False)
    root = np.sqrt(s[:self.rank])
    return [u[:, :self.rank] * root, root[:, None] * vt[:self.rank]]

  def recover(self, params):
    return params[0] @ params[1]

  def gradient(self, params, grad_theta):
    return [grad_theta @ params[1].T, params[0].T @ grad_theta]


def _forms(scheme, rows, name):
  """Each capacity's form of the n x d item table: m = n d rounded down to a multiple
  of the largest capacity, c slots' worth m / c; one hash seed (the task's + 1) for
  every tier, or (fair_inconsistent) one per tier."""
  m = rows * DIM // max(scheme) * max(scheme)
  forms = []
  for index, capacity in enumerate(scheme):
    if capacity == 1:
      forms.append(Full())
    elif name == 'fedhm':
      forms.append(LowRank(int(rows * DIM / (capacity * (rows + DIM)))))
    else:
      seed = SEED + 1 + (1_000_003 * (index + 1) if name == 'fair_inconsistent' else 0)
      forms.append(Hashed(rows, DIM, m // capacity, seed))
  return forms


def _tiers(count, scheme, fractions=None, assignment='ordered'):
  """Each client's tier, clients in id order: equal contiguous groups, or groups of
  the fractions' sizes; 'random' shuffles them with the task's seed."""
  if fractions is None:
    sizes = [len(g) for g in np.array_split(np.arange(count), len(scheme))]
  else:
    sizes = np.diff(np.concatenate([[0], np.round(np.cumsum(fractions) * count)])).astype(int)
  tiers = np.repeat(np.arange(len(scheme)), sizes)
  if assignment == 'random':
    tiers = tiers[np.random.default_rng(SEED).permutation(count)]
  return tiers


def _fair(run, name, scheme, *, fractions=None, assignment='ordered', client_optimizer=None,
          server_rate=1.0, row_scale=None):
  ids = list(run.task.train_client_ids)
  tier_of = dict(zip(ids, _tiers(len(ids), scheme, fractions, assignment)))
  if name == 'fair_hom':
    scheme, tier_of = [max(scheme)], dict.fromkeys(ids, 0)
  elif name == 'full_trn':
    tier_of = {c: 0 for c, t in tier_of.items() if scheme[t] == 1}
    scheme = [1]
  users, items = (_by_name(run, run.initial)[n] for n in ('users', 'items'))
  forms = _forms(scheme, items.shape[0], name)
  seen = set()
  for cohort in run.rounds:
    tables, dense, weights = [], [], []
    for client in cohort:
      tier, batches = client.input
      assert tier_of[client.id] == tier  # the input says the tier the reference trains
      seen.add(tier)
      form = forms[tier]

      def gradient(w, features, labels, form=form):
        loss, grad_users, grad_items = _mf_gradient(w[0], form.recover(w[1:]), features, labels)
        return loss, [grad_users, *form.gradient(w[1:], grad_items)]

      trained, examples, _, _ = reference.local_training(
          gradient, [users, *form.reduce(items)], reference.batches_of(batches),
          (client_optimizer or (lambda: reference.SGD(0.5)))())
      dense.append(trained[0])
      tables.append(form.recover(trained[1:]))
      weights.append(examples)
    mean_users, mean_items = reference.weighted_mean(
        [[d, t] for d, t in zip(dense, tables)], weights)
    step = items - mean_items
    if row_scale is not None:
      step = step * row_scale[:, None]
    users = users - server_rate * (users - mean_users)
    items = items - server_rate * step
  assert seen == set(range(len(scheme)))  # every tier trained
  return {'users': users, 'items': items}


def _by_name(run, weights) -> dict:
  """The Keras MF's trainable weights (a list, Keras's order) by table."""
  names = [v.name.split('/')[0] for v in run.task.keras_model().trainable_variables]
  return dict(zip(names, weights, strict=True))


def _check(run, expected):
  moved = np.abs(expected['items'] - _by_name(run, run.initial)['items']).max()
  assert moved > 1e-2, moved
  final = _by_name(run, run.final)
  assert sorted(final) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_allclose(final[name], value, rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize('name, options, reference_options', [
    ('fair', dict(capacities='1x-4x-16x', capacity_assignment='random'),
     dict(assignment='random')),
    ('fair', dict(capacities='1x-4x', capacity_fractions='0.25,0.75'),
     dict(fractions=(0.25, 0.75))),
    ('fair_inconsistent', dict(capacities='1x-2x-4x'), {}),
    ('fair_hom', dict(capacities='1x-4x'), {}),
    ('full_trn', dict(capacities='1x-2x'), {}),
    ('fedhm', dict(capacities='1x-2x'), {}),
    ('fair', dict(client_optimizer='adam', client_learning_rate=0.05, server_learning_rate=0.5),
     dict(client_optimizer=lambda: reference.Adam(0.05), server_rate=0.5))],
    ids=['three_tiers_random', 'fractions', 'inconsistent', 'hom', 'full_trn', 'fedhm',
         'fresh_adam_server_rate'])
def test_fair_family_follows_algorithm_1(monkeypatch, tmp_path, ranking_dir, name, options,
                                         reference_options):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(ranking_dir, algorithm=name, **options))
  scheme = [int(c[:-1]) for c in options.get('capacities', '1x-2x').split('-')]
  _check(run, _fair(run, name, scheme, **reference_options))


def test_fedsubavg_stacked_on_fair_scales_each_rows_step_by_n_over_its_heat(
    monkeypatch, tmp_path, ranking_dir):
  """FAIR weighs clients by examples, so the heat counts them: n_m the training
  positives of the clients whose positives hold item m, N all of them."""
  run = as_trained.train(monkeypatch, tmp_path, *_flags(ranking_dir, algorithm='fair',
                                                        stack='fedsubavg'))
  task = run.task
  heat, total = np.zeros(task.data.num_items), 0
  for client in task.train_client_ids:
    positives = task.data.train.of(task.user_index(client))
    heat[np.unique(positives)] += len(positives)
    total += len(positives)
  scale = np.where(heat > 0, total / np.maximum(heat, 1), 1.0)
  _check(run, _fair(run, 'fair', [1, 2], row_scale=scale))
