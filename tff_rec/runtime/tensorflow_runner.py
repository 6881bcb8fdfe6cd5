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

import concurrent.futures
import queue
from typing import Any, Sequence

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


class TensorFlowRunner:
  """Calls a TFF TensorFlow computation like a function, in-process."""

  def __init__(self, computation: tff.Computation, *, sessions: int = 1,
               config: tf.compat.v1.ConfigProto | None = None):
    proto = computation.get_proto(computation)
    if proto.WhichOneof('computation') != 'tensorflow':
      raise NotTensorFlowError(
          f'expected a TensorFlow computation, got {proto.WhichOneof("computation")!r}')
    tf_proto = proto.tensorflow
    graph_def = tf.compat.v1.GraphDef()
    tf_proto.graph_def.Unpack(graph_def)
    self.type_signature = computation.type_signature
    self._parameter_type = self.type_signature.parameter
    self._result_type = self.type_signature.result
    self._sequence_inputs = {}
    self._graph = tf.Graph()
    with self._graph.as_default():
      input_map = {}
      for name in _tensor_names(tf_proto.parameter, kinds=('sequence',)):
        # A dataset parameter arrives as its serialized graph.
        serialized = tf.compat.v1.placeholder(tf.string, shape=[])
        input_map[name] = tf.raw_ops.DatasetFromGraph(graph_def=serialized)
        self._sequence_inputs[name] = serialized
      tf.graph_util.import_graph_def(graph_def, input_map=input_map, name='')
    self._parameter_names = (_tensor_names(tf_proto.parameter)
                             if tf_proto.HasField('parameter') else [])
    self._result_names = _tensor_names(tf_proto.result)
    self._initialize_op = tf_proto.initialize_op or None
    self._sessions = queue.SimpleQueue()
    for _ in range(sessions):
      self._sessions.put(tf.compat.v1.Session(graph=self._graph, config=config))
    self._pool = concurrent.futures.ThreadPoolExecutor(sessions)

  def _feed(self, arg) -> dict:
    if self._parameter_type is None:
      return {}
    feed = {}
    for name, leaf in zip(self._parameter_names, _flatten(arg, self._parameter_type)):
      if name in self._sequence_inputs:
        feed[self._sequence_inputs[name]] = leaf._as_serialized_graph().numpy()
      else:
        feed[name] = leaf
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

  def map(self, args: Sequence[Any]) -> list[Any]:
    """Python results of a call on each of `args`, as many at a time as the
    runner has sessions (TF releases the GIL while it runs), in `args`' order."""
    return list(self._pool.map(self, args))

  def close(self) -> None:
    self._pool.shutdown()
    while not self._sessions.empty():
      self._sessions.get().close()

