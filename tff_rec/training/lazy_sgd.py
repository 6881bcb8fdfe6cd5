"""SGD that moves only the rows a sparse gradient touches, to the bit TFF's SGD.

tff.learning's SGD (build_sgdm without momentum) densifies an embedding
lookup's gradient and writes w - lr * g over the whole table; at 10^5 x 64
items that is two table-sized passes a step for a client that read a few
rows. An untouched row's w - lr * 0 is w, and a touched row's summed gradient
is the densified one's (lazy_adam.summed_rows), so writing the touched rows
alone gives the very same weights (on CPU, whose unsorted_segment_sum adds in
the input's order on both sides; a GPU's atomics fix no order on either). For
loops that hand it the IndexedSlices and own the weights' buffers
(training.functional: `next_in_place`).
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import lazy_adam


class LazySGD(tff.learning.optimizers.Optimizer):
  takes_indexed_slices = True  # training.functional keeps sparse gradients for it

  def __init__(self, learning_rate: float):
    if not learning_rate > 0:
      raise ValueError(f'SGD learning_rate must be > 0, got {learning_rate}')
    self._lr = learning_rate

  def initialize(self, specs):
    del specs  # no slots
    return collections.OrderedDict(learning_rate=self._lr)

  def next(self, state, weights, gradients):
    return self._next(state, weights, gradients, lazy_adam.scatter_copy)

  def next_in_place(self, state, weights, gradients):
    """`next`, the touched rows written into the weights' buffers (the caller owns them)."""
    return self._next(state, weights, gradients, lazy_adam.scatter_in_place)

  def _next(self, state, weights, gradients, scatter):
    lr = state['learning_rate']

    def update(w, g):  # as TFF's SGD writes it: w - lr * g
      if isinstance(g, tf.IndexedSlices):
        rows, g = lazy_adam.summed_rows(g)
        return scatter(w, rows, tf.gather(w, rows) - tf.cast(lr, g.dtype) * g)
      return w - tf.cast(lr, g.dtype) * g

    flat = [update(w, g) for w, g in zip(tf.nest.flatten(weights),
                                         tf.nest.flatten(gradients, expand_composites=False),
                                         strict=True)]
    return state, tf.nest.pack_sequence_as(weights, flat)
