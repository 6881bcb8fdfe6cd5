"""The project's round: each client's own state in, its new state back, the rest
untouched; reports in cohort order; what clients send through TFF's
aggregation with its measurements in the metrics; checkpoints that resume
exactly; on both runtimes (SCAFFOLD's variates, FedMF's stored users and
MetaUA's reports go through this; their own tests check the algorithms)."""

import collections
import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import composer
from tff_rec.runtime import inprocess
from tff_rec.training import checkpoints
from tff_rec.training import loop

NUM_CLIENTS = 5
RUNTIMES = ('native', 'inprocess')
CLIENT_STATE = collections.OrderedDict(total=tff.TensorType(np.float32, [2]),
                                       visits=tff.TensorType(np.int32))


@tff.tensorflow.computation
def _server_init():
  return tf.constant(0.0)


@tff.tensorflow.computation(np.float32)
def _distributor(server):
  return server * 0.0 + 0.5  # the broadcast: a factor for the clients


@tff.tensorflow.computation(np.float32)
def _weights(server):
  return server


@tff.tensorflow.computation(np.float32, np.float32)
def _set_weights(server, weights):
  del server
  return weights


def _work(factor, value, state=None, *, report=False):
  output = collections.OrderedDict(update=value, metrics=collections.OrderedDict(clients=1))
  if state is not None:  # a new state that depends on the old: a lost or swapped one shows
    output['state'] = collections.OrderedDict(total=state['total'] * factor
                                              + tf.stack([value, -value]),
                                              visits=state['visits'] + 1)
  if report:
    output['report'] = value * 10.0
  return output


def _round(aggregation=tff.aggregators.SumFactory(), *, stateful=True, report=False):
  if stateful:
    work = tff.tensorflow.computation(lambda f, v, s: _work(f, v, s, report=report),
                                      np.float32, np.float32, CLIENT_STATE)
  else:
    work = tff.tensorflow.computation(lambda f, v: _work(f, v, report=report),
                                      np.float32, np.float32)
  result_type = aggregation.create(
      tff.TensorType(np.float32)).next.type_signature.result.result.member

  if report:
    def finalizer(server, factor, summed, aggregate, reports):
      del factor
      assert reports.shape == (summed['clients'],)
      # the reports in cohort order: the first client's counts double
      return np.float32(server + aggregate + reports[0] / 10.0), collections.OrderedDict(
          clients=summed['clients'], first=reports[0])
  else:
    @tff.tensorflow.computation(np.float32, np.float32, work.type_signature.result['metrics'],
                                result_type)
    def finalizer(server, factor, summed, aggregate):
      del factor
      return server + aggregate, collections.OrderedDict(clients=summed['clients'])

  return composer.Round(_server_init, _distributor, work, aggregation, finalizer, _weights,
                      _set_weights)


def _process(runtime='native', **options):
  initial = collections.OrderedDict(total=np.ones((NUM_CLIENTS, 2), np.float32),
                                    visits=np.zeros(NUM_CLIENTS, np.int32))
  return inprocess.for_runtime(composer.compose(_round(**options), initial), runtime)


def _reference(cohorts):
  total, visits = np.ones((NUM_CLIENTS, 2)), np.zeros(NUM_CLIENTS)
  for cohort in cohorts:
    for index, value in cohort:
      total[index] = total[index] * 0.5 + [value, -value]
      visits[index] += 1
  return total, visits


@pytest.mark.parametrize('runtime', RUNTIMES)
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
  with pytest.raises(ValueError, match='needs their initial states'):
    composer.RoundProcess(_round())


def test_the_initial_client_states_are_shared_read_only_never_copied(tff_runtime):
  initial = collections.OrderedDict(total=np.ones((NUM_CLIENTS, 2), np.float32),
                                    visits=np.zeros(NUM_CLIENTS, np.int32))
  state = composer.compose(_round(), initial).initialize()
  for name, array in state['clients'].items():
    assert np.shares_memory(array, initial[name]) and not array.flags.writeable, name
  state = composer.compose(_round(), initial).next(state, [(3, 2.0)]).state
  assert not state['clients']['total'].flags.writeable


@pytest.mark.parametrize('runtime', RUNTIMES)
def test_initial_client_states_made_at_each_initialize_are_held_by_the_state_alone(
    tff_runtime, runtime):
  made = []

  def initial():
    made.append(collections.OrderedDict(total=np.ones((NUM_CLIENTS, 2), np.float32),
                                        visits=np.zeros(NUM_CLIENTS, np.int32)))
    return made[-1]

  process = inprocess.for_runtime(composer.compose(_round(), initial), runtime)
  assert not made  # nothing made until a run starts
  state = process.initialize()
  assert len(made) == 1 and not state['clients']['total'].flags.writeable
  table = weakref.ref(made.pop()['total'])
  state = process.next(state, [(3, 2.0)]).state
  gc.collect()
  assert table() is None  # the next state replaced it, and nothing else held it
  np.testing.assert_array_equal(state['clients']['total'][3], [2.5, -1.5])
  process.initialize()
  assert len(made) == 1  # made again


@pytest.mark.parametrize('runtime', RUNTIMES)
def test_reports_reach_the_finalizer_stacked_in_cohort_order(tff_runtime, runtime):
  process = inprocess.for_runtime(composer.compose(_round(stateful=False, report=True)),
                                  runtime)
  output = process.next(process.initialize(), [3.0, -1.0, 0.5])
  assert process.get_model_weights(output.state) == pytest.approx(2.5 + 3.0)
  assert output.metrics['first'] == 30.0 and output.metrics['clients'] == 3


def test_a_round_without_client_state_or_reports_is_a_mapreduce_learning_process(
    tff_runtime):
  process = composer.compose(_round(stateful=False))
  assert isinstance(process, tff.learning.templates.LearningProcess)
  outputs = [p.next(p.initialize(), [2.0, 0.25]) for p in
             (process, inprocess.for_runtime(process, 'inprocess'))]
  for output in outputs:
    assert process.get_model_weights(output.state) == pytest.approx(2.25)
    assert output.metrics['clients'] == 2


@pytest.mark.parametrize('runtime', RUNTIMES)
def test_a_resumed_run_ends_in_the_state_of_an_uninterrupted_one(tff_runtime, tmp_path,
                                                                 runtime):
  ids = [f'c{k}' for k in range(NUM_CLIENTS)]

  def client_input(client_id, seed):
    return ids.index(client_id), np.float32(seed % 7)

  def run(rounds_, directory):
    return loop.run(
        _process(runtime), client_ids=ids, client_input=client_input,
        schedule=loop.Schedule(rounds=rounds_, clients_per_round=2, eval_every=0,
                               checkpoint_every=1, seed=3),
        evaluate=lambda weights: {},
        checkpointing=loop.Checkpointing(checkpoints.NumpyProgramStateManager(directory)))[0]

  straight = run(4, tmp_path / 'straight')
  run(2, tmp_path / 'resumed')
  resumed = run(4, tmp_path / 'resumed')
  for a, b in zip(tf.nest.flatten(straight), tf.nest.flatten(resumed), strict=True):
    np.testing.assert_array_equal(a, b)
  assert straight['clients']['visits'].sum() == 4 * 2


@pytest.mark.parametrize('runtime, aggregation, expected, measured', [
    # TFF's secure sum clips each value to its bounds: 2.0 counts as 1.0.
    ('inprocess', tff.aggregators.SecureSumFactory(1.0, -1.0), 1.0 - 0.5,
     {'secure_upper_clipped_count': 1, 'secure_upper_threshold': 1.0}),
    # TFF's DP mean over the expected cohort of 2 (no noise, a clip that never bites).
    ('native', tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(0.0, 2, 10.0),
     (2.0 - 0.5) / 2, {}),
    ('inprocess', tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(0.0, 2, 10.0),
     (2.0 - 0.5) / 2, {}),
])
def test_what_clients_send_goes_through_the_rounds_tff_aggregation(
    tff_runtime, runtime, aggregation, expected, measured):
  process = _process(runtime, aggregation=aggregation)
  output = process.next(process.initialize(), [(3, 2.0), (0, -0.5)])
  assert process.get_model_weights(output.state) == pytest.approx(expected)
  assert output.metrics['clients'] == 2
  for name, value in measured.items():
    assert output.metrics['aggregator'][name] == value
  np.testing.assert_allclose(output.state['clients']['total'][3], [2.5, -1.5])
