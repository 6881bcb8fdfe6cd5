"""FedSubAvg (Ding et al., NeurIPS 2022): the mean update corrected by feature heat.

Feature heat n_m is how many clients' data involve row m of an embedding
table; dense parameters are involved by all N clients. FedSubAvg multiplies
the aggregated update of row m by N / n_m, so in expectation over the cohort
each row moves by the mean update of the clients that hold it, not that mean
diluted by the clients that never touch it.

The correction is a tff.aggregators factory around any inner weighted
factory (TFF's mean by default, or a mean over secure sums, DP, ...): the
clients' step stays whatever the inner factory does, and the server scales
its result row by row, so it composes with every tff.learning server
optimizer. With uniform client weights it is the paper's
N / (n_m K) * sum_k delta_k; with example weights and heat counted in
examples (`feature_heat(..., weights=examples)`) it is the official code's
coef[m] * sum_k n_k delta_k / sum_k n_k.

It also measures the submodel a real deployment moves: per client, the rows
its update changed (the rows its data touch, less any whose update is
exactly zero) times the row width, plus every dense parameter; the same
rows go down and up.
"""

import collections
from typing import Iterable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

BYTES_PER_FLOAT = 4
# What a round reports wherever the correction is applied: the largest row factor.
# The registry refuses a build that stacks FedSubAvg and shows no such measurement.
MEASURED = 'fedsubavg_max_scale'


def feature_heat(client_rows: Iterable[np.ndarray], num_rows: int,
                 weights: Sequence[float] | None = None) -> np.ndarray:
  """[num_rows] heat: per row, the number (or total weight) of clients that touch it.

  client_rows: per client, the row ids its data index (repeats allowed).
  weights: per client (default 1: the paper's count; the official code uses
  the client's number of training examples).
  """
  unique = [np.unique(np.asarray(rows, np.int64)) for rows in client_rows]
  if weights is None:
    weights = np.ones(len(unique))
  if len(weights) != len(unique):
    raise ValueError(f'{len(weights)} weights for {len(unique)} clients')
  rows = np.concatenate(unique) if unique else np.zeros(0, np.int64)
  if rows.size and (rows.min() < 0 or rows.max() >= num_rows):
    raise ValueError(f'row id {rows.max() if rows.max() >= num_rows else rows.min()} '
                     f'is outside the table of {num_rows} rows')
  return np.bincount(rows, weights=np.repeat(np.asarray(weights, np.float64),
                                             [len(u) for u in unique]),
                     minlength=num_rows)


def corrections(heat: np.ndarray, population: float, bound: float | None = None
                ) -> np.ndarray:
  """N / n_m per row (float32); 1 for rows no client touches (they never move).

  `bound` caps the factor (ours, not the paper's): where one client holds a row,
  N / n_m is N, and the mean over a cohort of K moves that row by N / K times
  its holder's update (about 450 on Beauty's clicks), which diverges. With heat
  and weights counted in clients, a bound of K moves such a row by at most its
  holders' summed updates.
  """
  heat = np.asarray(heat, np.float64)
  scales = np.where(heat > 0, population / np.maximum(heat, 1e-300), 1.0)
  if bound is not None:
    scales = np.minimum(scales, bound)
  return scales.astype(np.float32)


def scale_rows(update: tf.Tensor, scales: np.ndarray) -> tf.Tensor:
  """FedSubAvg's correction of a table's aggregated update: row m times its N / n_m.
  The one way every method applies it (this factory on TFF's processes; the
  project's rounds, whose clients send other payloads, on their update)."""
  scales = tf.constant(np.asarray(scales, np.float32))
  return update * tf.reshape(scales, [-1] + [1] * (update.shape.rank - 1))


def measured(scales: Iterable[np.ndarray | None]) -> dict[str, np.float32]:
  """The measurement a round that applies `scales` reports (MEASURED); none where
  every scale is None (no correction applied)."""
  applied = [float(np.max(s)) for s in scales if s is not None]
  return {MEASURED: np.float32(max(applied))} if applied else {}


def dispersion(heat: np.ndarray) -> float:
  """max n_m / min n_m over the rows some client touches (the paper's Table 1)."""
  touched = np.asarray(heat)[np.asarray(heat) > 0]
  return float(touched.max() / touched.min()) if touched.size else float('nan')


class FedSubAvgFactory(tff.aggregators.WeightedAggregationFactory):
  """The inner factory's weighted mean, each table row scaled by its correction.

  `row_scales` follows the aggregated structure flattened by tf.nest (a
  model's trainable variables in their order; dicts by sorted key): a [rows] array for an embedding table, None for a
  dense parameter (no correction, counted whole in the submodel). With no
  scale at all (every entry None but the tables marked by `tables`) it is
  the plain mean and only measures the submodel: the baselines use it so.
  """

  def __init__(self, row_scales: Sequence[np.ndarray | None], *,
               tables: Sequence[bool] | None = None,
               inner: tff.aggregators.WeightedAggregationFactory | None = None):
    self._scales = [None if s is None else np.asarray(s, np.float32) for s in row_scales]
    self._tables = (list(tables) if tables is not None
                    else [s is not None for s in self._scales])
    if len(self._tables) != len(self._scales):
      raise ValueError(f'{len(self._tables)} table marks for {len(self._scales)} tensors')
    self._inner = inner or tff.aggregators.MeanFactory()

  @classmethod
  def measuring_only(cls, tables: Sequence[bool], **kwargs) -> 'FedSubAvgFactory':
    """The plain mean (FedAvg), with the submodel measured as FedSubAvg's."""
    return cls([None] * len(tables), tables=tables, **kwargs)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    inner = self._inner.create(value_type, weight_type)
    specs = tf.nest.flatten(tff.structure.to_odict_or_tuple(value_type))
    if len(specs) != len(self._scales):
      raise ValueError(f'{len(self._scales)} row scales for a value of {len(specs)} tensors')
    for spec, scale, table in zip(specs, self._scales, self._tables):
      if scale is not None and (not table or spec.shape[0] != len(scale)):
        raise ValueError(f'a row scale of {len(scale)} rows for a tensor of shape {spec.shape}')
    scales, tables = self._scales, self._tables
    model_bytes = sum(int(np.prod(s.shape)) for s in specs) * BYTES_PER_FLOAT

    @tff.tensorflow.computation(value_type)
    def correct(mean):
      flat = [v if s is None else scale_rows(v, s)
              for v, s in zip(tf.nest.flatten(mean), scales)]
      return tf.nest.pack_sequence_as(mean, flat)

    @tff.tensorflow.computation(value_type)
    def submodel_bytes(update):
      floats = []
      for v, table in zip(tf.nest.flatten(update), tables):
        if table:
          rows = tf.reduce_any(tf.not_equal(tf.reshape(v, [v.shape[0], -1]), 0), axis=1)
          floats.append(tf.reduce_sum(tf.cast(rows, tf.float32)) * float(np.prod(v.shape[1:])))
        else:
          floats.append(tf.constant(float(np.prod(v.shape)), tf.float32))
      return tf.add_n(floats) * float(BYTES_PER_FLOAT)

    @tff.federated_computation(inner.next.type_signature.parameter)
    def next_fn(state, value, weight):
      output = inner.next(state, value, weight)
      measurement = collections.OrderedDict(
          inner=output.measurements,
          submodel_bytes=tff.federated_mean(tff.federated_map(submodel_bytes, value)),
          model_bytes=tff.federated_value(np.float32(model_bytes), tff.SERVER))
      measurement.update((k, tff.federated_value(v, tff.SERVER))
                         for k, v in measured(scales).items())
      return tff.templates.MeasuredProcessOutput(
          state=output.state, result=tff.federated_map(correct, output.result),
          measurements=tff.federated_zip(measurement))

    return tff.templates.AggregationProcess(inner.initialize, next_fn)
