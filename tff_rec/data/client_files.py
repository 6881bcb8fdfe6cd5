"""Clients' examples in files that whoever runs the client work reads itself.

With a task's examples written here once, a round sends each client its index
and seed instead of its examples: the TFF worker that trains the client reads
`<folder>/<index>.tensors` inside the client's dataset computation. TFF 0.87's
own means for data that materializes on the workers is a data descriptor (a
computation that turns handles into datasets, run on the clients); its C++
worker has no data backend for `tff.framework.Data` URIs, so the handle here
is the client's index and the computation reads the file with TF ops.

A file holds one client's columns, each `tf.io.serialize_tensor`ed, stacked
into one serialized string vector. `fingerprint` (a hash of every file) is
checked by every read, so a worker that sees another dataset under the same
path fails, naming it.
"""

import collections
import hashlib
import json
import pathlib
import re
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

MANIFEST = 'manifest.json'
FINGERPRINT = 'fingerprint'


class ClientFilesError(ValueError):
  """Client files that are missing, stale or of another dataset."""


def write(folder: str | pathlib.Path, client_ids: Sequence[str],
          examples_of: Callable[[str], dict[str, np.ndarray]], source: str) -> str:
  """Writes every client's examples (`examples_of(client_id)`) under `folder`,
  unless the same `source`'s (what they are of: the task and its settings) are
  there already; their fingerprint."""
  root = pathlib.Path(folder)
  manifest = root / MANIFEST
  if manifest.exists():
    written = json.loads(manifest.read_text())
    if written['source'] == source and written['clients'] == list(client_ids):
      return written['fingerprint']
    raise ClientFilesError(f'{root} holds the client files of another dataset or task '
                           f'({written["source"]}); give an empty folder')
  root.mkdir(parents=True, exist_ok=True)
  digest, columns = hashlib.sha256(), None
  for index, client_id in enumerate(client_ids):
    examples = examples_of(client_id)
    columns = columns or list(examples)
    content = tf.io.serialize_tensor(tf.stack(
        [tf.io.serialize_tensor(tf.constant(a)) for a in examples.values()])).numpy()
    digest.update(content)
    (root / f'{index}.tensors').write_bytes(content)
  fingerprint = digest.hexdigest()
  (root / FINGERPRINT).write_text(fingerprint)  # what each read checks, where it runs
  partial = manifest.with_suffix('.partial')  # the manifest last: written means complete
  partial.write_text(json.dumps({'source': source, 'clients': list(client_ids),
                                 'columns': columns, 'fingerprint': fingerprint}))
  partial.rename(manifest)
  return fingerprint


def reader(folder: str | pathlib.Path, types: collections.OrderedDict) -> tff.Computation:
  """client index (int32) -> that client's examples (`types`: name -> tff.TensorType),
  read from `folder` where the computation runs, after checking that the files
  there are the ones written here."""
  root = pathlib.Path(folder).resolve()
  if not (root / MANIFEST).exists():
    raise ClientFilesError(f'{root} holds no client files ({MANIFEST} is missing)')
  written = json.loads((root / MANIFEST).read_text())
  missing = sorted(set(types) - set(written['columns']))
  if missing:
    raise ClientFilesError(f'{root}: the client files lack columns {missing}; give an empty '
                           'folder to write them anew')
  position = {name: k for k, name in enumerate(written['columns'])}
  fingerprint = written['fingerprint']

  @tff.tensorflow.computation(np.int32)
  def read(index):
    same = tf.debugging.assert_equal(
        tf.io.read_file(f'{root}/{FINGERPRINT}'), fingerprint,
        message=f'{root} holds other client files than the trainer wrote (fingerprint '
                f'{fingerprint[:12]}); give every worker the same folder')
    with tf.control_dependencies([same]):
      path = tf.strings.join([str(root), '/', tf.strings.as_string(index), '.tensors'])
      columns = tf.io.parse_tensor(tf.io.read_file(path), tf.string)
    return collections.OrderedDict(
        (name, tf.ensure_shape(tf.io.parse_tensor(columns[position[name]], t.dtype), t.shape))
        for name, t in types.items())

  return read


def unreadable(error: Exception, folder: str | pathlib.Path) -> str | None:
  """What a worker said when it could not read the client files under `folder`
  (it raised `error`, e.g. gRPC's from a remote worker); None for another error."""
  found = re.search(rf'{re.escape(str(pathlib.Path(folder).resolve()))}[^\]\n"\\]*',
                    str(error))
  return None if found is None else f'a worker cannot read the client files: {found[0]}'


class ReadWhereTrained:
  """`task` with its clients' examples written under `folder` and read by the
  client work: its dataset computation takes (client index, seed), and a
  round's client arguments are those two numbers. The task's own dataset
  computation makes the batches, so they are the same batches as in memory.

  Only for a task whose client arguments are (its fixed examples, seed): one
  that draws a client's examples per round (sampled negatives) cannot have them
  written once, and is refused."""

  def __init__(self, task, folder: str | pathlib.Path):
    self._task = task
    ids = list(task.train_client_ids)
    examples = getattr(task, 'client_examples', None)
    if examples is None or not _fixed(task, ids[0]):
      raise ClientFilesError(
          f'the {task.NAME} task gives its clients other examples every round, or none as '
          'one table; its examples cannot be written once for the workers to read')
    write(folder, ids, examples, f'{task.NAME} {getattr(task, "config", "")!r}')
    examples_type = task.dataset_computation.type_signature.parameter[0]
    read = reader(folder, collections.OrderedDict(tff.structure.iter_elements(examples_type)))
    seed_type = task.dataset_computation.type_signature.parameter[1]

    @tff.tensorflow.computation(np.int32, seed_type)
    def dataset_computation(index, seed):
      return task.dataset_computation(read(index), seed)

    self.dataset_computation = dataset_computation
    self._index = {client_id: k for k, client_id in enumerate(ids)}

  def client_arguments(self, client_id: str, seed: int):
    return np.int32(self._index[client_id]), np.int64(seed)

  def __getattr__(self, name):  # everything else is the task's
    return getattr(self._task, name)


def _fixed(task, client_id: str) -> bool:
  """Whether the client's arguments are (its examples, seed) whatever the seed."""
  examples = task.client_examples(client_id)
  for seed in (1, 2):
    arguments = task.client_arguments(client_id, seed)
    if len(arguments) != 2 or not isinstance(arguments[0], dict) or any(
        not np.array_equal(arguments[0][k], examples.get(k)) for k in arguments[0]):
      return False
  return True
