"""LazyAdam (TF Addons' semantics) as a tff.learning optimizer.

Adam, except that a table's rows move only where the batch touches them: for a
gradient that arrives as tf.IndexedSlices (an embedding lookup's), the first
and second moments and the weights of the touched rows are updated, and the
other rows keep their weights and their moments. Dense gradients get plain
Adam. The step count, and so the bias correction, is global, as in TF Addons.
It is our own because TF Addons is not a dependency and tff.learning's
optimizers densify IndexedSlices. Only a client loop that hands it the
IndexedSlices (training.functional) gains speed; tff.learning's Keras client
work densifies them first.

`next` returns new tensors, as a tff.learning optimizer must, so each step
copies every table it touches (TF's scatter into a tensor copies it).
`next_in_place` writes the touched rows into the given buffers instead; it is
for a loop that owns them (training.functional copies them once per client,
not once per step).
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff


class LazyAdam(tff.learning.optimizers.Optimizer):
  takes_indexed_slices = True  # training.functional keeps sparse gradients for it

  def __init__(self, learning_rate: float, beta_1: float = 0.9, beta_2: float = 0.999,
               epsilon: float = 1e-7):
    if not learning_rate > 0:
      raise ValueError(f'lazy_adam learning_rate must be > 0, got {learning_rate}')
    if not (0 <= beta_1 < 1 and 0 <= beta_2 < 1 and epsilon >= 0):
      raise ValueError(f'lazy_adam needs 0 <= beta < 1 and epsilon >= 0, got {beta_1}, '
                       f'{beta_2}, {epsilon}')
    self._lr, self._beta_1, self._beta_2, self._epsilon = (learning_rate, beta_1, beta_2,
                                                          epsilon)

  def initialize(self, specs):
    zeros = lambda s: tf.zeros(s.shape, s.dtype)  # pylint: disable=unnecessary-lambda-assignment
    return collections.OrderedDict(
        learning_rate=self._lr, beta_1=self._beta_1, beta_2=self._beta_2,
        epsilon=self._epsilon, step=0, accumulator=tf.nest.map_structure(zeros, specs),
        preconditioner=tf.nest.map_structure(zeros, specs))

  def next(self, state, weights, gradients):
    return self._next(state, weights, gradients, scatter_copy)

  def next_in_place(self, state, weights, gradients):
    """`next`, but the touched rows of the weights and moments are written into
    their buffers: the caller must own them (no other op reads them)."""
    return self._next(state, weights, gradients, scatter_in_place)

  def _next(self, state, weights, gradients, scatter):
    step = state['step'] + 1
    beta_1, beta_2, epsilon = state['beta_1'], state['beta_2'], state['epsilon']
    t = tf.cast(step, tf.float32)
    lr = state['learning_rate'] * tf.sqrt(1.0 - tf.pow(beta_2, t)) / (1.0 - tf.pow(beta_1, t))

    def adam(w, m, v, g):  # written as TFF's Adam writes it
      m = m + (g - m) * (1.0 - beta_1)
      v = v + (tf.square(g) - v) * (1.0 - beta_2)
      return w - lr * m / (tf.sqrt(v) + epsilon), m, v

    def update(w, m, v, g):
      if isinstance(g, tf.IndexedSlices):
        rows, g = summed_rows(g)
        w_rows, m_rows, v_rows = adam(tf.gather(w, rows), tf.gather(m, rows),
                                      tf.gather(v, rows), g)
        return scatter(w, rows, w_rows), scatter(m, rows, m_rows), scatter(v, rows, v_rows)
      return adam(w, m, v, g)

    flat = [update(w, m, v, g) for w, m, v, g in zip(
        tf.nest.flatten(weights), tf.nest.flatten(state['accumulator']),
        tf.nest.flatten(state['preconditioner']),
        tf.nest.flatten(gradients, expand_composites=False))]
    new_state = collections.OrderedDict(state)
    new_state.update(
        step=step,
        accumulator=tf.nest.pack_sequence_as(state['accumulator'], [f[1] for f in flat]),
        preconditioner=tf.nest.pack_sequence_as(state['preconditioner'], [f[2] for f in flat]))
    return new_state, tf.nest.pack_sequence_as(weights, [f[0] for f in flat])


def summed_rows(gradient: tf.IndexedSlices) -> tuple[tf.Tensor, tf.Tensor]:
  """(the rows a sparse gradient touches, each row's gradient): a repeated row's
  values summed in their order, as densifying it (unsorted_segment_sum) sums them."""
  rows, at = tf.unique(gradient.indices)
  return rows, tf.math.unsorted_segment_sum(gradient.values, at, tf.shape(rows)[0])


def scatter_copy(table, rows, values):
  return tf.tensor_scatter_nd_update(table, rows[:, None], values)


def scatter_in_place(table, rows, values):
  # InplaceUpdate writes into its input's buffer and returns it (TF's own
  # inplace_ops.alias_inplace_update). Safe when every read of `table` runs first:
  # the rows' reads feed `values`; the forward pass's, training.functional orders.
  return tf.raw_ops.InplaceUpdate(x=table, i=tf.cast(rows, tf.int32), v=values)
