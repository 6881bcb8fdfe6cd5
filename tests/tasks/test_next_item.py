import numpy as np
import pytest

from tasks import next_item as task_lib
from tff_rec.training import optimizers


@pytest.fixture
def task(ml100k_dir):
  return task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), batch_size=4))


def _batches(dataset):
  return [(x['context'].numpy(), y.numpy()) for x, y in dataset]


def _dataset(task, client, seed):
  return _batches(task.dataset_computation(*task.client_arguments(client, seed)))


def test_a_clients_dataset_is_full_batches_of_its_own_examples_shuffled_by_the_seed(
    task, tff_runtime):
  client = task.train_client_ids[3]
  rows = task.examples.user == int(client)
  got = _dataset(task, client, 11)
  assert all(len(labels) == 4 for _, labels in got) and len(got) == rows.sum() // 4 > 0
  own = {(tuple(c), int(l)) for c, l in zip(task.examples.context[rows],
                                             task.examples.label[rows], strict=True)}
  assert {(tuple(c), int(l)) for cs, ls in got for c, l in zip(cs, ls, strict=True)} <= own
  again = _dataset(task, client, 11)
  for (gc, gl), (ac, al) in zip(got, again, strict=True):
    np.testing.assert_array_equal(gc, ac)
    np.testing.assert_array_equal(gl, al)
  other = _dataset(task, client, 12)  # another seed shuffles differently
  assert any(not np.array_equal(a[1], b[1]) for a, b in zip(got, other, strict=True))


def test_without_drop_remainder_every_example_trains(ml100k_dir, tff_runtime):
  task = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), batch_size=4,
                                       drop_remainder=False))
  client = next(c for c in task.train_client_ids
                if (task.examples.user == int(c)).sum() % 4)  # has a partial batch
  rows = task.examples.user == int(client)
  batches = _dataset(task, client, 0)
  assert len(batches[-1][1]) == rows.sum() % 4
  seen = np.concatenate([labels for _, labels in batches])
  np.testing.assert_array_equal(np.sort(seen), np.sort(task.examples.label[rows]))


def test_evaluate_reports_recall_at_1_5_10_on_held_out_users(task, tff_runtime):
  import tensorflow_federated as tff
  model = task.keras_model()
  weights = tff.learning.models.ModelWeights.from_model(model)
  result = task.evaluate(weights, 'test')
  assert set(result) == {'recall_at_1', 'recall_at_5', 'recall_at_10'}
  # By hand: a label's rank counts the other items scoring at least as high.
  test = task.split.pooled('test')
  scores = model({'context': test['context']}).numpy()
  label_scores = scores[np.arange(len(scores)), test['label'] - 1]
  ranks = (scores >= label_scores[:, None]).sum(1) - 1
  for k in (1, 5, 10):
    assert result[f'recall_at_{k}'] == pytest.approx(np.mean(ranks < k))


def test_popularity_ranks_items_by_training_label_count(task):
  train = {'label': np.array([3, 3, 3, 7, 7, 1], np.int32)}
  test = {'label': np.array([3, 7, 1, 2], np.int32)}
  # Ranks: item 3 first, 7 second, 1 third, 2 tied with the 36 unseen items.
  result = task.objective.popularity(train, test)
  assert result == {'recall_at_1': 0.25, 'recall_at_5': 0.75, 'recall_at_10': 0.75}


def test_users_are_split_into_train_validation_and_test_clients(task):
  assert len(task.train_client_ids) == 24
  assert task.split.users['validation'].tolist() == [25, 26, 27]
  assert task.split.users['test'].tolist() == [28, 29, 30]
  assert task.vocab_size == 40


def test_centralized_split_by_user_is_the_federated_users_split(ml100k_dir):
  task = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir),
                                       centralized_split='by_user'))
  split = task.centralized_split()
  for part in ('train', 'validation', 'test'):
    np.testing.assert_array_equal(getattr(split, part)['label'],
                                  task.split.pooled(part)['label'])
  # Every test example is a test user's: none was trained on.
  test_users = np.isin(task.examples.user, task.split.users['test'])
  assert len(split.test['label']) == test_users.sum() > 0
  assert len(split.train['label']) + len(split.validation['label']) == (~test_users).sum()


def test_log_q_correction_counts_the_training_labels(ml100k_dir):
  task = task_lib.Task(task_lib.Config(
      data_dir=str(ml100k_dir), loss='batch_softmax', logq_correction=True))
  frequency = np.array(task.loss().label_frequency)
  labels = task.split.pooled('train')['label']
  assert frequency.sum() == pytest.approx(1.0)
  assert frequency[labels[0] - 1] == pytest.approx(np.mean(labels == labels[0]))
  assert task.loss(np.array([2, 2, 3])).label_frequency[1] == pytest.approx(2 / 3)


@pytest.mark.parametrize('kwargs, message', [
    ({'loss': 'softmax'}, "unknown loss 'softmax'; choose one of"),
    ({'batch_size': 0}, 'batch_size must be >= 1'),
    ({'centralized_split': 'random'}, "unknown centralized_split 'random'"),
    ({'logq_correction': True}, 'apply to the batch softmax losses, not loss=global_softmax'),
    ({'spreadout_weight': 5.0}, 'spreadout_weight applies to the \\*_spreadout losses'),
])
def test_bad_config(kwargs, message, ml100k_dir):
  with pytest.raises(ValueError, match=message):
    task_lib.Config(data_dir=str(ml100k_dir), **kwargs)


def test_real_ml100k_task_sizes(real_ml100k):
  task = task_lib.Task(task_lib.Config(data_dir=str(real_ml100k)))
  assert len(task.train_client_ids) == 754  # 80% of 943 users
  assert task.vocab_size == 1682
  # Every user has >= 20 ratings; the cap keeps at most 300 examples per user.
  per_user = np.bincount(task.examples.user)
  assert per_user[per_user > 0].min() >= 19 and per_user.max() == 300


@pytest.mark.slow
def test_federated_global_softmax_beats_popularity_on_real_ml100k(real_ml100k, tff_runtime):
  import tensorflow_federated as tff
  from tff_rec.algorithms import baselines
  from tff_rec.training import loop

  task = task_lib.Task(task_lib.Config(data_dir=str(real_ml100k),
                                       loss='global_softmax'))
  process = tff.simulation.compose_dataset_computation_with_learning_process(
      task.dataset_computation,
      baselines.build_process(task.model_fn,
                              client_optimizer=optimizers.OptimizerConfig('sgd', 0.1),
                              server_optimizer=optimizers.OptimizerConfig('adam', 0.01)))
  _, metrics = loop.run(
      process, client_ids=task.train_client_ids, client_input=task.client_arguments,
      schedule=loop.Schedule(rounds=25, clients_per_round=50, eval_every=0),
      evaluate=lambda w: task.evaluate(w, 'test'))
  popularity = task.objective.popularity(task.split.pooled('train'), task.split.pooled('test'))
  assert popularity['recall_at_10'] == pytest.approx(0.046, abs=0.002)
  assert metrics['recall_at_10'] > popularity['recall_at_10'] + 0.01


def test_a_sequence_file_gives_each_users_next_items_in_file_order(tmp_path):
  from tests import fixtures
  sequences = {u: [10 + (u + k) % 7 for k in range(6)] for u in range(1, 41)}
  root = fixtures.write_user_items(tmp_path / 'beauty', sequences)
  task = task_lib.Task(task_lib.Config(data_dir=str(root), batch_size=2))
  assert task.vocab_size == 7  # items 10..16 -> 1..7
  assert len(task.train_client_ids) == 32  # 80% of 40 users, by sorted id
  first = task.client_examples(task.train_client_ids[0])  # user 1: items 11, 12, ..., 16
  np.testing.assert_array_equal(first['label'], [3, 4, 5, 6, 7])
  np.testing.assert_array_equal(first['context'][1][:3], [2, 3, 0])
  by_file = task_lib.Task(task_lib.Config(data_dir=str(root / 'sequences.txt'),
                                          batch_size=2))
  np.testing.assert_array_equal(by_file.client_examples(task.train_client_ids[0])['label'],
                                first['label'])


def test_a_directory_that_is_neither_names_both_formats(tmp_path):
  from tff_rec.data import tables
  (tmp_path / 'empty').mkdir()
  with pytest.raises(tables.DataFormatError, match='not a MovieLens directory.*sequence file'):
    task_lib.Task(task_lib.Config(data_dir=str(tmp_path / 'empty')))


def test_short_histories_empty_parts_and_skipped_users_are_said_before_training(tmp_path):
  from tests import fixtures
  # 40 users of 6 items (5 examples each) and 10 of 2 items (no example: fewer than 3)
  sequences = {u: [10 + (u + k) % 7 for k in range(6 if u <= 40 else 2)] for u in range(1, 51)}
  root = fixtures.write_user_items(tmp_path / 'seq', sequences)
  short = task_lib.Task(task_lib.Config(data_dir=str(root)))
  assert '32 training clients hold fewer than batch_size examples' in short.describe()
  with pytest.raises(ValueError, match=r'no training user has 16 examples \(batch_size\), and '
                     'drop_remainder drops'):
    short.train_client_ids  # pylint: disable=pointless-statement
  task = task_lib.Task(task_lib.Config(data_dir=str(root), drop_remainder=False))
  assert '(10 users with fewer than 3 items skipped)' in task.describe()
  partly = task_lib.Task(task_lib.Config(data_dir=str(root), batch_size=5))
  assert len(partly.train_client_ids) == 32 and partly.short_clients == 0
  few = fixtures.write_user_items(tmp_path / 'few', {u: [1, 2, 3, 4] for u in range(1, 10)})
  with pytest.raises(ValueError, match='no validation user; users with 3 or more items '
                     r'\(9 here\) are split 0.8 / 0.1'):
    task_lib.Task(task_lib.Config(data_dir=str(few), drop_remainder=False))
