"""SCAFFOLD (Karimireddy et al., ICML 2020), exact, with option II control variates.

Client i holds a control variate c_i (zeros at first); the server holds c.
A client starts from the server model x, takes K local steps
y <- y - lr (g(y) - c_i + c), and then sets c_i+ = c_i - c + (x - y) / (K lr).
It returns dy = y - x and dc = c_i+ - c_i; the server applies
x <- x + server_lr * mean(dy) and c <- c + (|S| / N) mean(dc).

tff.learning has no SCAFFOLD. The exact algorithm keeps a state on every
client between rounds, which a MapReduce round cannot hand back to a client
(its client outputs are only aggregated): so the round here is a federated
computation whose output includes each client's new c_i at tff.CLIENTS, and
client_state.ClientStateProcess keeps the variates of all N clients in the
program state, so checkpoints and resumes are exact. That costs N x model
floats of driver memory: the algorithm for small models (FedSubAvg's
MovieLens LR). It runs on TFF's native runtime, not the in-process one.
"""

import collections
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.algorithms import api
from tff_rec.algorithms import client_loop
from tff_rec.algorithms import client_state
from tff_rec.algorithms import templates


def _local_training(model, dataset, x, server_control, client_control, learning_rate):
  """K corrected SGD steps from x: (dy, dc, new c_i, loss sum, example count)."""

  @tf.function  # one function, so its automatic control dependencies order the
  def run():    # assignments, the steps and the final reads
    for variable, value in zip(model.trainable_variables, x):
      variable.assign(value)
    steps, loss_sum, count = client_loop.sgd(
        model, dataset, learning_rate,
        hook=lambda grads: [g - ci + c for g, c, ci in zip(grads, server_control,
                                                            client_control)])
    dy = [v - start for v, start in zip(model.trainable_variables, x)]
    # c_i+ = c_i - c + (x - y) / (K lr); a client with no step keeps its variate.
    new_control = [tf.where(steps > 0, ci - c - d / (tf.maximum(steps, 1.0) * learning_rate),
                            ci) for ci, c, d in zip(client_control, server_control, dy)]
    dc = [n - ci for n, ci in zip(new_control, client_control)]
    return dy, dc, new_control, loss_sum, count

  return run()


def build_round(model_fn: Callable[[], tff.learning.models.VariableModel],
                dataset_computation: tff.Computation, *, client_learning_rate: float,
                server_learning_rate: float, num_clients: int):
  """(initialize, next) federated computations of one SCAFFOLD round.

  next(server state, client dataset arguments, client variates) ->
  (server state, new client variates at CLIENTS, metrics).
  """
  with tf.Graph().as_default():
    model = model_fn()
    weights_type = tff.types.to_type([tff.TensorType(v.dtype.as_numpy_dtype, v.shape)
                                      for v in model.trainable_variables])

  @tff.tensorflow.computation
  def initial_server_state():
    model = model_fn()
    zeros = [tf.zeros_like(v) for v in model.trainable_variables]
    return collections.OrderedDict(
        model=[tf.identity(v) for v in model.trainable_variables],
        non_trainable=[tf.identity(v) for v in model.non_trainable_variables],
        control=zeros)

  @tff.tensorflow.computation(weights_type, weights_type, weights_type,
                              dataset_computation.type_signature.result)
  def client_update(x, server_control, client_control, dataset):
    model = model_fn()
    dy, dc, new_control, loss_sum, count = _local_training(
        model, dataset, x, server_control, client_control, client_learning_rate)
    return collections.OrderedDict(dy=dy, dc=dc, control=new_control, loss_sum=loss_sum,
                                   count=count)

  server_state_type = initial_server_state.type_signature.result

  @tff.tensorflow.computation(server_state_type, weights_type, weights_type, np.float32)
  def server_update(state, mean_dy, mean_dc, cohort_size):
    return collections.OrderedDict(
        model=[w + server_learning_rate * d for w, d in zip(state['model'], mean_dy)],
        non_trainable=state['non_trainable'],
        control=[c + cohort_size / num_clients * d for c, d in zip(state['control'], mean_dc)])

  @tff.federated_computation
  def initialize():
    return tff.federated_eval(initial_server_state, tff.SERVER)

  @tff.federated_computation(
      tff.FederatedType(server_state_type, tff.SERVER),
      tff.FederatedType(dataset_computation.type_signature.parameter, tff.CLIENTS),
      tff.FederatedType(weights_type, tff.CLIENTS))
  def next_fn(state, client_arguments, client_controls):
    datasets = tff.federated_map(dataset_computation, client_arguments)
    outputs = tff.federated_map(client_update, (
        tff.federated_broadcast(state.model), tff.federated_broadcast(state.control),
        client_controls, datasets))
    cohort_size = tff.federated_sum(tff.federated_value(np.float32(1), tff.CLIENTS))
    new_state = tff.federated_map(server_update, (
        state, tff.federated_mean(outputs.dy), tff.federated_mean(outputs.dc), cohort_size))
    metrics = tff.federated_map(tff.tensorflow.computation(
        lambda s, n: templates.round_metrics(s, n)), (
        tff.federated_sum(outputs.loss_sum), tff.federated_sum(outputs.count)))
    return new_state, outputs.control, metrics

  return initialize, next_fn


def build_process(model_fn, dataset_computation: tff.Computation, *, num_clients: int,
                  client_learning_rate: float, server_learning_rate: float = 1.0
                  ) -> client_state.ClientStateProcess:
  """SCAFFOLD with every client's variate kept between rounds (client_state).

  Client inputs are (client index in 0..N-1, dataset arguments); the clients'
  state is, per trainable variable, an [N, ...] array of their variates.
  """
  initialize, round_fn = build_round(
      model_fn, dataset_computation, client_learning_rate=client_learning_rate,
      server_learning_rate=server_learning_rate, num_clients=num_clients)
  with tf.Graph().as_default():
    shapes = [v.shape for v in model_fn().trainable_variables]

  def get_model_weights(state) -> tff.learning.models.ModelWeights:
    return tff.learning.models.ModelWeights(
        trainable=list(state['server']['model']),
        non_trainable=list(state['server']['non_trainable']))

  def set_model_weights(state, weights: tff.learning.models.ModelWeights):
    """The state with the server model replaced (the client variates stay)."""
    return client_state.with_server(state, model=list(weights.trainable),
                                    non_trainable=list(weights.non_trainable))

  return client_state.ClientStateProcess(
      initialize, round_fn, [np.zeros((num_clients, *s), np.float32) for s in shapes],
      get_model_weights=get_model_weights, set_model_weights=set_model_weights)


def build(task, options, training, *, name: str):
  """SCAFFOLD on any task with a Keras model (native runtime: the driver keeps c_i)."""
  del options  # none
  api.require(task, name, api.KERAS, api.KERAS_WHY)
  if training.runtime != 'native':
    raise api.NotApplicable(
        f"--algorithm={name} keeps every client's control variate between rounds, which "
        'a MapReduce round cannot hand back to a client; use --runtime=native')
  if training.client_optimizer.name != 'sgd' or training.server_optimizer.name != 'sgd':
    raise api.NotApplicable(
        f'--algorithm={name} takes SGD steps at the clients and the server; got '
        f'--client_optimizer={training.client_optimizer.name} / --server_optimizer='
        f'{training.server_optimizer.name}')
  if training.aggregator.name != 'mean':
    raise api.NotApplicable(
        f'--algorithm={name} averages updates and control variates with a plain mean '
        '(its driver-kept variates are outside TFF aggregators); use --aggregator=mean')
  ids = list(task.train_client_ids)
  process = build_process(
      task.model_fn, api.keras_dataset_computation(task), num_clients=len(ids),
      client_learning_rate=training.client_optimizer.learning_rate,
      server_learning_rate=training.server_optimizer.learning_rate)
  index = {client: k for k, client in enumerate(ids)}

  def client_input(client_id: str, seed: int):
    return index[client_id], task.client_arguments(client_id, seed)

  return api.Built(process, ids, client_input)
