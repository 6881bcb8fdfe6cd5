"""State that lives on a client between the rounds it joins: one mechanism for
FedMF's stored user vectors and SCAFFOLD's control variates, on both runtimes.

A MapReduce round cannot hand a value back to one client: its client outputs
are only aggregated. So an algorithm that keeps client state writes its round
as four TensorFlow computations (`Round`): the server prepares a broadcast,
each client's work turns (broadcast, its data, its state) into what it sends
and its new state, the cohort's sends are summed, and the server updates.
`ClientStateProcess` runs them, on TFF's native runtime (as one federated
computation whose output holds the new states at tff.CLIENTS) or in this
process (each piece run by runtime.tensorflow_runner, where the op library and
the GPU are visible), and keeps every client's state in the program state,
`{'server': the round's server state, 'clients': per leaf of one client's
state an [N, ...] array}`. It is plain arrays, so the trainer's checkpoints
hold it whole and a resumed run continues exactly. The cost is N x one
client's state of memory where the round loop runs.
"""

import collections
import dataclasses
import functools
import os
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.runtime import tensorflow_runner

State = dict  # {'server': ..., 'clients': ...}


@dataclasses.dataclass(frozen=True)
class Round:
  """A round that keeps client state, as TensorFlow computations; what the
  clients send is summed (a mean is the sum over a count the clients send)."""
  initialize: tff.Computation   # () -> server state
  prepare: tff.Computation      # server state -> broadcast
  # (broadcast, client data, client state) -> {'sent': summed over the cohort,
  # 'state': the client's new state}
  client_work: tff.Computation
  update: tff.Computation       # (server state, broadcast, sum of sent) -> (server state, metrics)


def federated(round_: Round) -> tuple[tff.Computation, tff.Computation]:
  """(initialize, next) as federated computations (TFF's runtimes):
  next(server state, client data, client states) -> (server state, new client
  states at CLIENTS, metrics)."""
  server_type = round_.initialize.type_signature.result
  _, data_type, state_type = round_.client_work.type_signature.parameter

  @tff.federated_computation
  def initialize():
    return tff.federated_eval(round_.initialize, tff.SERVER)

  @tff.federated_computation(tff.FederatedType(server_type, tff.SERVER),
                             tff.FederatedType(data_type, tff.CLIENTS),
                             tff.FederatedType(state_type, tff.CLIENTS))
  def next_fn(server, client_data, client_states):
    broadcast = tff.federated_map(round_.prepare, server)
    outputs = tff.federated_map(round_.client_work, (
        tff.federated_broadcast(broadcast), client_data, client_states))
    new_server, metrics = tff.federated_map(round_.update, (
        server, broadcast, tff.federated_sum(outputs.sent)))
    return new_server, outputs.state, metrics

  return initialize, next_fn


class _InProcess:
  """The round's pieces run in this process, a client per core at a time; the
  sends are summed in cohort order (the same sum whatever the threads)."""

  def __init__(self, round_: Round):
    run = tensorflow_runner.TensorFlowRunner
    self._initialize, self._prepare = run(round_.initialize), run(round_.prepare)
    self._work = run(round_.client_work, sessions=os.cpu_count() or 1)
    self._update = run(round_.update)

  def initialize(self):
    return self._initialize()

  def next(self, server, client_data, client_states):
    broadcast = self._prepare(server)
    outputs = self._work.map([[broadcast, data, state]
                              for data, state in zip(client_data, client_states)])
    sent = functools.reduce(lambda a, b: tf.nest.map_structure(np.add, a, b),
                            [o['sent'] for o in outputs])
    new_server, metrics = self._update([server, broadcast, sent])
    return new_server, [o['state'] for o in outputs], metrics


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
    return {'server': self._initialize(),
            'clients': tf.nest.map_structure(np.copy, self._initial_clients)}

  def next(self, state: State, client_inputs: Sequence[tuple[int, Any]]
           ) -> tff.learning.templates.LearningProcessOutput:
    indices = [int(index) for index, _ in client_inputs]
    if len(set(indices)) != len(indices):
      raise ValueError(f'a client joins a round once; the cohort repeats one of {indices}')
    if not indices:
      raise ValueError('a round needs at least one client')
    clients = state['clients']
    server, new_states, metrics = self._round(
        state['server'], [data for _, data in client_inputs],
        [tf.nest.map_structure(lambda a, i=i: a[i], clients) for i in indices])
    leaves = [np.array(a, copy=True) for a in tf.nest.flatten(clients)]
    for index, new in zip(indices, new_states):
      for leaf, value in zip(leaves, tf.nest.flatten(new)):
        leaf[index] = value
    return tff.learning.templates.LearningProcessOutput(
        {'server': server, 'clients': tf.nest.pack_sequence_as(clients, leaves)}, metrics)

  def get_model_weights(self, state: State):
    return self._get_model_weights(state)

  def set_model_weights(self, state: State, weights) -> State:
    return self._set_model_weights(state, weights)


def with_server(state: State, **replaced) -> State:
  """The state with entries of its server part replaced."""
  server = collections.OrderedDict(state['server'])
  server.update(replaced)
  return {**state, 'server': server}
