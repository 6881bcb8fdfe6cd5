import numpy as np
import pytest
import tensorflow as tf

from tff_rec.models import hashed_embedding
from tff_rec.ops import hashed_embedding as he


def test_drop_in_shapes_mask_and_parameter_count():
  layer = hashed_embedding.HashedEmbedding(1000, 8, memory_size=64, mask_zero=True, seed=1)
  ids = tf.constant([[3, 0, 999], [1, 2, 0]])
  out = layer(ids)
  assert out.shape == (2, 3, 8)
  assert layer.count_params() == 64
  np.testing.assert_array_equal(layer.compute_mask(ids), ids.numpy() != 0)
  np.testing.assert_array_equal(
      tf.reshape(out, [-1, 8]),
      he.hashed_embedding_lookup(layer.memory, ids, dim=8, seed=1))


def test_ids_beyond_input_dim_are_an_error():
  layer = hashed_embedding.HashedEmbedding(10, 4, memory_size=16)
  with pytest.raises(tf.errors.InvalidArgumentError, match='ids must be < input_dim=10'):
    layer(tf.constant([3, 10]))


@pytest.mark.parametrize('impl', ['op', 'composite'])
def test_trains_in_a_keras_model(impl):
  model = tf.keras.Sequential([
      hashed_embedding.HashedEmbedding(500, 4, memory_size=128, impl=impl, seed=3),
      tf.keras.layers.Flatten(), tf.keras.layers.Dense(1)])
  x = np.random.default_rng(0).integers(0, 500, size=(256, 2))
  y = (x[:, 0] % 2).astype(np.float32)
  model.compile(tf.keras.optimizers.Adam(0.05), 'binary_crossentropy')
  before = model.evaluate(x, y, verbose=0)
  model.fit(x, y, epochs=20, verbose=0)
  assert model.evaluate(x, y, verbose=0) < before - 0.1


def test_config_round_trip():
  layer = hashed_embedding.HashedEmbedding(100, 8, memory_size=32, seed=5, mode='chunk',
                                           chunk_size=4, mask_zero=True)
  clone = hashed_embedding.HashedEmbedding.from_config(layer.get_config())
  layer.build(None)
  clone.build(None)
  clone.set_weights(layer.get_weights())
  ids = tf.constant([1, 2, 99])
  np.testing.assert_array_equal(layer(ids), clone(ids))
