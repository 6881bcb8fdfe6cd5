"""Clients' examples in files that whoever runs the client work reads itself.

With a task's examples written here once, a round sends each client its index
and seed instead of its examples: the TFF worker that trains the client reads
`<folder>/<index>.tensors` inside the client's dataset computation. TFF 0.87's
own means for data that materializes on the workers is a data descriptor (a
computation that turns handles into datasets, run on the clients); its C++
worker binary links no data backend that would resolve `tff.framework.Data`
URIs, so the handle here is the client's index and the computation reads the
file with TF ops.

Two kinds of client work read them: tff.learning's, through the task's
dataset computation (ReadWhereTrained: a round sends each client its index and
seed), and the project's rounds, through the sliced.Batches of their clients'
input (BatchesWhereTrained: the task's own batches become its index and seed
too, the task making them where the client trains; batches of the client's
fixed examples, split, are made there from the rows written with them, and
only an order no plan made is sent, as row numbers). A round's client whose
input still holds arrays of its own, fixed (a reconstructed user's initial
vector), reads those from a folder of their own (ArraysWhereTrained).

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
import functools
import hashlib
import json
import pathlib
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import capabilities
from tff_rec.data import sliced

MANIFEST = 'manifest.json'
FINGERPRINT = 'fingerprint'


class ClientFilesError(ValueError):
  """Client files that cannot be written, or are not of these examples."""


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
            f'{self.root} holds other client files (fingerprint '
            f'{written["fingerprint"][:12]}, these are {self.fingerprint[:12]}): another '
            "dataset's, or these examples in another layout (another kind of algorithm "
            "reads them otherwise); give an empty folder")
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


class BatchesWhereTrained:
  """The project's rounds (tff_rec.algorithms.rounds) with their clients'
  examples in files, in one of two ways:

  - The client's input holds the task's own batches (`task`: a ReadWhereTrained
    whose batches_computation reads the files): each becomes the client's index
    and the round's seed, and the task makes the batches where the client
    trains, its sampled negatives and its order drawn by TF there (not numpy's
    draws: a run on the files does not repeat one without them). A round sends
    each client two numbers.
  - Any other batches whose columns are the client's examples, fixed (MetaUA's
    split of them): the examples are written here once, each Batches' columns
    become the client's index and seed, and its order is written with them
    where no round changes it (an in-order pass), made where the client trains
    where it is `plan`'s over rows of the client's own (the rows written; TF's
    order, as above), or else sent as the row numbers numpy drew on the
    trainer (the one case that repeats a run without files to the digit).

  `read` (a TF computation, run where the client trains) makes the client's
  input again from what `client_input` sends. Other batches are refused."""

  def __init__(self, folder: str | pathlib.Path, client_ids: Sequence[str],
               client_input: Callable[[str, int], Any], data_type: tff.Type, task=None,
               plan: sliced.Plan | None = None):
    ids = list(client_ids)
    samples = [client_input(ids[0], seed) for seed in (1, 2)]
    columns = [_shared_columns(sample) for sample in samples]
    if columns[0] is None:
      raise ClientFilesError("its clients' input holds no batches of examples (sliced."
                             'Batches) to write once for the workers to read')
    self._input, self._index = client_input, {c: k for k, c in enumerate(ids)}
    checked = _checked_inputs(ids, client_input)
    own = task is not None and task.reads('batches_computation') and _the_tasks_batches(
        task, checked)
    batches_type = next(_batch_types(data_type), None)
    made_type = own and task.batches_computation.type_signature.result
    if own and batches_type and batches_type.is_assignable_from(made_type):
      self._whole, self.files = True, None  # the task's files hold the examples
      self._handle, make = task.client_arguments, task.batches_computation
      handle_type = make.type_signature.parameter

      def batches_of(sent):  # the same batches for each Batches sent
        return [make(sent[0])] * len(sent)
    elif _equal(*columns):
      self._whole = False
      structure, kinds = columns[0], _kinds(checked, plan)

      def stored(client_id):  # the examples, and what of each Batches is the client's own
        value = client_input(client_id, 0)
        arrays = _flat(_shared_columns(value))
        for j, (kind, b) in enumerate(zip(kinds, _batches(value))):
          if kind == FIXED:
            arrays.update({f'b{j}/starts': b.starts, f'b{j}/ends': b.ends, f'b{j}/rows': b.rows})
          elif kind == PLANNED:
            arrays[f'b{j}/rows'] = np.unique(b.rows)
        return arrays

      self.files = ClientFiles(folder, ids, stored)
      read = self.files.reader(collections.OrderedDict(
          (name, tff.TensorType(v.dtype, [None, *v.shape[1:]]))
          for name, v in stored(ids[0]).items()))
      self._kinds = kinds
      self._handle = lambda client_id, seed: (np.int32(self._index[client_id]), np.int64(seed))
      handle_type = tff.StructWithPythonType([np.int32, np.int64], tuple)

      def batches_of(sent):  # every Batches sent, with (index, seed) for columns
        index, seed = sent[0].columns
        examples = read(index)
        columns_read = tf.nest.pack_sequence_as(structure, [examples[k] for k in _flat(structure)])
        made = []
        for j, (kind, b) in enumerate(zip(kinds, sent)):
          if kind == FIXED:
            made.append(sliced.Batches(columns_read, *(examples[f'b{j}/{part}']
                                                       for part in ('starts', 'ends', 'rows'))))
          elif kind == PLANNED:
            made.append(plan.batches_tf(columns_read, seed, examples[f'b{j}/rows']))
          else:
            made.append(b._replace(columns=columns_read))
        return made
    elif own:
      raise ClientFilesError(f"its task's batches made where the clients train ({made_type}) "
                             f"are not its clients' ({batches_type})")
    else:
      raise ClientFilesError(
          "the clients' examples change every round (e.g. sampled negatives), so they "
          'cannot be written once for the workers to read')
    self.handle_type = _with_handles(data_type, handle_type, whole=self._whole)

    @tff.tensorflow.computation(self.handle_type)
    def read_batches(handles):
      # A lone Batches parameter arrives as a tff Struct: its Python containers back.
      handles = tff.types.type_to_py_container(handles, self.handle_type)
      sent = []
      _map_typed(lambda b: sent.append(b) or b, handles, data_type)
      made = iter(batches_of(sent))
      return _map_typed(lambda _: next(made), handles, data_type)

    self.read = read_batches

  def client_input(self, client_id: str, seed: int):
    """The client's input with each Batches replaced by its handle (the task's
    batches), or its columns by it and the order left out where the client's
    file holds or makes it."""
    handle = self._handle(client_id, seed)
    if self._whole:
      return _map_batches(lambda _: handle, self._input(client_id, seed))
    kinds = iter(self._kinds)

    def sent(b):
      if next(kinds) == SENT:
        return b._replace(columns=handle)
      none = np.zeros(0, np.int32)
      return sliced.Batches(handle, none, none, none)

    return _map_batches(sent, self._input(client_id, seed))


class ArraysWhereTrained:
  """A round whose client's input, once its examples are read where it trains,
  still holds arrays of the client's own that no round changes (a
  reconstructed user's initial vector, FedMF's): they are written once too
  (`files`), the input's top-level arrays become the client's index
  (`client_input`), and `read` (a TF computation, run where the client trains)
  puts them back. Arrays that change from round to round are refused."""

  def __init__(self, folder: str | pathlib.Path, client_ids: Sequence[str],
               client_input: Callable[[str, int], Any], data_type: tff.Type):
    ids = list(client_ids)
    first, second = (client_input(ids[0], seed) for seed in (1, 2))
    if not isinstance(first, tuple) or isinstance(first, sliced.Batches):
      raise ClientFilesError("its clients' input is not a tuple whose arrays could be "
                             'written once for the workers to read')
    self._arrays = [k for k, part in enumerate(first)
                    if isinstance(part, np.ndarray) and part.ndim > 0]
    rest = [part for k, part in enumerate(first) if k not in self._arrays]
    if any(np.ndim(leaf) > 0 for leaf in tf.nest.flatten(rest)):
      raise ClientFilesError("its clients' input holds arrays inside its parts, which are "
                             'not written for the workers to read')
    if not all(_equal(first[k], second[k]) for k in self._arrays):
      raise ClientFilesError("the clients' arrays change every round (e.g. sampled "
                             'examples), so they cannot be written once for the workers to read')
    self._input, self._index = client_input, {c: k for k, c in enumerate(ids)}
    self.files = ClientFiles(folder, ids, lambda client_id: {
        str(k): np.asarray(client_input(client_id, 0)[k]) for k in self._arrays})
    parts = [t for _, t in tff.structure.iter_elements(data_type)]
    read = self.files.reader(collections.OrderedDict((str(k), parts[k]) for k in self._arrays))
    handle_type = tff.StructWithPythonType(
        [tff.TensorType(np.int32) if k in self._arrays else t for k, t in enumerate(parts)],
        tuple)

    @tff.tensorflow.computation(handle_type)
    def read_arrays(sent):
      sent = tff.types.type_to_py_container(sent, handle_type)
      arrays = read(sent[self._arrays[0]])
      return tuple(arrays[str(k)] if k in self._arrays else part for k, part in enumerate(sent))

    self.read = read_arrays

  def client_input(self, client_id: str, seed: int):
    """The client's input with each of its arrays replaced by its index."""
    index = np.int32(self._index[client_id])
    return tuple(index if k in self._arrays else part
                 for k, part in enumerate(self._input(client_id, seed)))


def _map_batches(fn, value):
  """`value` with fn applied to each sliced.Batches in it (through tuples, lists
  and dicts; to each part of a sliced.Joined, joined again)."""
  if isinstance(value, sliced.Batches):
    return fn(value)
  if isinstance(value, sliced.Joined):
    return sliced.joined([fn(part) for part in value.parts()])
  if isinstance(value, Mapping):
    return type(value)((k, _map_batches(fn, v)) for k, v in value.items())
  if isinstance(value, tuple) and hasattr(value, '_fields'):
    return type(value)(*(_map_batches(fn, v) for v in value))
  if isinstance(value, (list, tuple)):
    return type(value)(_map_batches(fn, v) for v in value)
  return value


# What BatchesWhereTrained does with each Batches of fixed examples: its order
# is the same every round (FIXED: written with the examples), the task's plan
# over rows of its own (PLANNED: the rows written, the order drawn where the
# client trains), or neither (SENT: numpy's order sent every round).
FIXED, PLANNED, SENT = 'fixed', 'planned', 'sent'


def _kinds(checked: dict[str, list], plan: sliced.Plan | None) -> list[str]:
  """The kind of each Batches in the checked clients' input (_checked_inputs)."""
  def planned(b, seed):
    return plan is not None and _equal(b, plan.batches(b.columns, seed, rows=np.unique(b.rows)))

  pairs = [list(zip(*map(_batches, inputs)))
           for inputs in checked.values()]  # per client, per Batches: its two rounds
  return [FIXED if all(_equal(*pair) for pair in each) else
          PLANNED if all(planned(b, seed) for pair in each for b, seed in zip(pair, (1, 2)))
          else SENT for each in zip(*pairs)]


# BatchesWhereTrained tells what each Batches is from the largest few of the
# first clients (seeds 1 and 2): a client of one example, whose order no seed
# changes, cannot pass for the rest.
CHECKED, CANDIDATES = 3, 50


def _checked_inputs(client_ids: Sequence[str], client_input) -> dict[str, list]:
  """{client: its inputs of seeds 1 and 2} of the CHECKED clients of the first
  CANDIDATES with the most rows in their batches."""
  first = {client_id: client_input(client_id, 1) for client_id in client_ids[:CANDIDATES]}

  def rows(client_id):
    return sum(len(b.rows) for b in _batches(first[client_id]))

  return {client_id: [first[client_id], client_input(client_id, 2)]
          for client_id in sorted(first, key=rows, reverse=True)[:CHECKED]}


def _the_tasks_batches(task, checked: dict[str, list]) -> bool:
  """Whether every Batches of the checked clients' input is their task's client_batches."""
  return all(_equal(b, task.client_batches(client_id, seed))
             for client_id, inputs in checked.items() for seed, value in zip((1, 2), inputs)
             for b in _batches(value))


def _map_typed(fn, value, value_type: tff.Type):
  """`value` (of `value_type`) with fn applied where its type is a sliced.Batches
  (where a handle stands in for one: `_map_batches` finds Batches themselves)."""
  if not isinstance(value_type, tff.StructType):
    return value
  if getattr(value_type, 'python_container', None) is sliced.Batches:
    return fn(value)
  if getattr(value_type, 'python_container', None) is sliced.Joined:
    return sliced.joined([fn(part) for part in value.parts()])
  types = [t for _, t in tff.structure.iter_elements(value_type)]
  if isinstance(value, Mapping):
    return type(value)((k, _map_typed(fn, v, t)) for (k, v), t in zip(value.items(), types))
  if isinstance(value, tuple) and hasattr(value, '_fields'):
    return type(value)(*(_map_typed(fn, v, t) for v, t in zip(value, types)))
  return type(value)(_map_typed(fn, v, t) for v, t in zip(value, types))


def holds_batches(client_input) -> bool:
  """Whether a client's input holds sliced.Batches (BatchesWhereTrained reads those)."""
  return bool(_batches(client_input))


def _batches(value) -> list[sliced.Batches]:
  found = []
  _map_batches(lambda b: found.append(b) or b, value)
  return found


def _shared_columns(client_input):
  """The columns every Batches of a client's input holds (None: no Batches);
  ClientFilesError if they differ."""
  found = _batches(client_input)
  if not found:
    return None
  if not all(_equal(found[0].columns, b.columns) for b in found[1:]):
    raise ClientFilesError("the batches of a client's input hold different examples, so "
                           'they cannot be read from one file per client')
  return found[0].columns


def _flat(columns) -> dict[str, np.ndarray]:
  return {str(k): np.asarray(v) for k, v in enumerate(tf.nest.flatten(columns))}


def _equal(a, b) -> bool:
  a, b = _flat(a), _flat(b)
  return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _with_handles(data_type: tff.Type, handle_type: tff.Type, *, whole: bool) -> tff.Type:
  """`data_type` with each Batches (`whole`) or each Batches' columns of `handle_type`."""
  if not isinstance(data_type, tff.StructType):
    return data_type
  container = getattr(data_type, 'python_container', None)
  if container is sliced.Batches and whole:
    return handle_type
  elements = [(name, (handle_type if name == 'columns' else t)
               if container is sliced.Batches else _with_handles(t, handle_type, whole=whole))
              for name, t in tff.structure.iter_elements(data_type)]
  return tff.StructWithPythonType(elements, container) if container else tff.StructType(elements)


def _batch_types(data_type: tff.Type):
  """The types of the Batches in `data_type`, in order."""
  if isinstance(data_type, tff.StructType):
    if getattr(data_type, 'python_container', None) is sliced.Batches:
      yield data_type
    elif getattr(data_type, 'python_container', None) is sliced.Joined:
      yield from [data_type.batches] * data_type.part_ends.shape[0]
    else:
      for _, t in tff.structure.iter_elements(data_type):
        yield from _batch_types(t)


# The forms a task may give its clients' data in: (dataset computation, client
# arguments) pairs. A Keras model's; a weight-table model's; FedMF's private
# users' rows; the Keras model's client_batches made where the client trains, of
# the same arguments (the project's rounds on numpy batches, BatchesWhereTrained).
FORMS = (('dataset_computation', 'client_arguments'),
         ('table_dataset_computation', 'table_client_arguments'),
         ('mf_dataset_computation', 'mf_client_arguments'),
         ('batches_computation', 'client_arguments'))


class ReadWhereTrained(capabilities.Wrapper):
  """`task` with its clients' examples in files (`ClientFiles`, written by
  `files.write()`) and read by the client work: in each form of its clients'
  data (FORMS) whose arguments are fixed arrays (or tables of them) and a seed,
  the dataset computation takes (client index, seed), and a round's client
  arguments are those two numbers. The task's own dataset computation makes
  the batches from what it reads, so they are the same batches as in memory.

  A task whose clients draw examples every round (sampled negatives) offers
  `drawn_where_trained()`, the same task drawing them in its dataset
  computation, from the seed; it is read so. A task with no such form is
  refused."""

  def __init__(self, task, folder: str | pathlib.Path):
    if capabilities.has(task, 'drawn_where_trained'):
      task = task.drawn_where_trained()
    super().__init__(task)
    ids = list(task.train_client_ids)
    fixed = functools.cache(lambda arguments: _fixed(task, arguments, ids[0]))  # forms share
    self._forms = [form for form in FORMS if all(capabilities.has(task, name) for name in form)
                   and fixed(form[1])]
    if not self._forms:
      raise ClientFilesError(
          f"the {task.NAME} task's client arguments are not fixed arrays and a seed (they "
          'change every round, or come in another form), so they cannot be written once '
          'for the workers to read')
    self._folder, self._index = folder, {client_id: k for k, client_id in enumerate(ids)}

  # Made when first asked, not in the constructor: a project's round on fixed
  # batches writes files of its own, never these (BatchesWhereTrained).
  @functools.cached_property
  def files(self) -> ClientFiles:
    return ClientFiles(self._folder, list(self._index), lambda client_id: {
        f'{arguments}:{name}': column for arguments in dict.fromkeys(f[1] for f in self._forms)
        for name, column in _columns(getattr(self.wrapped, arguments)(client_id, 0)).items()})

  def _reading(self, form: tuple[str, str], computation: tff.Computation) -> tff.Computation:
    """`computation` (of the form's arguments) on what the client reads: (index, seed)."""
    arguments = form[1]
    *fixed_types, (_, seed_type) = tff.structure.iter_elements(
        computation.type_signature.parameter)
    read = self.files.reader(collections.OrderedDict(
        (f'{arguments}:{name}', t) for k, (_, part) in enumerate(fixed_types)
        for name, t in _typed(k, part)))

    @tff.tensorflow.computation(np.int32, seed_type)
    def reading(index, seed):
      flat = read(index)
      parts = [collections.OrderedDict((name, flat[f'{arguments}:{_column(k, name)}'])
                                       for name, _ in tff.structure.iter_elements(part))
               if isinstance(part, tff.StructType) else flat[f'{arguments}:{_column(k)}']
               for k, (_, part) in enumerate(fixed_types)]
      return computation(*parts, seed)

    return reading

  def reads(self, computation: str) -> bool:
    """Whether the task's `computation` (a form's, FORMS) reads the files."""
    return any(computation == form[0] for form in self._forms)

  def _arguments(self, client_id: str, seed: int, *plan):
    del plan  # what the form's computation is made for (`__getattr__`), not read
    return np.int32(self._index[client_id]), np.int64(seed)

  def __getattr__(self, name):
    """A read form's computations and arguments; everything else is the task's. A
    form's computation may be a method making it for a plan (FedMF's extra epochs):
    then so is the reading one."""
    for form in self.__dict__.get('_forms', ()):
      if name == form[1]:
        return self._arguments
      if name == form[0]:
        made = getattr(self.wrapped, name)
        reading = (self._reading(form, made) if isinstance(made, tff.Computation) else
                   functools.cache(lambda *plan, made=made, form=form: self._reading(
                       form, made(*plan))))
        setattr(self, name, reading)  # made once
        return reading
    return super().__getattr__(name)


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


def _fixed(task, arguments: str, client_id: str) -> bool:
  """Whether the task's client `arguments` are fixed arrays whatever the seed, then the seed."""
  first, second = (getattr(task, arguments)(client_id, seed) for seed in (1, 2))
  try:
    a, b = _columns(first), _columns(second)
  except (TypeError, ValueError):
    return False
  return (int(first[-1]) == 1 and int(second[-1]) == 2 and a.keys() == b.keys()
          and all(np.array_equal(a[k], b[k]) for k in a))
