"""The Goodreads ranking task: BPR triples, negatives, evaluation, other datasets."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks import ranking
from tasks import setting
from tests import fixtures
from tff_rec.models import neumf


def _task(data_dir, **overrides):
  return ranking.Task(ranking.Config(
      data_dir=str(data_dir), **overrides))


def test_table_client_arguments_are_epochs_of_shuffled_positives_with_unseen_negatives(
    user_items_dir):
  task = _task(user_items_dir, local_epochs=3, num_negatives=2)
  user, positives, negatives = task.table_client_arguments('5', seed=7)
  train = task.data.train.of(5)
  assert user == 5 and negatives.shape == (3 * len(train), 2)
  for epoch in range(3):  # each epoch is a permutation of the user's positives
    chunk = positives[epoch * len(train):(epoch + 1) * len(train)]
    assert sorted(chunk) == sorted(train)
  assert not np.isin(negatives, train).any()
  assert negatives.min() >= 0 and negatives.max() < task.data.num_items
  again = task.table_client_arguments('5', seed=7)
  np.testing.assert_array_equal(again[2], negatives)  # a function of the seed
  assert not np.array_equal(task.table_client_arguments('5', seed=8)[2], negatives)


def test_negatives_are_uniform_over_unseen_items(user_items_dir):
  task = _task(user_items_dir)
  rng = np.random.default_rng(0)
  seen = task.data.train.of(0)
  draws = task._negatives(seen, 40_000, rng)  # pylint: disable=protected-access
  counts = np.bincount(draws, minlength=task.data.num_items)
  unseen = np.setdiff1d(np.arange(task.data.num_items), seen)
  assert counts[seen].sum() == 0
  expected = len(draws) / len(unseen)
  assert np.abs(counts[unseen] - expected).max() < 5 * np.sqrt(expected)


def test_triples_are_batched_keeping_the_last_partial_batch(user_items_dir):
  task = _task(user_items_dir, batch_size=3, local_epochs=1)
  user, positives, negatives = task.table_client_arguments('2', seed=0)
  dataset = task.triples_dataset(np.full(len(positives), user, np.int32), positives, negatives)
  batches = list(dataset.as_numpy_iterator())
  assert [len(b['user']) for b in batches] == [3, 3, 2]  # keeps the last partial batch
  np.testing.assert_array_equal(np.concatenate([b['positive'] for b in batches]), positives)
  assert task.table_dataset_computation.type_signature.result.columns['negatives'].shape == (
      None, 1)


def test_evaluation_masks_train_items_and_scores_a_perfect_model(user_items_dir):
  """Score(u, i) = item_gmf[i, u]: 1 for u's test items, 10 for u's train items.

  With train items masked the top 5 are exactly the 4 test items: every metric
  is 1. Without the mask the train items would fill the top and score 0.
  """
  task = _task(user_items_dir, top_k=5, factors=8)  # 8 users: one factor each
  weights = {k: np.zeros_like(v) for k, v in neumf.initial_weights(task.shape, 0).items()}
  weights['user_gmf'][:] = np.eye(8)
  weights['output/kernel'][:8, 0] = 1.0  # the GMF half of the output layer
  for user in range(8):
    weights['item_gmf'][task.data.test.of(user), user] = 1.0
    weights['item_gmf'][task.data.train.of(user), user] = 10.0
  assert task.evaluate(weights) == {'ndcg_at_5': 1.0, 'recall_at_5': 1.0, 'hr_at_5': 1.0}


def test_popularity_ranks_by_train_users(tmp_path):
  # Item 9 is everyone's train item; items 1 and 2 are popular test items.
  root = fixtures.write_user_items(tmp_path, {0: [9, 1], 1: [9, 1], 2: [9, 2], 3: [9]},
                                   {0: [2], 1: [2], 2: [1], 3: [1]})
  task = _task(root, top_k=1)
  metrics = task.objective.popularity('test')
  # Top unseen item: user 0, 1 -> 2 (hit); user 2 -> 1 (hit); user 3 -> 1 (hit).
  assert metrics['hr_at_1'] == 1.0 and metrics['ndcg_at_1'] == 1.0
  # A user without test items is left out of the means (not a NaN in them, nor a miss).
  root = fixtures.write_user_items(tmp_path / 'other',
                                   {0: [9, 1], 1: [9, 1], 2: [9, 2, 3], 3: [2]},
                                   {0: [2], 1: [3], 2: [], 3: []})
  # Unseen, item 2 tops users 0 and 1: user 0 hits, user 1 (test item 3) does not.
  assert _task(root, top_k=1).objective.popularity('test')['hr_at_1'] == 0.5


def test_amazon_style_sequence_file_works_unchanged(tmp_path):
  train, _ = fixtures.synthetic_user_items(6, 30, per_user=10)
  root = fixtures.write_user_items(tmp_path, {u + 1: [i + 1 for i in items]
                                              for u, items in train.items()})
  task = _task(root, test_fraction=0.25)
  assert len(task.train_client_ids) == 6
  assert task.data.test.counts.tolist() == [2] * 6  # ceil(0.25 * 8)


def test_top_users_and_a_validation_split_score_held_out_train_items(tmp_path):
  train = {u: list(range(10 * u, 10 * u + 2 + u)) for u in range(5)}  # 2..6 items
  root = fixtures.write_user_items(tmp_path, train, {u: [99] for u in range(5)})
  task = _task(root, top_users=2, held_out='validation', top_k=1, test_fraction=0.5)
  assert task.data.user_ids.tolist() == [3, 4] and task.EVAL_PARTS == ('validation',) * 2
  assert task.data.test.of(0).tolist() == [32, 33, 34]  # no test item (99) is scored
  # Every held-out item is unique to its user: popularity never hits, 0 and not NaN.
  assert task.objective.popularity('validation')['hr_at_1'] == 0.0
  with pytest.raises(ValueError, match=r"holds out 'validation' only, got 'test'"):
    task.objective.popularity('test')


def test_ids_that_leave_most_of_the_catalogue_unused_are_renumbered_in_order(tmp_path):
  root = fixtures.write_user_items(tmp_path, {0: [10**6 + 5, 10**6 + 1], 1: [10**6 + 1]},
                                   {0: [10**6 + 9], 1: [10**6 + 5]})
  task = _task(root, top_k=1)
  assert task.data.num_items == 3 and task.shape.num_items == 3
  assert task.data.train.of(0).tolist() == [1, 0] and task.data.test.of(0).tolist() == [2]
  assert '3 items (renumbered 0.. in id order' in task.describe()
  dense = _task(fixtures.write_user_items(tmp_path / 'dense', {0: [4, 1]}, {0: [2]}), top_k=1)
  assert dense.data.num_items == 5 and not dense.data.renumbered  # ids kept: the format's


@pytest.mark.parametrize('train, test, top_k, message', [
    ({0: [0, 1], 1: [1]}, {0: [2], 1: [2]}, 4, r"top_k \(4\) is more than the catalogue's 3"),
    ({0: [0, 1, 2, 1], 1: [1]}, {0: [], 1: [2]}, 1,
     r"1 users \(e.g. user 0\) trained on every one of the catalogue's 3 items"),
])
def test_a_catalogue_the_task_cannot_rank_is_refused(tmp_path, train, test, top_k, message):
  root = fixtures.write_user_items(tmp_path, train, test)
  with pytest.raises(ValueError, match=message):
    _task(root, top_k=top_k)


def test_real_goodreads_popularity_matches_the_design_note(real_goodreads):
  """DESIGN.md: popularity alone scores NDCG@20 of about 0.275 on Goodreads-100."""
  metrics = _task(real_goodreads).objective.popularity('test')
  assert metrics['ndcg_at_20'] == pytest.approx(0.2765, abs=0.001)


def test_centralized_epoch_covers_every_train_interaction_once(user_items_dir):
  task = _task(user_items_dir, batch_size=5)
  batches = list(task.centralized_epoch(1).as_numpy_iterator())
  pairs = sorted(zip(np.concatenate([b['user'] for b in batches]).tolist(),
                     np.concatenate([b['positive'] for b in batches]).tolist(), strict=True))
  expected = sorted((u, int(i)) for u in range(8) for i in task.data.train.of(u))
  assert pairs == expected


@pytest.mark.parametrize('overrides, message', [
    (dict(factors=0), 'factors must be >= 1'),
    (dict(l2=-1.0), 'l2 must be >= 0'),
    (dict(top_users=-1), 'top_users must be >= 0'),
    (dict(held_out='train'), 'held_out must be one of'),
])
def test_bad_config(user_items_dir, overrides, message):
  with pytest.raises(ValueError, match=message):
    ranking.Config(data_dir=str(user_items_dir), **overrides)


def test_table_dataset_computation_batches_each_epoch_on_its_own(user_items_dir, tff_runtime):
  task = _task(user_items_dir, batch_size=3, local_epochs=2)
  user, positives, negatives = task.table_client_arguments('2', seed=0)  # 8 positives an epoch

  @tff.tensorflow.computation(task.table_dataset_computation.type_signature.parameter)
  def batch_sizes(args):
    return task.table_dataset_computation(args).as_dataset().reduce(
        tf.zeros([0], tf.int32), lambda sizes, b: tf.concat([sizes, tf.shape(b['user'])], 0))

  assert batch_sizes((user, positives, negatives)).tolist() == [3, 3, 2, 3, 3, 2]


def test_keras_neumf_computes_the_functional_margins_and_evaluates_from_model_weights(
    user_items_dir):
  task = _task(user_items_dir, factors=4, num_negatives=2)
  model = task.keras_model()
  functional = task.functional_model().initial_weights
  names = neumf.keras_weight_names(model)
  assert names == list(functional)  # every weight, by the same names, in the same order
  for name, variable in zip(names, model.trainable_variables, strict=True):
    assert variable.shape == functional[name].shape, name
  model.set_weights([functional[n] for n in names])
  user, positives, negatives = task.table_client_arguments(task.train_client_ids[0], 3)
  triples = {'user': np.full(len(positives), user, np.int32), 'positive': positives,
             'negatives': negatives}
  expected = neumf.score_margins({k: tf.constant(v) for k, v in functional.items()},
                                 triples, neumf.full_item_rows(functional))
  np.testing.assert_allclose(model(triples).numpy()[:, 0], expected.numpy(), rtol=1e-5)
  weights = tff.learning.models.ModelWeights.from_model(model)
  assert task.evaluate(weights) == task.evaluate(functional)


def test_neumf_declares_its_item_tables_and_private_user_rows(user_items_dir):
  task = _task(user_items_dir)
  model = task.functional_model()
  declared = {t.name: t for t in task.tables}
  for name, weight in model.initial_weights.items():
    if name in declared:
      assert (declared[name].rows, declared[name].width) == weight.shape, name
  assert sorted(declared) == ['item_gmf', 'item_mlp', 'user_gmf', 'user_mlp']
  assert list(model.tables) == ['item_gmf', 'item_mlp']
  assert list(model.per_user_tables) == ['user_gmf', 'user_mlp']
  assert declared['item_mlp'].features == ('positive', 'negatives')


def test_test_fraction_on_a_train_and_test_pair_is_refused_unless_it_splits_validation(
    user_items_dir):
  with pytest.raises(ValueError, match='test_fraction applies to one sequence or '
                     'interactions file, and to held_out=validation; a train.txt'):
    _task(user_items_dir, test_fraction=0.5)
  validation = _task(user_items_dir, test_fraction=0.5, held_out='validation')
  assert len(validation.data.test.items) != len(
      _task(user_items_dir, held_out='validation').data.test.items)  # it splits
  held_out = len(validation.data.test.items)
  assert validation.describe().endswith(f' / {held_out} validation interactions')


def test_a_setting_for_one_kind_of_training_names_which():
  field = next(f for f in setting.described(ranking.Config) if f.name == 'local_epochs')
  assert field.metadata['training'] == 'federated'
  with pytest.raises(ValueError, match=r"training must be one of \('federated', "
                     r"'centralized'\), got 'both'"):
    setting.setting(1, 'x', training='both')
