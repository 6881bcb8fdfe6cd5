"""MovieLens leave-one-out ranking: client rows, evaluation, popularity, processes, bad input."""

import numpy as np
import pytest

from tasks import loo_ranking as task_lib
from tests import fixtures
from tff_rec import objectives
from tff_rec import registry
from tff_rec.algorithms import api
from tff_rec.models import tables
from tff_rec.training import loop
from tff_rec.training import optimizers
from tff_rec.training import resources

SGD = optimizers.OptimizerConfig('sgd', 0.5)


def _task(data_dir, **overrides):
  return task_lib.Task(task_lib.Config(data_dir=str(data_dir), **overrides))


def _process(task, algorithm='colr', runtime='native', **options):
  built = registry.build(algorithm, task, registry.Training(
      SGD, optimizers.OptimizerConfig('sgd', 1.0), runtime=runtime), **options)
  return built.process, built.client_ids, built.client_input


def test_client_rows_are_epochs_of_positives_and_fresh_unseen_negatives(ranking_dir):
  task = _task(ranking_dir, num_negatives=3)
  epoch, items, labels = task.client_rows(4, seed=1, epochs=2)
  positives = task.data.train.of(4)
  assert len(items) == 2 * 4 * len(positives)
  for e in (0, 1):
    chunk, chunk_labels = items[epoch == e], labels[epoch == e]
    assert sorted(chunk[chunk_labels == 1]) == sorted(positives)
    negatives = chunk[chunk_labels == 0]
    assert len(negatives) == 3 * len(positives) and not np.isin(negatives, positives).any()
  assert not np.array_equal(items[epoch == 0], items[epoch == 1])  # redrawn and reshuffled
  np.testing.assert_array_equal(task.client_rows(4, seed=1, epochs=2)[1], items)


@pytest.mark.parametrize('block', [objectives.SampledRanking.BLOCK_USERS, 7])  # 7: blocks
def test_evaluation_ranks_each_held_out_item_among_its_own_negatives(ranking_dir, block,
                                                                     monkeypatch):
  monkeypatch.setattr(objectives.SampledRanking, 'BLOCK_USERS', block)
  task = _task(ranking_dir, embedding_dim=3)
  assert len(task.data.user_ids) % 7  # the last block of 7 is a partial one
  rng = np.random.default_rng(0)
  weights = {'items': rng.normal(size=(task.data.num_items, 3)),
             'users': rng.normal(size=(len(task.data.user_ids), 3))}
  hits, gains = [], []
  for user, vector in enumerate(weights['users']):  # one user at a time, by hand
    scores = weights['items'] @ vector
    held_out = task.data.held_out['validation'][user]
    rank = sum(scores[n] >= scores[held_out] for n in task.data.negatives['validation'][user])
    hits.append(rank < 10)
    gains.append(1 / np.log2(rank + 2) if rank < 10 else 0)
  got = task.evaluate(weights, 'validation')
  assert got['hr_at_10'] == pytest.approx(np.mean(hits))
  assert got['ndcg_at_10'] == pytest.approx(np.mean(gains))
  assert 0 < got['hr_at_10'] < 1


def test_sequence_files_work_with_no_code_change(tmp_path):
  rng = np.random.default_rng(0)
  sequences = {u: rng.choice(np.arange(1, 301), size=int(rng.integers(20, 40)), replace=False)
               for u in range(1, 13)}
  sequences[13] = np.array([1, 2, 3])  # too short: skipped and counted
  task = _task(fixtures.write_user_items(tmp_path / 'beauty', sequences))
  assert len(task.data.user_ids) == 12 and task.data.skipped_users == 1
  by_file = _task(tmp_path / 'beauty' / 'sequences.txt').data  # the file, not its folder
  np.testing.assert_array_equal(by_file.train.items, task.data.train.items)
  np.testing.assert_array_equal(by_file.negatives['test'], task.data.negatives['test'])
  assert 'users with < 20 items skipped' in task.describe()


def test_movielens_1m_files_give_the_same_split(ranking_dir, tmp_path):
  ml1m = fixtures.write_ml1m(tmp_path / 'ml-1m', fixtures.synthetic_ratings(30, 200), 30, 200)
  one, hundred = _task(ml1m).data, _task(ranking_dir).data
  np.testing.assert_array_equal(one.train.items, hundred.train.items)
  np.testing.assert_array_equal(one.negatives['test'], hundred.negatives['test'])


def test_real_ml100k_split_and_popularity(real_ml100k):
  task = _task(real_ml100k)
  assert len(task.data.user_ids) == 943 and task.data.num_items == 1682
  assert len(task.data.train.items) == 100_000 - 2 * 943
  popularity = task.objective.popularity('test')
  assert popularity['hr_at_10'] == pytest.approx(0.404, abs=0.001)
  floors = task.floors()['popularity']  # by the names runs report
  assert floors['test/hr_at_10'] == popularity['hr_at_10']
  assert floors['validation/ndcg_at_10'] == task.objective.popularity('validation')[
      'ndcg_at_10']


def test_real_beauty_keeps_users_with_20_items(real_beauty):
  task = _task(real_beauty)
  assert task.data.skipped_users > 20_000 and 0 < len(task.data.user_ids) < 2_000


def test_a_stored_run_keeps_no_initial_user_table_beside_its_state(ranking_dir, tff_runtime):
  # The process makes its first state of the task's initial vectors at initialize;
  # a task that kept them too would hold a third user table (composer.RoundProcess).
  task = _task(ranking_dir, embedding_dim=8)
  process, _, _ = _process(task)
  state = process.initialize()
  assert 'initial_users' not in vars(task)  # never made and kept (a cached property)
  np.testing.assert_array_equal(state['clients'], task.initial_users)  # the same vectors


def test_federated_colr_learns_beyond_its_initial_ranking(ranking_dir, tff_runtime):
  task = _task(ranking_dir, embedding_dim=8, batch_size=32)
  process, ids, client_input = _process(task, rank=2)
  initial = task.evaluate(process.get_model_weights(process.initialize()), 'validation')
  _, metrics = loop.run(process, client_ids=ids, client_input=client_input,
                        schedule=loop.Schedule(rounds=40, clients_per_round=10, eval_every=0),
                        evaluate=lambda w: task.evaluate(w, 'validation'))
  # Users walk through the catalogue in order: the next items are learnable.
  assert metrics['hr_at_10'] > initial['hr_at_10'] + 0.2


def test_reconstructed_users_at_evaluation_match_the_clients_reconstruction(ranking_dir):
  import collections
  import tensorflow as tf
  from tff_rec.algorithms import fedmf
  from tff_rec.data import implicit

  task = _task(ranking_dir, embedding_dim=4, batch_size=16)
  config = fedmf.FedMFConfig(num_items=len(task.initial_items), dim=4,
                             client_learning_rate=0.5, l2=task.config.l2,
                             reconstruction_epochs=2)
  items = task.initial_items * 3
  vectors = fedmf.reconstructed_users(task, config, items)
  for user in (0, 17):
    rows = task.client_rows(user, [0, fedmf.EVAL_SEED_OFFSET, user], 2)
    dataset = implicit.epoch_batches(
        collections.OrderedDict(epoch=rows[0], item=rows[1], label=rows[2]), 2, 16)
    alone = fedmf.reconstruct_user(config, tf.constant(items),
                                   tf.constant(task.initial_users[user]), dataset)
    np.testing.assert_allclose(vectors[user], alone.numpy(), atol=1e-6)
    assert np.abs(vectors[user] - task.initial_users[user]).max() > 0.01


@pytest.mark.parametrize('state, runtime, options, message', [
    ('stored', 'native', dict(secure_sum_bound=1.0), 'native worker has no secure sum'),
    ('reconstructed', 'native', dict(secure_sum_bound=1.0), 'native worker has no secure sum'),
    ('stored', 'native', dict(rank=0), r'rank must be in 1..64'),
    ('stored', 'native', dict(rank=65), r'rank must be in 1..64'),
    ('stored', 'native', dict(rank=4, local_ranks='1-8'), r'local ranks \[1, 8\] must be in '
     r'1..4 \(the global rank R\)'),
    ('stored', 'native', dict(local_ranks='1-2'), 'local_ranks applies to scolr only'),
    ('stored', 'native', dict(item_average='all'), "unknown item_average 'all'"),
    ('stored', 'native', dict(rank=3), r'--rank applies to the compressed forms .*, not '
     '--algorithm=fedmf'),
])
def test_bad_settings_are_refused_before_training(ranking_dir, state, runtime, options,
                                                  message):
  task = _task(ranking_dir)
  algorithm = ('scolr' if 'local_ranks' in options and options['local_ranks'] == '1-8'
               else 'fedmf' if options.get('rank') == 3 else 'colr')
  with pytest.raises(ValueError, match=message):
    _process(task, algorithm, runtime=runtime, user_state=state, **options)


def test_scolr_local_ranks_uniform_or_by_client_group(ranking_dir):
  task = _task(ranking_dir)
  _, ids, client_input = _process(task, 'scolr', rank=4)
  # Stored users' client input: (user, (rank, rows)).
  ranks = {client_input(c, seed)[1][0] for c in ids[:5] for seed in range(40)}
  assert ranks == {1, 2, 3, 4}
  _, ids, client_input = _process(task, 'scolr', rank=4, local_ranks='1-4')
  ranks = [client_input(c, 0)[1][0] for c in ids]
  assert ranks == [1] * 15 + [4] * 15  # users in id order, equal groups


def test_fedsubavg_stacked_on_colr_scales_each_item_row_of_the_update_by_n_over_heat(
    ranking_dir, tff_runtime):
  """Unbounded, and with max_correction 4, which cuts some rows' N/n_m and not others."""
  task = _task(ranking_dir, embedding_dim=8)
  deltas = []
  for stack, bound in (((), None), (('fedsubavg',), None), (('fedsubavg',), 4.0)):
    training = registry.Training(SGD, optimizers.OptimizerConfig('sgd', 1.0), stack=stack,
                                 max_correction=bound)
    built = registry.build('colr', task, training, rank=2)
    state = built.process.initialize()
    before = built.process.get_model_weights(state)['items']
    state = built.process.next(state, [built.client_input(c, 3)
                                       for c in built.client_ids[:4]]).state
    deltas.append(built.process.get_model_weights(state)['items'] - before)
  plain, stacked, bounded = deltas
  heat = np.zeros(task.data.num_items)
  for user in range(len(task.data.user_ids)):
    heat[np.unique(task.data.train.of(user))] += 1
  scale = np.where(heat > 0, len(task.data.user_ids) / np.maximum(heat, 1), 1.0)
  np.testing.assert_allclose(stacked, plain * scale[:, None], rtol=1e-4, atol=1e-7)
  np.testing.assert_allclose(bounded, plain * np.minimum(scale, 4.0)[:, None], rtol=1e-4,
                             atol=1e-7)
  moved = np.abs(plain).max(axis=1) > 1e-4
  assert (moved & (scale > 4.5)).any() and (moved & (scale > 1) & (scale < 4)).any()


def test_keras_mf_scores_like_the_tables_and_evaluates_from_its_model_weights(ranking_dir):
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  task = _task(ranking_dir, embedding_dim=4)
  model = task.keras_model()
  assert api.table_of_variable(task) == ['users', 'items']
  n_users, n_items = len(task.data.user_ids), task.data.num_items
  assert task.tables == (tables.Table('users', n_users, 4, ('user',), private=True),
                         tables.Table('items', n_items, 4, ('item',)))
  weights = tff.learning.models.ModelWeights.from_model(model)
  users, items = (np.asarray(w) for w in weights.trainable)
  logits = model({'user': np.array([3, 5], np.int32), 'item': np.array([7, 0], np.int32)})
  np.testing.assert_allclose(logits.numpy()[:, 0], [users[3] @ items[7], users[5] @ items[0]],
                             rtol=1e-5)
  assert task.evaluate(weights, 'test') == task.evaluate({'users': users, 'items': items},
                                                          'test')


def test_other_algorithms_train_the_keras_mf_whose_user_rows_only_their_client_moves(
    ranking_dir, tff_runtime):
  task = _task(ranking_dir, embedding_dim=4, batch_size=16)
  built = registry.build('fedprox', task, registry.Training(
      SGD, optimizers.OptimizerConfig('sgd', 1.0)))
  state = built.process.initialize()
  before = built.process.get_model_weights(state)
  cohort = built.client_ids[:3]
  after = built.process.get_model_weights(built.process.next(
      state, [built.client_input(c, 0) for c in cohort]).state)
  moved = np.abs(np.asarray(after.trainable[0]) - np.asarray(before.trainable[0])).max(axis=1)
  cohort_rows = [task.user_index(c) for c in cohort]
  assert (moved[cohort_rows] > 1e-6).all()
  assert (np.delete(moved, cohort_rows) == 0).all()
  examples = task.client_examples(cohort[0])
  assert (examples['user'] == cohort_rows[0]).all()
  assert examples['label'].sum() * (1 + task.config.num_negatives) == len(examples['label'])
  # FAIR hashes the item table only: the user table is one row per client
  fair = registry.build('fair', task, registry.training(task, 'fair'))
  users = fair.process.get_model_weights(fair.process.initialize()).trainable[0]
  assert users.shape == (len(task.train_client_ids), 4)
  assert fair.process.next.type_signature.parameter[0].member.server.weights.users.shape == users.shape


def test_min_interactions_below_a_three_item_split_is_refused_before_reading_data():
  with pytest.raises(ValueError, match=r'min_interactions must be >= 3 .*got 2'):
    task_lib.Config(data_dir='/nonexistent', min_interactions=2)


def test_a_population_whose_tables_do_not_fit_is_refused_before_they_are_allocated(
    ranking_dir, monkeypatch):
  data = _task(ranking_dir).data
  users, items = len(data.user_ids), data.num_items
  made = []

  def allocating(rows, dim, seed):
    del seed
    made.append(rows)
    return np.broadcast_to(np.float32(0), (rows, dim))  # its shape, not its memory

  monkeypatch.setattr(task_lib.mf, 'initial_table', allocating)
  half = resources.machine_memory() / 2
  # Every run: one copy of the users, three of the items, checked before either is made.
  dim = int(half / 4 / (users + 3 * items)) + 1
  with pytest.raises(ValueError, match=rf'{users} users x {dim} floats x 1 and {items} items '
                     rf'x {dim} floats x 3 .*a smaller --embedding_dim or fewer users$'):
    _task(ranking_dir, embedding_dim=dim)
  assert not made
  # FedMF's stored users and the Keras MF's user table (a model weight) keep 2
  # copies: this dimension fits 1, and their builds are refused before the user
  # table is made; FedAvg on the MF is FedMF's round, which reconstructs under fedmf.
  dim = int(half / 4 / (1.5 * users + 3 * items))
  task = _task(ranking_dir, embedding_dim=dim)
  stored = rf'{users} users x {dim} floats x 2 \(stored users\) and {items} items x {dim} '
  for name, cure in (('fedmf', 'use --user_state=reconstructed'),
                     ('fedavg', 'use --algorithm=fedmf --user_state=reconstructed')):
    with pytest.raises(registry.NotApplicable, match=f'{stored}floats x 3 .*; {cure}, '):
      registry.build(name, task, registry.training(task, name))
  with pytest.raises(ValueError, match=rf"{users} users x {dim} floats x 2 \(the Keras MF's "
                     r"user table, a model weight\) .*or FedMF's private users"):
    registry.build('fedprox', task, registry.training(task, 'fedprox'))
  assert made == [items]


def test_top_k_names_the_progress_metrics_and_stops_below_the_candidates(ranking_dir):
  task = _task(ranking_dir, embedding_dim=3, top_k=5)
  rng = np.random.default_rng(0)
  weights = {'items': rng.normal(size=(task.data.num_items, 3)),
             'users': rng.normal(size=(len(task.data.user_ids), 3))}
  shown = {task.PROGRESS['val hr'], task.PROGRESS['test hr']}
  assert shown == {'validation/hr_at_5', 'test/hr_at_5'}
  assert 'hr_at_5' in task.evaluate(weights, 'validation')  # what the line shows is reported
  task_lib.Config(top_k=task_lib.EVAL_CANDIDATES)
  with pytest.raises(ValueError, match=r'top_k must be at most 99 .* 100 candidates\), got 100'):
    task_lib.Config(top_k=100)
