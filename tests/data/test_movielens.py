import hashlib

import numpy as np
import pandas as pd
import pytest

from tests import fixtures
from tff_rec.data import archives
from tff_rec.data import movielens
from tff_rec.data import tables


def test_100k_and_1m_formats_read_to_the_same_tables(ml100k_dir, ml1m_dir):
  a = movielens.load(ml100k_dir)
  b = movielens.load(ml1m_dir)
  assert a.ratings.equals(b.ratings)
  assert len(a.ratings) == len(fixtures.synthetic_ratings(30, 40))
  assert list(a.ratings.columns) == ['user_id', 'item_id', 'rating', 'timestamp']
  assert a.ratings.dtypes.unique().tolist() == [np.int64]
  assert list(a.users.columns) == list(b.users.columns) == [
      'user_id', 'age', 'gender', 'occupation', 'zip']
  assert len(a.items) == len(b.items) == 40


def test_100k_genre_flags_become_genre_names(ml100k_dir):
  items = movielens.load(ml100k_dir).items.set_index('item_id')
  # The fixture sets flag i % 19 for item i.
  assert items.loc[1, 'genres'] == 'Action'
  assert items.loc[19, 'genres'] == 'unknown'
  assert items.loc[5, 'genres'] == 'Comedy'


def test_real_ml100k_has_the_published_counts(real_ml100k):
  data = movielens.load(real_ml100k)
  assert len(data.ratings) == 100_000
  assert data.ratings['user_id'].nunique() == 943 == len(data.users)
  assert len(data.items) == 1682
  assert data.ratings['rating'].between(1, 5).all()


def test_missing_file_names_it_and_the_expected_set(ml100k_dir):
  (ml100k_dir / 'u.user').unlink()
  with pytest.raises(tables.DataFormatError, match=r'missing u\.user.*u\.data, u\.user, u\.item'):
    movielens.load(ml100k_dir)


def test_directory_without_movielens_files(tmp_path):
  with pytest.raises(tables.DataFormatError, match='not a MovieLens directory.*ratings.dat'):
    movielens.load(tmp_path)
  with pytest.raises(tables.DataFormatError, match='absent: no such file or directory'):
    movielens.load(tmp_path / 'absent')
  (tmp_path / 'ratings.csv').write_text('1,2,5\n')
  with pytest.raises(tables.DataFormatError,
                     match=r'ratings.csv: a file, not MovieLens.* u.data or ratings.dat'):
    movielens.load(tmp_path / 'ratings.csv')


def test_the_ratings_file_stands_for_its_folder(ml100k_dir, ml1m_dir):
  for folder, ratings in ((ml100k_dir, 'u.data'), (ml1m_dir, 'ratings.dat')):
    pd.testing.assert_frame_equal(movielens.load(folder / ratings).ratings,
                                  movielens.load(folder).ratings)


def _replace_line(path, index, text):
  lines = path.read_text().splitlines()
  lines[index] = text
  path.write_text('\n'.join(lines) + '\n')


def test_non_integer_field_names_file_line_and_format(ml100k_dir):
  _replace_line(ml100k_dir / 'u.data', 6, '1\tabc\t3\t881250949')
  with pytest.raises(tables.DataFormatError,
                     match=r"u\.data, line 7: item_id='abc' is not an integer; "
                     r'expected user id \\t item id'):
    movielens.load(ml100k_dir)


def test_short_line_in_1m_file(ml1m_dir):
  _replace_line(ml1m_dir / 'ratings.dat', 3, '1::2::3')
  with pytest.raises(tables.DataFormatError,
                     match=r"ratings\.dat, line 4: timestamp='' is not an integer; "
                     'expected UserID::MovieID::Rating::Timestamp'):
    movielens.load(ml1m_dir)


def test_extra_fields_are_reported(ml1m_dir):
  _replace_line(ml1m_dir / 'ratings.dat', 3, '1::2::3::4::5')
  with pytest.raises(tables.DataFormatError, match=r'ratings\.dat: .*line 4.*expected UserID'):
    movielens.load(ml1m_dir)


def test_rating_of_unknown_item_is_reported(ml100k_dir):
  with open(ml100k_dir / 'u.data', 'a') as f:
    f.write('1\t999\t5\t881250949\n')
  with pytest.raises(tables.DataFormatError, match='item_id 999 is not in the items file'):
    movielens.load(ml100k_dir)


def _local_archive(tmp_path, ml100k_dir, sha256=None):
  path = fixtures.zip_dir(ml100k_dir, tmp_path / 'ml-100k.zip')
  digest = hashlib.sha256(path.read_bytes()).hexdigest()
  return archives.Archive(url=path.as_uri(), sha256=sha256 or digest, folder='ml-100k')


def test_download_extracts_verified_archive_and_reuses_cache(tmp_path, ml100k_dir):
  archive = _local_archive(tmp_path, ml100k_dir)
  cache = tmp_path / 'cache'
  extracted = movielens.download('ml-100k', cache, archive=archive)
  assert extracted == cache / 'ml-100k'
  assert movielens.load(extracted).ratings.equals(movielens.load(ml100k_dir).ratings)
  (tmp_path / 'ml-100k.zip').unlink()  # a second call must not fetch again
  assert movielens.download('ml-100k', cache, archive=archive) == extracted


def test_an_empty_folder_in_the_cache_is_not_taken_for_a_download(tmp_path, ml100k_dir):
  cache = tmp_path / 'cache'
  (cache / 'ml-100k').mkdir(parents=True)  # left by hand, or by an older tool
  extracted = movielens.download('ml-100k', cache, archive=_local_archive(tmp_path, ml100k_dir))
  assert movielens.load(extracted).ratings.equals(movielens.load(ml100k_dir).ratings)


def test_download_with_bad_checksum_leaves_nothing(tmp_path, ml100k_dir):
  archive = _local_archive(tmp_path, ml100k_dir, sha256='0' * 64)
  cache = tmp_path / 'cache'
  with pytest.raises(archives.ChecksumError, match='does not match the published 0000'):
    movielens.download('ml-100k', cache, archive=archive)
  assert list(cache.iterdir()) == []


def test_download_knows_the_official_archives():
  assert set(movielens.ARCHIVES) == {'ml-100k', 'ml-1m'}
  assert all(len(a.sha256) == 64 for a in movielens.ARCHIVES.values())
  with pytest.raises(ValueError, match="unknown MovieLens archive 'ml-20m'"):
    movielens.download('ml-20m', '/nonexistent')
