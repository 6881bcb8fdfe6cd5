"""State that lives on a client between the rounds it joins: one mechanism for
FedMF's stored user vectors and SCAFFOLD's control variates.

A MapReduce round cannot hand a value back to one client: its client outputs
are only aggregated. So an algorithm that keeps client state writes its round
as a federated computation

    round(server state, client data, client states)
        -> (server state, new client states at tff.CLIENTS, metrics)

and `ClientStateProcess` keeps every client's state in the program state,
`{'server': the round's server state, 'clients': per leaf of one client's
state an [N, ...] array}`. It is plain arrays, so the trainer's checkpoints
hold it whole and a resumed run continues exactly. The cost is N x one
client's state of memory where the round loop runs. The round runs on TFF's
native runtime; the in-process runtime runs MapReduce rounds only.
"""

import collections
import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

State = dict  # {'server': ..., 'clients': ...}


@dataclasses.dataclass
class Output:
  state: Any
  metrics: Any


class ClientStateProcess:
  """initialize / next / get_model_weights / set_model_weights, like a
  LearningProcess, over a round that keeps client state.

  Client inputs are (client index in 0..N-1, the round's client data).
  `initial_client_states`: one client's state per leaf stacked over the N
  clients ([N, ...] arrays, any tf.nest structure). `get_model_weights(state)`
  and `set_model_weights(state, weights)` read and write the model in the
  whole state (the server's part, and the clients' where they hold part of
  the model, e.g. private user rows).
  """

  def __init__(self, initialize: tff.Computation, round_fn: tff.Computation,
               initial_client_states, *,
               get_model_weights: Callable[[State], Any],
               set_model_weights: Callable[[State, Any], State]):
    self._initialize = initialize
    self._round = round_fn
    self._initial_clients = tf.nest.map_structure(
        lambda a: np.array(a, copy=True), initial_client_states)
    self._get_model_weights = get_model_weights
    self._set_model_weights = set_model_weights

  def initialize(self) -> State:
    return {'server': self._initialize(),
            'clients': tf.nest.map_structure(np.copy, self._initial_clients)}

  def next(self, state: State, client_inputs: Sequence[tuple[int, Any]]) -> Output:
    indices = [int(index) for index, _ in client_inputs]
    if len(set(indices)) != len(indices):
      raise ValueError(f'a client joins a round once; the cohort repeats one of {indices}')
    clients = state['clients']
    server, new_states, metrics = self._round(
        state['server'], [data for _, data in client_inputs],
        [tf.nest.map_structure(lambda a, i=i: a[i], clients) for i in indices])
    leaves = [np.array(a, copy=True) for a in tf.nest.flatten(clients)]
    for index, new in zip(indices, new_states):
      for leaf, value in zip(leaves, tf.nest.flatten(new)):
        leaf[index] = value
    return Output({'server': server,
                   'clients': tf.nest.pack_sequence_as(clients, leaves)}, metrics)

  def get_model_weights(self, state: State):
    return self._get_model_weights(state)

  def set_model_weights(self, state: State, weights) -> State:
    return self._set_model_weights(state, weights)


def with_server(state: State, **replaced) -> State:
  """The state with entries of its server part replaced."""
  server = collections.OrderedDict(state['server'])
  server.update(replaced)
  return {**state, 'server': server}
