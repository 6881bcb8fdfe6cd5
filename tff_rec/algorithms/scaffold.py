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
the driver (`ScaffoldProcess`) keeps the variates of all N clients, in the
program state, so checkpoints and resumes are exact. That costs N x model
floats of driver memory: the algorithm for small models (FedSubAvg's
MovieLens LR). It runs on TFF's native runtime, not the in-process one.
"""

import collections
import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.algorithms import api


@dataclasses.dataclass
class _Output:
  state: Any
  metrics: Any


def _local_training(model, dataset, x, server_control, client_control, learning_rate):
  """K corrected SGD steps from x: (dy, dc, new c_i, loss sum, example count)."""

  @tf.function  # one function, so its automatic control dependencies order the
  def run():    # assignments, the steps and the final reads
    for variable, value in zip(model.trainable_variables, x):
      variable.assign(value)
    steps, loss_sum, count = tf.constant(0.0), tf.constant(0.0), tf.constant(0.0)
    # iter(): autograph turns a loop over the dataset itself into a slow
    # ReduceDataset op (see baselines.CLIENT_LOOP).
    for batch in iter(dataset):
      with tf.GradientTape() as tape:
        output = model.forward_pass(batch, training=True)
      grads = tape.gradient(output.loss, model.trainable_variables)
      for variable, grad, c, ci in zip(model.trainable_variables, grads, server_control,
                                       client_control):
        variable.assign_sub(learning_rate * (tf.convert_to_tensor(grad) - ci + c))
      size = tf.cast(output.num_examples, tf.float32)
      steps, loss_sum, count = steps + 1.0, loss_sum + output.loss * size, count + size
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
    loss_sum, count = tff.federated_sum(outputs.loss_sum), tff.federated_sum(outputs.count)
    metrics = tff.federated_zip(collections.OrderedDict(
        loss=tff.federated_map(tff.tensorflow.computation(
            lambda s, n: s / tf.maximum(n, 1.0)), (loss_sum, count)),
        num_examples=count))
    return new_state, outputs.control, metrics

  return initialize, next_fn


class ScaffoldProcess:
  """initialize / next / get_model_weights, with every client's variate in the state.

  Client inputs are (client index in 0..N-1, dataset arguments); the state is
  {'server': server state, 'client_controls': per trainable variable an
  [N, ...] array}, plain arrays a checkpoint holds.
  """

  def __init__(self, model_fn, dataset_computation: tff.Computation, *, num_clients: int,
               client_learning_rate: float, server_learning_rate: float = 1.0):
    self._initialize, self._next = build_round(
        model_fn, dataset_computation, client_learning_rate=client_learning_rate,
        server_learning_rate=server_learning_rate, num_clients=num_clients)
    self._num_clients = num_clients

  def initialize(self):
    server = self._initialize()
    return {'server': server, 'client_controls': [
        np.zeros((self._num_clients, *np.shape(w)), np.float32) for w in server['model']]}

  def next(self, state, client_inputs: Sequence[tuple[int, Any]]) -> _Output:
    indices = [int(index) for index, _ in client_inputs]
    controls = state['client_controls']
    server, new_controls, metrics = self._next(
        state['server'], [arguments for _, arguments in client_inputs],
        [[c[i] for c in controls] for i in indices])
    controls = [c.copy() for c in controls]
    for index, new in zip(indices, new_controls):
      for table, value in zip(controls, new):
        table[index] = value
    return _Output({'server': server, 'client_controls': controls},
                   collections.OrderedDict(client_work=collections.OrderedDict(train=metrics)))

  def get_model_weights(self, state) -> tff.learning.models.ModelWeights:
    return tff.learning.models.ModelWeights(
        trainable=list(state['server']['model']),
        non_trainable=list(state['server']['non_trainable']))

  def set_model_weights(self, state, weights: tff.learning.models.ModelWeights):
    """The state with the server model replaced (the client variates stay)."""
    server = collections.OrderedDict(state['server'])
    server['model'], server['non_trainable'] = (list(weights.trainable),
                                                list(weights.non_trainable))
    return {**state, 'server': server}



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
  process = ScaffoldProcess(
      task.model_fn, api.keras_dataset_computation(task), num_clients=len(ids),
      client_learning_rate=training.client_optimizer.learning_rate,
      server_learning_rate=training.server_optimizer.learning_rate)
  index = {client: k for k, client in enumerate(ids)}

  def client_input(client_id: str, seed: int):
    return index[client_id], task.client_arguments(client_id, seed)

  return api.Built(process, ids, client_input)
