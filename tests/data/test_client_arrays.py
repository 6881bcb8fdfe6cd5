"""Clients in one array form, and the feeds derived from it."""

import numpy as np
import pytest

from tff_rec import feeds
from tff_rec.data import client_arrays
from tff_rec.data import sliced
from tff_rec.models import tables


def _clients() -> client_arrays.ClientArrays:
  features = {'user': np.array([1, 1, 0, 0, 0, 9], np.int32),
              'item': np.array([4, 5, 5, 6, 7, 9], np.int32)}
  labels = np.array([[1.0], [2.0], [3.0], [4.0], [5.0], [9.0]], np.float32)
  return client_arrays.ClientArrays(features, labels, {'b': [0, 1], 'a': [2, 3, 4]})


def test_sizes_rows_and_pooled_follow_the_ids_as_given():
  clients = _clients()
  assert clients.ids == ['b', 'a'] and clients.sizes() == [2, 3]
  declared = (tables.Table('users', 2, 4, ('user',)), tables.Table('items', 8, 4, ('item',)))
  rows = clients.table_rows(declared)
  assert [r.tolist() for r in rows['users']] == [[1, 1], [0, 0, 0]]
  assert [r.tolist() for r in rows['items']] == [[4, 5], [5, 6, 7]]
  features, labels = clients.pooled()
  assert features['item'].tolist() == [4, 5, 5, 6, 7]
  assert labels[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_table_indexed_by_two_features_counts_both():
  rows = _clients().table_rows((tables.Table('ids', 8, 4, ('user', 'item')),))
  assert [r.tolist() for r in rows['ids']] == [[1, 1, 4, 5], [0, 0, 0, 5, 6, 7]]


def test_drawn_clients_heat_and_sizes_count_their_positives_not_their_draws():
  """A ranking's clients: each positive with a sampled negative, drawn anew each
  round; the heat counts the positives and the user, which no draw changes, and a
  labels' table (next_item's) its labels."""
  users = {'b': 7, 'a': 8}
  positives = {7: np.array([3, 4]), 8: np.array([5])}  # by user

  def draw(client_id, seed):
    mine = positives[users[client_id]]
    return ({'user': np.full(len(mine), users[client_id]), 'positive': mine,
             'negatives': (mine + seed + 1)[:, None] % 10}, np.ones((len(mine), 1)))

  clients = client_arrays.ClientDraws(
      ['b', 'a'], draw, own_seed=lambda c: 0,
      kept=client_arrays.kept_positives(users, positives.get, 'positive'))
  declared = (tables.Table('items', 10, 4, ('positive', 'negatives')),
              tables.Table('users', 9, 4, ('user',)))
  rows = clients.table_rows(declared)
  assert [r.tolist() for r in rows['items']] == [[3, 4], [5]]
  assert [r.tolist() for r in rows['users']] == [[7, 7], [8]]
  assert clients.sizes() == [2, 1]
  labelled = _clients().table_rows((tables.Table('ids', 10, 4, ('item', 'label')),))
  assert [r.tolist() for r in labelled['ids']] == [[4, 5, 1, 2], [5, 6, 7, 3, 4, 5]]


def test_a_clients_dataset_and_batches_hold_its_examples_shuffled_by_its_seed(tff_runtime):
  clients = _clients()
  plan = sliced.Plan(batch_size=2)
  computation = clients.dataset_computation(plan)

  def pairs(batches):
    return [(int(i), float(y)) for features, labels in batches
            for i, y in zip(features['item'], labels[:, 0], strict=True)]

  def from_tf(seed):
    batches = list(computation(*clients.arguments('a', seed)))
    assert [len(labels) for _, labels in batches] == [2, 1]
    return pairs(batches)

  assert sorted(from_tf(3)) == [(5, 3.0), (6, 4.0), (7, 5.0)]  # rows kept together
  assert from_tf(3) == from_tf(3)
  assert len({tuple(from_tf(s)) for s in range(8)}) > 1  # the seed orders them
  numpy = clients.batches('a', plan, 3)  # the project's clients: numpy's draws
  (features, labels), rows = numpy.columns, np.asarray(numpy.rows)
  assert np.diff(numpy.starts).tolist() == [2] and numpy.ends[-1] == 3
  assert sorted((int(features['item'][r]), float(labels[r, 0])) for r in rows) == sorted(
      from_tf(3))
  drawn_by_tf = clients.batches_computation(plan)(*clients.arguments('a', 3))  # from files
  (features, labels), rows = drawn_by_tf.columns, np.asarray(drawn_by_tf.rows)
  assert sorted((int(features['item'][r]), float(labels[r, 0])) for r in rows) == sorted(
      from_tf(3))


def test_a_clients_examples_are_its_rows_and_as_one_dict_split_back_for_the_model():
  features, labels = _clients().examples('b')
  assert features['item'].tolist() == [4, 5] and labels[:, 0].tolist() == [1.0, 2.0]

  class Task(feeds.Feeds):
    client_arrays = _clients()

  examples = Task().client_examples('b')  # MetaUA's form: labels under 'label'
  assert sorted(examples) == ['item', 'label', 'user']
  x, y = Task.model_input(examples)
  assert x['user'].tolist() == [1, 1] and y[:, 0].tolist() == [1.0, 2.0] and 'label' not in x


def test_a_feature_named_as_the_labels_key_is_refused():
  with pytest.raises(ValueError, match="a feature is named 'label'"):
    client_arrays.ClientArrays({'label': np.zeros(2)}, np.zeros(2), {'a': [0, 1]})


@pytest.mark.parametrize('labels, rows, message', [
    (np.zeros(5), {'a': [0]}, r"the features have \{'item': 6\} rows and the labels 5"),
    (np.zeros(6), {}, 'no client has a training example'),
    (np.zeros(6), {'a': [0], 'b': []}, "client 'b': its rows must be a non-empty list"),
    (np.zeros(6), {'a': [0, 6]}, r"client 'a': its rows must be .* in 0\.\.5, got \[0, 6\]"),
])
def test_rows_that_do_not_index_the_examples_are_refused_naming_the_client(labels, rows,
                                                                           message):
  with pytest.raises(ValueError, match=message):
    client_arrays.ClientArrays({'item': np.zeros(6, np.int32)}, labels, rows)
