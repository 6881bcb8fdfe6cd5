"""FedProx's client steps as an optimizer: any client optimizer with the proximal
term of Li et al. (2020) added to its gradients.

A FedProx client minimizes its loss plus (mu / 2) ||w - w_t||^2, w_t the model the
server broadcast, so each step's gradient gains mu (w - w_t). Here w_t is the
weights of the first step since the optimizer was initialized, which
tff.learning's client work does at the start of every client update. It is our
own because TFF 0.87's FedProx (build_weighted_fed_prox) adds mu (w_t - w)
instead, which pushes each client away from w_t
(tests/algorithms/test_baselines.py checks both against a reference).
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff


class Proximal(tff.learning.optimizers.Optimizer):
  """`inner`'s steps on gradient + strength (w - the weights of the first step)."""

  def __init__(self, inner: tff.learning.optimizers.Optimizer, strength: float):
    if strength < 0:
      raise ValueError(f'proximal strength must be >= 0, got {strength}')
    self._inner, self._strength = inner, strength

  def initialize(self, specs):
    return collections.OrderedDict(
        step=tf.constant(0, tf.int64),
        anchor=tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), specs),
        inner=self._inner.initialize(specs))

  def next(self, state, weights, gradients):
    first = tf.equal(state['step'], 0)
    anchor = tf.nest.map_structure(lambda a, w: tf.where(first, w, a), state['anchor'], weights)
    pulled = tf.nest.map_structure(
        lambda g, w, a: tf.convert_to_tensor(g) + self._strength * (w - a),
        gradients, weights, anchor)
    inner, weights = self._inner.next(state['inner'], weights, pulled)
    return collections.OrderedDict(step=state['step'] + 1, anchor=anchor, inner=inner), weights
