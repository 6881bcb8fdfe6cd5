"""Per-user item lists: FAIR's train/test pair and single sequence files."""

import gzip

import numpy as np
import pytest

from tests import fixtures
from tff_rec.data import interactions
from tff_rec.data import movielens
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


def test_the_sequence_families_read_a_pair_as_train_then_test_items(tmp_path):
  root = fixtures.write_user_items(tmp_path, {3: [5, 1], 0: [2]}, {0: [7], 3: [4, 9], 8: [6]})
  read = user_items.sequences(root, interactions.Columns())
  np.testing.assert_array_equal(read.user_ids, [0, 3, 8])
  np.testing.assert_array_equal(read.lists.of(0), [2, 7])
  np.testing.assert_array_equal(read.lists.of(1), [5, 1, 4, 9])
  np.testing.assert_array_equal(read.lists.of(2), [6])


def test_a_pair_named_by_either_file_is_the_pair_joined(tmp_path):
  root = fixtures.write_user_items(tmp_path, {3: [5, 1]}, {3: [4, 9]})
  for name in ('test.txt', 'train.txt'):
    read = user_items.sequences(root / name, interactions.Columns())
    np.testing.assert_array_equal(read.lists.of(0), [5, 1, 4, 9])


def test_a_bad_movielens_line_is_named_not_hidden_behind_the_other_layouts(ml100k_dir):
  lines = (ml100k_dir / 'u.data').read_text().splitlines()
  lines[4] = lines[4].replace('\t', '\tabc\t', 1).split('\t', 2)[0] + '\tabc\t3\t1'
  (ml100k_dir / 'u.data').write_text('\n'.join(lines) + '\n')
  with pytest.raises(tables.DataFormatError, match=r"u.data, line 5: item_id='abc'"):
    user_items.load(ml100k_dir)


def test_movielens_ratings_are_ranked_as_positives_in_time_order(ml100k_dir):
  ratings = movielens.load(ml100k_dir).ratings
  data = user_items.load(ml100k_dir, test_fraction=0.3)
  assert data.train.offsets[-1] + data.test.offsets[-1] == len(ratings)
  first = ratings[ratings.user_id == data.user_ids[0]].sort_values('timestamp', kind='stable')
  np.testing.assert_array_equal(np.concatenate([data.train.of(0), data.test.of(0)]),
                                first.item_id)


def test_a_file_stands_for_its_folder(tmp_path):
  pair = fixtures.write_user_items(tmp_path / 'pair', {3: [5, 1], 0: [2]}, {0: [7], 3: [4]})
  sequence = fixtures.write_user_items(tmp_path / 'sequence', {1: [10, 11, 12], 2: [20, 21]})
  (sequence / 'notes.md').write_text('not read')
  for folder, path in ((pair, pair / 'test.txt'), (sequence, sequence / 'sequences.txt')):
    by_folder, by_file = user_items.load(folder), user_items.load(path)
    np.testing.assert_array_equal(by_file.user_ids, by_folder.user_ids)
    np.testing.assert_array_equal(by_file.train.items, by_folder.train.items)
    np.testing.assert_array_equal(by_file.test.items, by_folder.test.items)
  (sequence / 'more.txt').write_text('3 1 2\n')  # a folder of two: only the file is clear
  assert user_items.load(sequence / 'sequences.txt').train.items.tolist() == [10, 11, 20]
  with pytest.raises(tables.DataFormatError, match=r"found \['more.txt', 'sequences.txt'\]"):
    user_items.load(sequence)
  with pytest.raises(tables.DataFormatError, match='absent: .*found no such file or directory'):
    user_items.load(tmp_path / 'absent')


def test_a_user_only_in_test_has_no_train_items(tmp_path):
  root = fixtures.write_user_items(tmp_path, {0: [1]}, {0: [2], 5: [3]})
  data = user_items.load(root)
  np.testing.assert_array_equal(data.user_ids, [0, 5])
  assert data.train.counts.tolist() == [1, 0]


@pytest.mark.parametrize('line, message', [
    ('0 1 x', r'train.txt:2: non-integer field'),
    ('0 1 -3', r'train.txt:2: negative id'),
    ('0 1 +', r'train.txt:2: non-integer field'),  # numpy reads a lone sign as 0
    ('0 -', r'train.txt:2: non-integer field'),
    ('7 1', r'train.txt:2: user 7 appears twice'),
    ('8,1', r'train.txt:2: non-integer field; .* declare its user_column and item_column'),
    ('8 ' + '9' * 23, r'train.txt:2: an id past 2\^63 - 1'),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
  fixtures.write_user_items(tmp_path, {7: [1]}, {7: [2]})
  with (tmp_path / 'train.txt').open('a') as f:
    f.write(line + '\n')
  with pytest.raises(tables.DataFormatError, match=message):
    user_items.load(tmp_path)


def test_missing_or_ambiguous_files(tmp_path):
  with pytest.raises(tables.DataFormatError, match=r'expected train.txt and test.txt.*'
                     'or a MovieLens folder'):
    user_items.load(tmp_path)
  fixtures.write_user_items(tmp_path, {0: [1]}, {0: [2]})
  (tmp_path / 'test.txt').unlink()
  with pytest.raises(tables.DataFormatError, match='missing test.txt'):
    user_items.load(tmp_path)


def test_real_goodreads_100_counts(real_goodreads):
  data = user_items.load(real_goodreads)
  assert (len(data.user_ids), data.num_items) == (99, 359_014)
  assert (data.train.counts.sum(), data.test.counts.sum()) == (482_745, 206_869)


def test_heaviest_keeps_the_users_with_most_items_in_uid_order(tmp_path):
  # Totals (train + test): uid 0 -> 2, uid 3 -> 4, uid 5 -> 4, uid 8 -> 1.
  root = fixtures.write_user_items(tmp_path, {0: [1], 3: [1, 2, 3], 5: [4, 5], 8: [6]},
                                   {0: [2], 3: [4], 5: [6, 7], 8: []})
  data = user_items.heaviest(user_items.load(root), 2)
  np.testing.assert_array_equal(data.user_ids, [3, 5])
  np.testing.assert_array_equal(data.train.of(1), [4, 5])
  np.testing.assert_array_equal(data.test.of(1), [6, 7])
  assert data.num_items == 8  # the catalogue is kept
  # A tie at the cut goes to the lower uid.
  np.testing.assert_array_equal(user_items.heaviest(user_items.load(root), 1).user_ids, [3])
  for count in (0, 5):
    with pytest.raises(ValueError, match=f'cannot keep the {count} heaviest users: there are 4'):
      user_items.heaviest(user_items.load(root), count)
  # Test items count too: uid 1 holds fewer training items but more in all.
  other = fixtures.write_user_items(tmp_path / 'other', {0: [1, 2, 3], 1: [1]},
                                    {0: [], 1: [2, 3, 4]})
  np.testing.assert_array_equal(user_items.heaviest(user_items.load(other), 1).user_ids, [1])


def test_validation_split_holds_out_the_end_of_train_and_drops_test(tmp_path):
  root = fixtures.write_user_items(tmp_path, {0: [1, 2, 3, 4], 1: [5]}, {0: [9], 1: [8]})
  data = user_items.validation_split(user_items.load(root), 0.3)
  np.testing.assert_array_equal(data.train.of(0), [1, 2])  # ceil(1.2) = 2 held
  np.testing.assert_array_equal(data.test.of(0), [3, 4])
  np.testing.assert_array_equal(data.train.of(1), [5])  # one train item: nothing held
  assert data.test.counts.tolist() == [2, 0]
  assert 9 not in data.test.items and 8 not in data.test.items


def test_a_gzipped_sequence_file_with_a_bom_reads_as_the_plain_file(tmp_path):
  path = tmp_path / 'seq.txt.gz'
  with gzip.open(path, 'wt', encoding='utf-8') as f:
    f.write('\ufeff1 5 6 7\n2 6 7 8\n')
  data = user_items.load(path, test_fraction=0.3)
  np.testing.assert_array_equal(data.train.of(0), [5, 6])
  np.testing.assert_array_equal(data.test.of(1), [8])


@pytest.mark.parametrize('chunk', [7, 1 << 24])  # 7: chunks end inside lines and numbers
def test_the_bulk_parse_reads_what_the_line_by_line_reader_reads(tmp_path, monkeypatch, chunk):
  monkeypatch.setattr(user_items, 'CHUNK_CHARACTERS', chunk)
  path = tmp_path / 'sequences.txt'
  rng = np.random.default_rng(0)
  lines = [' '.join(map(str, [u, *rng.integers(0, 10**6, rng.integers(0, 30))]))
           for u in rng.permutation(300)]
  lines[5:5] = ['', '   ', '\t12345 007 +8\t 9  ']  # blank lines; an id written as Python reads it
  path.write_text('\r\n'.join(lines))  # Windows line ends, no final one
  with tables.open_text(path) as f:
    bulk = user_items._parse_in_bulk(f)  # pylint: disable=protected-access
  assert bulk is not None  # read in bulk, not left to the line-by-line reader
  one_by_one = user_items._read_line_by_line(path)  # pylint: disable=protected-access
  np.testing.assert_array_equal(bulk.user_ids, one_by_one.user_ids)
  np.testing.assert_array_equal(bulk.lists.offsets, one_by_one.lists.offsets)
  np.testing.assert_array_equal(bulk.lists.items, one_by_one.lists.items)
  assert bulk.user_ids[5] == 12345 and bulk.lists.of(5).tolist() == [7, 8, 9]


@pytest.mark.parametrize('line', ['5 1+2 x', '5 \u0663'])
def test_what_the_bulk_parse_cannot_vouch_for_is_read_line_by_line(tmp_path, line):
  # numpy reads '1+2 x' as two ids (then stops, warning) and no Arabic digit: each
  # goes to the reader that refuses the line or reads it whole (ids clipped at
  # 2^63 - 1: test_bad_lines_name_file_and_line).
  path = tmp_path / 'sequences.txt'
  path.write_text(f'1 2 3\n{line}\n', encoding='utf-8')
  if 'x' in line:
    with pytest.raises(tables.DataFormatError, match=r'sequences.txt:2: non-integer field'):
      user_items.read_lines(path)
  else:
    assert user_items.read_lines(path).lists.of(1).tolist() == [int(line.split()[1])]


def test_bad_bytes_are_named_after_an_earlier_bad_line_and_after_a_line_by_line_start(
    tmp_path, monkeypatch):
  path = tmp_path / 'sequences.txt'
  path.write_bytes(b'1 2\n3 x\n' + b' ' * 20_000 + b'\n\xff\n')
  with pytest.raises(tables.DataFormatError, match=r'sequences.txt:2: non-integer field'):
    user_items.read_lines(path)  # the line comes first, as read line by line
  monkeypatch.setattr(user_items, 'CHUNK_CHARACTERS', 7)
  path.write_bytes('1\xa02\n'.encode() + b' ' * 20 + b'\n\xff\n')  # NBSP: line by line
  with pytest.raises(tables.DataFormatError, match=r'sequences.txt: not UTF-8 text'):
    user_items.read_lines(path)


def test_a_fraction_outside_0_1_is_refused(tmp_path):
  data = user_items.load(fixtures.write_user_items(tmp_path, {0: [1, 2]}, {0: [3]}))
  for fraction in (0, 1, float('nan')):
    with pytest.raises(ValueError, match='fraction must be in'):
      user_items.validation_split(data, fraction)
