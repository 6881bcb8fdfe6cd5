"""Clients in one array form, and the feeds derived from it."""

import numpy as np
import pytest

from tff_rec.data import client_arrays
from tff_rec.data import sliced
from tff_rec.models import tables


def _clients() -> client_arrays.ClientArrays:
  return client_arrays.ClientArrays({
      'b': ({'user': np.array([1, 1], np.int32), 'item': np.array([4, 5], np.int32)},
            np.array([[1.0], [2.0]], np.float32)),
      'a': ({'user': np.array([0, 0, 0], np.int32), 'item': np.array([5, 6, 7], np.int32)},
            np.array([[3.0], [4.0], [5.0]], np.float32)),
  })


def test_sizes_rows_and_pooled_follow_the_sorted_ids():
  clients = _clients()
  assert clients.ids == ['a', 'b'] and clients.sizes() == [3, 2]
  declared = (tables.Table('users', 2, 4, ('user',)), tables.Table('items', 8, 4, ('item',)))
  rows = clients.table_rows(declared)
  assert [r.tolist() for r in rows['users']] == [[0, 0, 0], [1, 1]]
  assert [r.tolist() for r in rows['items']] == [[5, 6, 7], [4, 5]]
  features, labels = clients.pooled()
  assert features['item'].tolist() == [5, 6, 7, 4, 5]
  assert labels[:, 0].tolist() == [3.0, 4.0, 5.0, 1.0, 2.0]


def test_a_table_indexed_by_two_features_counts_both():
  rows = _clients().table_rows((tables.Table('ids', 8, 4, ('user', 'item')),))
  assert [r.tolist() for r in rows['ids']] == [[0, 0, 0, 5, 6, 7], [1, 1, 4, 5]]


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


@pytest.mark.parametrize('examples, message', [
    ({}, 'no client has a training example'),
    ({'a': ({'item': np.zeros(3, np.int32)}, np.zeros(2, np.float32))},
     "client 'a': its features have {'item': 3} rows and its labels 2"),
    ({'a': ({'item': np.zeros(2, np.int32)}, np.zeros(2, np.float32)),
      'b': ({'item': np.zeros(2, np.int64)}, np.zeros(2, np.float32))},
     "client 'b': features and labels .* where client 'a' has"),
])
def test_clients_that_do_not_share_one_form_are_refused_naming_the_client(examples, message):
  with pytest.raises(ValueError, match=message):
    client_arrays.ClientArrays(examples)
