"""Per-user item lists: FAIR's train/test pair and single sequence files."""

import numpy as np
import pytest

from tests import fixtures
from tff_rec.data import tables
from tff_rec.data import user_items


def test_reads_a_train_test_pair_by_user_id(tmp_path):
  root = fixtures.write_user_items(tmp_path, {3: [5, 1], 0: [2]}, {0: [7], 3: [4, 9]})
  data = user_items.load(root)
  np.testing.assert_array_equal(data.user_ids, [0, 3])
  np.testing.assert_array_equal(data.train.of(1), [5, 1])  # file order kept
  np.testing.assert_array_equal(data.test.of(0), [7])
  assert data.num_items == 10
  np.testing.assert_array_equal(data.train.counts, [1, 2])


def test_splits_a_sequence_file_chronologically(tmp_path):
  root = fixtures.write_user_items(tmp_path, {1: [10, 11, 12, 13, 14], 2: [20, 21]})
  data = user_items.load(root, test_fraction=0.3)
  np.testing.assert_array_equal(data.train.of(0), [10, 11, 12])  # ceil(1.5) = 2 held
  np.testing.assert_array_equal(data.test.of(0), [13, 14])
  np.testing.assert_array_equal(data.train.of(1), [20])  # at least one stays in train
  np.testing.assert_array_equal(data.test.of(1), [21])


def test_a_user_only_in_test_has_no_train_items(tmp_path):
  root = fixtures.write_user_items(tmp_path, {0: [1]}, {0: [2], 5: [3]})
  data = user_items.load(root)
  np.testing.assert_array_equal(data.user_ids, [0, 5])
  assert data.train.counts.tolist() == [1, 0]


@pytest.mark.parametrize('line, message', [
    ('0 1 x', r'train.txt:2: non-integer field'),
    ('0 1 -3', r'train.txt:2: negative id'),
    ('7 1', r'train.txt:2: user 7 appears twice'),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
  fixtures.write_user_items(tmp_path, {7: [1]}, {7: [2]})
  with (tmp_path / 'train.txt').open('a') as f:
    f.write(line + '\n')
  with pytest.raises(tables.DataFormatError, match=message):
    user_items.load(tmp_path)


def test_missing_or_ambiguous_files(tmp_path):
  with pytest.raises(tables.DataFormatError, match=r'expected train.txt and test.txt'):
    user_items.load(tmp_path)
  fixtures.write_user_items(tmp_path, {0: [1]}, {0: [2]})
  (tmp_path / 'test.txt').unlink()
  with pytest.raises(tables.DataFormatError, match='missing test.txt'):
    user_items.load(tmp_path)


def test_real_goodreads_100_counts(real_goodreads):
  data = user_items.load(real_goodreads)
  assert (len(data.user_ids), data.num_items) == (99, 359_014)
  assert (data.train.counts.sum(), data.test.counts.sum()) == (482_745, 206_869)
