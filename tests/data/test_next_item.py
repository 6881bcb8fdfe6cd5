import numpy as np
import pandas as pd
import pytest

from tff_rec.data import next_item


def _ratings(rows):
  return pd.DataFrame(rows, columns=['user_id', 'item_id', 'rating', 'timestamp'])


def test_windows_are_previous_items_oldest_first_right_padded():
  # User 7 rates items 10, 30, 20, 40 at times given out of file order.
  ratings = _ratings([(7, 30, 5, 200), (7, 10, 5, 100), (7, 40, 5, 400),
                      (7, 20, 5, 300)])
  vocab = next_item.item_vocabulary(np.array([10, 20, 30, 40, 50]))
  config = next_item.NextItemConfig(context_length=3, min_timeline_length=1)
  ex = next_item.make_examples(ratings, vocab, config)
  # ids are renumbered 1..5: 10->1, 20->2, 30->3, 40->4 (50->5 never rated).
  assert ex.vocab_size == 5
  np.testing.assert_array_equal(ex.label, [3, 2, 4])
  np.testing.assert_array_equal(ex.context, [[1, 0, 0], [1, 3, 0], [1, 3, 2]])
  np.testing.assert_array_equal(ex.user, [7, 7, 7])


def test_window_slides_once_longer_than_context():
  ratings = _ratings([(1, i, 4, i) for i in range(1, 8)])  # items 1..7 in order
  vocab = next_item.item_vocabulary(np.arange(1, 8))
  ex = next_item.make_examples(
      ratings, vocab, next_item.NextItemConfig(context_length=3, min_timeline_length=1))
  np.testing.assert_array_equal(ex.label, [2, 3, 4, 5, 6, 7])
  np.testing.assert_array_equal(ex.context[-1], [4, 5, 6])
  np.testing.assert_array_equal(ex.context[2], [1, 2, 3])


def test_short_timelines_are_skipped_and_cap_keeps_earliest():
  ratings = _ratings([(1, 1, 4, 1), (1, 2, 4, 2)]  # 2 ratings: below min 3
                     + [(2, i, 4, i) for i in range(1, 9)])  # 8 ratings
  vocab = next_item.item_vocabulary(np.arange(1, 9))
  ex = next_item.make_examples(
      ratings, vocab, next_item.NextItemConfig(max_examples_per_user=4))
  np.testing.assert_array_equal(ex.user, [2, 2, 2, 2])
  np.testing.assert_array_equal(ex.label, [2, 3, 4, 5])


def test_ties_in_time_keep_file_order():
  ratings = _ratings([(1, 3, 4, 5), (1, 1, 4, 5), (1, 2, 4, 5)])
  vocab = next_item.item_vocabulary(np.arange(1, 4))
  ex = next_item.make_examples(ratings, vocab, next_item.NextItemConfig())
  np.testing.assert_array_equal(ex.label, [1, 2])
  np.testing.assert_array_equal(ex.context[1, :2], [3, 1])


def test_unknown_item_is_an_error():
  vocab = next_item.item_vocabulary(np.array([1, 2]))
  with pytest.raises(ValueError, match='outside the vocabulary'):
    next_item.make_examples(_ratings([(1, 9, 4, 1)]), vocab, next_item.NextItemConfig())


def _examples(num_users=10, per_user=5):
  """Each user rates their own items (so every example is distinct)."""
  rows = [(u, 100 * u + i, 4, i) for u in range(1, num_users + 1)
          for i in range(per_user + 1)]
  vocab = next_item.item_vocabulary(np.array([r[1] for r in rows]))
  return next_item.make_examples(_ratings(rows), vocab, next_item.NextItemConfig())


def test_users_split_80_10_10_by_sorted_id():
  config = next_item.NextItemConfig()
  train, val, test = next_item.split_users(np.array([5, 3, 9, 1, 2, 8, 7, 4, 6, 10, 3]), config)
  np.testing.assert_array_equal(train, [1, 2, 3, 4, 5, 6, 7, 8])
  np.testing.assert_array_equal(val, [9])
  np.testing.assert_array_equal(test, [10])


def test_federated_split_clients_hold_their_own_examples():
  split = next_item.federated_split(_examples(), next_item.NextItemConfig())
  train = split.client_data('train')
  assert train.client_ids == [str(u) for u in range(1, 9)]
  element = next(iter(train.create_tf_dataset_for_client('3').batch(100)))
  np.testing.assert_array_equal(element['label'], [14, 15, 16, 17, 18])  # 301..305
  assert split.client_data('test').client_ids == ['10']
  assert len(split.pooled('validation')['label']) == 5


def test_centralized_split_partitions_examples_by_seed():
  examples = _examples(num_users=20)
  config = next_item.NextItemConfig()
  a = next_item.centralized_split(examples, config, seed=1)
  b = next_item.centralized_split(examples, config, seed=1)
  c = next_item.centralized_split(examples, config, seed=2)
  sizes = [len(p['label']) for p in (a.train, a.validation, a.test)]
  assert sizes == [80, 10, 10]
  np.testing.assert_array_equal(a.test['context'], b.test['context'])
  assert not np.array_equal(a.test['context'], c.test['context'])
  # Together the parts hold every example exactly once.
  rows = lambda p: {tuple(r) for r in np.c_[p['context'], p['label']]}
  everything = rows(examples.select(np.ones(100, bool)))
  assert len(everything) == 100
  assert rows(a.train) | rows(a.validation) | rows(a.test) == everything


@pytest.mark.parametrize('kwargs, message', [
    ({'context_length': 0}, 'context_length'),
    ({'max_examples_per_user': -1}, 'max_examples_per_user'),
    ({'train_fraction': 0.95, 'validation_fraction': 0.1}, 'sum < 1'),
])
def test_bad_config_is_rejected(kwargs, message):
  with pytest.raises(ValueError, match=message):
    next_item.NextItemConfig(**kwargs)
