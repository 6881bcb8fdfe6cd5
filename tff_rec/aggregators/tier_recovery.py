"""Weighted mean of clients' compressed tables, recovered into the full tables.

Clients of different capacity tiers return their item tables in different
forms (full, hashed memory, low rank). Each client fills only its own tier's
slot of the value (the others are zero), so the weighted mean of the value
holds, per tier t, sum_{i in t} p_i psi_i with p_i = w_i / sum_all w. Since
recovery is linear for the full and hashed forms (S_t psi), summing each
tier's recovered mean gives FAIR's sum_i p_i S_i psi_i exactly, and the
client-to-server step stays a plain (weighted) sum: any inner TFF weighted
factory (mean, DP, secure aggregation) can compute it. (For FedHM's low-rank
form recovery is bilinear, B C; the code follows FedHM's own aggregation by
recovering on the client's side of the sum: see `client_payload`.)

The factory's value is the client's whole update, its tier payloads under
one entry (`key`) beside the rest (FAIR's dense weights): the inner factory
aggregates it all as one value (so DP clips and noises the whole update, as
DP-FedAvg does), and the result holds the recovered full tables under `key`.
"""

import collections
from typing import Mapping

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.models import compressed_table

Tiers = Mapping[str, Mapping[str, object]]  # tier label -> table name -> form


def _additive(form) -> bool:
  return not isinstance(form, compressed_table.LowRank)


def payload_forms(tiers: Tiers) -> collections.OrderedDict:
  """The form each tier's table takes in the aggregated value.

  Full and hashed parameters are summed as they are; a low-rank table is
  summed recovered (a product of sums is not a sum of products).
  """
  return collections.OrderedDict(
      (label, collections.OrderedDict(
          (name, form if _additive(form) else
           compressed_table.Full(form.num_rows, form.dim))
          for name, form in forms.items()))
      for label, forms in tiers.items())


def client_payload(tiers: Tiers, tier: str, tables: Mapping[str, object]
                   ) -> collections.OrderedDict:
  """A client's value: its trained tables in its tier's slot, zeros elsewhere."""
  value = collections.OrderedDict()
  for label, forms in payload_forms(tiers).items():
    value[label] = collections.OrderedDict()
    for name, form in forms.items():
      if label != tier:
        value[label][name] = compressed_table.zeros(form)
      elif _additive(tiers[label][name]):
        value[label][name] = tables[name]
      else:
        value[label][name] = tiers[label][name].recover(tables[name])
  return value


def recover_sum(tiers: Tiers, mean: Mapping[str, Mapping[str, object]]
                ) -> collections.OrderedDict:
  """sum over tiers of each tier's recovered mean: table name -> full table."""
  forms = payload_forms(tiers)
  names = next(iter(tiers.values())).keys()
  return collections.OrderedDict(
      (name, tf.add_n([forms[label][name].recover(mean[label][name]) for label in tiers]))
      for name in names)


class TierRecoveryFactory(tff.aggregators.WeightedAggregationFactory):
  """Aggregates per-tier payloads (see module doc) into full tables."""

  def __init__(self, tiers: Tiers,
               inner: tff.aggregators.WeightedAggregationFactory | None = None, *,
               key: str = 'tiers'):
    names = {tuple(forms) for forms in tiers.values()}
    if len(names) != 1:
      raise ValueError(f'every tier must hold the same tables, got {sorted(names)}')
    self._tiers = tiers
    self._inner = inner or tff.aggregators.MeanFactory()
    self._key = key

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    inner = self._inner.create(value_type, weight_type)
    tiers, key = self._tiers, self._key

    @tff.tensorflow.computation(value_type)
    def recover(mean):
      mean = collections.OrderedDict(mean)
      mean[key] = recover_sum(tiers, mean[key])
      return mean

    @tff.federated_computation(inner.next.type_signature.parameter)
    def next_fn(state, value, weight):
      output = inner.next(state, value, weight)
      return tff.templates.MeasuredProcessOutput(
          state=output.state, result=tff.federated_map(recover, output.result),
          measurements=output.measurements)

    return tff.templates.AggregationProcess(inner.initialize, next_fn)
