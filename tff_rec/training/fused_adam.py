"""TFF's Adam, whose steps in the client loop run in TF's fused Adam kernel.

TFF's Adam (`tff.learning.optimizers.build_adam`) is a chain of a dozen
elementwise ops, each reading and writing whole tensors: about 30 floats move
per weight and step where the update needs 7 (read the weight, its gradient and
two moments; write the weight and the moments). On FAIR's dense item tables
that chain was most of a round (results/benchmarks_runtimes.md). TF's own
ResourceApplyAdam makes one pass, with the same float operations in the same
order, so its steps are TFF's bit for bit (tests/training/test_fused_adam.py),
but it updates variables only. So the client loop (training.functional) holds a
client's weights and moments in variables of its own for its loop
(`in_variables`). `next` is TFF's Adam itself, for every other caller (the
server's step, tff.learning's client work, lockstep).
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff
# TF's name for a variable of its own per run (ResourceHandle::ANONYMOUS_NAME):
# clients that train at once in one graph never share one.
from tensorflow.python.eager.context import anonymous_name  # pylint: disable=g-direct-tensorflow-import

_MOMENTS = ('accumulator', 'preconditioner')  # TFF's Adam's names for m and v


class Adam(tff.learning.optimizers.Optimizer):
  """tff.learning.optimizers.build_adam(learning_rate, epsilon=epsilon)."""

  def __init__(self, learning_rate: float, epsilon: float = 1e-7):
    self._adam = tff.learning.optimizers.build_adam(learning_rate, epsilon=epsilon)

  def initialize(self, specs):
    return self._adam.initialize(specs)

  def next(self, state, weights, gradients):
    return self._adam.next(state, weights, gradients)

  def in_variables(self, state, weights) -> 'Held':
    """The weights and moments copied into variables of their own, for a loop
    that steps them in place (the caller's tensors never change)."""
    return Held(state, weights)


class Held:
  """A client loop's weights and Adam moments in variables: `weights` and
  `state` are the loop's values (the moments and weights as variable handles),
  `read` the weights' values for the forward pass, `next` one step in place,
  `release` the values at the end, the variables freed."""

  def __init__(self, state, weights):
    self._like = _held_parts(state, weights)
    # weights', then m's, v's: a handle's read has neither dtype nor shape of its own
    self._specs = [tf.TensorSpec(t.shape, t.dtype) for t in tf.nest.flatten(self._like)]
    self.state, self.weights = self._unflatten(
        state, [_variable_of(t) for t in tf.nest.flatten(self._like)])

  def read(self, weights):
    return tf.nest.pack_sequence_as(weights, [
        _value_of(h, spec) for h, spec in zip(tf.nest.flatten(weights), self._specs)])

  def next(self, state, weights, gradients):
    """Adam's step (TFF's arithmetic, in TF's fused kernel); the weights returned
    are read after it."""
    step = state['step'] + 1
    beta_1, beta_2 = (tf.convert_to_tensor(state[k], tf.float32) for k in ('beta_1', 'beta_2'))
    t = tf.cast(step, beta_1.dtype)
    # As TFF's Adam: the powers in float32 (float32 weights: its arithmetic bit for bit)
    scalars = dict(beta1_power=tf.pow(beta_1, t), beta2_power=tf.pow(beta_2, t),
                   lr=state['learning_rate'], beta1=beta_1, beta2=beta_2,
                   epsilon=state['epsilon'])
    updates = [
        tf.raw_ops.ResourceApplyAdam(
            var=w, m=m, v=v, grad=g, **{k: tf.cast(x, spec.dtype) for k, x in scalars.items()})
        for w, m, v, g, spec in zip(
            *(tf.nest.flatten(s) for s in (weights, state['accumulator'],
                                            state['preconditioner'], gradients)),
            self._specs[:len(tf.nest.flatten(gradients))], strict=True)]
    with tf.control_dependencies(updates):
      weights = tf.nest.map_structure(tf.identity, weights)
    return collections.OrderedDict(state, step=step), weights

  def release(self, state, weights):
    held = tf.nest.flatten(_held_parts(state, weights))
    values = [_value_of(h, spec) for h, spec in zip(held, self._specs)]
    with tf.control_dependencies(values):
      freed = [tf.raw_ops.DestroyResourceOp(resource=h) for h in held]
    with tf.control_dependencies(freed):
      return self._unflatten(state, [tf.identity(v) for v in values])

  def _unflatten(self, state, flat):
    weights, moments = tf.nest.pack_sequence_as(self._like, flat)
    return collections.OrderedDict(state, **dict(zip(_MOMENTS, moments))), weights


def _held_parts(state, weights) -> tuple:
  """What a loop holds in variables, in Held's order: the weights, then m and v."""
  return weights, [state[m] for m in _MOMENTS]


def _variable_of(value: tf.Tensor) -> tf.Tensor:
  handle = tf.raw_ops.VarHandleOp(dtype=value.dtype, shape=value.shape,
                                  shared_name=anonymous_name())
  with tf.control_dependencies([tf.raw_ops.AssignVariableOp(resource=handle, value=value)]):
    return tf.identity(handle)


def _value_of(handle: tf.Tensor, spec: tf.TensorSpec) -> tf.Tensor:
  # ensure_shape, not set_shape: a graph read back (TFF's, the in-process runtime's)
  # keeps the shape only as an op's
  return tf.ensure_shape(tf.raw_ops.ReadVariableOp(resource=handle, dtype=spec.dtype),
                         spec.shape)
