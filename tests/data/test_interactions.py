"""Interactions files (CSV/TSV with declared columns) read as time-ordered
sequences, and the ranking and next-item tasks fed by them as by MovieLens."""

import gzip

import numpy as np
import pytest

from tasks import loo_ranking
from tasks import next_item
from tasks import ranking
from tff_rec.data import interactions
from tff_rec.data import tables
from tff_rec.data import user_items

U_DATA = dict(user_column='user', item_column='item', time_column='time',
              columns=('user', 'item', 'rating', 'time'))


def _read(path, **columns):
  return dict(interactions.read(path, interactions.Columns(**columns)).per_user())


def test_a_csv_export_with_string_ids_and_dates_becomes_time_ordered_sequences(tmp_path):
  path = tmp_path / 'export.csv'
  path.write_text('reviewer,asin,when,stars\n'
                  'A9,B7,2014-03-02,5\n'
                  'A1,B3,2014-01-05,4\n'
                  'A9,B3,2013-12-31,2\n'
                  'A1,B7,2014-01-05,1\n'  # a tie with the row above: file order
                  'A1,B8,2013-06-01 10:00,5\n')
  sequences = _read(path, user_column='reviewer', item_column='asin', time_column='when')
  # ids numbered from 1 by first appearance: A9 1, A1 2; B7 1, B3 2, B8 3
  assert list(sequences) == [1, 2]
  np.testing.assert_array_equal(sequences[1], [2, 1])
  np.testing.assert_array_equal(sequences[2], [3, 2, 1])
  kept = _read(path, user_column='reviewer', item_column='asin', time_column='when',
               rating_column='stars', min_rating=4)
  np.testing.assert_array_equal(kept[2], [3, 2])
  assert list(kept) == [1, 2] and list(kept[1]) == [1]


def test_dates_are_read_in_the_one_order_that_reads_every_row(tmp_path):
  """Day-first where only it reads every row (13/01), month-first where only it does
  (01/13), whatever the first row (04/12, either way)."""
  for first, later in (('04/12/1997', '27/11/1997'), ('12/04/1997', '11/27/1997')):
    path = tmp_path / 'export.csv'
    path.write_text(f'user,item,time\n1,5,{first}\n1,6,{later}\n1,7,01/01/1998\n')
    sequences = _read(path, user_column='user', item_column='item', time_column='time')
    np.testing.assert_array_equal(sequences[1], [6, 5, 7])  # 27 Nov, 4 Dec, 1 Jan


def test_a_headerless_tab_file_takes_names_and_keeps_integer_ids(tmp_path):
  path = tmp_path / 'u.data'
  path.write_text('7\t30\t3\t200\n5\t10\t4\t100\n7\t20\t5\t100\n')
  sequences = _read(path, **U_DATA)
  assert sorted(sequences) == [5, 7]
  np.testing.assert_array_equal(sequences[7], [20, 30])
  unordered = _read(path, user_column='user', item_column='item', columns=U_DATA['columns'])
  np.testing.assert_array_equal(unordered[7], [30, 20])  # no time: file order


def test_a_tab_file_whose_fields_hold_commas_splits_on_its_tabs(tmp_path):
  path = tmp_path / 'export.tsv'  # the first line decides, and holds both
  path.write_text('1\t5\tToy Story, The\n1\t6\tHeat\n')
  np.testing.assert_array_equal(_read(path, user_column='user', item_column='item',
                                      columns=('user', 'item', 'title'))[1], [5, 6])


def test_ids_with_spaces_around_them_are_the_same_integer_ids(tmp_path):
  path = tmp_path / 'export.csv'
  path.write_text('user,item\n 3, 12\n3,7\n')
  sequences = _read(path, user_column='user', item_column='item')
  assert list(sequences) == [3]
  np.testing.assert_array_equal(sequences[3], [12, 7])


def test_a_pairs_file_is_read_once_its_columns_are_named_and_refused_before(tmp_path):
  path = tmp_path / 'pairs.txt'
  path.write_text('1 10\n2 11\n1 12\n')
  with pytest.raises(tables.DataFormatError, match='user 1 appears twice; for a file of '
                     'one interaction a line'):
    user_items.read_lines(path)
  sequences = _read(path, columns=('user', 'item'), user_column='user', item_column='item')
  np.testing.assert_array_equal(sequences[1], [10, 12])


@pytest.mark.parametrize('text, columns, message', [
    ('u,i\n1,2\n', dict(user_column='user', item_column='i'),
     "no column 'user' (user_column); its columns: u, i"),
    ('u,i,t\n1,2,yesterday\n1,3,soon\n', dict(user_column='u', item_column='i', time_column='t'),
     "t (time_column) of data row 1 is 'yesterday', not a number or a date"),
    ('u,i,r\n1,2,5\n1,3,x\n', dict(user_column='u', item_column='i', rating_column='r',
                                   min_rating=4), "r (rating_column) of data row 2 is 'x'"),
    ('1\t2\t3\n', dict(user_column='u', item_column='i', columns=('u', 'i')),
     '3 fields per line, but columns names 2: u,i'),
    ('u,i,r\n1,2,1\n', dict(user_column='u', item_column='i', rating_column='r', min_rating=4),
     'no interaction is rated 4 or more (r)'),
])
def test_bad_files_are_named_with_what_was_found(tmp_path, text, columns, message):
  path = tmp_path / 'export.csv'
  path.write_text(text)
  with pytest.raises(tables.DataFormatError, match='export.csv') as error:
    _read(path, **columns)
  assert message in str(error.value)


def test_a_folder_must_hold_one_interactions_file(tmp_path):
  for name in ('a.csv', 'b.tsv', 'notes.md'):
    (tmp_path / name).write_text('u,i\n1,2\n')
  with pytest.raises(tables.DataFormatError, match='found a.csv, b.tsv; name the file'):
    interactions.file_of(tmp_path)
  (tmp_path / 'b.tsv').unlink()
  assert interactions.file_of(tmp_path) == tmp_path / 'a.csv'
  with pytest.raises(tables.DataFormatError, match='no such file or directory'):
    interactions.file_of(tmp_path / 'missing')


@pytest.mark.parametrize('columns, message', [
    (dict(user_column='u'), 'needs both user_column and item_column'),
    (dict(user_column='u', item_column='i', min_rating=3), 'min_rating and rating_column'),
    (dict(user_column='u', item_column='u'), 'must differ'),
])
def test_incomplete_declarations_are_refused(columns, message):
  with pytest.raises(ValueError, match=message):
    interactions.Columns(**columns)


def test_u_data_read_as_interactions_feeds_each_family_as_movielens_does(ranking_dir):
  """Leave-one-out ranking and next-item examples from u.data through the
  interactions reader equal those of the MovieLens reader."""
  u_data = str(ranking_dir / 'u.data')
  splits = [loo_ranking.load(loo_ranking.make_config(data_dir=d, **c))
            for d, c in ((str(ranking_dir), {}), (u_data, U_DATA))]
  for field in ('user_ids', 'item_ids', 'negatives'):
    a, b = getattr(splits[0], field), getattr(splits[1], field)
    for part in (a if isinstance(a, dict) else [None]):
      np.testing.assert_array_equal(a[part] if part else a, b[part] if part else b)
  np.testing.assert_array_equal(splits[0].train.items, splits[1].train.items)
  tasks = [next_item.Task(next_item.make_config(
      data_dir=d, **c)) for d, c in ((str(ranking_dir), {}), (u_data, U_DATA))]
  assert tasks[0].train_client_ids == tasks[1].train_client_ids
  for client in tasks[0].train_client_ids[:5]:
    for column, values in tasks[0].client_examples(client).items():
      np.testing.assert_array_equal(values, tasks[1].client_examples(client)[column])


def test_an_interactions_file_splits_for_item_list_ranking_as_its_sequence_file(tmp_path):
  sequences = {3: [5, 6, 7, 8], 9: [1, 2, 3]}
  (tmp_path / 'seq').mkdir()
  (tmp_path / 'seq' / 'seq.txt').write_text(
      ''.join(f'{u} {" ".join(map(str, items))}\n' for u, items in sequences.items()))
  rows = [(u, item, 100 - t) for u, items in sequences.items()
          for t, item in enumerate(reversed(items))]  # in file order the newest first
  (tmp_path / 'export.csv').write_text(
      'user,item,ts\n' + ''.join(f'{u},{i},{t}\n' for u, i, t in rows))
  columns = interactions.Columns(user_column='user', item_column='item', time_column='ts')
  a = user_items.load(tmp_path / 'seq', test_fraction=0.3)
  b = user_items.load(tmp_path / 'export.csv', test_fraction=0.3, columns=columns)
  np.testing.assert_array_equal(a.user_ids, b.user_ids)
  for part in ('train', 'test'):
    np.testing.assert_array_equal(getattr(a, part).items, getattr(b, part).items)
  config = ranking.make_config(data_dir=str(tmp_path / 'export.csv'),
                               user_column='user', item_column='item',
                               time_column='ts')
  assert config.interactions == columns


def test_long_and_zero_padded_ids_stay_distinct(tmp_path):
  # through floats, 20-digit ids all became one item; '007' and '7' one user
  path = tmp_path / 'ids.csv'
  path.write_text('user,item\n007,50000000000000000001\n7,50000000000000000002\n'
                  '007,50000000000000000002\n')
  sequences = _read(path, user_column='user', item_column='item')
  assert list(sequences) == [1, 2]  # numbered by first appearance: '007' 1, '7' 2
  np.testing.assert_array_equal(sequences[1], [1, 2])
  np.testing.assert_array_equal(sequences[2], [2])


def test_a_trailing_delimiter_does_not_shift_the_columns(tmp_path):
  path = tmp_path / 'export.csv'
  path.write_text('user,item\n4,258,\n4,259,\n5,258,\n')
  sequences = _read(path, user_column='user', item_column='item')
  np.testing.assert_array_equal(sequences[4], [258, 259])
  np.testing.assert_array_equal(sequences[5], [258])


@pytest.mark.parametrize('compress', [False, True])
def test_gzip_bom_and_double_colon_files_read_as_plain_ones(tmp_path, compress):
  text = '\ufeff1::10::5::300\n1::11::3::100\n2::10::4::200\n'  # MovieLens 1M's ratings.dat
  path = tmp_path / ('ratings.dat.gz' if compress else 'ratings.dat')
  if compress:
    with gzip.open(path, 'wt', encoding='utf-8') as f:
      f.write(text)
  else:
    path.write_text(text, encoding='utf-8')
  sequences = _read(path, **U_DATA)
  np.testing.assert_array_equal(sequences[1], [11, 10])
  np.testing.assert_array_equal(sequences[2], [10])


@pytest.mark.parametrize('text, columns, message', [
    ('user,item\n1,2\n,3\n', {}, "user (user_column) of data row 2 is '', not an id"),
    ('user,item\n1,2\n2, \n', {}, "item (item_column) of data row 2 is ' ', not an id"),
    ('user,item,time\n1,2,100\n1,3,\n', dict(time_column='time'),
     "time (time_column) of data row 2 is '', not a number (as the first row's time is)"),
    ('user,item,time\n1,2,02/01/2020\n1,3,03/01/2020\n', dict(time_column='time'),
     "time (time_column) reads month-first and day-first alike (data row 1: '02/01/2020'); "
     'write its dates as ISO 8601'),
    ('user,item,time\n1,2,02/01/2020\n1,3,13/01/2020\n1,4,01/13/2020\n',
     dict(time_column='time'), "data row 2 is '13/01/2020', not a number or a date in one "
     'format (month-first or day-first)'),  # neither reads every row
    ('user,item,rating\n1,2,5\n', dict(columns=('user', 'item', 'rating')),
     'its first line is a header (user,item,rating); with a header, leave columns out'),
])
def test_empty_ids_ambiguous_dates_and_a_named_header_are_refused(tmp_path, text, columns,
                                                                  message):
  path = tmp_path / 'export.csv'
  path.write_text(text)
  with pytest.raises(tables.DataFormatError) as error:
    _read(path, user_column='user', item_column='item', **columns)
  assert message in str(error.value)


def test_a_binary_file_is_named_as_not_text(tmp_path):
  path = tmp_path / 'export.csv'
  path.write_bytes('user,item\n1,caf\xe9\n'.encode('latin-1'))
  with pytest.raises(tables.DataFormatError, match='export.csv: not UTF-8 text'):
    _read(path, user_column='user', item_column='item')
