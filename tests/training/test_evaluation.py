import numpy as np
import tensorflow as tf

from tff_rec import metrics
from tff_rec.training import evaluation


def test_evaluator_result_does_not_depend_on_batch_size():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(100, 12)).astype(np.float32)
  y = rng.integers(1, 13, size=100).astype(np.int32)
  model = tf.keras.Sequential([tf.keras.layers.Lambda(lambda t: t)])
  evaluator = evaluation.Evaluator(model, [metrics.GlobalRecall(1), metrics.GlobalRecall(5)])
  results = [evaluator(tf.data.Dataset.from_tensor_slices((x, y)).batch(b)) for b in (7, 100)]
  assert results[0] == results[1]
  expected = np.mean(metrics.recall_at_k(y, x, 5).numpy())
  assert results[0]['recall_at_5'] == np.float32(expected)
