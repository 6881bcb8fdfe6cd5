"""Clients' examples in files that whoever runs the client work reads itself.

With a task's examples written here once, a round sends each client its index
and seed instead of its examples: the TFF worker that trains the client reads
`<folder>/<index>.tensors` inside the client's dataset computation. TFF 0.87's
own means for data that materializes on the workers is a data descriptor (a
computation that turns handles into datasets, run on the clients); its C++
worker binary links no data backend that would resolve `tff.framework.Data`
URIs, so the handle here is the client's index and the computation reads the
file with TF ops.

A file holds one client's columns, each `tf.io.serialize_tensor`ed, stacked
into one serialized string vector. The fingerprint is a hash of the examples
(of every file's bytes), computed from the examples in memory at every start:
files are reused only when it matches theirs, and every read on a worker
checks the fingerprint file written with them, so a worker whose folder holds
another dataset's files stops the run, naming the folder. (A worker's partial
copy that kept the right fingerprint file is not detected until a file it lacks
is read.)
"""

import collections
import hashlib
import json
import pathlib
import re
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

MANIFEST = 'manifest.json'
FINGERPRINT = 'fingerprint'


class ClientFilesError(ValueError):
  """Client files that cannot be written, or are of other examples."""


class UnreadableClientFiles(RuntimeError):
  """A worker could not read the client files (missing, or another dataset's)."""


def _serialized(examples: dict[str, np.ndarray]) -> bytes:
  return tf.io.serialize_tensor(tf.stack(
      [tf.io.serialize_tensor(tf.constant(a)) for a in examples.values()])).numpy()


class ClientFiles:
  """The files of `client_ids`' examples (`examples_of(client_id)`) under
  `folder`: their fingerprint and column order at once, the files themselves
  on `write()`. The path is made absolute here: every worker must read the
  files at that path."""

  def __init__(self, folder: str | pathlib.Path, client_ids: Sequence[str],
               examples_of: Callable[[str], dict[str, np.ndarray]]):
    self.root = pathlib.Path(folder).absolute()
    self.client_ids, self._examples_of = list(client_ids), examples_of
    digest, self.columns = hashlib.sha256(), None
    for client_id in self.client_ids:
      examples = examples_of(client_id)
      self.columns = self.columns or list(examples)
      digest.update(_serialized(examples))
    self.fingerprint = digest.hexdigest()

  def write(self) -> None:
    """Writes the files, or checks that the folder holds these very ones."""
    manifest = self.root / MANIFEST
    if manifest.exists():
      written = json.loads(manifest.read_text())
      if written['fingerprint'] != self.fingerprint:
        raise ClientFilesError(
            f'{self.root} holds the client files of other examples (fingerprint '
            f'{written["fingerprint"][:12]}, these are {self.fingerprint[:12]}); give an '
            'empty folder')
      return
    try:
      self.root.mkdir(parents=True, exist_ok=True)
      for index, client_id in enumerate(self.client_ids):
        (self.root / f'{index}.tensors').write_bytes(
            _serialized(self._examples_of(client_id)))
      (self.root / FINGERPRINT).write_text(self.fingerprint)
      partial = manifest.with_suffix('.partial')  # the manifest last: written means complete
      partial.write_text(json.dumps({'clients': self.client_ids, 'columns': self.columns,
                                     'fingerprint': self.fingerprint}))
      partial.rename(manifest)
    except OSError as e:
      raise ClientFilesError(f'cannot write the client files under {self.root}: {e}') from None

  def reader(self, types: collections.OrderedDict) -> tff.Computation:
    """client index (int32) -> that client's examples (`types`: name -> tff.TensorType),
    read from the folder where the computation runs, once it checked the
    fingerprint file there."""
    missing = sorted(set(types) - set(self.columns))
    if missing:
      raise ClientFilesError(f'the client files lack columns {missing}')
    position = {name: k for k, name in enumerate(self.columns)}
    root, fingerprint = str(self.root), self.fingerprint

    @tff.tensorflow.computation(np.int32)
    def read(index):
      same = tf.debugging.assert_equal(
          tf.io.read_file(f'{root}/{FINGERPRINT}'), fingerprint,
          message=f'{root}/{FINGERPRINT}: the folder holds other client files than the '
                  f'trainer wrote ({fingerprint[:12]}); give every worker the same files')
      with tf.control_dependencies([same]):
        path = tf.strings.join([root, '/', tf.strings.as_string(index), '.tensors'])
        columns = tf.io.parse_tensor(tf.io.read_file(path), tf.string)
      return collections.OrderedDict(
          (name, tf.ensure_shape(tf.io.parse_tensor(columns[position[name]], t.dtype),
                                 t.shape))
          for name, t in types.items())

    return read

  def unreadable(self, error: Exception) -> str | None:
    """What a worker said when it could not read these files (it raised `error`,
    e.g. gRPC's from a remote worker, naming a file of the folder); None for
    any other error."""
    found = re.search(rf'{re.escape(str(self.root))}/(\d+\.tensors|{FINGERPRINT})'
                      r'[^\]\n"\\]*', str(error))
    return None if found is None else f'a worker cannot read the client files: {found[0]}'


class ReadWhereTrained:
  """`task` with its clients' examples in files (`ClientFiles`, written by
  `files.write()`) and read by the client work: its dataset computation takes
  (client index, seed), and a round's client arguments are those two numbers.
  The task's own dataset computation makes the batches from what it reads, so
  they are the same batches as in memory.

  Only for a task whose client arguments are fixed arrays (or tables of them)
  and a seed, as the CTR and next-item tasks' are: one that draws a client's
  examples per round (sampled negatives), or whose Keras algorithms read
  another form, is refused."""

  def __init__(self, task, folder: str | pathlib.Path):
    self._task = task
    ids = list(task.train_client_ids)
    if hasattr(task, 'keras_dataset_computation') or not _fixed(task, ids[0]):
      raise ClientFilesError(
          f"the {task.NAME} task's client arguments are not fixed arrays and a seed (they "
          'change every round, or come in another form), so they cannot be written once '
          'for the workers to read')
    self.files = ClientFiles(folder, ids,
                             lambda client_id: _columns(task.client_arguments(client_id, 0)))
    *fixed_types, (_, seed_type) = tff.structure.iter_elements(
        task.dataset_computation.type_signature.parameter)
    read = self.files.reader(collections.OrderedDict(
        (name, t) for k, (_, part) in enumerate(fixed_types) for name, t in _typed(k, part)))

    @tff.tensorflow.computation(np.int32, seed_type)
    def dataset_computation(index, seed):
      flat = read(index)
      parts = [collections.OrderedDict((name, flat[_column(k, name)]) for name, _ in
                                       tff.structure.iter_elements(part))
               if isinstance(part, tff.StructType) else flat[_column(k)]
               for k, (_, part) in enumerate(fixed_types)]
      return task.dataset_computation(*parts, seed)

    self.dataset_computation = dataset_computation
    self._index = {client_id: k for k, client_id in enumerate(ids)}

  def client_arguments(self, client_id: str, seed: int):
    return np.int32(self._index[client_id]), np.int64(seed)

  def __getattr__(self, name):  # everything else is the task's
    return getattr(self._task, name)


def _column(k: int, name: str | None = None) -> str:
  """The column of a client's k-th argument (an array), or of its array `name` (a table)."""
  return str(k) if name is None else f'{k}/{name}'


def _columns(arguments) -> dict[str, np.ndarray]:
  """A client's arguments but the seed (the last), as named columns (`_column`)."""
  columns = {}
  for k, part in enumerate(arguments[:-1]):
    if isinstance(part, Mapping):
      columns.update({_column(k, name): np.asarray(value) for name, value in part.items()})
    else:
      columns[_column(k)] = np.asarray(part)
  return columns


def _typed(k: int, part) -> list[tuple[str, tff.Type]]:
  """_columns' names with their types, from the k-th parameter's type."""
  if isinstance(part, tff.StructType):
    return [(_column(k, name), t) for name, t in tff.structure.iter_elements(part)]
  return [(_column(k), part)]


def _fixed(task, client_id: str) -> bool:
  """Whether the client's arguments are fixed arrays whatever the seed, then the seed."""
  first, second = (task.client_arguments(client_id, seed) for seed in (1, 2))
  try:
    a, b = _columns(first), _columns(second)
  except (TypeError, ValueError):
    return False
  return (int(first[-1]) == 1 and int(second[-1]) == 2 and a.keys() == b.keys()
          and all(np.array_equal(a[k], b[k]) for k in a))
