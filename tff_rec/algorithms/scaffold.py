"""SCAFFOLD (Karimireddy et al., ICML 2020), exact, with option II control variates.

Client i holds a control variate c_i (zeros at first); the server holds c.
A client starts from the server model x, takes K local steps
y <- y - lr (g(y) - c_i + c), and then sets c_i+ = c_i - c + (x - y) / (K lr).
It returns dy = y - x and dc = c_i+ - c_i; the server applies
x <- x + server_lr * mean(dy) and c <- c + (|S| / N) mean(dc).

tff.learning has no SCAFFOLD. The exact algorithm keeps a state on every
client between rounds, which a MapReduce round cannot hand back to a client
(its client outputs are only aggregated): it is the project's round
(composer.Round) with client state, whose driver keeps the variates of all N
clients in the program state, so checkpoints and resumes are exact. That
costs N x model floats of trainer memory: the algorithm for small models
(FedSubAvg's MovieLens LR). dy and dc go through the round's aggregator, so
TFF's secure sum and DP mean wrap them. A cohort's clients may train in
lockstep (keras_lockstep, with each client's correction), where the Keras model
allows it.
"""

import collections
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import registry
from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import rounds
from tff_rec.training import functional
from tff_rec.training import keras_lockstep
from tff_rec.training import resources


def build_round(model_fn: Callable[[], tff.learning.models.VariableModel],
                batches_type: tff.Type, *, client_learning_rate: float,
                server_learning_rate: float, num_clients: int, averaged: bool = False,
                keras: keras_lockstep.KerasModel | None = None) -> rounds.Parts:
  """SCAFFOLD's round, for the composer, with every client's variate kept between
  rounds: client inputs are (client index in 0..N-1, its training batches of the
  round, sliced.Batches of `batches_type`); the clients' state is, per trainable
  variable, an [N, ...] array of their variates.

  dy and dc go through the composer's unweighted aggregation: a sum (TFF's plain
  or secure sum), or (`averaged`) a mean over the expected cohort such as TFF's
  DP mean. With `keras` (the Keras model model_fn wraps), the round has a
  lockstep form where the model allows one (keras_lockstep.KerasModel.refusal).
  """
  initial_server_state, get_model_weights, set_model_weights = rounds.keras_server_model(
      model_fn, more=lambda state: {'control': [tf.zeros_like(w) for w in state['weights']]})
  server_state_type = initial_server_state.type_signature.result
  weights_type = server_state_type['weights']

  @tff.tensorflow.computation(server_state_type)
  def distributor(state):
    return collections.OrderedDict(model=state['weights'], control=state['control'])

  sgd = tff.learning.optimizers.build_sgdm(client_learning_rate)

  def sent(x, server_control, client_control, trained, steps, loss_sum, count):
    """What clients send and keep: each leaf a client's, or in lockstep the clients'
    (x, c and `steps`, one per weight, broadcast against theirs)."""
    dy = [y - start for y, start in zip(trained, x)]
    # c_i+ = c_i - c + (x - y) / (K lr); a client with no step keeps its variate.
    new_control = [
        tf.where(k > 0, ci - c - d / (tf.maximum(k, 1.0) * client_learning_rate), ci)
        for ci, c, d, k in zip(client_control, server_control, dy, steps)]
    return collections.OrderedDict(
        update=collections.OrderedDict(
            dy=dy, dc=[n - ci for n, ci in zip(new_control, client_control)]),
        metrics=collections.OrderedDict(clients=tf.ones_like(loss_sum), loss_sum=loss_sum,
                                        count=tf.cast(count, tf.float32)),
        state=new_control)

  @tff.tensorflow.computation(distributor.type_signature.result, batches_type, weights_type)
  def client_work(broadcast, batches, client_control):
    # K corrected SGD steps from the broadcast x.
    x, server_control = broadcast['model'], broadcast['control']
    trained = functional.train(
        model_fn(), sgd, x, batches,
        hook=lambda grads: [g - ci + c for g, c, ci in zip(grads, server_control,
                                                            client_control)])
    steps = tf.cast(trained.steps, tf.float32)
    return sent(x, server_control, client_control, trained.weights, [steps] * len(x),
                trained.loss_sum, trained.count)

  def finalizer(state, broadcast, summed, aggregate):
    del broadcast  # the server's own
    cohort = summed['clients']
    dy, dc = aggregate['dy'], aggregate['dc']
    mean_dy = dy if averaged else [d / cohort for d in dy]
    sum_dc = [d * cohort for d in dc] if averaged else dc
    new_state = collections.OrderedDict(
        weights=[w + server_learning_rate * d for w, d in zip(state['weights'], mean_dy)],
        non_trainable=state['non_trainable'],
        control=[c + d / num_clients for c, d in zip(state['control'], sum_dc)])
    return new_state, rounds.round_metrics(summed['loss_sum'], summed['count'])

  shapes = [t.shape for t in weights_type]
  parameters = sum(int(np.prod(s)) for s in shapes)
  refusal = resources.too_large(4 * num_clients * parameters,  # float32 variates
                                f'{num_clients} clients x {parameters} parameters')
  if refusal:
    raise api.NotApplicable(
        f'--algorithm=scaffold keeps a control variate of the whole model for each client: '
        f'{refusal}; use fewer clients or a smaller model')

  def side_by_side(predict):  # the cohort in lockstep, each its own correction
    @tff.tensorflow.computation(distributor.type_signature.result, (
        keras_lockstep.stacked_type(batches_type),
        [tff.TensorType(np.float32, [None, *s]) for s in shapes]))
    def trained_side_by_side(broadcast, stacked):
      (columns, mask), client_control = stacked
      x, server_control = broadcast['model'], broadcast['control']
      trained, loss_sum, count = keras_lockstep.train(
          predict, keras.loss, sgd, x, columns, mask,
          correction=[c - ci for c, ci in zip(server_control, client_control)])
      steps = keras_lockstep.steps(mask)
      return sent(x, server_control, client_control, trained,
                  [tf.reshape(steps, [-1] + [1] * len(s)) for s in shapes], loss_sum, count)

    return trained_side_by_side

  return rounds.Parts(initial_server_state, distributor, client_work, finalizer,
                      get_model_weights, set_model_weights, averaged=averaged,
                      initial_client_states=[np.zeros((num_clients, *s), np.float32)
                                             for s in shapes],
                      **keras_lockstep.form(
                          keras, side_by_side, state_bytes=3 * 4 * parameters,
                          stack_states=lambda states: [np.stack(v) for v in zip(*states)],
                          # client by client's round: LR 1.57-2.32x, DCN 1.07-1.65x, and a
                          # first round 1.2 s against 5.2 (results/benchmarks_runtimes.md)
                          auto=True))


def build(task, options, training, *, name: str):
  """SCAFFOLD on any task with a Keras model (its round keeps the c_i)."""
  del options  # none
  if training.client_optimizer.name != 'sgd' or training.server_optimizer.name != 'sgd':
    raise api.NotApplicable(
        f'--algorithm={name} takes SGD steps at the clients and the server; this run\'s '
        f'are {training.client_optimizer.name} / {training.server_optimizer.name} (as given, '
        f'else the task\'s defaults): give --client_optimizer=sgd --server_optimizer=sgd')
  ids = list(task.train_client_ids)
  parts = build_round(
      task.model_fn, api.batches_type(task), num_clients=len(ids),
      client_learning_rate=training.client_optimizer.learning_rate,
      server_learning_rate=training.server_optimizer.learning_rate,
      averaged=training.aggregator.averages,
      keras=keras_lockstep.KerasModel.of(task))
  index = {client: k for k, client in enumerate(ids)}

  def client_input(client_id: str, seed: int):
    return index[client_id], task.client_batches(client_id, seed)

  return api.Built(parts, ids, client_input)


registry.register('scaffold', registry.Algorithm(
    'SCAFFOLD, exact, with client control variates', {'keras_batches': build},
    aggregators=inner.NAMES, composition_note='its clients correct their steps with '
    "variates of the model's own update, which a stacked correction would not follow"))
