"""The client training loop every client work of the project runs: one pass
of a TFF optimizer over a client's batches, on plain weight tensors.

Clients of FAIR's tiers hold their item tables in different forms; training
plain tensors lets one loop serve them all, FedMF's and the table forms'
clients, the Keras clients of SCAFFOLD, MetaUA and FedNova (their model's
variables take the weights, then its forward pass is differentiated) and the
centralized baselines. Clients read sliced.Batches; datasets remain for the
centralized baselines. What differs between algorithms is a hook on the
gradients (SCAFFOLD's correction) or the optimizer (lazy_adam's and lazy_sgd's rows,
fused_adam's variables).
"""

from typing import Any, Callable, Mapping, NamedTuple, Sequence

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import sliced

LossFn = Callable[[Mapping[str, tf.Tensor], Any], tf.Tensor]
# What the loop differentiates: a loss of the weights, or a tff.learning model
# whose trainable variables the weights are (in order).
Objective = LossFn | tff.learning.models.VariableModel
# gradients -> the gradients the step takes (e.g. SCAFFOLD's g - c_i + c).
GradientHook = Callable[[Sequence[tf.Tensor]], Sequence[tf.Tensor]]


class Trained(NamedTuple):
  weights: Any
  optimizer_state: Any
  loss_sum: tf.Tensor  # float32: the sum over examples of each batch's mean loss
  count: tf.Tensor  # int64 examples
  steps: tf.Tensor  # int64 batches


def train(objective: Objective, optimizer: tff.learning.optimizers.Optimizer,
          weights, batches: tf.data.Dataset | sliced.Batches,
          optimizer_state: Any = None, *, hook: GradientHook | None = None) -> Trained:
  """One pass over `batches` (a dataset, or sliced.Batches: cheaper per client).

  The optimizer starts fresh unless `optimizer_state` is given. Sparse
  gradients (embedding lookups) are densified, as tff.learning does, except
  for an optimizer that takes them (lazy_adam.LazyAdam, lazy_sgd.LazySGD).
  """
  if optimizer_state is None:
    optimizer_state = optimizer.initialize(
        tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), weights))
  return Trained(*_loop(objective, optimizer, weights, batches, optimizer_state, hook))


def _loss_and_gradients(objective: Objective, weights, batch):
  if isinstance(objective, tff.learning.models.VariableModel):
    variables = objective.trainable_variables
    for variable, value in zip(variables, weights):
      variable.assign(value)
    with tf.GradientTape() as tape:
      loss = objective.forward_pass(batch, training=True).loss
    return loss, tape.gradient(loss, variables)
  with tf.GradientTape() as tape:
    tape.watch(weights)
    loss = objective(weights, batch)
  return loss, tape.gradient(loss, weights)


# Without autograph: it would convert every function the step calls (the
# model's, the optimizer's, TFF's), which made tracing a client's loop take
# seconds; the loops are written as the tf.while_loops autograph would make.
@tf.function(reduce_retracing=True, autograph=False)
def _loop(objective, optimizer, weights, batches, state, hook):
  def step(weights, state, loss_sum, count, batch):
    loss, grads = _loss_and_gradients(objective, held.read(weights) if held else weights,
                                      batch)
    if not getattr(optimizer, 'takes_indexed_slices', False):  # lazy_adam keeps them
      grads = tf.nest.map_structure(tf.convert_to_tensor, grads)
    if hook:
      grads = hook(grads)
    if held or in_place:
      # The forward pass reads the weights that this step overwrites; a gradient
      # need not depend on every read (a linear term's does not).
      with tf.control_dependencies([loss]):
        state, weights = (held.next if held else optimizer.next_in_place)(state, weights,
                                                                            grads)
    else:
      state, weights = optimizer.next(state, weights, grads)
    size = tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
    return weights, state, loss_sum + loss * tf.cast(size, tf.float32), count + size

  # An optimizer that writes rows in place (lazy_adam) gets its own copy of the
  # weights and its state, once per client: the caller's (the server's model, a
  # constant zero state) never change.
  in_place = hasattr(optimizer, 'next_in_place')
  if in_place:
    # DeepCopy is stateful: never folded into a constant or merged with another copy.
    weights, state = tf.nest.map_structure(lambda t: tf.raw_ops.DeepCopy(x=t),
                                           (weights, state))
  # An optimizer that steps variables (fused_adam.Adam) holds the weights and its
  # state in variables of the loop's own.
  held = optimizer.in_variables(state, weights) if hasattr(optimizer, 'in_variables') else None
  if held:
    weights, state = held.weights, held.state
  start = (weights, state, tf.constant(0.0), tf.constant(0, tf.int64))
  if isinstance(batches, sliced.Batches):
    total = batches.steps()

    def sliced_step(weights, state, loss_sum, count, s):
      return (*step(weights, state, loss_sum, count, batches.batch(s)), s + 1)

    *done, _ = tf.while_loop(lambda *values: values[-1] < total, sliced_step,
                             (*start, tf.zeros_like(total)))
    done.append(tf.cast(total, tf.int64))
  else:
    done = _dataset_loop(batches, step, start)
  if held:
    done[1], done[0] = held.release(done[1], done[0])
  return done


def _dataset_loop(batches, step, start):
  # The dataset's iterator, as autograph loops over iter(dataset) (a loop over the
  # dataset itself becomes a slow ReduceDataset op; see baselines.CLIENT_LOOP).
  iterator = iter(batches)
  first = iterator.get_next_as_optional()

  def dataset_step(optional, weights, state, loss_sum, count, steps):
    done = step(weights, state, loss_sum, count, optional.get_value())
    return (iterator.get_next_as_optional(), *done, steps + 1)

  return list(tf.while_loop(lambda optional, *_: optional.has_value(), dataset_step,
                            (first, *start, tf.constant(0, tf.int64)))[1:])
