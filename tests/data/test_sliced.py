"""sliced.Plan: numpy batches shaped as tf.data's pipeline shapes them."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.data import sliced


def _columns(rows):
  return collections.OrderedDict(x=np.arange(rows, dtype=np.int32),
                                 y=np.arange(rows, dtype=np.float32)[:, None] * 10)


def _batches(plan, columns, seed, form='numpy'):
  """plan's batches as numpy draws them on the trainer, or as TF draws them (`tf`)."""
  if form == 'numpy':
    return plan.batches(columns, seed=seed)
  return tf.nest.map_structure(np.asarray, plan.batches_tf(
      tf.nest.map_structure(tf.constant, columns), tf.constant(seed, tf.int64)))


FORMS = ('numpy', 'tf')


@pytest.mark.parametrize('form', FORMS)
@pytest.mark.parametrize('plan, rows', [
    (sliced.Plan(4), 10), (sliced.Plan(4, epochs=3), 10), (sliced.Plan(4, epochs=3, steps=5), 10),
    (sliced.Plan(4, epochs=2, drop_remainder=True), 7), (sliced.Plan(16, epochs=2), 5),
    (sliced.Plan(3, epochs=2, buffer=4), 11), (sliced.Plan(4), 0)])
def test_batches_have_tf_datas_sizes_and_each_epoch_is_a_permutation(plan, rows, form):
  columns = _columns(rows)
  batches = _batches(plan, columns, 7, form)
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


@pytest.mark.parametrize('form', FORMS)
def test_the_order_is_a_function_of_the_seed(form):
  plan, columns = sliced.Plan(4, epochs=2), _columns(50)
  first = _batches(plan, columns, 3, form).rows
  np.testing.assert_array_equal(_batches(plan, columns, 3, form).rows, first)
  assert not np.array_equal(_batches(plan, columns, 4, form).rows, first)
  assert not np.array_equal(first[:50], first[50:])  # each epoch reshuffled


@pytest.mark.parametrize('form', FORMS)
def test_a_small_buffer_shuffles_locally_as_tf_datas_does(form):
  rows, buffer = 200, 5
  order = _batches(sliced.Plan(8, buffer=buffer), _columns(rows), 1, form).rows
  np.testing.assert_array_equal(np.sort(order), np.arange(rows))
  # Draw k comes from the first k + buffer rows; a full shuffle breaks this.
  assert (order < np.arange(rows) + buffer).all()
  assert len(set(order - np.arange(rows))) > buffer  # random slots, not one pattern
  full = _batches(sliced.Plan(8), _columns(rows), 1, form).rows
  assert not (full < np.arange(rows) + buffer).all()


def test_in_order_is_one_pass_with_a_partial_last_batch():
  batches = sliced.in_order(_columns(10), 4)
  assert list(batches.starts) == [0, 4, 8] and list(batches.ends) == [4, 8, 10]
  np.testing.assert_array_equal(batches.rows, np.arange(10))


@pytest.mark.parametrize('form', FORMS)
def test_batches_of_some_rows_shuffle_them_as_batches_of_those_rows_alone(form):
  plan, columns, some = sliced.Plan(4, epochs=2), _columns(30), np.array([3, 5, 8, 13, 21, 29])
  alone = _batches(plan, {k: v[some] for k, v in columns.items()}, 5, form)
  if form == 'numpy':
    batches = plan.batches(columns, seed=5, rows=some)
  else:
    batches = tf.nest.map_structure(np.asarray, plan.batches_tf(
        tf.nest.map_structure(tf.constant, columns), tf.constant(5, tf.int64), tf.constant(some)))
  np.testing.assert_array_equal(batches.rows, some[alone.rows])
  np.testing.assert_array_equal(batches.starts, alone.starts)
  np.testing.assert_array_equal(batches.ends, alone.ends)
  np.testing.assert_array_equal(sliced.in_order(columns, 4, some).rows, some)
  np.testing.assert_array_equal(sliced.in_order(columns, 4, list(some)).rows, some)


def test_tfs_order_draws_from_a_stream_of_its_own():
  """A task's own draws from [seed, k] (a ranking's negatives) stay independent of it."""
  rows = _batches(sliced.Plan(4, epochs=2), _columns(50), 7, 'tf').rows
  for k in range(3):
    drawn = np.argsort(tf.random.stateless_uniform([50], tf.constant([7, k], tf.int64)))
    assert not np.array_equal(rows[:50], drawn) and not np.array_equal(rows[50:], drawn)


def test_joined_batches_split_back_into_their_parts_batch_for_batch():
  columns = _columns(20)
  parts = [sliced.Plan(3, epochs=2).batches(columns, 5, np.arange(12)),
           sliced.in_order(columns, 4, np.arange(12)),
           sliced.in_order(columns, 4, np.zeros(0, np.int64)),  # an empty part: no step
           sliced.in_order(columns, 5, np.arange(12, 20))]
  joined = sliced.joined(parts)
  assert list(joined.part_ends) == [8, 11, 11, 13]
  for part, back in zip(parts, joined.parts(), strict=True):  # numpy: each part as it was
    for field in ('starts', 'ends', 'rows'):
      np.testing.assert_array_equal(getattr(back, field), getattr(part, field))
  in_tf = tf.nest.map_structure(tf.constant, joined)
  for part, got, again in zip(parts, in_tf.parts(), sliced.joined(in_tf.parts()).parts(),
                              strict=True):  # and joined again in TF
    assert int(again.steps()) == len(part.starts)
    assert int(got.steps()) == len(part.starts)
    for step in range(len(part.starts)):
      want = part.batch(tf.constant(step))
      np.testing.assert_array_equal(got.batch(tf.constant(step))['x'], want['x'])
      np.testing.assert_array_equal(again.batch(tf.constant(step))['x'], want['x'])


def test_batches_over_other_columns_or_not_in_order_are_not_joined():
  with pytest.raises(ValueError, match='share their columns'):
    sliced.joined([sliced.in_order(_columns(5), 2), sliced.in_order(_columns(5), 2)])
  columns = _columns(5)
  some = sliced.in_order(columns, 2).where(np.array([True, False, True]))
  with pytest.raises(ValueError, match='batch after batch'):
    sliced.joined([some, sliced.in_order(columns, 2)])
