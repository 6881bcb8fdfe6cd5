"""The parts of the project's one round, as an algorithm writes them: the shape of
every algorithm that is not TFF's own composed LearningProcess (FAIR and its
baselines, the table-update forms, FedMF, SCAFFOLD, MetaUA, FedNova, and the
FedAvg family on numpy batches).

An algorithm's Parts describe one round as TensorFlow computations, named as
tff.learning's composer names them:

* initialize: () -> the server state.
* distributor: server state -> what every client of the round receives.
* client_work: (broadcast, client data[, client state]) -> an OrderedDict:
  'update' goes through the aggregation, with 'weight' when it is weighted;
  'metrics' are summed over the cohort (as tff.learning sums its clients'
  metrics); 'state' is the client's new state, for rounds whose clients keep
  one between the rounds they join (FedMF's stored user vectors, SCAFFOLD's
  control variates); 'report' reaches the server update client by client, for
  servers that weigh clients one by one (MetaUA, FedNova).
* server_update: (server state, broadcast, summed metrics, the aggregate) ->
  (server state, metrics), or a step whose pseudo-gradient an optimizer
  applies; with reports, a Python function of TensorFlow values that also
  takes the cohort's reports stacked, run where the round's driver runs.
* get_model_weights / set_model_weights: the model in the server state
  (`clients_in_model`: the clients' states are part of it too, e.g. private
  user rows, under that key).

The aggregation is not among them: an algorithm never chooses it. The composer
(tff_rec.composer) adds the one the user chose (TFF's mean, secure sum or DP),
inside the method's own factory where it has one (FAIR's tier recovery, CoLR's
factor sum: Parts.around), and FedSubAvg's correction when stacked, as
tff.learning's composer takes the aggregator beside the other parts.
"""

import collections
import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.training import lockstep as lockstep_lib

UPDATE, WEIGHT, METRICS, STATE, REPORT = 'update', 'weight', 'metrics', 'state', 'report'
Factory = tff.aggregators.WeightedAggregationFactory | tff.aggregators.UnweightedAggregationFactory


def server_model(initial: Mapping[str, np.ndarray], optimizer: tff.learning.optimizers.Optimizer,
                 view=None, *, counts_rounds: bool = False):
  """(initialize, get_model_weights, set_model_weights) of a server state that holds
  model weights (a dict of tensors), its optimizer's state and, `counts_rounds`,
  the round's number (from 0; the optimizer's finalizer advances it): the weights as
  they are or, with `view` (table_model.KerasView), as the Keras model's
  ModelWeights."""
  specs = collections.OrderedDict((k, tf.TensorSpec(v.shape, tf.float32))
                                  for k, v in initial.items())

  @tff.tensorflow.computation
  def initialize():
    weights = collections.OrderedDict((k, tf.constant(v, tf.float32))
                                      for k, v in initial.items())
    state = collections.OrderedDict(weights=weights, optimizer=optimizer.initialize(specs))
    if counts_rounds:
      state['round'] = tf.constant(0, tf.int64)
    return state

  get_model_weights, set_model_weights = model_weights_accessors(
      initialize.type_signature.result,
      lambda server: view.to_model_weights(server['weights']) if view else server['weights'],
      lambda _, weights: {'weights': view.from_model_weights(weights) if view else weights})
  return initialize, get_model_weights, set_model_weights


@dataclasses.dataclass(frozen=True)
class Parts:
  """What an algorithm supplies of its round (the module's docstring): a composed
  round's fields less its aggregation, which the composer (tff_rec.composer)
  adds.

  server_update: with `optimizer`, step(weights, summed metrics, aggregate,
    broadcast) -> (pseudo-gradient, metrics), which the optimizer applies to the
    server state's weights (server_model, keras_server_model); without, the
    finalizer itself (state, broadcast, summed metrics, aggregate[, reports])
    -> (state, metrics), a function of TensorFlow values.
  around: the method's own factory around the composer's inner aggregation
    (FAIR's tier recovery, CoLR's factor sum); None: the inner one as it is.
  row_tables: the tables (keys of the server's weights) whose rows a stacked
    correction scales on the optimizer's pseudo-gradient; None: a Keras model's
    variables, which the composer's aggregator scales.
  averaged: the aggregate the round's clients send through an unweighted
    aggregation is a mean over the cohort (TFF's DP), not a sum.
  stack_refusal: why a stacked correction does not apply to this round (None:
    it does where row_tables or a Keras model's mean say), which the composer
    refuses a --stack with.
  initial_client_states: as composer.compose takes them.
  lockstep: the same client work for a cohort at once, where the runtime runs it
    (the in-process one); None: client by client, `lockstep_refusal` saying why.
  """
  initialize: tff.Computation
  distributor: tff.Computation
  client_work: tff.Computation
  server_update: Callable[..., Any]
  get_model_weights: tff.Computation
  set_model_weights: tff.Computation
  optimizer: tff.learning.optimizers.Optimizer | None = None
  around: Callable[[Factory], Factory] | None = None
  row_tables: Sequence[str] | None = None
  clients_in_model: str | None = None
  averaged: bool = False
  stack_refusal: str | None = None
  initial_client_states: Any = None
  lockstep: lockstep_lib.Lockstep | None = None
  lockstep_refusal: str = ('the algorithm trains its clients one by one (its round has no '
                           'lockstep form, training.lockstep.Lockstep)')

  @property
  def weighted(self) -> bool:
    """Whether its clients send a weight beside their update (a weighted aggregation)."""
    return WEIGHT in tff.structure.name_list(self.client_work.type_signature.result)


def keras_server_model(model_fn: Callable[[], Any],
                       optimizer: tff.learning.optimizers.Optimizer | None = None,
                       more: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None):
  """(initialize, get_model_weights, set_model_weights) of a server state that holds
  a Keras model's trainable variables under 'weights', its others under
  'non_trainable', `optimizer`'s state for the weights under 'optimizer' and
  then more(that state)'s entries; the model weights are the model's
  ModelWeights, the rest of the state kept."""

  @tff.tensorflow.computation
  def initialize():
    model = model_fn()
    weights = [tf.identity(v) for v in model.trainable_variables]
    state = collections.OrderedDict(
        weights=weights, non_trainable=[tf.identity(v) for v in model.non_trainable_variables])
    if optimizer is not None:
      state['optimizer'] = optimizer.initialize(
          [tf.TensorSpec(w.shape, w.dtype) for w in weights])
    state.update(more(state) if more else ())
    return state

  return (initialize, *model_weights_accessors(
      initialize.type_signature.result, lambda state: tff.learning.models.ModelWeights(
          trainable=state['weights'], non_trainable=state['non_trainable']),
      lambda _, weights: {'weights': weights.trainable, 'non_trainable': weights.non_trainable}))


def model_weights_accessors(state_type, read: Callable, replaced: Callable):
  """(get_model_weights, set_model_weights) of a state of `state_type` whose model
  weights are read(state); replaced(state, weights) -> the entries they replace."""
  get_model_weights = tff.tensorflow.computation(read, state_type)

  @tff.tensorflow.computation(state_type, get_model_weights.type_signature.result)
  def set_model_weights(state, weights):
    state = collections.OrderedDict(state)  # pylint: disable=unsubscriptable-object
    state.update(replaced(state, weights))
    return state

  return get_model_weights, set_model_weights


def round_metrics(loss_sum: tf.Tensor, num_examples: tf.Tensor, *, client_work=(),
                  aggregator=()) -> collections.OrderedDict:
  """A round's metrics as tff.learning's composed processes lay them out: the
  clients' mean training loss and example count under client_work/train (with
  `client_work`'s other entries), what the aggregation moved (bytes) under
  aggregator, beside the aggregator's measurements."""
  train = collections.OrderedDict(
      loss=loss_sum / tf.cast(tf.maximum(num_examples, 1), loss_sum.dtype),
      num_examples=num_examples)
  return collections.OrderedDict(
      client_work=collections.OrderedDict(train=train, **collections.OrderedDict(client_work)),
      aggregator=collections.OrderedDict(aggregator))


def with_measurements(metrics, measurements) -> collections.OrderedDict:
  """The finalizer's metrics with the aggregator's measurements under 'aggregator'."""
  metrics = collections.OrderedDict(metrics)
  aggregator = collections.OrderedDict(metrics.get('aggregator', ()))
  aggregator.update(collections.OrderedDict(measurements or ()))
  metrics['aggregator'] = aggregator
  return metrics
