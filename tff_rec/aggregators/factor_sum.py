"""CoLR's factor sum (Nguyen et al.) as a TFF aggregation factory.

In a CoLR round every client trains A (n x r, from zero) in W + A B for each
table, B an r x d basis drawn from the round's seed and shared by the whole
cohort. Because B is shared, the weighted mean of the clients' updates is
mean_i(A_i B) = mean_i(A_i) B: the clients' side is a plain weighted mean of
the A's, which any inner TFF factory computes (MeanFactory, a secure sum, DP),
and this factory multiplies by B afterwards, at the server.

SCoLR: a client trains only some columns of A (the others stay zero) and
sends, beside A, its column indicator. The weighted mean of the indicators is
the weight share of the clients that trained each column; dividing by it
makes each column a mean over the clients that trained it.

The value is the client's whole update with {table: {'factor': A, 'columns':
indicator [r]}} under one entry (`key`) beside the rest (a model's dense
weights): the inner factory aggregates it all as one value (so DP clips and
noises the whole update), and the result holds {table: the mean update,
n x d} under `key`. The factory counts rounds from 0, one per
`next`, and draws round t's bases from (seed, t) with `round_bases`: a
process that uses it broadcasts the same (seed, t) to its clients.
"""

import collections
import math
from typing import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


def correlated_basis(seed: tf.Tensor, rank: int, dim: int) -> tf.Tensor:
  """B: a Gaussian r x d matrix with its rows orthonormalised, scaled by
  sqrt(d / r) so that E[B^T B] = I (the paper's appendix D; the official
  code's 'orthnorm')."""
  gaussian = tf.random.stateless_normal([rank, dim], seed)
  _, u, v = tf.linalg.svd(gaussian)
  return tf.matmul(u, v, transpose_b=True) * math.sqrt(dim / rank)


def round_seeds(seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """(B's seed, the SCoLR permutation's seed) of a round seed."""
  split = tf.random.experimental.stateless_split(seed, 2)
  return split[0], split[1]


def round_seed(seed: int, round_num: tf.Tensor) -> tf.Tensor:
  return tf.stack([tf.constant(seed, tf.int64), tf.cast(round_num, tf.int64)])


def round_bases(round_seed_: tf.Tensor, rank: int, widths: Mapping[str, int]
                ) -> collections.OrderedDict:
  """{table: B (rank x its width)}: one basis per table, all from the round's seed."""
  basis_seed, _ = round_seeds(round_seed_)
  return collections.OrderedDict(
      (name, correlated_basis(
          tf.random.experimental.stateless_fold_in(basis_seed, k), rank, width))
      for k, (name, width) in enumerate(widths.items()))


class FactorSumFactory(tff.aggregators.WeightedAggregationFactory):
  """The weighted mean of clients' A's through `inner`, decoded with the round's B's.

  widths: {table: d}, the width of each table the A's update.
  """

  def __init__(self, rank: int, widths: Mapping[str, int], seed: int,
               inner: tff.aggregators.WeightedAggregationFactory | None = None, *,
               key: str = 'tables'):
    if rank < 1:
      raise ValueError(f'rank must be >= 1, got {rank}')
    self._rank = rank
    self._widths = collections.OrderedDict(widths)
    self._seed = seed
    self._inner = inner or tff.aggregators.MeanFactory()
    self._key = key

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    rank, widths, seed, key = self._rank, self._widths, self._seed, self._key
    factors = value_type[key]
    names = [name for name, _ in tff.structure.iter_elements(factors)]
    if names != list(widths):
      raise ValueError(f'the value holds tables {names}, the factory was made for '
                       f'{list(widths)}')
    for name in names:
      factor, columns = factors[name].factor, factors[name].columns
      if factor.shape[-1] != rank or tuple(columns.shape) != (rank,):
        raise ValueError(f'table {name}: expected a factor of {rank} columns and {rank} '
                         f'column indicators, got {factors[name]}')
    inner = self._inner.create(value_type, weight_type)

    @tff.tensorflow.computation
    def first_round():
      return tf.constant(0, tf.int64)

    @tff.tensorflow.computation(inner.next.type_signature.result.result.member, np.int64)
    def decode(mean, round_num):
      bases = round_bases(round_seed(seed, round_num), rank, widths)
      mean = collections.OrderedDict(mean)
      # A column no client trained has a zero mean and a zero share: it stays zero.
      mean[key] = collections.OrderedDict(
          (name, tf.matmul(tf.math.divide_no_nan(mean[key][name]['factor'],
                                                 mean[key][name]['columns'][None, :]),
                           bases[name]))
          for name in widths)
      return mean, round_num + 1

    @tff.federated_computation
    def initialize():
      return tff.federated_zip(collections.OrderedDict(
          inner=inner.initialize(), round=tff.federated_eval(first_round, tff.SERVER)))

    state_type = initialize.type_signature.result

    @tff.federated_computation(state_type, inner.next.type_signature.parameter[1],
                               inner.next.type_signature.parameter[2])
    def next_fn(state, value, weight):
      output = inner.next(state.inner, value, weight)
      result, round_num = tff.federated_map(decode, (output.result, state.round))
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip(collections.OrderedDict(inner=output.state,
                                                          round=round_num)),
          result=result, measurements=output.measurements)

    return tff.templates.AggregationProcess(initialize, next_fn)
