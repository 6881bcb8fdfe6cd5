"""State that lives on a client between the rounds it joins: one mechanism for
FedMF's stored user vectors and SCAFFOLD's control variates, on both runtimes.

A MapReduce round cannot hand a value back to one client: its client outputs
are only aggregated. So an algorithm that keeps client state writes its round
as four TensorFlow computations (`Round`): the server prepares a broadcast,
each client's work turns (broadcast, its data, its state) into what it sends
and its new state, what the cohort sends is aggregated (through a
tff.aggregators factory, so TFF's secure sum and DP wrap it) or summed, and
the server updates. `ClientStateProcess` runs them, on TFF's native runtime
(as one federated computation whose output holds the new states at
tff.CLIENTS) or in this process (each piece run by runtime.tensorflow_runner,
where the op library and the GPU are visible), and keeps every client's state
in the program state, `{'server': the round's server state, 'aggregator': its
aggregation's state, 'clients': per leaf of one client's state an [N, ...]
array}`. It is plain arrays, so the trainer's checkpoints hold it whole and a
resumed run continues exactly. The cost is N x one
client's state of memory where the round loop runs.
"""

import collections
import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.runtime import inprocess
from tff_rec.runtime import tensorflow_runner

State = dict  # {'server': ..., 'aggregator': ..., 'clients': ...}


@dataclasses.dataclass(frozen=True)
class Round:
  """A round that keeps client state, as TensorFlow computations. What clients
  send goes two ways: `aggregated` through `aggregation` (a tff.aggregators
  factory: TFF's plain or secure sum, its DP mean, ...), and `sent` (counts,
  training metrics) summed plainly, as tff.learning sums its metrics."""
  initialize: tff.Computation   # () -> server state
  prepare: tff.Computation      # server state -> broadcast
  # (broadcast, client data, client state) -> {'aggregated': through the
  # aggregation, 'sent': summed over the cohort, 'state': the client's new state}
  client_work: tff.Computation
  # (server state, broadcast, sum of sent, {'result', 'measurements'} of the
  # aggregation) -> (server state, metrics)
  update: tff.Computation
  aggregation: tff.aggregators.UnweightedAggregationFactory = tff.aggregators.SumFactory()

  def aggregation_process(self) -> tff.templates.AggregationProcess:
    return self.aggregation.create(self.client_work.type_signature.result['aggregated'])


def aggregate_type(aggregation: tff.aggregators.UnweightedAggregationFactory,
                   value_type) -> tff.StructWithPythonType:
  """The type of `update`'s aggregate argument when `aggregation` takes value_type."""
  output = aggregation.create(tff.types.to_type(value_type)).next.type_signature.result
  return tff.StructWithPythonType([('result', output.result.member),
                                   ('measurements', output.measurements.member)],
                                  collections.OrderedDict)


def federated(round_: Round) -> tuple[tff.Computation, Callable]:
  """(initialize, next) on TFF's runtimes: next({'server', 'aggregator'} state,
  client data, client states) -> (state, new client states in the cohort's
  order, metrics). One federated computation; each client's new state comes
  back with its place in the cohort, because TFF's mergeable context (remote
  workers) returns CLIENTS-placed results in the order its subrounds finish."""
  aggregation = round_.aggregation_process()
  broadcast_type, data_type, state_type = round_.client_work.type_signature.parameter
  placed_type = tff.StructType([('place', np.int32), ('state', state_type)])

  @tff.tensorflow.computation(broadcast_type, data_type, placed_type)
  def placed_work(broadcast, data, placed):
    output = round_.client_work(broadcast, data, placed['state'])
    output['state'] = collections.OrderedDict(place=placed['place'], state=output['state'])
    return output

  @tff.federated_computation
  def initialize():
    return tff.federated_zip(collections.OrderedDict(
        server=tff.federated_eval(round_.initialize, tff.SERVER),
        aggregator=aggregation.initialize()))

  @tff.federated_computation(initialize.type_signature.result,
                             tff.FederatedType(data_type, tff.CLIENTS),
                             tff.FederatedType(placed_type, tff.CLIENTS))
  def next_fn(state, client_data, client_states):
    broadcast = tff.federated_map(round_.prepare, state.server)
    outputs = tff.federated_map(placed_work, (
        tff.federated_broadcast(broadcast), client_data, client_states))
    aggregate = aggregation.next(state.aggregator, outputs.aggregated)
    new_server, metrics = tff.federated_map(round_.update, (
        state.server, broadcast, tff.federated_sum(outputs.sent),
        tff.federated_zip(collections.OrderedDict(result=aggregate.result,
                                                  measurements=aggregate.measurements))))
    new_state = tff.federated_zip(collections.OrderedDict(server=new_server,
                                                          aggregator=aggregate.state))
    return new_state, outputs.state, metrics

  def run(state, client_data, client_states):
    state, placed, metrics = next_fn(state, client_data, [
        collections.OrderedDict(place=np.int32(i), state=s)
        for i, s in enumerate(client_states)])
    in_order = [None] * len(placed)
    for client in placed:
      in_order[int(client['place'])] = client['state']
    return state, in_order, metrics

  return initialize, run


def _plain(aggregation) -> bool:
  return type(aggregation) is tff.aggregators.SumFactory  # pylint: disable=unidiomatic-typecheck


def _in_process_aggregation(round_: Round) -> inprocess.InProcessRound | None:
  """The round's aggregation alone as a MapReduce round run in-process (TFF's
  secure sums simulated exactly, DP's clipping and noise as TFF computes them);
  None for TFF's plain sum, which the clients' chain sums itself."""
  if _plain(round_.aggregation):
    return None
  aggregation = round_.aggregation_process()

  @tff.federated_computation
  def initialize():
    return aggregation.initialize()

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(
      round_.client_work.type_signature.result['aggregated'], tff.CLIENTS))
  def next_fn(state, values):
    output = aggregation.next(state, values)
    return output.state, tff.federated_zip((output.result, output.measurements))

  return inprocess.InProcessRound(initialize, next_fn)


def _client_work(round_: Round) -> tff.Computation:
  """The round's client work as inprocess.SummedClients runs it: ((data, state),
  broadcast) -> (what is summed: 'sent', and 'aggregated' under a plain sum; what
  each client returns: its 'state', and 'aggregated' otherwise)."""
  broadcast_type, data_type, state_type = round_.client_work.type_signature.parameter
  summed = ('sent', 'aggregated') if _plain(round_.aggregation) else ('sent',)

  @tff.tensorflow.computation(tff.StructType([data_type, state_type]), broadcast_type)
  def work(client, broadcast):
    output = round_.client_work(broadcast, client[0], client[1])
    return (collections.OrderedDict((k, output[k]) for k in summed),
            collections.OrderedDict((k, v) for k, v in output.items() if k not in summed))

  return work


class _InProcess:
  """The round's pieces run in this process, the clients several per TF call."""

  def __init__(self, round_: Round):
    run = tensorflow_runner.TensorFlowRunner
    self._initialize, self._prepare = run(round_.initialize), run(round_.prepare)
    self._update = run(round_.update)
    self._aggregation = _in_process_aggregation(round_)
    self._clients = inprocess.SummedClients(_client_work(round_))

  def initialize(self):
    return {'server': self._initialize(),
            'aggregator': self._aggregation.initialize() if self._aggregation else ()}

  def next(self, state, client_data, client_states):
    broadcast = self._prepare(state['server'])
    summed, kept = self._clients(broadcast, list(zip(client_data, client_states)))
    if self._aggregation:
      aggregator, (result, measurements) = self._aggregation.next(
          state['aggregator'], [k['aggregated'] for k in kept])
    else:
      aggregator, result, measurements = (), summed['aggregated'], ()
    new_server, metrics = self._update([
        state['server'], broadcast, summed['sent'],
        collections.OrderedDict(result=result, measurements=measurements)])
    return ({'server': new_server, 'aggregator': aggregator}, [k['state'] for k in kept],
            metrics)


RUNTIMES = ('native', 'inprocess')


class ClientStateProcess:
  """initialize / next / get_model_weights / set_model_weights, like a
  LearningProcess, over a Round that keeps client state.

  Client inputs are (client index in 0..N-1, the round's client data).
  `initial_client_states`: one client's state per leaf stacked over the N
  clients ([N, ...] arrays, any tf.nest structure). `get_model_weights(state)`
  and `set_model_weights(state, weights)` read and write the model in the
  whole state (the server's part, and the clients' where they hold part of
  the model, e.g. private user rows). `runtime`: 'native' (TFF's, the default
  context) or 'inprocess'.
  """

  def __init__(self, round_: Round, initial_client_states, *,
               get_model_weights: Callable[[State], Any],
               set_model_weights: Callable[[State, Any], State], runtime: str = 'native'):
    if runtime not in RUNTIMES:
      raise ValueError(f'unknown runtime {runtime!r}; choose one of {RUNTIMES}')
    if runtime == 'inprocess':
      runner = _InProcess(round_)
      self._initialize, self._round = runner.initialize, runner.next
    else:
      self._initialize, self._round = federated(round_)
    self._initial_clients = tf.nest.map_structure(
        lambda a: np.array(a, copy=True), initial_client_states)
    self._get_model_weights = get_model_weights
    self._set_model_weights = set_model_weights

  def initialize(self) -> State:
    return {**self._initialize(),
            'clients': tf.nest.map_structure(np.copy, self._initial_clients)}

  def next(self, state: State, client_inputs: Sequence[tuple[int, Any]]
           ) -> tff.learning.templates.LearningProcessOutput:
    indices = [int(index) for index, _ in client_inputs]
    if len(set(indices)) != len(indices):
      raise ValueError(f'a client joins a round once; the cohort repeats one of {indices}')
    if not indices:
      raise ValueError('a round needs at least one client')
    clients = state['clients']
    rest, new_states, metrics = self._round(
        {'server': state['server'], 'aggregator': state['aggregator']},
        [data for _, data in client_inputs],
        [tf.nest.map_structure(lambda a, i=i: a[i], clients) for i in indices])
    leaves = [np.array(a, copy=True) for a in tf.nest.flatten(clients)]
    for index, new in zip(indices, new_states):
      for leaf, value in zip(leaves, tf.nest.flatten(new)):
        leaf[index] = value
    return tff.learning.templates.LearningProcessOutput(
        {**rest, 'clients': tf.nest.pack_sequence_as(clients, leaves)}, metrics)

  def get_model_weights(self, state: State):
    return self._get_model_weights(state)

  def set_model_weights(self, state: State, weights) -> State:
    return self._set_model_weights(state, weights)


def with_server(state: State, **replaced) -> State:
  """The state with entries of its server part replaced."""
  server = collections.OrderedDict(state['server'])
  server.update(replaced)
  return {**state, 'server': server}
