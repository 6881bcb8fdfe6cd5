"""sliced.Plan: numpy batches shaped as tf.data's pipeline shapes them."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.data import sliced


def _columns(rows):
  return collections.OrderedDict(x=np.arange(rows, dtype=np.int32),
                                 y=np.arange(rows, dtype=np.float32)[:, None] * 10)


@pytest.mark.parametrize('plan, rows', [
    (sliced.Plan(4), 10), (sliced.Plan(4, epochs=3), 10), (sliced.Plan(4, epochs=3, steps=5), 10),
    (sliced.Plan(4, epochs=2, drop_remainder=True), 7), (sliced.Plan(16, epochs=2), 5),
    (sliced.Plan(3, epochs=2, buffer=4), 11), (sliced.Plan(4), 0)])
def test_batches_have_tf_datas_sizes_and_each_epoch_is_a_permutation(plan, rows):
  columns = _columns(rows)
  batches = plan.batches(columns, seed=7)
  dataset = plan.dataset(tf.data.Dataset.from_tensor_slices(columns), seed=7)
  sizes = batches.ends - batches.starts
  assert list(sizes) == [len(b['x']) for b in dataset]
  assert list(batches.starts[1:]) == list(batches.ends[:-1])
  order = batches.columns['x'][batches.rows]
  for epoch in range(len(order) // rows if rows else 0):
    np.testing.assert_array_equal(np.sort(order[epoch * rows:(epoch + 1) * rows]),
                                  np.arange(rows))
  for step in range(len(sizes)):  # the tensors' view of the same batch
    batch = batches.batch(tf.constant(step))
    np.testing.assert_array_equal(batch['x'], order[batches.starts[step]:batches.ends[step]])
    np.testing.assert_array_equal(batch['y'][:, 0], batch['x'] * 10)  # rows kept whole


def test_the_order_is_a_function_of_the_seed():
  plan, columns = sliced.Plan(4, epochs=2), _columns(50)
  first = plan.batches(columns, seed=3).rows
  np.testing.assert_array_equal(plan.batches(columns, seed=3).rows, first)
  assert not np.array_equal(plan.batches(columns, seed=4).rows, first)
  assert not np.array_equal(first[:50], first[50:])  # each epoch reshuffled


def test_a_small_buffer_shuffles_locally_as_tf_datas_does():
  rows, buffer = 200, 5
  order = sliced.Plan(8, buffer=buffer).batches(_columns(rows), seed=1).rows
  np.testing.assert_array_equal(np.sort(order), np.arange(rows))
  # Draw k comes from the first k + buffer rows; a full shuffle breaks this.
  assert (order < np.arange(rows) + buffer).all()
  assert not np.array_equal(order, np.arange(rows))
  full = sliced.Plan(8).batches(_columns(rows), seed=1).rows
  assert not (full < np.arange(rows) + buffer).all()


def test_in_order_is_one_pass_with_a_partial_last_batch():
  batches = sliced.in_order(_columns(10), 4)
  assert list(batches.starts) == [0, 4, 8] and list(batches.ends) == [4, 8, 10]
  np.testing.assert_array_equal(batches.rows, np.arange(10))


def test_batches_of_some_rows_shuffle_them_as_batches_of_those_rows_alone():
  plan, columns, some = sliced.Plan(4, epochs=2), _columns(30), np.array([3, 5, 8, 13, 21, 29])
  alone = plan.batches({k: v[some] for k, v in columns.items()}, seed=5)
  batches = plan.batches(columns, seed=5, rows=some)
  np.testing.assert_array_equal(batches.rows, some[alone.rows])
  np.testing.assert_array_equal(batches.starts, alone.starts)
  np.testing.assert_array_equal(batches.ends, alone.ends)
  np.testing.assert_array_equal(sliced.in_order(columns, 4, some).rows, some)
  np.testing.assert_array_equal(sliced.in_order(columns, 4, list(some)).rows, some)
