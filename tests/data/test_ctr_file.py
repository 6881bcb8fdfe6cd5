"""CTR files with declared columns: ids, lists, clients, splits, and errors that point."""

import dataclasses
import gzip

import numpy as np
import pytest

from tff_rec.data import ctr_file
from tff_rec.data import tables

DIN_STYLE = ctr_file.Columns(label='label', client='user', features=('user', 'item'),
                             list_features=('history',))


def _write(tmp_path, text, name='clicks.csv'):
  path = tmp_path / name
  path.write_text(text)
  return path


def test_rows_become_ids_with_padding_grouped_by_client_in_file_order(tmp_path):
  path = _write(tmp_path, 'label,user,item,history\n'
                '1,bob,b,\n'
                '0,amy,a,"b,c"\n'
                '1,bob,c,b\n'
                '0,amy,c,"a,b,c"\n')
  examples = ctr_file.read(path, DIN_STYLE, test_fraction=0.5)
  assert list(examples.user_ids) == ['amy', 'bob']
  np.testing.assert_array_equal(examples.clients, [0, 0, 1, 1])
  np.testing.assert_array_equal(examples.labels, [0, 0, 1, 1])
  np.testing.assert_array_equal(examples.features['item'], [1, 3, 2, 3])  # a b c -> 1 2 3
  np.testing.assert_array_equal(examples.features['history'],
                                [[2, 3, 0], [1, 2, 3], [0, 0, 0], [2, 0, 0]])
  assert examples.vocab_sizes == {'user': 3, 'item': 4, 'history': 4}
  np.testing.assert_array_equal(examples.is_test, [False, True, False, True])  # last per user


def test_a_shared_vocabulary_gives_one_value_one_id_and_a_test_column_marks_the_test(
    tmp_path):
  path = _write(tmp_path, 'label,user,item,history,test\n'  # aa: in a history only
                '1,bob,c,a,0\n'
                '0,bob,d,"aa,c",1\n'
                '1,amy,a,,1\n')
  columns = ctr_file.Columns('label', 'user', ('user', 'item'), ('history',), test='test',
                             shared_vocabularies=(('item', 'history'),))
  examples = ctr_file.read(path, columns, split='random', test_fraction=0.5)  # not used
  np.testing.assert_array_equal(examples.features['item'], [1, 3, 4])  # a aa c d
  np.testing.assert_array_equal(examples.features['history'], [[0, 0], [1, 0], [2, 3]])
  assert examples.vocab_sizes['item'] == examples.vocab_sizes['history'] == 5
  np.testing.assert_array_equal(examples.is_test, [True, False, True])


def test_many_interleaved_rows_keep_each_clients_file_order(tmp_path):
  """40 rows, two clients taking turns (numpy's unstable sort reorders this many)."""
  path = _write(tmp_path, 'label,user,item,history\n' + ''.join(
      f'{k % 2},{"ab"[k % 2]},i{k:02d},\n' for k in range(40)))
  examples = ctr_file.read(path, DIN_STYLE)
  np.testing.assert_array_equal(examples.features['item'], [*range(1, 41, 2), *range(2, 41, 2)])


def test_list_items_are_read_without_the_spaces_around_them(tmp_path):
  path = _write(tmp_path, 'label,user,item,history\n1,a,x,"y, z"\n0,a,y,"y,z"\n')
  history = ctr_file.read(path, DIN_STYLE).features['history']
  np.testing.assert_array_equal(history[0], history[1])


def test_a_tsv_is_read_by_its_extension(tmp_path):
  path = _write(tmp_path, 'click\tuser\tsite\n1\tu1\ts\n0\tu1\t\n', 'clicks.tsv')
  examples = ctr_file.read(path, ctr_file.Columns('click', 'user', ('site',)))
  np.testing.assert_array_equal(examples.features['site'], [1, 0])  # empty: padding
  zipped = tmp_path / 'clicks.tsv.gz'
  with gzip.open(zipped, 'wt', encoding='utf-8') as f:
    f.write('\ufeff' + path.read_text())  # and a byte-order mark
  np.testing.assert_array_equal(
      ctr_file.read(zipped, ctr_file.Columns('click', 'user', ('site',))).features['site'],
      [1, 0])


def test_a_trailing_delimiter_does_not_shift_the_columns(tmp_path):
  path = _write(tmp_path, 'label,user,item\n1,u4,a,\n0,u4,b,\n1,u5,a,\n')
  examples = ctr_file.read(path, ctr_file.Columns('label', 'user', ('item',)))
  np.testing.assert_array_equal(examples.labels, [1, 0, 1])
  assert list(examples.user_ids) == ['u4', 'u5']


@pytest.mark.parametrize('text, columns, message', [
    ('label,user,item\n1,a,x\n', ctr_file.Columns('label', 'user', ('itme',)),
     "no feature column 'itme'; its columns: label, user, item"),
    ('clk,user,item\n1,a,x\n', ctr_file.Columns('label', 'user', ('item',)),
     "no label column 'label'; its columns: clk, user, item"),
    ('label,user,item\n1,a,x\nyes,b,y\n', ctr_file.Columns('label', 'user', ('item',)),
     "clicks.csv, line 3: label column label='yes' is not a number"),
    ('label,user,item,history\n1,a,x,"y,z"\n0,b,x,"y,,z"\n', DIN_STYLE,
     "clicks.csv, line 3: list feature history='y,,z' has an empty item"),
    # rows are grouped by client before lists are read: the line is still the file's
    ('label,user,item,history\n1,b,x,"y,z"\n0,a,x,"y,,z"\n1,b,x,y\n', DIN_STYLE,
     "clicks.csv, line 3: list feature history='y,,z' has an empty item"),
    ('label,user,item\n', ctr_file.Columns('label', 'user', ('item',)),
     ': no rows'),
    ('label,user,item,test\n1,a,x,0\n0,b,y,\n', ctr_file.Columns('label', 'user', ('item',),
                                                               test='test'),
     "clicks.csv, line 3: test column test='' is not a number"),
])
def test_bad_files_name_the_file_line_and_column(tmp_path, text, columns, message):
  with pytest.raises(tables.DataFormatError, match=message):
    ctr_file.read(_write(tmp_path, text), columns)


def test_declaring_a_column_twice_is_refused():
  with pytest.raises(ValueError, match=r"columns \['item'\] are declared more than once"):
    ctr_file.Columns('label', 'user', ('item', 'item'))


def test_a_shared_vocabulary_must_group_declared_features_once():
  with pytest.raises(ValueError, match=r"\['history'\] are not feature columns"):
    ctr_file.Columns('label', 'user', ('item',), shared_vocabularies=(('item', 'history'),))
  with pytest.raises(ValueError, match='each in one group at most'):
    ctr_file.Columns('label', 'user', ('item', 'other'),
                     shared_vocabularies=(('item', 'other'), ('item',)))


def test_the_real_criteo_sample_reads_with_its_categorical_columns(tmp_path):
  from tests import conftest  # pylint: disable=g-import-not-at-top
  path = conftest.SHARED_DATA / 'ctr-samples' / 'criteo_sample.txt'
  if not path.is_file():
    pytest.skip('the Criteo sample is not in ../shared/data')
  columns = ctr_file.Columns('label', 'C1', tuple(f'C{k}' for k in range(2, 27)))
  examples = ctr_file.read(path, columns, split='random', test_fraction=0.2)
  assert len(examples.labels) == 200 and 0 < examples.labels.mean() < 1
  assert examples.is_test.sum() == 40
  assert (examples.features['C20'] == 0).any()  # empty categories are padding


HEADER = 'label,user,item,history'
ROWS = ['1,bob,b,', '0,amy,a,"b,c"', '1,bob,c,b', '0,amy,c,"a,b,c"']


def _same_examples(a, b):
  for name in ('labels', 'clients', 'is_test', 'user_ids'):
    np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
  for name in a.features:
    np.testing.assert_array_equal(a.features[name], b.features[name])
  assert a.vocab_sizes == b.vocab_sizes


def test_a_file_without_a_header_is_read_by_the_names_given_for_its_fields(tmp_path):
  with_header = ctr_file.read(_write(tmp_path, '\n'.join([HEADER, *ROWS]) + '\n'), DIN_STYLE,
                              test_fraction=0.5)
  headerless = ctr_file.read(_write(tmp_path, '\n'.join(ROWS) + '\n', 'bare.csv'), DIN_STYLE,
                             names=HEADER.split(','), test_fraction=0.5)
  _same_examples(with_header, headerless)
  with pytest.raises(tables.DataFormatError, match="bare.csv, line 1: label column label="
                     "'bob' is not a number"):  # names in another order: labels are users
    ctr_file.read(tmp_path / 'bare.csv', DIN_STYLE, names=['user', 'label', 'item', 'history'])
  with pytest.raises(tables.DataFormatError, match="no label column 'label'; its columns: "
                     'click, user, item, history'):
    ctr_file.read(tmp_path / 'bare.csv', DIN_STYLE, names=['click', 'user', 'item', 'history'])


def test_names_given_for_a_file_with_a_header_are_refused_naming_its_first_line(tmp_path):
  path = _write(tmp_path, '\n'.join(['click,uid,iid,hist', *ROWS]) + '\n')
  with pytest.raises(tables.DataFormatError, match=r"clicks.csv, line 1: label column "
                     r"label='click' is not a number. If that line is a header, leave columns"):
    ctr_file.read(path, DIN_STYLE, names=HEADER.split(','))


@pytest.mark.parametrize('names', [(), tuple(HEADER.split(','))])
@pytest.mark.parametrize('bad, fields', [('0,amy,a', 3), ('0,amy,a,b,c', 5), ('0,amy', 2)])
def test_a_line_whose_fields_disagree_with_the_header_or_names_is_refused_naming_it(
    tmp_path, names, bad, fields):
  """Before, pandas padded a short line with empty fields (padding ids, silently)."""
  rows = [*ROWS[:2], '', bad, *ROWS[2:]]  # a blank line before it: the line number counts it
  text = '\n'.join(([] if names else [HEADER]) + rows) + '\n'
  line = 4 if names else 5
  given = 'columns \\(label,user,item,history\\)' if names else 'its header'
  with pytest.raises(tables.DataFormatError,
                     match=f'clicks.csv, line {line}: {fields} fields, but {given} names 4'):
    ctr_file.read(_write(tmp_path, text), DIN_STYLE, names=names)


@pytest.mark.parametrize('end', ['\r\n', '\r', '\n'])
@pytest.mark.parametrize('quoted', [False, True])
def test_fields_are_counted_across_chunks_and_in_quotes(tmp_path, monkeypatch, quoted, end):
  """Counting reads the file in chunks (numpy) or, where fields are quoted, with csv."""
  monkeypatch.setattr(tables, 'CHUNK_BYTES', 7)  # lines cut at every chunk
  history = '"a,b"' if quoted else 'a'
  rows = [f'{k % 2},u{k % 3},i{k},{history}' for k in range(30)]
  rows[23] = '1,u2,i23'  # no history field
  with pytest.raises(tables.DataFormatError, match='clicks.csv, line 25: 3 fields, but its '
                     'header names 4'):
    ctr_file.read(_write(tmp_path, end.join([HEADER, *rows]) + end), DIN_STYLE)
  del rows[23]
  examples = ctr_file.read(_write(tmp_path, end.join([HEADER, *rows])), DIN_STYLE)
  assert len(examples.labels) == 29


@pytest.mark.parametrize('text', [
    '\n' + HEADER + '\n' + '\n'.join(ROWS) + '\n',  # a blank line first
    HEADER + '\n' + ROWS[0] + '\n   \n' + '\n'.join(ROWS[1:]),  # spaces alone: blank
    HEADER + '\r' + '\r'.join(ROWS) + '\r',  # old Mac line ends
    HEADER + ',\n' + '\n'.join(ROWS) + '\n',  # a trailing delimiter on the header alone
])
def test_what_pandas_reads_as_these_rows_is_read_alike(tmp_path, text):
  expected = ctr_file.read(_write(tmp_path, '\n'.join([HEADER, *ROWS]) + '\n', 'plain.csv'),
                           DIN_STYLE, test_fraction=0.5)
  for quoted in (True, False):  # csv's counting, and numpy's
    written = text if quoted else text.replace('"b,c"', 'b').replace('"a,b,c"', 'a')
    read = ctr_file.read(_write(tmp_path, written), DIN_STYLE, test_fraction=0.5)
    np.testing.assert_array_equal(read.labels, expected.labels)
    assert list(read.user_ids) == list(expected.user_ids)
    if quoted:
      _same_examples(read, expected)


def test_a_quoted_history_longer_than_csvs_field_limit_is_read(tmp_path):
  history = ','.join(f'i{k}' for k in range(30_000))  # 188 KB in one field
  examples = ctr_file.read(_write(tmp_path, f'{HEADER}\n1,amy,a,"{history}"\n0,amy,b,\n'),
                           DIN_STYLE)
  assert examples.features['history'].shape == (2, 30_000)


def test_a_separator_of_two_characters_never_forms_across_two_fields(tmp_path):
  """Fields a|, b and c joined by || would split as a, |b, c (ids 1, 3, 2)."""
  path = _write(tmp_path, 'label\tuser\titem\thistory\n'
                '1\tamy\ta\ta|\n0\tamy\tb\tb\n1\tamy\tc\tc\n', 'lists.tsv')
  examples = ctr_file.read(path, dataclasses.replace(DIN_STYLE, list_separator='||'))
  np.testing.assert_array_equal(examples.features['history'], [[1], [2], [3]])
