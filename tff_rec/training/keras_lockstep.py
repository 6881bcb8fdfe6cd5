"""A cohort's clients training one Keras model side by side (the Keras rounds'
lockstep.Lockstep): their weights stacked on a leading clients axis, their batches
stacked and padded, one step for all of them.

Client n's step s is the step training.functional takes on its batch s: the
gradient of the batch's mean loss (padded rows weigh nothing), then its
optimizer's step. The client optimizers of the project (SGD, Adam, Adagrad, and
FedProx's term around them) act entry by entry, so one step on the stacked
weights is every client's own step; a scalar of their state (Adam's step count)
is the same for every client still training, as they all started together. A
client whose batches ended keeps its weights and state.

It applies where each example's loss depends on its own row only: a loss of
Keras's own, or a Keras Loss that says so (`PER_EXAMPLE = True`; a loss of the
whole batch, as in-batch negatives, would see the padding), on a model without
state outside its trainable weights.
"""

import dataclasses
import functools
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import sliced
from tff_rec.models import spec
from tff_rec.models import table_model
from tff_rec.training import lockstep

# (weights in the Keras model's trainable order, a batch's x) -> predictions
Predict = Callable[[Sequence[tf.Tensor], object], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class KerasModel:
  """A Keras model as its clients train it in lockstep: the model, its loss and its
  input spec (a task's keras_model, loss() and input_spec)."""
  keras_model: Callable[[], tf.keras.Model]
  loss: tf.keras.losses.Loss
  input_spec: object
  reference: tf.keras.Model | None = None  # one built already, to read (refusal, client_bytes)

  @classmethod
  def of(cls, task) -> 'KerasModel':
    """A task's Keras model as its clients train it."""
    return cls(task.keras_model, task.loss(), task.input_spec, spec.built_to_read(task))

  def refusal(self) -> str | None:
    """Why its clients cannot train in lockstep (None: they can)."""
    if not (type(self.loss).__module__.startswith('keras.')
            or getattr(self.loss, 'PER_EXAMPLE', False)):
      return (f'its loss ({type(self.loss).__name__}) is not one of Keras\'s per-example '
              'losses, so padding a batch could change it')
    model = self._model
    if model.losses:
      return 'its Keras model adds a loss of its own (e.g. a regularizer)'
    if model.non_trainable_variables:
      return 'its Keras model has non-trainable state (e.g. batch normalization)'
    return None

  def predictor(self) -> Predict:
    """The model's forward pass as a function of its weights (TFF's functional form)."""
    functional = tff.learning.models.functional_model_from_keras(
        self.keras_model, self.loss, self.input_spec)
    _, keras_order = table_model.creation_order(self.keras_model)
    created = np.argsort(keras_order)  # for each created variable, its Keras position

    def predict(weights, x):
      return functional.predict_on_batch(([weights[k] for k in created], ()), x,
                                         training=True)

    return predict

  def client_bytes(self) -> int:
    """The memory one more client adds: its weights, their gradients, their next
    values and an optimizer's two moments (float32)."""
    return 5 * 4 * sum(int(np.prod(w.shape)) for w in self._model.trainable_weights)

  @functools.cached_property
  def _model(self) -> tf.keras.Model:  # built once: refusal and client_bytes read it
    return self.reference if self.reference is not None else self.keras_model()


def form(keras: KerasModel | None, side_by_side: Callable[[Predict], tff.Computation], *,
         stack_data: Callable[[Sequence], object] | None = None,
         size_of: Callable[[object], int] | None = None,
         stack_states: Callable[[Sequence], object] | None = None,
         state_bytes: int = 0, auto: bool = False) -> dict:
  """The lockstep fields of a Keras round's rounds.Parts: `side_by_side`(the
  model's forward pass) -> the computation of (broadcast, the stacked clients) ->
  their outputs side by side; the clients' data stacked by `stack_data` (default:
  their batches, `stack`) and run longest first by `size_of` (default: their
  steps), their states (where they keep one) stacked beside by `stack_states`,
  each adding `state_bytes`. Without `keras`, or where its model cannot train in
  lockstep, none (and why). `auto`: whether --lockstep=auto runs it (Lockstep.auto;
  not by default: the FedAvg family's rounds were as fast client by client on DCN
  and Keras MF, results/benchmarks_runtimes.md, "Lockstep cohorts, Keras models")."""
  refusal = keras and keras.refusal()
  if refusal:
    return {'lockstep_refusal': f'the Keras model cannot train in lockstep: {refusal}'}
  if not keras:
    return {}
  stack_data = stack_data or stack

  def stacked(data, states):
    return (stack_data(data), stack_states(states)) if stack_states else stack_data(data)

  return {'lockstep': lockstep.Lockstep(
      stacked, lambda: side_by_side(keras.predictor()), size_of or size,
      keras.client_bytes() + state_bytes, auto=auto)}


def stack(batches: Sequence[sliced.Batches], *, longest_first: bool = True):
  """Clients' numpy batches side by side: their columns, each [steps, clients,
  rows, ...], and the [steps, clients, rows] 0/1 mask of real rows; client n's
  step s holds its batch s. A batch narrower than the widest is padded with its
  last row, the steps after a client's last with its last row (weighing nothing:
  the mask), so a loss that reads a row's label as an index (the global softmax)
  reads a valid one. `longest_first`: the clients come with the most steps first
  (`train` steps a prefix of them), else refused."""
  lengths = [np.asarray(b.ends) - np.asarray(b.starts) for b in batches]
  if longest_first and any(len(a) < len(b) for a, b in zip(lengths, lengths[1:])):
    raise ValueError(f'clients in lockstep come longest first; their steps are '
                     f'{[len(n) for n in lengths]}')
  steps = max(len(n) for n in lengths)
  width = max([int(n.max()) for n in lengths if len(n)] or [1])
  flat = [tf.nest.flatten(b.columns) for b in batches]
  columns = [np.zeros((steps, len(batches), width, *c.shape[1:]), c.dtype) for c in flat[0]]
  mask = np.zeros((steps, len(batches), width), np.float32)
  slots = np.arange(width)
  for n, (b, length) in enumerate(zip(batches, lengths)):
    if not len(length):
      continue  # no example: zeros, masked
    mask[:len(length), n] = slots < length[:, None]
    # each step's rows, clipped to its last; after the client's last step, its last row
    last = np.minimum(slots, np.maximum(length, 1)[:, None] - 1)
    at = np.full((steps, width), b.ends[-1] - 1)
    at[:len(length)] = np.asarray(b.starts)[:, None] + last
    for column, values in zip(columns, flat[n]):
      column[:, n] = values[np.asarray(b.rows)[at]]
  return tf.nest.pack_sequence_as(batches[0].columns, columns), mask


def stacked_type(batches_type: tff.Type) -> tff.Type:
  """The TFF type of `stack`'s output for clients' batches of `batches_type`."""
  steps = [None, None, None]  # steps, clients, rows
  columns = tf.nest.map_structure(
      lambda spec: tff.TensorType(spec.dtype.as_numpy_dtype, [*steps, *spec.shape[1:]]),
      tff.types.type_to_tf_tensor_specs(batches_type).columns)
  return tff.types.to_type((columns, tff.TensorType(np.float32, steps)))


def train(predict: Predict, loss: tf.keras.losses.Loss,
          optimizer: tff.learning.optimizers.Optimizer, weights: Sequence[tf.Tensor],
          columns, mask: tf.Tensor, correction: Sequence[tf.Tensor] | None = None):
  """Every client's pass over its batches (`stack`'s), from the same `weights`;
  with `correction` (per weight, [clients, ...]), each client's gradient plus its
  own correction at every step (SCAFFOLD's c - c_i).

  Returns (weights [clients, ...] each, their sums over examples of each
  batch's mean loss [clients], their example counts [clients] int64), as
  training.functional.train's weights, loss_sum and count per client.
  """
  per_example = _per_example(loss)
  clients = tf.shape(mask)[1]
  # Each client's weights as one vector: a step then moves one tensor per client,
  # not one per weight (ops on the clients' rows per step cost more than the model).
  shapes = [w.shape for w in weights]
  sizes = [int(np.prod(shape)) for shape in shapes]
  floats = sum(sizes)  # a client's
  if correction is not None:
    correction = tf.concat([tf.reshape(c, [clients, -1]) for c in correction], 1)

  def client_loss(arguments):  # a client's batch: its mean loss over the real rows
    flat, (x, y), rows = arguments
    client_weights = [tf.reshape(w, shape) for w, shape in zip(tf.split(flat, sizes), shapes)]
    losses = _row_losses(per_example, predict, client_weights, x, y, rows)
    return tf.math.divide_no_nan(tf.reduce_sum(losses * rows), tf.reduce_sum(rows))

  def step(s, weights, state, loss_sum, count):
    # The clients still training (the first ones: `stack` takes them longest
    # first), the others as their batches left them.
    size = tf.reduce_sum(mask[s], 1)
    upto = tf.math.count_nonzero(size, dtype=tf.int32)
    head = lambda t: t[:upto] if _per_client(t) else t
    head_weights, head_state = tf.nest.map_structure(head, (weights, state))
    # One gradient of the clients' summed losses: each client's loss reads its own
    # weights only, so its part of the gradient is its own gradient (the backward
    # pass of the vectorized ops, fewer ops than vectorizing each client's).
    with tf.GradientTape() as tape:
      tape.watch(head_weights)
      batch_losses = tf.vectorized_map(client_loss, (
          head_weights, tf.nest.map_structure(lambda c: c[s][:upto], columns), mask[s][:upto]))
      summed = tf.reduce_sum(batch_losses)
    gradients = tf.convert_to_tensor(tape.gradient(summed, head_weights))
    if correction is not None:
      gradients += correction[:upto]
    new_state, new_weights = optimizer.next(head_state, head_weights, gradients)

    def kept(new, old):
      return tf.concat([new, old[upto:]], 0) if _per_client(new) else new

    return (s + 1, kept(new_weights, weights), tf.nest.map_structure(kept, new_state, state),
            loss_sum + tf.pad(batch_losses, [[0, clients - upto]]) * size,
            count + tf.cast(size, tf.int64))

  flat = tf.concat([tf.reshape(w, [-1]) for w in weights], 0)
  state = tf.nest.map_structure(
      lambda t: tf.broadcast_to(t, [clients, floats]) if _per_client(t) else t,
      optimizer.initialize(tf.TensorSpec([floats], flat.dtype)))
  _, trained, _, loss_sum, count = tf.while_loop(
      lambda s, *_: s < tf.shape(mask)[0], step,
      (tf.constant(0), tf.broadcast_to(flat, [clients, floats]), state,
       tf.zeros([clients]), tf.zeros([clients], tf.int64)))
  return ([tf.reshape(w, tf.concat([[clients], shape], 0))
           for w, shape in zip(tf.split(trained, sizes, axis=1), shapes)], loss_sum, count)


def loss_sums(predict: Predict, loss: tf.keras.losses.Loss, weights: Sequence[tf.Tensor],
              columns, mask: tf.Tensor, *, with_gradient: bool = False):
  """Each client's loss summed over its examples (`stack`'s, in any order) at its
  own weights ([clients, ...] each) [clients], and (`with_gradient`, else None)
  the gradient of that sum, per weight [clients, ...]."""
  per_example = _per_example(loss)

  def client_sum(arguments):
    client_weights, (x, y), rows = arguments
    losses = _row_losses(per_example, predict, client_weights, x, y, rows)
    return tf.reduce_sum(tf.where(rows > 0, losses, 0.0))

  def step(s, weights, total, gradient):  # the weights a loop variable: the tape sees them
    with tf.GradientTape() as tape:
      tape.watch(weights)
      sums = tf.vectorized_map(client_sum, (
          weights, tf.nest.map_structure(lambda c: c[s], columns), mask[s]))
      summed = tf.reduce_sum(sums)
    if with_gradient:
      gradient = [g + tf.convert_to_tensor(d)
                  for g, d in zip(gradient, tape.gradient(summed, weights))]
    return s + 1, weights, total + sums, gradient

  _, _, total, gradient = tf.while_loop(
      lambda s, *_: s < tf.shape(mask)[0], step,
      (tf.constant(0), list(weights), tf.zeros([tf.shape(mask)[1]]),
       [tf.zeros_like(w) for w in weights] if with_gradient else []))
  return total, gradient if with_gradient else None


def _row_losses(per_example, predict: Predict, weights, x, y, rows: tf.Tensor) -> tf.Tensor:
  """A client's batch's loss per row [rows], padded ones too: a row's mean over its
  outputs, as Keras's mean reduction takes it."""
  losses = per_example(y, predict(weights, x))
  return tf.reduce_mean(tf.reshape(losses, [tf.shape(rows)[0], -1]), 1)


def _per_example(loss: tf.keras.losses.Loss) -> tf.keras.losses.Loss:
  return type(loss).from_config({**loss.get_config(), 'reduction': 'none'})


def _per_client(value) -> bool:
  """Whether an optimizer's state entry is one per weight (not a scalar: a step
  count, a Python hyperparameter)."""
  return tf.is_tensor(value) and value.shape.rank != 0


def steps(mask: tf.Tensor) -> tf.Tensor:
  """Each client's steps [clients] (float32), of `stack`'s mask: its batches."""
  return tf.cast(tf.math.count_nonzero(tf.reduce_sum(mask, 2), 0), tf.float32)


def size(batches: sliced.Batches) -> int:
  """A client's steps (the lockstep runs the longest first)."""
  return len(batches.starts)

