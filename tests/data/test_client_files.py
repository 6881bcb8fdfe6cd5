"""Clients' examples written once and read by the client work, from real files."""

import collections
import functools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

import tasks
from tasks import loo_ranking
from tasks import ranking
from tff_rec.algorithms import api
from tff_rec.data import client_files
from tff_rec.data import sliced

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
  with pytest.raises(client_files.ClientFilesError, match='holds other client files'):
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
  # Asking which models it offers makes none of it (a project's round never reads it).
  assert api.model_kinds(on_files) == api.model_kinds(task)
  assert not {'files', 'dataset_computation'} & set(vars(on_files))
  on_files.files.write()
  client = task.train_client_ids[3]
  from_files = list(on_files.dataset_computation(*on_files.client_arguments(client, 7)))
  in_memory = list(task.dataset_computation(*task.client_arguments(client, 7)))
  assert len(from_files) == len(in_memory) > 1
  for got, expected in zip(from_files, in_memory, strict=True):
    for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(expected), strict=True):
      np.testing.assert_array_equal(a, b)


def _each_batch(batches: sliced.Batches) -> list:
  batches = tf.nest.map_structure(tf.convert_to_tensor, batches)
  return [tf.nest.map_structure(np.asarray, batches.batch(s)) for s in range(batches.steps())]


def _batches_of(batches: sliced.Batches) -> list[np.ndarray]:
  """Every column of every batch."""
  return [a for batch in _each_batch(batches) for a in tf.nest.flatten(batch)]


@pytest.mark.parametrize('task_name', ['ranking', 'loo_ranking'])
def test_a_ranking_reads_its_positives_and_draws_its_negatives_where_trained(
    task_name, user_items_dir, ranking_dir, tmp_path, tff_runtime):
  """A client's files hold its positives alone; the round's seed draws its
  negatives and order in the client work: unseen items, the same for a seed."""
  if task_name == 'ranking':
    task = ranking.Task(ranking.Config(data_dir=str(user_items_dir), batch_size=4))
    arguments = 'table_client_arguments'

    def computation_of(form):
      return form.table_dataset_computation
  else:
    task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir), embedding_dim=4))
    arguments = 'mf_client_arguments'

    def computation_of(form):  # made for a plan: FedMF's extra epochs (none here)
      return form.mf_dataset_computation()
  on_files = client_files.ReadWhereTrained(task, tmp_path / 'clients')
  on_files.files.write()
  client = task.train_client_ids[3]
  user = task._client_index[client]  # pylint: disable=protected-access
  positives = set(task.data.train.of(user))
  sent = getattr(on_files, arguments)(client, 7)
  assert [np.ndim(a) for a in sent] == [0, 0]  # its index and the seed
  read = [_batches_of(computation_of(on_files)(*getattr(on_files, arguments)(client, s)))
          for s in (7, 7, 8)]
  drawn = task.drawn_where_trained()
  in_memory = _batches_of(computation_of(drawn)(*getattr(drawn, arguments)(client, 7)))
  for a, b in zip(read[0], in_memory, strict=True):
    np.testing.assert_array_equal(a, b)
  assert all(np.array_equal(a, b) for a, b in zip(read[0], read[1], strict=True))
  assert not all(np.array_equal(a, b) for a, b in zip(read[0], read[2], strict=True))
  batches = _each_batch(computation_of(on_files)(*sent))
  if task_name == 'ranking':  # every positive once an epoch, negatives never seen
    assert sorted(np.concatenate([b['positive'] for b in batches])) == sorted(
        task.data.train.of(user).tolist() * task.config.local_epochs)
    negatives = np.concatenate([b['negatives'].ravel() for b in batches])
  else:  # each epoch: the positives and num_negatives unseen items each
    items = np.concatenate([b['item'] for b in batches])
    labels = np.concatenate([b['label'] for b in batches])
    assert sorted(items[labels == 1]) == sorted(
        task.data.train.of(user).tolist() * task.config.local_epochs)
    negatives = items[labels == 0]
    assert len(negatives) == task.config.num_negatives * (labels == 1).sum()
  assert len(negatives) and not positives & set(negatives.tolist())


def test_a_task_whose_clients_get_other_examples_every_round_is_refused(tmp_path):
  class Drawn:  # sampled negatives on the trainer, and no form drawing them elsewhere
    NAME = 'drawn'
    train_client_ids = ['a']
    dataset_computation = None

    @staticmethod
    def client_arguments(client_id, seed):
      return np.full(3, seed, np.int32), np.int64(seed)

  with pytest.raises(client_files.ClientFilesError, match='not fixed arrays and a seed'):
    client_files.ReadWhereTrained(Drawn(), tmp_path)


def _client_input(client_id, seed, joined=False):
  """A project round's client input: (a client index, (shuffled training batches
  and one in-order pass over the same examples, as two Batches or `joined` as
  MetaUA's are, a few attributes))."""
  examples = (collections.OrderedDict(item=EXAMPLES[client_id]['item']),
              EXAMPLES[client_id]['label'][:, None])
  plan = sliced.Plan(1, epochs=2)
  batches = [plan.batches(examples, seed), sliced.in_order(examples, 1)]
  return (np.int32(seed), (sliced.joined(batches) if joined else batches,
                           np.ones(3, np.float32)))


@pytest.mark.parametrize('joined', [False, True])
@pytest.mark.parametrize('planned', [False, True])
def test_a_rounds_batches_are_read_back_where_the_client_trains(planned, joined, tmp_path,
                                                                tff_runtime):
  """The in-order pass's order is written with the examples; the shuffled one's
  is sent as numpy's rows, or, given the plan that made it, drawn by TF there;
  the parts of joined batches each as a Batches would be, joined again there."""
  client_input = functools.partial(_client_input, joined=joined)
  parts = _client_input('a', 0)[1][0]
  batches_type = ([sliced.tff_type(b) for b in parts] if not joined else sliced.Joined(
      sliced.tff_type(parts[0]), tff.TensorType(np.int32, [2])))
  data_type = tff.types.to_type([batches_type, tff.TensorType(np.float32, [3])])
  plan = sliced.Plan(1, epochs=2)
  reading = client_files.BatchesWhereTrained(tmp_path, list(EXAMPLES), client_input,
                                             data_type, plan=plan if planned else None)
  reading.files.write()
  for k, client_id in enumerate(EXAMPLES):
    sent = reading.client_input(client_id, 5)
    shuffled, in_order = _client_input(client_id, 5)[1][0]
    handles = sent[1][0].parts() if joined else sent[1][0]
    for handle in handles:
      assert [np.ndim(a) for a in handle.columns] == [0, 0]  # the index and seed, not examples
      assert list(handle.columns) == [k, 5]
    sent_rows = [len(handle.rows) for handle in handles]
    assert sent_rows == [0 if planned else len(shuffled.rows), 0]
    got = reading.read(sent[1])[0]
    got_shuffled, got_in_order = got.parts() if joined else got
    for a, b in zip(tf.nest.flatten(got_in_order), tf.nest.flatten(in_order), strict=True):
      np.testing.assert_array_equal(a, b)
    expected = plan.batches_tf(tf.nest.map_structure(tf.constant, in_order.columns),
                               tf.constant(5, tf.int64)) if planned else shuffled
    for a, b in zip(tf.nest.flatten(got_shuffled), tf.nest.flatten(expected), strict=True):
      np.testing.assert_array_equal(a, b)


def test_batches_of_examples_drawn_every_round_are_refused(tmp_path):
  def drawn(client_id, seed):  # sampled negatives: other examples every round
    return sliced.in_order(collections.OrderedDict(item=np.full(3, seed, np.int32)), 2)

  with pytest.raises(client_files.ClientFilesError, match='change every round'):
    client_files.BatchesWhereTrained(tmp_path, ['a'], drawn, sliced.tff_type(drawn('a', 0)))


def _own_vector(client_id, seed):  # a reconstructed user's input: (its vector, index, seed)
  return (np.full(3, ord(client_id), np.float32), np.int32(ord(client_id)), np.int64(seed))


def test_a_clients_own_arrays_are_read_back_where_it_trains(tmp_path, tff_runtime):
  data_type = tff.types.to_type((tff.TensorType(np.float32, [3]), np.int32, np.int64))
  reading = client_files.ArraysWhereTrained(tmp_path, ['a', 'b'], _own_vector, data_type)
  reading.files.write()
  for k, client_id in enumerate(['a', 'b']):
    sent = reading.client_input(client_id, 5)
    assert sent[0] == k and sent[1:] == _own_vector(client_id, 5)[1:]  # the index, not the vector
    got = reading.read(sent)
    for a, b in zip(got, _own_vector(client_id, 5), strict=True):
      np.testing.assert_array_equal(a, b)


def test_own_arrays_that_change_every_round_are_refused(tmp_path):
  def drawn(client_id, seed):
    return (np.full(3, seed, np.float32), np.int64(seed))

  with pytest.raises(client_files.ClientFilesError, match='change every round'):
    client_files.ArraysWhereTrained(tmp_path, ['a'], drawn, tff.types.to_type(
        (tff.TensorType(np.float32, [3]), np.int64)))
  with pytest.raises(client_files.ClientFilesError, match='not a tuple'):
    client_files.ArraysWhereTrained(tmp_path, ['a'], lambda c, s: {'x': np.zeros(2)},
                                    tff.types.to_type({'x': tff.TensorType(np.float64, [2])}))


@pytest.mark.parametrize('task_name', ['ctr', 'next_item', 'ranking', 'loo_ranking'])
def test_a_tasks_own_batches_are_made_where_the_client_trains(
    task_name, ml100k_dir, user_items_dir, ranking_dir, tmp_path, tff_runtime):
  """The project's rounds on a task's numpy batches (client_batches): a round
  sends the client's index and seed, and the task makes the batches from its
  file where the client trains: numpy's batch sizes, the client's examples
  (a ranking's positives, with unseen negatives), TF's order and draws."""
  if task_name == 'ranking':
    task = ranking.Task(ranking.Config(data_dir=str(user_items_dir), batch_size=4))
  elif task_name == 'loo_ranking':
    task = loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir), embedding_dim=4))
  else:
    module = tasks.module(task_name)
    task = module.Task(module.make_config(data_dir=str(ml100k_dir), batch_size=8))
  on_files = client_files.ReadWhereTrained(task, tmp_path / 'clients')
  client = task.train_client_ids[3]

  def client_input(client_id, seed):  # as SCAFFOLD's: (its index, its batches)
    return np.int32(0), task.client_batches(client_id, seed)

  reading = client_files.BatchesWhereTrained(
      tmp_path / 'unused', task.train_client_ids, client_input,
      tff.types.to_type((np.int32, sliced.tff_type(task.client_batches(client, 0)))),
      task=on_files)
  assert reading.files is None  # the task's files hold the examples
  on_files.files.write()
  sent = reading.client_input(client, 7)
  assert [np.ndim(a) for a in tf.nest.flatten(sent)] == [0, 0, 0]  # a number, index, seed
  expected, made = task.client_batches(client, 7), reading.read(sent)[1]
  for name in ('starts', 'ends'):  # numpy's batch sizes
    np.testing.assert_array_equal(getattr(made, name), getattr(expected, name))

  def examples(batches):  # every column of every row, in order
    return [np.asarray(tf.gather(v, batches.rows)) for v in tf.nest.flatten(batches.columns)]

  got, numpy_drawn = examples(made), examples(expected)
  if task_name == 'ranking':  # (negatives, positive, user, label): the triples' epochs
    assert sorted(got[1]) == sorted(numpy_drawn[1])
    negatives, positives = got[0].ravel(), got[1]
  elif task_name == 'loo_ranking':  # (item, user, label): positives, unseen negatives
    items, labels = got[0], got[2].ravel()
    assert sorted(labels) == sorted(numpy_drawn[2].ravel())
    negatives, positives = items[labels == 0], items[labels == 1]
    assert sorted(positives) == sorted(numpy_drawn[0][numpy_drawn[2].ravel() == 1])
  else:  # the client's examples as they are, in another order
    for a, b in zip(tf.nest.flatten(made.columns), tf.nest.flatten(expected.columns),
                    strict=True):
      np.testing.assert_array_equal(a, b)
    assert len(made.rows) == len(expected.rows) and not np.array_equal(made.rows, expected.rows)
    assert np.bincount(made.rows).max() <= task.batch_plan.epochs  # once an epoch at most
    return
  assert len(negatives) and not set(positives.tolist()) & set(negatives.tolist())
  again = examples(reading.read(reading.client_input(client, 8))[1])
  assert not np.array_equal(again[0], got[0])  # other negatives
