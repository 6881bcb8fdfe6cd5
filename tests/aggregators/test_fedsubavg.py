"""FedSubAvg: feature heat, the row correction, Example 1 of the paper, composition."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.aggregators import fedsubavg
from tff_rec.algorithms import baselines
from tff_rec.runtime import inprocess


def test_feature_heat_counts_clients_or_their_weights_once_per_row():
  rows = [np.array([0, 2, 2, 2]), np.array([2, 3]), np.array([3])]
  np.testing.assert_array_equal(fedsubavg.feature_heat(rows, 5), [1, 0, 2, 2, 0])
  np.testing.assert_array_equal(fedsubavg.feature_heat(rows, 5, weights=[4, 10, 1]),
                                [4, 0, 14, 11, 0])
  with pytest.raises(ValueError, match='row id 7 is outside the table of 5 rows'):
    fedsubavg.feature_heat([np.array([7])], 5)


def test_corrections_and_dispersion():
  heat = np.array([1, 0, 2, 4.0])
  np.testing.assert_allclose(fedsubavg.corrections(heat, 4), [4, 1, 2, 1])
  np.testing.assert_allclose(fedsubavg.corrections(heat, 4, bound=3), [3, 1, 2, 1])
  assert fedsubavg.dispersion(heat) == 4.0


def _example_1_process(num_clients, *, learning_rate, correct, inner=None):
  """The paper's Example 1 as a tff.learning process.

  Parameters (w1, w2) are rows 0 and 1 of a 2 x 1 table. Client 0's data
  hold both rows, every other client row 1 only; the loss is the sum of
  squares of the rows its examples index, so client 0 minimises w1^2 + w2^2
  and the others w2^2. One exact gradient step per client, all clients every
  round, uniform weights, the server adds the (corrected) mean update.
  """
  def model_fn():
    keras_model = tf.keras.Sequential([
        tf.keras.Input(shape=(), dtype=tf.int32),
        tf.keras.layers.Embedding(2, 1, name='w', embeddings_initializer='ones')])
    return tff.learning.models.from_keras_model(
        keras_model, loss=tf.keras.losses.MeanSquaredError(reduction='sum'),
        input_spec=(tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, 1], tf.float32)))

  client_rows = [np.array([0, 1])] + [np.array([1])] * (num_clients - 1)
  heat = fedsubavg.feature_heat(client_rows, 2)
  scales = [fedsubavg.corrections(heat, num_clients) if correct else None]
  aggregator = fedsubavg.FedSubAvgFactory(scales, tables=[True], inner=inner)
  process = tff.learning.algorithms.build_weighted_fed_avg(
      model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate),
      server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0),
      client_weighting=tff.learning.ClientWeighting.UNIFORM, model_aggregator=aggregator,
      loop_implementation=baselines.CLIENT_LOOP)
  data = [tf.data.Dataset.from_tensor_slices((rows.astype(np.int32),
                                              np.zeros([len(rows), 1], np.float32))).batch(2)
          for rows in client_rows]
  return process, data


@pytest.mark.parametrize('correct', [False, True])
def test_example_1_fedavg_and_fedsubavg_rates(tff_runtime, correct):
  num_clients, rate, rounds = 10, 0.25, 3
  process, data = _example_1_process(num_clients, learning_rate=rate, correct=correct)
  state = process.initialize()
  for _ in range(rounds):
    output = process.next(state, data)
    state = output.state
  w1, w2 = process.get_model_weights(state).trainable[0][:, 0]
  shrink = (1 - 2 * rate) if correct else (1 - 2 * rate / num_clients)
  np.testing.assert_allclose(w1, shrink ** rounds, rtol=1e-6)  # w1^0 = 1
  np.testing.assert_allclose(w2, (1 - 2 * rate) ** rounds, rtol=1e-6)
  aggregator = output.metrics['aggregator']
  assert aggregator['submodel_bytes'] == pytest.approx((2 + 1 * (num_clients - 1)) * 4
                                                        / num_clients)
  assert aggregator['model_bytes'] == 8


def test_composes_with_secure_aggregation(tff_runtime):
  # TFF's native worker has no secure sum; the in-process runtime runs it.
  secure = tff.learning.secure_aggregator(zeroing=False, clipping=False)
  process, data = _example_1_process(10, learning_rate=0.25, correct=True, inner=secure)
  process = inprocess.InProcessLearningProcess(process)
  output = process.next(process.initialize(), data)
  w1, w2 = process.get_model_weights(output.state).trainable[0][:, 0]
  np.testing.assert_allclose([w1, w2], [0.5, 0.5], atol=1e-3)  # quantised sums


def test_scales_must_match_the_value():
  factory = fedsubavg.FedSubAvgFactory([np.ones(3, np.float32)])
  value_type = tff.types.to_type([tff.TensorType(np.float32, [2, 4])])
  with pytest.raises(ValueError, match='a row scale of 3 rows for a tensor of shape'):
    factory.create(value_type, tff.TensorType(np.float32))
  with pytest.raises(ValueError, match='2 row scales for a value of 1 tensors'):
    fedsubavg.FedSubAvgFactory([None, None]).create(value_type, tff.TensorType(np.float32))


def test_submodel_bytes_count_changed_rows_and_dense_tensors(tff_runtime):
  factory = fedsubavg.FedSubAvgFactory.measuring_only([True, False])
  value_type = tff.types.to_type([tff.TensorType(np.float32, [5, 3]),
                                  tff.TensorType(np.float32, [2])])
  process = factory.create(value_type, tff.TensorType(np.float32))
  one = [np.zeros([5, 3], np.float32), np.ones(2, np.float32)]
  two = [np.zeros([5, 3], np.float32), np.ones(2, np.float32)]
  one[0][[1, 4], 0] = 1.0
  two[0][2, 2] = -3.0
  output = process.next(process.initialize(), [one, two], [1.0, 3.0])
  assert output.measurements['submodel_bytes'] == pytest.approx(((2 * 3 + 2) + (3 + 2)) / 2 * 4)
  np.testing.assert_allclose(output.result[0][2, 2], -3.0 * 3 / 4)
