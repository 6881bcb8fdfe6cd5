"""Clients' examples written once and read by the client work, from real files."""

import collections
import json

import numpy as np
import pytest
import tensorflow_federated as tff

from tasks import ctr
from tasks import loo_ranking
from tff_rec.data import client_files

TYPES = collections.OrderedDict(item=tff.TensorType(np.int32, [None, 2]),
                                label=tff.TensorType(np.float32, [None]))
EXAMPLES = {'a': {'label': np.array([1.0, 0.0], np.float32),
                  'item': np.array([[1, 2], [3, 4]], np.int32)},
            'b': {'label': np.zeros(0, np.float32), 'item': np.zeros((0, 2), np.int32)}}


def test_each_client_reads_back_its_own_examples_by_index(tmp_path, tff_runtime):
  client_files.write(tmp_path, list(EXAMPLES), EXAMPLES.get, 'toy')
  read = client_files.reader(tmp_path, TYPES)  # the types in another order than the files
  for index, examples in enumerate(EXAMPLES.values()):
    got = read(index)
    for name in TYPES:
      np.testing.assert_array_equal(got[name], examples[name])


def test_files_of_another_source_are_refused_and_the_same_reused(tmp_path):
  first = client_files.write(tmp_path, list(EXAMPLES), EXAMPLES.get, 'toy')
  assert client_files.write(tmp_path, list(EXAMPLES), lambda c: 1 / 0, 'toy') == first
  with pytest.raises(client_files.ClientFilesError, match=r'another dataset or task \(toy\)'):
    client_files.write(tmp_path, list(EXAMPLES), EXAMPLES.get, 'other')


def test_a_reader_fails_naming_the_folder_where_the_files_differ_or_are_missing(
    tmp_path, tff_runtime):
  client_files.write(tmp_path, list(EXAMPLES), EXAMPLES.get, 'toy')
  read = client_files.reader(tmp_path, TYPES)
  (tmp_path / client_files.FINGERPRINT).write_text('another dataset')  # what a worker sees
  with pytest.raises(Exception, match=f'{tmp_path} holds other client files'):
    read(0)
  with pytest.raises(client_files.ClientFilesError, match='holds no client files'):
    client_files.reader(tmp_path / 'nowhere', TYPES)


def test_the_ctr_task_reads_the_same_batches_from_files(ml100k_dir, tmp_path, tff_runtime):
  task = ctr.Task(ctr.make_config(data_dir=str(ml100k_dir), model='lr', batch_size=8))
  on_files = client_files.ReadWhereTrained(task, tmp_path / 'clients')
  client = task.train_client_ids[3]
  from_files = list(on_files.dataset_computation(*on_files.client_arguments(client, 7)))
  in_memory = list(task.dataset_computation(*task.client_arguments(client, 7)))
  assert len(from_files) == len(in_memory) > 1
  for (x, y), (x0, y0) in zip(from_files, in_memory, strict=True):
    np.testing.assert_array_equal(y, y0)
    for name in x0:
      np.testing.assert_array_equal(x[name], x0[name])
  manifest = json.loads((tmp_path / 'clients' / client_files.MANIFEST).read_text())
  assert manifest['clients'] == task.train_client_ids


def test_a_task_that_draws_examples_every_round_is_refused(ranking_dir, tmp_path):
  task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir), embedding_dim=4))
  with pytest.raises(client_files.ClientFilesError, match='other examples every round'):
    client_files.ReadWhereTrained(task, tmp_path)
  assert not tmp_path.joinpath(client_files.MANIFEST).exists()

