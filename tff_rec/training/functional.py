"""Training a dict of weight tensors with a TFF optimizer: no Keras, no variables.

Clients of FAIR's tiers hold their item tables in different forms; training
plain tensors lets one loop serve them all (and the centralized baseline),
with each tier's tensors existing only while its branch runs.
"""

from typing import Any, Callable, Mapping

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import sliced

LossFn = Callable[[Mapping[str, tf.Tensor], Any], tf.Tensor]


def train(loss_fn: LossFn, optimizer: tff.learning.optimizers.Optimizer,
          weights: Mapping[str, tf.Tensor], batches: tf.data.Dataset | sliced.Batches,
          optimizer_state: Any = None):
  """One pass over `batches` (a dataset, or sliced.Batches: cheaper per client):
  (weights, optimizer_state, loss sum, example count).

  The optimizer starts fresh unless `optimizer_state` is given. Sparse
  gradients (embedding lookups) are densified, as tff.learning does, except
  for an optimizer that takes them (lazy_adam.LazyAdam).
  """
  if optimizer_state is None:
    optimizer_state = optimizer.initialize(
        tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), weights))
  return _loop(loss_fn, optimizer, weights, batches, optimizer_state)


@tf.function(reduce_retracing=True)  # autograph: a loop over batches
def _loop(loss_fn, optimizer, weights, batches, state):
  def step(weights, state, loss_sum, count, batch):
    with tf.GradientTape() as tape:
      tape.watch(weights)
      loss = loss_fn(weights, batch)
    grads = tape.gradient(loss, weights)
    if not getattr(optimizer, 'takes_indexed_slices', False):  # lazy_adam keeps them
      grads = tf.nest.map_structure(tf.convert_to_tensor, grads)
    state, weights = optimizer.next(state, weights, grads)
    size = tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
    return weights, state, loss_sum + loss * tf.cast(size, tf.float32), count + size

  loss_sum = tf.constant(0.0)
  count = tf.constant(0, tf.int64)
  if isinstance(batches, sliced.Batches):
    for s in tf.range(batches.steps()):
      weights, state, loss_sum, count = step(weights, state, loss_sum, count, batches.batch(s))
  else:
    # iter(): autograph turns a loop over the dataset itself into a slow
    # ReduceDataset op (see baselines.CLIENT_LOOP).
    for batch in iter(batches):
      weights, state, loss_sum, count = step(weights, state, loss_sum, count, batch)
  return weights, state, loss_sum, count
