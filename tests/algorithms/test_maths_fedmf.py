"""FedMF and its item-update forms (CoLR, SCoLR, SVD, top-k) as launch.train runs
them on leave-one-out ranking, against their maths in numpy.

Each client trains its private user vector and its item update by SGD on BCE
with L2 on the batch's rows (an item row moves by the mean gradient of its
occurrences in a batch: CoLR's official code); the server adds the mean update
times its rate. CoLR (Nguyen et al.): the client trains A (from zero) in W + A B,
B the round's random r x d basis with orthonormal rows scaled by sqrt(d / r)
(A's gradient scaled by sqrt(r / d), the official code's), the server adds
mean(A) B; SCoLR trains a column subset of A, each column averaged over the
clients that trained it; SVD and top-k compress the client's change and the
server's mean. Two rounds of 4 of 30 users, so a user of round 2 may keep its
vector from round 1, and round 2 draws another basis.
"""

import math

import numpy as np
import pytest

from tests.algorithms import as_trained
from tests.algorithms import reference

RATE, L2, DIM, SEED, LOCAL_EPOCHS = 0.5, 5e-4, 4, 5, 2


def _flags(path, **settings):
  values = dict(task='loo_ranking', data_dir=path, embedding_dim=DIM, batch_size=32,
                local_epochs=LOCAL_EPOCHS, num_negatives=2, rounds=2, clients_per_round=4, eval_every=0,
                seed=SEED, l2=L2)
  values.update(settings)
  return [f'--{k}={v}' for k, v in values.items() if v is not None]


def epoch_batches(epoch, item, label, batch_size=32):
  """Each epoch's rows batched on their own, in order: (first epoch, items, labels)."""
  for e in np.unique(epoch):
    rows = np.flatnonzero(epoch == e)
    for start in range(0, len(rows), batch_size):
      taken = rows[start:start + batch_size]
      yield e, item[taken], label[taken]


def _step(user, rows_of, ids, labels, *, items_frozen=False):
  """One SGD step of a client: (its new user vector, {item id: the gradient of its
  row, the mean over its occurrences}). rows_of(ids) -> [B, d] the batch's rows."""
  rows = rows_of(ids)
  size = len(ids)
  error = (reference.sigmoid(rows @ user) - labels) / size
  per_row = error[:, None] * user[None, :] + 2 * L2 * rows / size  # d loss / d row
  grad_user = error @ rows + 2 * L2 * user
  scaled = {}
  if not items_frozen:  # each id's rows move by the mean of its occurrences
    for i in np.unique(ids):
      at = ids == i
      scaled[i] = per_row[at].sum(0) * size / at.sum()
  return user - RATE * grad_user, scaled


def _client(items, user, batches, *, rank=None, round_basis=None, columns=None,
            reconstruction_epochs=0):
  """(trained user, item change or A) of one client."""
  if rank:
    factor = np.zeros((items.shape[0], rank))
    scale = math.sqrt(rank / items.shape[1])
    rows_of = lambda ids: items[ids] + (factor[ids] * columns) @ round_basis
  else:
    table = items.copy()
    rows_of = lambda ids: table[ids]
  for epoch, ids, labels in batches:
    if epoch < reconstruction_epochs:  # the user fitted with the items frozen
      user, _ = _step(user, lambda ids: items[ids], ids, labels, items_frozen=True)
      continue
    user, grads = _step(user, rows_of, ids, labels)
    for i, g in grads.items():
      if rank:
        factor[i] -= RATE * scale * (g @ round_basis.T) * columns
      else:
        table[i] -= RATE * g
  return user, (factor * columns if rank else table - items)


def fedmf(run, *, form='full', rank=0, item_average='cohort', row_scale=None,
          reconstruction_epochs=0, server_rate=1.0):
  """The rounds from the run's initial model: {'items', 'users' (stored)}."""
  items = run.initial['items']
  users = run.initial['users'].copy() if 'users' in run.initial else None
  for round_num, cohort in enumerate(run.rounds):
    payloads, coverages = [], []
    round_basis = reference.basis(SEED, round_num, rank, DIM) if form in ('colr', 'scolr') else None
    for client in cohort:
      if users is not None:
        index, (local_rank, rows) = client.input
        user = users[index]
      else:
        user, local_rank, rows = client.input
        index = None
      # what the client was fed: the reconstruction's epochs, then its local epochs
      assert np.unique(rows[0]).tolist() == list(range(reconstruction_epochs + LOCAL_EPOCHS))
      columns = (reference.scolr_columns(SEED, round_num, rank, local_rank) if form == 'scolr'
                 else np.ones(rank) if form == 'colr' else None)
      user, payload = _client(items, np.asarray(user, np.float64), epoch_batches(*rows),
                              rank=rank if columns is not None else None,
                              round_basis=round_basis, columns=columns,
                              reconstruction_epochs=reconstruction_epochs)
      if users is not None:
        users[index] = user
      width = rank if columns is not None else DIM
      if item_average == 'touched':
        coverage = np.any(payload != 0, axis=1).astype(float)[:, None] * np.ones(width)
      else:
        coverage = columns if columns is not None else np.ones(width)
      if form == 'svd':
        payload = reference.svd_compress(payload, rank)
      elif form == 'topk':
        payload = reference.topk_compress(payload, rank)
      payloads.append(payload)
      coverages.append(coverage)
    mean = sum(payloads) / np.maximum(sum(coverages), 1.0)
    update = {'colr': lambda m: m @ round_basis, 'scolr': lambda m: m @ round_basis,
              'svd': lambda m: reference.svd_compress(m, rank),
              'topk': lambda m: reference.topk_compress(m, rank),
              'full': lambda m: m}[form](mean)
    if row_scale is not None:  # FedSubAvg: rows of the update the server steps by
      update = update * row_scale[:, None]
    items = items + server_rate * update
  return {'items': items, **({'users': users} if users is not None else {})}


def _check(run, expected):
  assert sorted(run.final) == sorted(expected)
  moved = np.abs(expected['items'] - run.initial['items']).max()
  assert moved > 1e-2, moved
  for name in expected:
    np.testing.assert_allclose(run.final[name], expected[name], rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize('settings, reference_options', [
    (dict(algorithm='fedavg', server_learning_rate=0.7), dict(server_rate=0.7)),
    (dict(algorithm='fedmf', item_average='touched'), dict(item_average='touched')),
    (dict(algorithm='fedmf', user_state='reconstructed', reconstruction_epochs=1),
     dict(reconstruction_epochs=1)),
    (dict(algorithm='colr', rank=2), dict(form='colr', rank=2)),
    (dict(algorithm='colr', rank=4), dict(form='colr', rank=4)),
    (dict(algorithm='scolr', rank=4), dict(form='scolr', rank=4)),
    (dict(algorithm='svd', rank=3), dict(form='svd', rank=3)),
    (dict(algorithm='topk', rank=2), dict(form='topk', rank=2))],
    ids=['fedavg_rate', 'touched', 'reconstructed', 'colr2', 'colr4', 'scolr4', 'svd3', 'topk2'])
def test_fedmf_and_its_forms_follow_their_maths(monkeypatch, tmp_path, ranking_dir, settings,
                                               reference_options):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(ranking_dir, **settings))
  _check(run, fedmf(run, **reference_options))


def _item_scales(task, bound=None):
  """FedSubAvg's N / n_m per item, n_m the training clients whose positives hold it."""
  heat = np.zeros(task.initial_items.shape[0])
  for client in task.train_client_ids:
    heat[np.unique(task.data.train.of(task.user_index(client)))] += 1
  scale = np.where(heat > 0, len(task.train_client_ids) / np.maximum(heat, 1), 1.0)
  return scale if bound is None else np.minimum(scale, bound)


@pytest.mark.parametrize('settings, form, rank, bound', [
    (dict(algorithm='fedsubavg', max_correction=5.0), 'full', 0, 5.0),
    (dict(algorithm='colr', rank=2, stack='fedsubavg'), 'colr', 2, None),
    (dict(algorithm='fedmf', stack='fedsubavg'), 'full', 0, None)],
    ids=['fedsubavg_bounded', 'colr_stacked', 'fedmf_stacked'])
def test_fedsubavg_scales_each_items_mean_update_by_n_over_its_heat(
    monkeypatch, tmp_path, ranking_dir, settings, form, rank, bound):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(ranking_dir, **settings))
  _check(run, fedmf(run, form=form, rank=rank, row_scale=_item_scales(run.task, bound)))
