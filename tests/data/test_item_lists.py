"""Users' item lists in one CSR: taking, aligning and ordering users."""

import numpy as np

from tff_rec.data import item_lists

LISTS = {9: [4, 5], 2: [], 7: [1, 2, 3], 4: [6]}


def _as_lists(lists: item_lists.ItemLists) -> list[list[int]]:
  return [lists.of(k).tolist() for k in range(len(lists.counts))]


def test_take_gathers_the_users_lists_in_the_order_asked():
  lists = item_lists.Sequences.of(LISTS).lists
  assert _as_lists(lists.take([2, 0, 2, 1, 3])) == [[1, 2, 3], [4, 5], [1, 2, 3], [], [6]]
  assert _as_lists(lists.take([])) == []
  assert lists.rows.tolist() == [0, 0, 2, 2, 2, 3]
  assert lists.positions.tolist() == [0, 1, 0, 1, 2, 0]


def test_sequences_in_id_order_and_aligned_to_more_ids():
  sequences = item_lists.Sequences.of(LISTS)
  assert [(u, s.tolist()) for u, s in sequences.per_user()] == [
      (u, l) for u, l in LISTS.items()]  # the file's order
  ordered = sequences.in_id_order()
  assert ordered.user_ids.tolist() == [2, 4, 7, 9]
  assert [s.tolist() for _, s in ordered.per_user()] == [[], [6], [1, 2, 3], [4, 5]]
  assert ordered.in_id_order() is ordered
  aligned = sequences.aligned(np.array([1, 2, 4, 5, 7, 9, 11]))
  assert _as_lists(aligned) == [[], [], [6], [], [1, 2, 3], [4, 5], []]


def test_interactions_in_time_order_ties_as_given_and_none_at_all():
  read = item_lists.Sequences.in_time_order(np.array([7, 2, 7, 7]), np.array([1, 2, 3, 4]),
                                            np.array([5, 0, 1, 1]))
  np.testing.assert_array_equal(read.user_ids, [2, 7])
  np.testing.assert_array_equal(read.lists.of(1), [3, 4, 1])
  empty = item_lists.Sequences.in_time_order(*(np.zeros(0, np.int64),) * 3)
  assert len(empty) == 0 and empty.lists.offsets.tolist() == [0]
