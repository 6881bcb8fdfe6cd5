"""DIN's clicks from sequences: a click and a sampled unseen non-click per step."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tff_rec.data import ctr_file
from tff_rec.data import item_lists
from tff_rec.data import sequence_clicks
from tff_rec.data import tables

SEQUENCES = {7: np.array([3, 1, 4, 5]), 2: np.array([9, 3]), 5: np.array([6])}


def test_each_step_after_the_first_is_a_click_and_a_non_click_with_the_earlier_items():
  rows = sequence_clicks.din_rows(item_lists.Sequences.of(SEQUENCES), history_length=2, seed=0)
  user7 = rows[rows['user'] == 7]
  assert list(user7['label']) == [1, 0, 1, 0, 1, 0]
  assert list(user7['item'][user7['label'] == 1]) == [1, 4, 5]
  assert list(user7['history']) == ['3', '3', '3,1', '3,1', '1,4', '1,4']  # the last 2
  assert list(user7['test']) == [0, 0, 0, 0, 1, 1]  # the last pair
  assert list(rows[rows['user'] == 2]['test']) == [1, 1]  # one step: only a test pair
  assert 5 not in set(rows['user'])  # one item: no step


def test_non_clicks_are_catalogue_items_the_user_never_had():
  sequences = {u: np.random.default_rng(u).choice(30, 12, replace=False) + 100
               for u in range(40)}
  rows = sequence_clicks.din_rows(item_lists.Sequences.of(sequences), seed=3)
  catalogue = set(np.concatenate(list(sequences.values())).tolist())
  for user, items in rows[rows['label'] == 0].groupby('user')['item']:
    assert set(items) <= catalogue - set(sequences[user].tolist())
  again = sequence_clicks.din_rows(item_lists.Sequences.of(sequences), seed=3)
  pd.testing.assert_frame_equal(rows, again)  # the seed fixes the draws
  other = sequence_clicks.din_rows(item_lists.Sequences.of(sequences), seed=4)
  assert (other['item'] != rows['item']).any()


def test_the_rows_read_as_a_ctr_file_with_their_own_test_pairs(tmp_path):
  path = tmp_path / 'clicks.csv'
  sequence_clicks.din_rows(item_lists.Sequences.of(SEQUENCES), seed=0).to_csv(path, index=False)
  examples = ctr_file.read(path, ctr_file.Columns(
      'label', 'user', ('user', 'item'), ('history',), test='test',
      shared_vocabularies=(('item', 'history'),)))
  np.testing.assert_array_equal(examples.is_test, [True, True] + [False] * 4 + [True] * 2)
  np.testing.assert_array_equal(examples.labels, [1, 0] * 4)


def test_a_validation_part_of_clicks_takes_each_users_last_whole_pairs(tmp_path):
  path = tmp_path / 'clicks.csv'
  sequences = {1: np.arange(1, 7), 2: np.arange(1, 4), 3: np.arange(1, 15),  # 5, 2, 13 pairs
               4: np.arange(15, 18)}
  sequence_clicks.din_rows(item_lists.Sequences.of(sequences), seed=0).to_csv(path, index=False)
  examples = ctr_file.read(path, ctr_file.Columns(
      'label', 'user', ('user', 'item'), ('history',), test='test',
      shared_vocabularies=(('item', 'history'),))).with_validation('chronological', 0.1, 0)
  validation = examples.client_rows('validation')
  # 8 training rows: 0.8 rounds up to one pair; 2 rows: the pair stays for training;
  # 24 rows: 2.4 rounds up to two pairs
  assert {k: len(v) for k, v in validation.items()} == {0: 2, 2: 4}
  for rows in validation.values():
    np.testing.assert_array_equal(examples.labels[rows], [1, 0] * (len(rows) // 2))
    train = examples.client_rows('train')[examples.clients[rows[0]]]
    assert train.max() < rows.min()  # the last training rows


@pytest.mark.parametrize('sequences, message', [
    ({1: np.array([4]), 2: np.array([5])}, 'no user has two interactions'),
    ({1: np.array([4, 5]), 2: np.array([5, 4])}, 'user 1 has every item of the catalogue'),
])
def test_sequences_that_give_no_rows_or_no_non_click_are_refused(sequences, message):
  with pytest.raises(tables.DataFormatError, match=message):
    sequence_clicks.din_rows(item_lists.Sequences.of(sequences))


def test_a_history_length_below_one_is_refused():
  with pytest.raises(ValueError, match='history_length must be >= 1, got 0'):
    sequence_clicks.din_rows(item_lists.Sequences.of(SEQUENCES), history_length=0)


@pytest.mark.parametrize('shared', [(), (('item', 'history'),), (('user', 'item', 'history'),)])
def test_examples_made_from_the_numbers_are_those_read_from_the_rows(shared):
  """Ids numbered as a file's strings sort (user 10 before 9, item 100 before 11),
  users of one item or of every length, histories longer and shorter than kept."""
  rng = np.random.default_rng(0)
  sequences = {u: rng.choice(150, rng.integers(1, 14), replace=False)
               for u in rng.choice(120, 25, replace=False).tolist()}
  columns = dataclasses.replace(sequence_clicks.CTR_COLUMNS, shared_vocabularies=shared)
  rows = sequence_clicks.din_rows(item_lists.Sequences.of(sequences), history_length=4, seed=2)
  read = ctr_file.from_frame(rows.astype(dict.fromkeys(columns.features, str)), columns)
  made = sequence_clicks.din_examples(item_lists.Sequences.of(sequences), history_length=4,
                                      seed=2, shared_vocabularies=shared)
  for field in dataclasses.fields(read):
    expected, got = getattr(read, field.name), getattr(made, field.name)
    if isinstance(expected, dict):
      assert list(got) == list(expected), field.name
      for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key, strict=True)
    else:
      np.testing.assert_array_equal(got, expected, err_msg=field.name, strict=True)
