"""Clients' examples written once and read by the client work, from real files."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

import tasks
from tasks import loo_ranking
from tff_rec.data import client_files

TYPES = collections.OrderedDict(item=tff.TensorType(np.int32, [None, 2]),
                                label=tff.TensorType(np.float32, [None]))
EXAMPLES = {'a': {'label': np.array([1.0, 0.0], np.float32),
                  'item': np.array([[1, 2], [3, 4]], np.int32)},
            'b': {'label': np.zeros(0, np.float32), 'item': np.zeros((0, 2), np.int32)}}


def _files(folder, examples=None):
  examples = examples or EXAMPLES
  return client_files.ClientFiles(folder, list(examples), examples.get)


def test_each_client_reads_back_its_own_examples_by_index(tmp_path, tff_runtime):
  files = _files(tmp_path)
  files.write()
  read = files.reader(TYPES)  # the types in another order than the files' columns
  for index, examples in enumerate(EXAMPLES.values()):
    got = read(index)
    for name in TYPES:
      np.testing.assert_array_equal(got[name], examples[name])


def test_files_are_reused_only_for_the_very_same_examples(tmp_path):
  _files(tmp_path).write()
  written = (tmp_path / '0.tensors').stat().st_mtime_ns
  _files(tmp_path).write()  # the same examples: nothing rewritten
  assert (tmp_path / '0.tensors').stat().st_mtime_ns == written
  changed = {**EXAMPLES, 'a': {**EXAMPLES['a'], 'label': np.array([0.0, 1.0], np.float32)}}
  with pytest.raises(client_files.ClientFilesError, match='holds the client files of other '
                     'examples'):
    _files(tmp_path, changed).write()


def test_a_folder_that_cannot_be_written_is_named(tmp_path):
  (tmp_path / 'file').write_text('')
  with pytest.raises(client_files.ClientFilesError,
                     match=f'cannot write the client files under {tmp_path}/file/clients'):
    _files(tmp_path / 'file' / 'clients').write()


def test_a_reader_fails_naming_the_folder_where_the_files_differ_or_are_missing(
    tmp_path, tff_runtime):
  files = _files(tmp_path / 'clients')
  files.write()
  read = files.reader(TYPES)
  (tmp_path / 'clients' / client_files.FINGERPRINT).write_text('another dataset')
  with pytest.raises(Exception, match='holds other client files') as raised:
    read(0)
  assert files.unreadable(raised.value) == (
      f'a worker cannot read the client files: {tmp_path}/clients/fingerprint: the folder '
      'holds other client files than the trainer wrote '
      f'({files.fingerprint[:12]}); give every worker the same files')
  # Other errors, and other folders' files, are not this folder's.
  assert files.unreadable(OSError(f'{tmp_path}/clients_old/0.tensors: gone')) is None
  assert files.unreadable(ValueError(f'cannot create {tmp_path}/clients')) is None


@pytest.mark.parametrize('task_name', ['ctr', 'next_item'])
def test_a_task_reads_the_same_batches_from_files(task_name, ml100k_dir, tmp_path,
                                                  tff_runtime):
  module = tasks.module(task_name)
  task = module.Task(module.make_config(data_dir=str(ml100k_dir), batch_size=8))
  on_files = client_files.ReadWhereTrained(task, tmp_path / 'clients')
  assert not (tmp_path / 'clients').exists()  # written once nothing refused the run
  on_files.files.write()
  client = task.train_client_ids[3]
  from_files = list(on_files.dataset_computation(*on_files.client_arguments(client, 7)))
  in_memory = list(task.dataset_computation(*task.client_arguments(client, 7)))
  assert len(from_files) == len(in_memory) > 1
  for got, expected in zip(from_files, in_memory, strict=True):
    for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(expected), strict=True):
      np.testing.assert_array_equal(a, b)


def test_a_task_whose_clients_get_other_examples_every_round_is_refused(ranking_dir,
                                                                         tmp_path):
  task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir), embedding_dim=4))
  with pytest.raises(client_files.ClientFilesError, match='not fixed arrays and a seed'):
    client_files.ReadWhereTrained(task, tmp_path)
