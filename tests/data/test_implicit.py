"""Implicit-feedback batching: per-epoch batches, many users' batches side by side, and
the draws in TF (sampled negatives, epoch orders)."""

import collections

import numpy as np
import tensorflow as tf

from tff_rec.data import implicit
from tff_rec.data import sliced


def _rows(lengths, offset):
  epoch = np.repeat(np.arange(len(lengths)), lengths).astype(np.int32)
  return epoch, np.arange(len(epoch), dtype=np.int32) + offset


def test_each_epoch_is_batched_on_its_own():
  epoch, item = _rows([5, 5], 0)
  dataset = implicit.epoch_batches(collections.OrderedDict(epoch=epoch, item=item), 2, 2)
  batches = [b['item'].tolist() for b in dataset.as_dataset().as_numpy_iterator()]
  assert batches == [[0, 1], [2, 3], [4], [5, 6], [7, 8], [9]]
  first = implicit.epoch_batches(collections.OrderedDict(epoch=epoch, item=item), 2, 2)
  later = first.where(first.first_rows('epoch') >= 1)
  assert [b['item'].tolist() for b in later.as_dataset().as_numpy_iterator()] == batches[3:]


def test_a_client_without_rows_has_no_batches():
  empty = np.zeros([0], np.int32)
  batches = implicit.epoch_batches(collections.OrderedDict(epoch=empty, item=empty), 2, 3)
  assert int(batches.steps()) == 0


def test_padded_batches_hold_each_users_epoch_batches_in_order():
  users = [_rows([5, 5], 0), _rows([2, 2], 100), _rows([7], 200)]
  (items,), mask = implicit.padded_batches(users, batch_size=3)
  assert items.shape == mask.shape == (3, 4, 3)  # user 0: [3, 2] + [3, 2] rows
  for n, (epoch, item) in enumerate(users):
    expected = implicit.epoch_batches(collections.OrderedDict(item=item),
                                      int(epoch.max()) + 1, 3)
    expected = [b['item'].tolist() for b in expected.as_dataset().as_numpy_iterator()]
    got = [items[n, s][mask[n, s] > 0].tolist() for s in range(4)]
    assert got[:len(expected)] == expected
    assert not any(got[len(expected):])  # padding steps are empty


def test_a_small_and_a_large_catalogue_draw_the_same_unseen_items(monkeypatch):
  """The flags of a small catalogue and the binary search of a large one reject the
  same draws: the same items from the same seed, none seen (a run's draws do not
  depend on which one its catalogue's size picks)."""
  rng = np.random.default_rng(3)
  seen = rng.choice(500, 60, replace=False)
  small = implicit.unseen_items(seen, 4_000, 500, np.random.default_rng(1))
  monkeypatch.setattr(implicit, 'LOOKUP_ITEMS', 0)
  large = implicit.unseen_items(seen, 4_000, 500, np.random.default_rng(1))
  np.testing.assert_array_equal(small, large)
  assert not np.isin(small, seen).any() and len(np.unique(small)) == 500 - 60


def test_tf_draws_are_uniform_over_the_unseen_items_and_fixed_by_the_seed():
  seen = tf.constant([3, 7, 7, 0, 9, 11])  # repeats, unsorted, the last item
  seed = tf.constant(5, tf.int64)
  draws = implicit.unseen_items_tf(seen, 44_000, 12, implicit.seeds(seed, 1)[0]).numpy()
  counts = np.bincount(draws, minlength=12)
  unseen = [1, 2, 4, 5, 6, 8, 10]
  assert counts[[0, 3, 7, 9, 11]].sum() == 0 and (counts[unseen] > 0).all()
  # Each unseen item 1/7 of the draws: chi-square, 6 degrees of freedom, p = 0.001 at 22.5.
  expected = len(draws) / len(unseen)
  assert ((counts[unseen] - expected) ** 2 / expected).sum() < 22.5, counts
  again = implicit.unseen_items_tf(seen, 44_000, 12, implicit.seeds(seed, 1)[0]).numpy()
  other = implicit.unseen_items_tf(seen, 44_000, 12, implicit.seeds(seed + 1, 1)[0]).numpy()
  np.testing.assert_array_equal(draws, again)
  assert (draws != other).mean() > 0.5


def test_tf_permutations_are_independent_permutations():
  first, second = implicit.seeds(tf.constant(1, tf.int64), 2)
  orders = sliced.permutations_tf(50, 6, first).numpy()
  assert (np.sort(orders, axis=1) == np.arange(6)).all()
  assert len({tuple(o) for o in orders}) > 40  # 720 orders: few repeats in 50
  assert not np.array_equal(orders, sliced.permutations_tf(50, 6, second).numpy())
