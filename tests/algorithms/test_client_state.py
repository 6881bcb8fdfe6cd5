"""Client state between rounds: each client's own state in, its new state back,
the rest untouched, and checkpoints that resume exactly (SCAFFOLD's variates and
FedMF's stored users go through this; their own tests check the algorithms)."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.algorithms import client_state
from tff_rec.training import checkpoints
from tff_rec.training import loop

NUM_CLIENTS = 5
CLIENT_STATE = collections.OrderedDict(total=tff.TensorType(np.float32, [2]),
                                       visits=tff.TensorType(np.int32))


@tff.tensorflow.computation
def _server_init():
  return tf.constant(0.0)


@tff.tensorflow.computation(np.float32)
def _prepare(server):
  return server * 0.0 + 0.5  # the broadcast: a factor for the clients


@tff.tensorflow.computation(np.float32, np.float32, CLIENT_STATE)
def _client_work(factor, value, state):
  # A client's new state depends on its old one, so a lost or swapped state shows.
  return collections.OrderedDict(
      aggregated=value, sent=tf.constant(1),
      state=collections.OrderedDict(total=state['total'] * factor + tf.stack([value, -value]),
                                    visits=state['visits'] + 1))


def _round(aggregation=tff.aggregators.SumFactory()):
  @tff.tensorflow.computation(np.float32, np.float32, np.int32,
                              client_state.aggregate_type(aggregation, np.float32))
  def update(server, factor, clients, aggregate):
    del factor
    return server + aggregate['result'], collections.OrderedDict(clients=clients)

  return client_state.Round(_server_init, _prepare, _client_work, update, aggregation)


ROUND = _round()


def _process(runtime='native'):
  initial = collections.OrderedDict(total=np.ones((NUM_CLIENTS, 2), np.float32),
                                    visits=np.zeros(NUM_CLIENTS, np.int32))
  return client_state.ClientStateProcess(
      ROUND, initial, get_model_weights=lambda state: state['server'],
      set_model_weights=lambda state, weights: {**state, 'server': np.float32(weights)},
      runtime=runtime)


def _reference(cohorts):
  total, visits = np.ones((NUM_CLIENTS, 2)), np.zeros(NUM_CLIENTS)
  for cohort in cohorts:
    for index, value in cohort:
      total[index] = total[index] * 0.5 + [value, -value]
      visits[index] += 1
  return total, visits


@pytest.mark.parametrize('runtime', client_state.RUNTIMES)
def test_each_client_gets_its_own_state_back_and_the_rest_stay(tff_runtime, runtime):
  process = _process(runtime)
  cohorts = [[(3, 2.0), (0, 1.0)], [(0, 4.0), (4, -1.0), (3, 0.5)]]
  state = process.initialize()
  first = state
  for cohort in cohorts:
    state = process.next(state, cohort).state
  total, visits = _reference(cohorts)
  np.testing.assert_allclose(state['clients']['total'], total)
  np.testing.assert_array_equal(state['clients']['visits'], visits)
  assert process.get_model_weights(state) == pytest.approx(6.5)
  assert first['clients']['visits'].sum() == 0  # an earlier state is never written
  assert process.set_model_weights(state, 2.0)['server'] == 2.0
  with pytest.raises(ValueError, match='a client joins a round once'):
    process.next(state, [(1, 1.0), (1, 2.0)])
  with pytest.raises(ValueError, match='unknown runtime'):
    _process('gpu')


@pytest.mark.parametrize('runtime', client_state.RUNTIMES)
def test_a_resumed_run_ends_in_the_state_of_an_uninterrupted_one(tff_runtime, tmp_path,
                                                                 runtime):
  ids = [f'c{k}' for k in range(NUM_CLIENTS)]

  def client_input(client_id, seed):
    return ids.index(client_id), np.float32(seed % 7)

  def run(rounds, directory):
    return loop.run(
        _process(runtime), client_ids=ids, client_input=client_input,
        schedule=loop.Schedule(rounds=rounds, clients_per_round=2, eval_every=0,
                               checkpoint_every=1, seed=3),
        evaluate=lambda weights: {},
        checkpointing=loop.Checkpointing(checkpoints.NumpyProgramStateManager(directory)))[0]

  straight = run(4, tmp_path / 'straight')
  run(2, tmp_path / 'resumed')
  resumed = run(4, tmp_path / 'resumed')
  for a, b in zip(tf.nest.flatten(straight), tf.nest.flatten(resumed)):
    np.testing.assert_array_equal(a, b)
  assert straight['clients']['visits'].sum() == 4 * 2


@pytest.mark.parametrize('runtime, aggregation, expected', [
    # TFF's secure sum clips each value to its bounds: 2.0 counts as 1.0.
    ('inprocess', tff.aggregators.SecureSumFactory(1.0, -1.0), 1.0 - 0.5),
    # TFF's DP mean over the expected cohort of 2 (no noise, a clip that never bites).
    ('native', tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(0.0, 2, 10.0),
     (2.0 - 0.5) / 2),
    ('inprocess', tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(0.0, 2, 10.0),
     (2.0 - 0.5) / 2),
])
def test_what_clients_send_goes_through_the_rounds_tff_aggregation(tff_runtime, runtime,
                                                                   aggregation, expected):
  round_ = _round(aggregation)
  process = client_state.ClientStateProcess(
      round_, collections.OrderedDict(total=np.ones((NUM_CLIENTS, 2), np.float32),
                                      visits=np.zeros(NUM_CLIENTS, np.int32)),
      get_model_weights=lambda state: state['server'], set_model_weights=None,
      runtime=runtime)
  output = process.next(process.initialize(), [(3, 2.0), (0, -0.5)])
  assert process.get_model_weights(output.state) == pytest.approx(expected)
  assert output.metrics['clients'] == 2
  np.testing.assert_allclose(output.state['clients']['total'][3], [2.5, -1.5])
