"""MovieLens CTR examples: features, history, crosses, splits, id checks."""

import numpy as np
import pandas as pd
import pytest

from tff_rec.data import ctr
from tff_rec.data import movielens


def _tiny() -> movielens.MovieLens:
  """Two users; user 10 rates 5 movies (two ties in time), user 20 rates 2."""
  ratings = pd.DataFrame({
      'user_id': [20, 10, 10, 10, 20, 10, 10],
      'item_id': [3, 1, 2, 3, 1, 4, 5],
      'rating': [5, 4, 2, 5, 1, 4, 3],
      'timestamp': [7, 1, 2, 2, 5, 3, 4]})
  users = pd.DataFrame({'user_id': [10, 20], 'age': [17, 30], 'gender': ['M', 'F'],
                        'occupation': ['student', 'artist'], 'zip': ['12345', 'T8H1N']})
  items = pd.DataFrame({'item_id': [1, 2, 3, 4, 5], 'title': list('abcde'),
                        'genres': ['Drama', 'Comedy|Drama', '', 'Action', 'Drama']})
  return movielens.MovieLens(ratings, users, items)


def test_features_labels_history_and_crosses():
  e = ctr.make_examples(_tiny(), history_length=2, test_fraction=0.2)
  # Rows sorted by (client, time, file order): user 10 movies 1, 2, 3, 4, 5; user 20: 1, 3.
  np.testing.assert_array_equal(e.features['movie'], [1, 2, 3, 4, 5, 1, 3])
  np.testing.assert_array_equal(e.labels, [1, 0, 1, 1, 0, 0, 1])
  np.testing.assert_array_equal(e.clients, [0, 0, 0, 0, 0, 1, 1])
  # Last 2 clicks strictly before each row, oldest first, per client.
  np.testing.assert_array_equal(e.features['history'], [
      [0, 0], [0, 1], [0, 1], [1, 3], [3, 4], [0, 0], [0, 0]])
  np.testing.assert_array_equal(e.features['age'], [1, 1, 1, 1, 1, 2, 2])  # buckets 1, 25
  np.testing.assert_array_equal(e.features['gender'], [2, 2, 2, 2, 2, 1, 1])  # F=1, M=2
  np.testing.assert_array_equal(e.features['zip'], [1, 1, 1, 1, 1, 2, 2])  # '123' < 'T8H'
  assert e.vocab_sizes['gender_x_movie'] == 2 * 5 + 1
  np.testing.assert_array_equal(e.features['gender_x_movie'][[0, 5]], [5 + 1, 0 + 1])
  np.testing.assert_array_equal(e.features['genres'][:3], [[3, 0], [2, 3], [0, 0]])
  ctr.check_ids(e.features, e.vocab_sizes)
  np.testing.assert_array_equal(e.user_ids, [10, 20])


def test_chronological_split_holds_out_each_clients_last_rows():
  e = ctr.make_examples(_tiny(), test_fraction=0.2)
  np.testing.assert_array_equal(e.is_test, [0, 0, 0, 0, 1, 0, 1])
  assert {k: v.tolist() for k, v in e.client_rows().items()} == {0: [0, 1, 2, 3], 1: [5]}


def test_random_split_takes_an_exact_seeded_share():
  data = _tiny()
  first = ctr.make_examples(data, split='random', test_fraction=0.3, seed=4)
  again = ctr.make_examples(data, split='random', test_fraction=0.3, seed=4)
  assert first.is_test.sum() == 2
  np.testing.assert_array_equal(first.is_test, again.is_test)


def test_chronological_validation_is_each_clients_last_training_rows():
  e = ctr.make_examples(_tiny(), test_fraction=0.2).with_validation('chronological', 0.2, 0)
  np.testing.assert_array_equal(e.rows('test'), [4, 6])
  np.testing.assert_array_equal(e.rows('validation'), [3])  # user 20 keeps its one row
  np.testing.assert_array_equal(e.rows('train'), [0, 1, 2, 5])
  assert {k: v.tolist() for k, v in e.client_rows().items()} == {0: [0, 1, 2], 1: [5]}


def test_random_validation_is_a_seeded_share_of_the_training_rows():
  e = ctr.make_examples(_tiny(), split='random', test_fraction=0.3, seed=4)
  first, again = (e.with_validation('random', 0.5, 4) for _ in range(2))
  np.testing.assert_array_equal(first.is_validation, again.is_validation)
  validation, test = first.rows('validation'), first.rows('test')
  assert len(validation) == 2 and not set(validation) & set(test)  # half of 5 train rows
  assert sorted([*validation, *test, *first.rows('train')]) == list(range(7))
  with pytest.raises(ValueError, match='validation fraction must be in'):
    e.with_validation('random', 1.0, 4)
  with pytest.raises(ValueError, match="unknown part 'dev'"):
    e.rows('dev')


def test_validation_of_marked_test_pairs_takes_whole_pairs_and_leaves_one_to_train():
  """Test rows the data marked, a click and its non-click per client: client 0's two
  training rows are one pair, kept for training; client 1's last of two pairs
  validates."""
  marked = np.array([0, 0, 1, 1, 0, 0, 0, 0, 1, 1], bool)
  e = ctr.CtrExamples({}, np.tile([1.0, 0.0], 5).astype(np.float32),
                      np.array([0] * 4 + [1] * 6), marked, {}, np.array([7, 9]),
                      test_marked=True).with_validation('chronological', 0.2, 0)
  np.testing.assert_array_equal(e.rows('validation'), [6, 7])
  np.testing.assert_array_equal(e.rows('train'), [0, 1, 4, 5])


def test_ages_fall_in_the_bucket_their_lower_end_starts():
  """ML-1M's buckets 1, 18, 25, 35, 45, 50, 56: 18 and 25 start theirs."""
  ages = [17, 18, 24, 25, 56, 60]
  data = movielens.MovieLens(
      pd.DataFrame({'user_id': range(6), 'item_id': [1] * 6, 'rating': [4] * 6,
                    'timestamp': range(6)}),
      pd.DataFrame({'user_id': range(6), 'age': ages, 'gender': ['M'] * 6,
                    'occupation': ['x'] * 6, 'zip': ['1'] * 6}),
      pd.DataFrame({'item_id': [1], 'title': ['a'], 'genres': ['Drama']}))
  e = ctr.make_examples(data, test_fraction=0.5)
  np.testing.assert_array_equal(e.features['age'], [1, 2, 2, 3, 4, 4])  # 1, 18, 18, 25, 56


def test_real_movielens_100k(real_ml100k):
  e = ctr.make_examples(movielens.load(real_ml100k))
  assert len(e.labels) == 100_000 and len(e.user_ids) == 943
  assert e.labels.mean() == pytest.approx(0.55375)  # ratings >= 4
  assert e.vocab_sizes['movie'] == 1683 and e.vocab_sizes['age'] == 8
  assert e.vocab_sizes['genres'] == 20  # 19 genres + padding
  # Each user keeps >= 1 training example and holds out ceil(10%).
  counts = np.bincount(e.clients)
  np.testing.assert_array_equal(np.bincount(e.clients, weights=e.is_test),
                                np.ceil(0.1 * counts))


def test_bad_input_is_named():
  with pytest.raises(ValueError, match="feature 'movie': id 9 is outside its vocabulary"):
    ctr.check_ids({'movie': np.array([1, 9])}, {'movie': 6})
  with pytest.raises(ValueError, match='unknown split'):
    ctr.make_examples(_tiny(), split='by_week')
  with pytest.raises(ValueError, match='test_fraction must be in'):
    ctr.make_examples(_tiny(), test_fraction=1.0)


def test_movielens_1m_format(ml1m_dir):
  e = ctr.make_examples(movielens.load(ml1m_dir))
  assert e.vocab_sizes['genres'] == 3  # Comedy, Drama + padding
  np.testing.assert_array_equal(e.features['genres'][0], [1, 2])
  # ML-1M's age codes are already the buckets' lower ends.
  assert set(np.unique(e.features['age'])) <= set(range(1, len(ctr.AGE_BUCKETS) + 1))
  ctr.check_ids(e.features, e.vocab_sizes)
