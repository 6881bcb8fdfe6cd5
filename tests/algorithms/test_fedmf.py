"""FedMF, CoLR, SCoLR, SVD and top-k rounds, checked against numpy references."""

import collections
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import composer
from tff_rec.aggregators import factor_sum
from tff_rec.algorithms import fedmf
from tff_rec.algorithms import item_updates
from tff_rec.data import implicit
from tff_rec.runtime import inprocess

N, D, LR, L2 = 8, 4, 0.5, 0.01


def _dataset_computation(epochs: int, batch_size: int = 64):
  @tff.tensorflow.computation(tff.TensorType(np.int32, [None]), tff.TensorType(np.int32, [None]),
                              tff.TensorType(np.float32, [None]))
  def build(epoch, item, label):
    return implicit.epoch_batches(collections.OrderedDict(epoch=epoch, item=item, label=label),
                                  epochs, batch_size)
  return build


def _config(form='full', rank=0, **overrides):
  return fedmf.FedMFConfig(num_items=N, dim=D, form=item_updates.UpdateForm(form, rank),
                           client_learning_rate=LR, l2=L2, seed=3, **overrides)


def _rows(items, labels, epochs=1):
  items, labels = np.tile(items, epochs), np.tile(labels, epochs)
  return (np.repeat(np.arange(epochs), len(items) // epochs).astype(np.int32),
          np.asarray(items, np.int32), np.asarray(labels, np.float32))


ITEMS = np.random.default_rng(0).normal(size=(N, D)).astype(np.float32) / 2
USERS = np.random.default_rng(1).normal(size=(3, D)).astype(np.float32) / 2
# Client 0 reads items 0, 1 (item 0 twice), client 1 items 2, 3.
DATA = [_rows([0, 1, 0], [1, 0, 1]), _rows([2, 3], [0, 1])]


def _one_step_gradient(user, items, labels):
  """(d loss / d item rows [N, D] with each row's mean over its occurrences, d / d user)."""
  rows = ITEMS[items]
  error = 1 / (1 + np.exp(-rows @ user)) - labels
  grad = np.zeros_like(ITEMS)
  for item in set(items):
    at = items == item
    grad[item] = np.mean(error[at, None] * user + 2 * L2 * rows[at], axis=0)
  return grad, np.mean(error[:, None] * rows, 0) + 2 * L2 * user


def _process(config, dataset_computation, users=None, *,
             sum_factory=tff.aggregators.SumFactory(), mean_factory=None):
  """FedMF's round composed with TFF's plain sum, or the given sum or mean."""
  parts = fedmf.build_round(config, ITEMS, dataset_computation, users,
                            averaged=mean_factory is not None)
  return composer.compose_parts(parts, mean_factory or sum_factory)


def _stored_round(config, clients=(0,), ranks=None, runtime='native'):
  process = inprocess.for_runtime(
      _process(config, _dataset_computation(1), USERS), runtime)
  state = process.initialize()
  inputs = [(c, (np.int32((ranks or {}).get(c, config.form.rank)), DATA[c])) for c in clients]
  return process, state, process.next(state, inputs)


@pytest.mark.parametrize('runtime', ['native', 'inprocess'])
def test_fedmf_round_is_one_sgd_step_on_items_and_user(tff_runtime, runtime):
  _, _, output = _stored_round(_config(), runtime=runtime)
  grad, user_grad = _one_step_gradient(USERS[0], DATA[0][1], DATA[0][2])
  np.testing.assert_allclose(output.state['server']['weights']['items'], ITEMS - LR * grad,
                             atol=1e-6)
  np.testing.assert_allclose(output.state['clients'][0], USERS[0] - LR * user_grad, atol=1e-6)
  np.testing.assert_array_equal(output.state['clients'][1:], USERS[1:])  # not in the cohort
  np.testing.assert_allclose(output.metrics['aggregator']['bytes_up'], N * D * 4)


@pytest.mark.parametrize('runtime', ['native', 'inprocess'])
def test_each_client_of_a_cohort_gets_back_its_own_user_vector(tff_runtime, runtime):
  # Cohort order differs from client order: a runtime that pairs states with the
  # wrong clients (or reverses a shard's outputs) stores another client's user.
  _, _, output = _stored_round(_config(), clients=(1, 0), runtime=runtime)
  for client in (0, 1):
    _, user_grad = _one_step_gradient(USERS[client], DATA[client][1], DATA[client][2])
    np.testing.assert_allclose(output.state['clients'][client],
                               USERS[client] - LR * user_grad, atol=1e-6)
  np.testing.assert_array_equal(output.state['clients'][2], USERS[2])


@pytest.mark.parametrize('runtime', ['native', 'inprocess'])
def test_colr_round_moves_items_by_the_gradient_projected_on_the_shared_basis(tff_runtime,
                                                                              runtime):
  rank = 2
  _, _, output = _stored_round(_config('colr', rank), runtime=runtime)
  grad, _ = _one_step_gradient(USERS[0], DATA[0][1], DATA[0][2])
  seed = factor_sum.round_seeds(tf.constant([3, 0], tf.int64))[0]  # (config seed, round 0)
  basis = factor_sum.correlated_basis(seed, rank, D).numpy()
  # A = -lr sqrt(r/d) G B^T from zero, and the server adds A B.
  expected = ITEMS - LR * np.sqrt(rank / D) * grad @ basis.T @ basis
  np.testing.assert_allclose(output.state['server']['weights']['items'], expected, atol=1e-6)
  assert output.state['server']['round'] == 1
  np.testing.assert_allclose(output.metrics['aggregator']['bytes_up'], N * rank * 4)


@pytest.mark.parametrize('average, touched_share', [('cohort', 0.5), ('touched', 1.0)])
def test_item_average_over_the_cohort_or_over_the_clients_that_touched_it(
    tff_runtime, average, touched_share):
  _, _, output = _stored_round(_config(item_average=average), clients=(0, 1))
  moved = output.state['server']['weights']['items'] - ITEMS
  for client in (0, 1):
    grad, _ = _one_step_gradient(USERS[client], DATA[client][1], DATA[client][2])
    rows = sorted(set(DATA[client][1]))
    np.testing.assert_allclose(moved[rows], -LR * touched_share * grad[rows], atol=1e-6)
  np.testing.assert_array_equal(moved[4:], 0)  # no client touched items 4..7


def test_scolr_clients_train_nested_columns_of_one_permutation(tff_runtime):
  # Two clients at local rank 1 of R = 3 train the same column: a rank-1 update.
  _, _, output = _stored_round(_config('scolr', 3), clients=(0, 1), ranks={0: 1, 1: 1})
  moved = output.state['server']['weights']['items'] - ITEMS
  assert np.linalg.matrix_rank(moved, tol=1e-6) == 1
  np.testing.assert_allclose(output.metrics['aggregator']['bytes_up'], N * 4)
  _, _, output = _stored_round(_config('scolr', 3), clients=(0, 1), ranks={0: 1, 1: 3})
  np.testing.assert_allclose(output.metrics['aggregator']['bytes_up'], N * 4 * 2)  # mean of 1, 3
  assert np.linalg.matrix_rank(output.state['server']['weights']['items'] - ITEMS, tol=1e-6) == 3


def test_reconstruction_round_is_mapreduce_and_runs_the_same_in_process(tff_runtime):
  config = _config('colr', 2, reconstruction_epochs=1)
  process = _process(config, _dataset_computation(2))
  clients = [(USERS[c], np.int32(2), _rows(DATA[c][1], DATA[c][2], epochs=2)) for c in (0, 1)]
  native = process.next(process.initialize(), clients)
  local = inprocess.InProcessLearningProcess(process, threads=2)
  try:
    in_process = local.next(local.initialize(), clients)
  finally:
    local.close()
  items = [process.get_model_weights(output.state)['items'] for output in (native, in_process)]
  np.testing.assert_allclose(items[1], items[0], atol=1e-6)
  assert np.abs(items[0] - ITEMS).max() > 1e-4


def _colr_round(users: str, **factories):
  """The items after one in-process colr round of clients 0 and 1, and its metrics."""
  if users == 'stored':
    process = inprocess.for_runtime(_process(
        _config('colr', 2), _dataset_computation(1), USERS, **factories), 'inprocess')
    output = process.next(process.initialize(), [(c, (np.int32(2), DATA[c])) for c in (0, 1)])
    return output.state['server']['weights']['items'], output.metrics
  built = _process(_config('colr', 2, reconstruction_epochs=1), _dataset_computation(2),
                   **factories)
  process = inprocess.InProcessLearningProcess(built, threads=1)
  try:
    output = process.next(process.initialize(), [
        (USERS[c], np.int32(2), _rows(DATA[c][1], DATA[c][2], epochs=2)) for c in (0, 1)])
  finally:
    process.close()
  return process.get_model_weights(output.state)['items'], output.metrics


@pytest.mark.slow
@pytest.mark.parametrize('users', ['stored', 'reconstructed'])
def test_tffs_secure_sum_and_dp_mean_of_colr_payloads_match_the_plain_sum(tff_runtime, users):
  """TFF's secure sum (clip to +-1, 32-bit quantization) in place of the plain sum,
  and its DP mean (no noise, a clip that never bites, the true cohort of 2): colr's
  clients cover every entry, so the cohort mean is the sum over the coverage."""
  plain, _ = _colr_round(users)
  secure, metrics = _colr_round(users, sum_factory=tff.aggregators.SecureSumFactory(1.0))
  dp, _ = _colr_round(users, mean_factory=(
      tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(0.0, 2, 1e6)))
  np.testing.assert_allclose(secure, plain, atol=1e-6)
  np.testing.assert_allclose(dp, plain, atol=1e-6)
  assert np.abs(plain - ITEMS).max() > 1e-4
  assert metrics['aggregator']['secure_upper_clipped_count'] == 0
  assert metrics['aggregator']['secure_upper_threshold'] == 1.0


def test_stored_users_refuse_reconstruction_and_vice_versa():
  for config, users in ((_config(reconstruction_epochs=1), USERS), (_config(), None)):
    with pytest.raises(ValueError, match='stored user vectors are never reconstructed'):
      fedmf.build_round(config, ITEMS, _dataset_computation(1), users)


def test_user_state_options_are_checked_and_refused_where_no_private_user_is():
  with pytest.raises(ValueError, match='reconstruction_epochs applies to '
                     'user_state=reconstructed; leave it out here'):
    item_updates.Options(reconstruction_epochs=3)
  with pytest.raises(ValueError, match="unknown user_state 'kept'"):
    item_updates.Options(user_state='kept')
  assert item_updates.Options(reconstruction_epochs=3, user_state='reconstructed'
                              ).extra_epochs == 3
  assert item_updates.Options().extra_epochs == 0


# Lockstep (training.lockstep.Lockstep, run by the in-process runtime): a cohort trained side by
# side gives the round its clients give one by one, to float tolerance.
NUM_ITEMS, DIM, NUM_USERS, BATCH, LOCKSTEP_EPOCHS = 30, 6, 14, 4, 2


def _client_rows(user: int, seed: int):
  """(epoch, item, label) rows: LOCKSTEP_EPOCHS shuffled epochs of 1..9 positives and
  as many negatives, clients of 1 to 5 batches an epoch, the last partial or not."""
  rng = np.random.default_rng([seed, user])
  items = rng.choice(NUM_ITEMS, 2 * (1 + user % 9), replace=False).astype(np.int32)
  labels = (np.arange(len(items)) % 2).astype(np.float32)
  order = np.concatenate([rng.permutation(len(items)) for _ in range(LOCKSTEP_EPOCHS)])
  epoch = np.repeat(np.arange(LOCKSTEP_EPOCHS, dtype=np.int32), len(items))
  return epoch, items[order], labels[order]


def _lockstep_parts(item_average='cohort', form='full', reconstructed=False):
  config = fedmf.FedMFConfig(num_items=NUM_ITEMS, dim=DIM, client_learning_rate=0.5, l2=0.01,
                             item_average=item_average, seed=1,
                             form=item_updates.UpdateForm(form, 0 if form == 'full' else 2),
                             reconstruction_epochs=int(reconstructed))
  rng = np.random.default_rng(7)
  users = None if reconstructed else rng.normal(size=(NUM_USERS, DIM)).astype(np.float32)
  return fedmf.build_round(config, rng.normal(size=(NUM_ITEMS, DIM)).astype(np.float32),
                           _dataset_computation(LOCKSTEP_EPOCHS, BATCH), users,
                           batch_size=BATCH)


def _rounds(lockstep: str, item_average: str, aggregator, form: str):
  """([items, users] before and after), each round's metrics: two in-process rounds of
  9 of the clients, each round another cohort in another order."""
  with inprocess.Parallelism(lockstep=lockstep):
    process = inprocess.for_runtime(
        composer.compose_parts(_lockstep_parts(item_average, form), aggregator), 'inprocess')
  state = process.initialize()
  weights, metrics = [(state['server']['weights']['items'], state['clients'])], []
  for r in range(2):
    cohort = np.random.default_rng(r).choice(NUM_USERS, 9, replace=False)
    output = process.next(state, [(u, (np.int32(0), _client_rows(u, r))) for u in cohort])
    state = output.state
    metrics.append(_flat(output.metrics))
  return weights + [(state['server']['weights']['items'], state['clients'])], metrics


def _flat(tree) -> dict:
  if isinstance(tree, dict):
    return {f'{k}/{n}': v for k, sub in tree.items() for n, v in _flat(sub).items()}
  return {'': np.asarray(tree)}


@pytest.mark.parametrize('form, item_average, aggregator, group', [
    ('full', 'cohort', tff.aggregators.SumFactory(), None),  # summed in the lockstep graph
    ('full', 'touched', tff.aggregators.SumFactory(), 4),  # groups of 4 clients
    ('colr', 'cohort', tff.aggregators.SecureSumFactory(100.0, -100.0), None),  # one by one
    ('svd', 'touched', tff.aggregators.SumFactory(), None),
    ('topk', 'cohort', tff.aggregators.SumFactory(), 5),
])
def test_a_lockstep_round_is_the_round_its_clients_train_one_by_one(form, item_average,
                                                                   aggregator, group,
                                                                   monkeypatch):
  (initial, trained), metrics = _rounds('off', item_average, aggregator, form)
  for before, after in zip(initial, trained):  # the items and the users trained
    assert np.abs(after - before).max() > 0.01
  if group:  # the bound on a group's memory holds `group` clients
    monkeypatch.setattr(inprocess, 'LOCKSTEP_BYTES', group * 3 * 4 * NUM_ITEMS * DIM)
  (_, lockstep), lockstep_metrics = _rounds('on', item_average, aggregator, form)
  for got, want in zip(lockstep, trained):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  for got, want in zip(lockstep_metrics, metrics, strict=True):
    assert got.keys() == want.keys()
    for key in want:
      np.testing.assert_allclose(got[key], want[key], rtol=1e-5, err_msg=key)


@pytest.mark.parametrize('options, why', [
    (dict(reconstructed=True), "FedMF's reconstructed users (--user_state=reconstructed) "
     'train client by client'),
    (dict(form='scolr'), "scolr's clients train columns of ranks of their own, client by "
     'client'),
])
def test_lockstep_on_is_refused_where_the_round_has_none_naming_why(options, why):
  process = composer.compose_parts(_lockstep_parts(**options), tff.aggregators.SumFactory())
  with inprocess.Parallelism(lockstep='on'):
    with pytest.raises(inprocess.LockstepRefused, match=re.escape(f'--lockstep=on: {why}')):
      inprocess.for_runtime(process, 'inprocess')
