"""Runs one TFF TensorFlow computation in this Python process.

A TFF TensorFlow computation is a GraphDef plus bindings that name its
parameter and result tensors (a dataset parameter is a variant tensor). The
graph is imported once into its own tf.Graph (not the eager context, whose
function library already holds TFF's traced functions under the same names)
and run with tf.compat.v1.Sessions: one per concurrent caller, since each
session holds its own variables. The computation's initialize op runs before
every call, so each call starts from fresh variables, as in TFF's runtime.
Here custom op libraries loaded in Python and the GPU are visible to it.
"""

import queue
import threading
from typing import Any, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


class NotTensorFlowError(ValueError):
  """The computation is not a single TensorFlow computation."""


def _tensor_names(binding, kinds=('tensor', 'sequence')) -> list[str]:
  """Names of a binding's tensors (and dataset variants), in flattening order."""
  kind = binding.WhichOneof('binding')
  if kind == 'struct':
    return [name for element in binding.struct.element
            for name in _tensor_names(element, kinds)]
  if kind not in kinds:
    return []
  return [binding.tensor.tensor_name if kind == 'tensor'
          else binding.sequence.variant_tensor_name]


def _flatten(value: Any, type_spec) -> list[Any]:
  """Leaves of `value` in the order of `type_spec` (datasets are leaves)."""
  if isinstance(type_spec, tff.StructType):
    elements = tff.structure.to_elements(tff.structure.from_container(value))
    return [leaf for (_, v), (_, t) in zip(elements, tff.structure.to_elements(type_spec))
            for leaf in _flatten(v, t)]
  return [value]


def _pack(leaves: list[Any], type_spec):
  """Inverse of _flatten: a tff.structure.Struct shaped like `type_spec`."""
  if isinstance(type_spec, tff.StructType):
    elements = []
    for name, t in tff.structure.to_elements(type_spec):
      elements.append((name, _pack(leaves, t)))
    return tff.structure.Struct(elements)
  return leaves.pop(0)


def _dataset_parameter() -> tuple[tf.Tensor, tf.Tensor]:
  """(the string placeholder to feed, the dataset it gives): a dataset parameter
  arrives as its serialized graph (_fed)."""
  serialized = tf.compat.v1.placeholder(tf.string, shape=[])
  return serialized, tf.raw_ops.DatasetFromGraph(graph_def=serialized)


def _fed(leaf, is_dataset: bool):
  """What to feed for a parameter leaf: a dataset's serialized graph, else the leaf."""
  if is_dataset:
    return leaf._as_serialized_graph().numpy()  # pylint: disable=protected-access
  return leaf


def _leaf_types(type_spec) -> list:
  """The tensor and sequence types of `type_spec`, in _flatten's order."""
  if isinstance(type_spec, tff.StructType):
    return [leaf for _, t in tff.structure.to_elements(type_spec) for leaf in _leaf_types(t)]
  return [type_spec]


def _unpack(computation: tff.Computation):
  """(its TensorFlow proto, its GraphDef)."""
  proto = computation.get_proto(computation)
  if proto.WhichOneof('computation') != 'tensorflow':
    raise NotTensorFlowError(
        f'expected a TensorFlow computation, got {proto.WhichOneof("computation")!r}')
  graph_def = tf.compat.v1.GraphDef()
  proto.tensorflow.graph_def.Unpack(graph_def)
  return proto.tensorflow, graph_def


def _import(computation: tff.Computation, inputs: list[tf.Tensor], prefix: str):
  """The computation imported into the default graph under `prefix`, fed `inputs`
  (its parameter's leaves): (its result's leaf tensors, its initialize op or None).
  Its variables and loops get names of their own, so that copies never share one."""
  tf_proto, graph_def = _unpack(computation)
  for node in graph_def.node:
    # Variables and (TFF's graphs are lowered) loop frames are named in attributes,
    # which importing under a prefix leaves as they are.
    for attr in ('shared_name', 'frame_name'):
      if attr in node.attr and node.attr[attr].s:
        node.attr[attr].s = f'{prefix}/'.encode() + node.attr[attr].s
  names = _tensor_names(tf_proto.parameter) if tf_proto.HasField('parameter') else []
  input_map = dict(zip(names, inputs))
  # TFF's graphs may also wait on a parameter (a control input): map those too.
  control = {i for node in graph_def.node for i in node.input if i.startswith('^')}
  input_map.update({f'^{n.split(":")[0]}': tensor for n, tensor in zip(names, inputs)
                    if f'^{n.split(":")[0]}' in control})
  wanted = _tensor_names(tf_proto.result) + (
      [tf_proto.initialize_op] if tf_proto.initialize_op else [])
  imported = tf.graph_util.import_graph_def(
      graph_def, input_map=input_map, return_elements=wanted, name=prefix)
  if tf_proto.initialize_op:
    return imported[:-1], imported[-1]
  return imported, None


def _bytes(type_spec) -> int:
  """Bytes of the fully shaped tensors of a type."""
  shapes = [(tf.TensorShape(t.shape), t.dtype) for t in _leaf_types(type_spec)
            if isinstance(t, tff.TensorType)]
  return sum(shape.num_elements() * np.dtype(dtype).itemsize for shape, dtype in shapes
             if shape.is_fully_defined())


def memory_bytes(computation: tff.Computation) -> int:
  """A rough size of what one call of the computation holds: its variables (a
  Keras model, its optimizer's slots, metrics), read off its graph, plus five
  times its result (a client's update is model-sized; training tensors, as
  FAIR's tables are, rather than variables holds the weights, two Adam
  moments, the gradient and the update)."""
  _, graph_def = _unpack(computation)
  variables = 0
  for node in graph_def.node:
    if node.op == 'VarHandleOp':
      shape = tf.TensorShape(node.attr['shape'].shape)
      if shape.is_fully_defined():
        variables += shape.num_elements() * tf.as_dtype(node.attr['dtype'].type).size
  return variables + 5 * _bytes(computation.type_signature.result)


class TensorFlowRunner:
  """Calls a TFF TensorFlow computation like a function, in-process."""

  def __init__(self, computation: tff.Computation, *, sessions: int = 1,
               config: tf.compat.v1.ConfigProto | None = None):
    tf_proto, graph_def = _unpack(computation)
    self.type_signature = computation.type_signature
    self._parameter_type = self.type_signature.parameter
    self._result_type = self.type_signature.result
    self._sequence_inputs = {}
    self._graph = tf.Graph()
    with self._graph.as_default():
      input_map = {}
      for name in _tensor_names(tf_proto.parameter, kinds=('sequence',)):
        self._sequence_inputs[name], input_map[name] = _dataset_parameter()
      tf.graph_util.import_graph_def(graph_def, input_map=input_map, name='')
    self._parameter_names = (_tensor_names(tf_proto.parameter)
                             if tf_proto.HasField('parameter') else [])
    self._result_names = _tensor_names(tf_proto.result)
    self._initialize_op = tf_proto.initialize_op or None
    self._sessions = queue.SimpleQueue()
    for _ in range(sessions):
      self._sessions.put(tf.compat.v1.Session(graph=self._graph, config=config))

  def _feed(self, arg) -> dict:
    if self._parameter_type is None:
      return {}
    feed = {}
    for name, leaf in zip(self._parameter_names, _flatten(arg, self._parameter_type)):
      feed[self._sequence_inputs.get(name, name)] = _fed(leaf, name in self._sequence_inputs)
    return feed

  def __call__(self, arg=None, *, as_python: bool = True):
    """Runs the computation; thread-safe (one session per concurrent call).

    Returns Python containers (as TFF's own contexts do), or with
    as_python=False the tff.structure.Struct the other pieces consume.
    """
    feed = self._feed(arg)
    session = self._sessions.get()
    try:
      if self._initialize_op:
        session.run(self._initialize_op, feed_dict=feed)
      fetched = session.run(self._result_names, feed_dict=feed)
    finally:
      self._sessions.put(session)
    value = _pack(list(fetched), self._result_type)
    return tff.types.type_to_py_container(value, self._result_type) if as_python else value

  def close(self) -> None:
    while not self._sessions.empty():
      self._sessions.get().close()


class ClientChain:
  """A MapReduce round's work and accumulate over several clients in one TF call.

  chain(accumulator, client_input, [data, ...]) runs work on each client's data
  and folds each client's update into the accumulator, as one call per
  `clients_per_call` clients, into which the pieces' graphs are imported once
  per client (the clients' variables apart, their work concurrent where TF
  finds cores). Returns (the accumulator, per client the work's other outputs,
  the secure sums' inputs), as tff.structure.Structs.
  """

  def __init__(self, work: tff.Computation, accumulate: tff.Computation, *,
               clients_per_call: int, sessions: int = 1):
    if clients_per_call < 1:
      raise ValueError(f'clients_per_call must be >= 1, got {clients_per_call}')
    self._work, self._accumulate = work, accumulate
    self._clients_per_call, self._sessions = clients_per_call, sessions
    data_type, input_type = work.type_signature.parameter
    self._data_types, self._input_type = _leaf_types(data_type), input_type
    self._accumulator_type = accumulate.type_signature.parameter[0]
    work_result = tff.structure.to_elements(work.type_signature.result)
    self._update_leaves = len(_leaf_types(work_result[0][1]))
    self._secure_type = tff.StructType(work_result[1:])
    self._graphs = {}  # clients in the call -> (feeds, fetches, init, sessions)
    self._building = threading.Lock()  # threads share the graphs

  def _placeholder(self, type_spec):
    if isinstance(type_spec, tff.SequenceType):
      return _dataset_parameter()
    placeholder = tf.compat.v1.placeholder(type_spec.dtype, type_spec.shape)
    return placeholder, placeholder

  def _build(self, clients: int):
    graph = tf.Graph()
    with graph.as_default():
      feeds = {}
      pairs = [self._placeholder(t) for t in _leaf_types(self._input_type)]
      feeds['input'] = [fed for fed, _ in pairs]
      client_input = [used for _, used in pairs]
      pairs = [self._placeholder(t) for t in _leaf_types(self._accumulator_type)]
      feeds['accumulator'] = [fed for fed, _ in pairs]
      accumulator = [used for _, used in pairs]
      feeds['data'], secure, inits = [], [], []
      for k in range(clients):
        pairs = [self._placeholder(t) for t in self._data_types]
        feeds['data'].append([fed for fed, _ in pairs])
        outputs, init = _import(self._work, [used for _, used in pairs] + client_input,
                                f'work_{k}')
        accumulator, init_accumulate = _import(
            self._accumulate, accumulator + outputs[:self._update_leaves], f'accumulate_{k}')
        secure.append(outputs[self._update_leaves:])
        inits += [op for op in (init, init_accumulate) if op is not None]
      init = tf.group(*inits) if inits else None
    sessions = queue.SimpleQueue()
    for _ in range(self._sessions):
      sessions.put(tf.compat.v1.Session(graph=graph))
    return feeds, (accumulator, secure), init, sessions

  def __call__(self, accumulator, client_input, client_data: Sequence[Any]):
    secure = []
    for start in range(0, len(client_data), self._clients_per_call):
      accumulator, more = self._call(accumulator, client_input,
                                     client_data[start:start + self._clients_per_call])
      secure += more
    return accumulator, secure

  def _call(self, accumulator, client_input, client_data: Sequence[Any]):
    with self._building:
      if len(client_data) not in self._graphs:
        self._graphs[len(client_data)] = self._build(len(client_data))
      feeds, fetches, init, sessions = self._graphs[len(client_data)]
    feed = dict(zip(feeds['input'], _flatten(client_input, self._input_type)))
    feed.update(zip(feeds['accumulator'], _flatten(accumulator, self._accumulator_type)))
    data_type = self._work.type_signature.parameter[0]
    for placeholders, data in zip(feeds['data'], client_data):
      for placeholder, leaf, type_spec in zip(placeholders, _flatten(data, data_type),
                                              self._data_types):
        feed[placeholder] = _fed(leaf, isinstance(type_spec, tff.SequenceType))
    session = sessions.get()
    try:
      if init is not None:
        session.run(init, feed_dict=feed)
      new_accumulator, secure = session.run(fetches, feed_dict=feed)
    finally:
      sessions.put(session)
    return (_pack(list(new_accumulator), self._accumulator_type),
            [[value for _, value in tff.structure.to_elements(
                _pack(list(s), self._secure_type))] for s in secure])
