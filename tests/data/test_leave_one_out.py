"""Leave-one-out splits: held-out items by time, fixed unseen negatives, skipped users."""

import numpy as np
import pandas as pd
import pytest

from tff_rec.data import item_lists
from tff_rec.data import leave_one_out


def _ratings(rows):
  return pd.DataFrame(rows, columns=['user_id', 'item_id', 'timestamp'])


def test_latest_item_is_test_the_one_before_validation_rest_train_in_time_order():
  # User 7 rated items 30, 10, 20, 40, 50 at times 5, 1, 3, 3, 9 (20 before 40: file order).
  ratings = _ratings([(7, 30, 5), (7, 10, 1), (7, 20, 3), (7, 40, 3), (7, 50, 9),
                      (8, 10, 1), (8, 20, 2), (8, 60, 3)])
  split = leave_one_out.from_ratings(ratings, min_interactions=3, num_negatives=1, seed=0)
  ids = split.item_ids
  assert list(ids) == [10, 20, 30, 40, 50, 60]
  assert list(split.user_ids) == [7, 8]
  assert list(ids[split.train.of(0)]) == [10, 20, 40]
  assert ids[split.held_out['validation'][0]] == 30 and ids[split.held_out['test'][0]] == 50
  assert list(ids[split.train.of(1)]) == [10]
  assert ids[split.held_out['test'][1]] == 60


def test_negatives_are_distinct_never_interacted_and_fixed_by_the_seed():
  rng = np.random.default_rng(1)
  rows = [(u, int(i), t) for u in range(20) for t, i in enumerate(rng.choice(200, 30, False))]
  split = leave_one_out.from_ratings(_ratings(rows), num_negatives=99, seed=3)
  for part in ('validation', 'test'):
    negatives = split.negatives[part]
    assert negatives.shape == (20, 99)
    for user in range(20):
      history = np.concatenate([split.train.of(user), [split.held_out['validation'][user],
                                                       split.held_out['test'][user]]])
      assert len(set(negatives[user])) == 99
      assert not np.isin(negatives[user], history).any()
  again = leave_one_out.from_ratings(_ratings(rows), num_negatives=99, seed=3)
  np.testing.assert_array_equal(again.negatives['test'], split.negatives['test'])
  other = leave_one_out.from_ratings(_ratings(rows), num_negatives=99, seed=4)
  assert not np.array_equal(other.negatives['test'], split.negatives['test'])


def test_candidates_read_back_one_stream_drawn_in_user_order_from_any_block(monkeypatch):
  # What the split once stored: each part's negatives drawn user after user from
  # one stream, validation's then test's. Read back from blocks of 3 users.
  monkeypatch.setattr(leave_one_out, 'NEGATIVES_BLOCK', 3)
  rng = np.random.default_rng(2)
  rows = [(u, int(i), t) for u in range(11) for t, i in enumerate(rng.choice(300, 25, False))]
  split = leave_one_out.from_ratings(_ratings(rows), num_negatives=7, seed=5)
  stream, want = np.random.default_rng(5), {}
  for part in ('validation', 'test'):
    want[part] = np.stack([leave_one_out._unseen(  # pylint: disable=protected-access
        np.concatenate([split.train.of(u), [split.held_out['validation'][u],
                                            split.held_out['test'][u]]]),
        split.num_items, 7, stream) for u in range(11)])
  for part, candidates in split.negatives.items():
    assert candidates.shape == (11, 7) and len(candidates.states) == 4
    np.testing.assert_array_equal(np.asarray(candidates), want[part])
    for start, stop in ((0, 11), (2, 7), (4, 5), (9, 11), (10, 20)):
      np.testing.assert_array_equal(candidates[start:stop], want[part][start:stop])
    np.testing.assert_array_equal(candidates[5], want[part][5])
    np.testing.assert_array_equal(candidates[-1], want[part][10])
  with pytest.raises(IndexError):
    split.negatives['test'][11]  # pylint: disable=expression-not-assigned


def test_users_below_min_interactions_are_skipped_and_counted():
  rows = ([(1, i, i) for i in range(25)] + [(2, i, i) for i in range(19)] + [(3, 0, 0)]
          + [(4, 100 + i, i) for i in range(20)])
  split = leave_one_out.from_ratings(_ratings(rows), min_interactions=20, num_negatives=1)
  assert list(split.user_ids) == [1, 4] and split.skipped_users == 2
  assert split.num_items == 45 and len(split.train.of(0)) == 23


def test_a_repeated_item_counts_once_at_its_latest_position():
  sequences = item_lists.Sequences.of({5: [1, 2, 3, 2, 4], 6: range(5, 9)})
  split = leave_one_out.from_sequences(sequences, min_interactions=3, num_negatives=1, seed=0)
  ids = split.item_ids
  assert list(ids[split.train.of(0)]) == [1, 3]
  assert ids[split.held_out['validation'][0]] == 2 and ids[split.held_out['test'][0]] == 4


@pytest.mark.parametrize('block', [1, 7, 1 << 20])  # 1: a block a user, or one past it
def test_repeats_are_dropped_block_by_block_as_user_by_user(monkeypatch, block):
  monkeypatch.setattr(leave_one_out, 'DISTINCT_BLOCK', block)
  rng = np.random.default_rng(3)
  lists = {u: rng.integers(0, 12, rng.integers(0, 25)) for u in range(60)}
  distinct = leave_one_out._latest_occurrences(  # pylint: disable=protected-access
      item_lists.Sequences.of(lists).lists)
  for user, items in lists.items():
    _, last_from_end = np.unique(items[::-1], return_index=True)
    np.testing.assert_array_equal(distinct.of(user),
                                  items[np.sort(len(items) - 1 - last_from_end)])


@pytest.mark.parametrize('options, message', [
    (dict(min_interactions=2), 'min_interactions must be >= 3'),
    (dict(min_interactions=50), 'no user has 50 or more distinct items'),
    (dict(num_negatives=30), 'fewer than 30 items they never interacted with'),
    # each user leaves 5 of the 25 items unseen: 6 is one too many
    (dict(num_negatives=6), 'fewer than 6 items .* a catalogue of at least 26 items'),
])
def test_bad_settings_are_refused_with_the_fix(options, message):
  with pytest.raises(ValueError, match=message):
    leave_one_out.from_sequences(
        item_lists.Sequences.of({1: range(20), 2: range(5, 25)}), **options)


def test_as_many_negatives_as_a_user_left_unseen_is_accepted():
  split = leave_one_out.from_sequences(
      item_lists.Sequences.of({1: range(20), 2: range(5, 25)}), num_negatives=5)
  assert sorted(split.negatives['test'][0]) == [20, 21, 22, 23, 24]


@pytest.mark.parametrize('num_items,seen,count', [
    (50, 0, 5), (300, 40, 99), (300, 201, 99), (40_000, 500, 12_000)])  # the last: tail shuffle
def test_negatives_are_the_draw_of_a_choice_over_the_unseen_items_array(num_items, seen, count):
  # The split picks ranks among the unseen items without building their array; every
  # committed ranking record was drawn by rng.choice over that array, item for item.
  rng = np.random.default_rng(num_items + seen)
  for _ in range(20):
    items = rng.permutation(num_items)[:seen]
    mask = np.ones(num_items, bool)
    mask[items] = False
    seed = int(rng.integers(1 << 30))
    expected = np.random.default_rng(seed).choice(np.flatnonzero(mask), count, replace=False)
    got = leave_one_out._unseen(items, num_items, count, np.random.default_rng(seed))  # pylint: disable=protected-access
    np.testing.assert_array_equal(got, expected)
