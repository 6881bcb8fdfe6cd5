"""Exact SCAFFOLD against a numpy reference on a quadratic with partial cohorts."""


import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import composer
from tff_rec.algorithms import api
from tff_rec.algorithms import scaffold
from tff_rec.data import sliced
from tff_rec.runtime import inprocess
from tff_rec.training import resources

ROWS = [np.array([0, 1]), np.array([1]), np.array([1]), np.array([0]), np.array([1]),
        np.array([0])]
STEPS, LR, SERVER_LR = 2, 0.2, 0.8
IDLE = 5  # a client with no step this round (no batch): it keeps its variate


def _model_fn():
  keras_model = tf.keras.Sequential([
      tf.keras.Input(shape=(), dtype=tf.int32),
      tf.keras.layers.Embedding(2, 1, embeddings_initializer='ones')])
  return tff.learning.models.from_keras_model(
      keras_model, loss=tf.keras.losses.MeanSquaredError(reduction='sum'),
      input_spec=(tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, 1], tf.float32)))


def _steps(client: int) -> int:
  return 0 if client == IDLE else STEPS


def _batches(client):
  """The client's rows, one batch, its steps times: each step's loss is sum of w_r^2."""
  rows = ROWS[client]
  columns = (rows.astype(np.int32), np.zeros([len(rows), 1], np.float32))
  steps = _steps(client)
  return sliced.Batches(columns, np.zeros(steps, np.int32), np.full(steps, len(rows), np.int32),
                        np.arange(len(rows), dtype=np.int32))


BATCHES = sliced.tff_type(_batches(0))


def _reference(cohorts):
  x, c = np.ones(2), np.zeros(2)
  controls = np.zeros((len(ROWS), 2))
  for cohort in cohorts:
    dys, dcs = [], []
    for i in cohort:
      mask = np.isin(np.arange(2), ROWS[i]).astype(float)
      y = x.copy()
      for _ in range(_steps(i)):
        y -= LR * (2 * y * mask - controls[i] + c)
      new = controls[i] - c + (x - y) / (STEPS * LR) if _steps(i) else controls[i]
      dys.append(y - x)
      dcs.append(new - controls[i])
      controls[i] = new
    x = x + SERVER_LR * np.mean(dys, 0)
    c = c + len(cohort) / len(ROWS) * np.mean(dcs, 0)
  return x, c, controls


# TFF's aggregations that change nothing here: a secure sum whose bounds never
# bite, a DP mean with no noise, a clip that never bites and the true cohort (3).
SECURE = dict(aggregation=tff.aggregators.SecureSumFactory(100.0, -100.0))
DP = dict(aggregation=tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(0.0, 3, 1e6),
          averaged=True)


def _process(num_clients: int, aggregation=tff.aggregators.SumFactory(), averaged=False,
             **options):
  parts = scaffold.build_round(_model_fn, BATCHES, num_clients=num_clients, averaged=averaged,
                               **options)
  return composer.compose_parts(parts, aggregation)


@pytest.mark.parametrize('runtime, aggregation', [
    ('native', {}), ('inprocess', {}), ('inprocess', SECURE), ('native', DP),
    ('inprocess', DP)])
def test_rounds_match_the_reference(tff_runtime, runtime, aggregation):
  cohorts = [[0, 1, 2], [0, 3, IDLE], [1, 3, 0]]  # c is not 0 when the idle client joins
  process = inprocess.for_runtime(_process(
      len(ROWS), client_learning_rate=LR, server_learning_rate=SERVER_LR, **aggregation),
                                  runtime)
  state = process.initialize()
  for cohort in cohorts:
    output = process.next(state, [(i, _batches(i)) for i in cohort])
    state = output.state
  x, c, controls = _reference(cohorts)
  np.testing.assert_allclose(process.get_model_weights(state).trainable[0][:, 0], x, rtol=1e-5)
  np.testing.assert_allclose(state['server']['control'][0][:, 0], c, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(state['clients'][0][:, :, 0], controls, rtol=1e-5,
                             atol=1e-7)
  assert output.metrics['client_work']['train']['num_examples'] == (1 + 1 + 2) * STEPS


def test_variates_beyond_half_the_memory_are_refused_before_allocating():
  memory = resources.machine_memory()
  with tf.Graph().as_default():
    parameters = sum(int(np.prod(v.shape)) for v in _model_fn().trainable_variables)
  clients = int(memory / 4 / parameters)  # variates of about the whole memory
  with pytest.raises(api.NotApplicable, match=rf'{clients} clients x {parameters} parameters'):
    _process(clients, client_learning_rate=0.1, server_learning_rate=1.0)
