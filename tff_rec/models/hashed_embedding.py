"""HashedEmbedding: a drop-in for tf.keras.layers.Embedding over hashed memory.

The input_dim x output_dim table is virtual: its elements live in one trainable
vector of `memory_size` floats (tff_rec.ops.hashed_embedding_lookup), so the
layer holds memory_size parameters whatever input_dim is.
"""

import tensorflow as tf

from tff_rec.ops import hashed_embedding


@tf.keras.utils.register_keras_serializable('tff_rec')
class HashedEmbedding(tf.keras.layers.Layer):
  """Like Embedding(input_dim, output_dim), stored in `memory_size` floats."""

  def __init__(self, input_dim: int, output_dim: int, memory_size: int, *,
               seed: int = 0, mode: str = 'element', chunk_size: int | None = None,
               impl: str = 'auto', embeddings_initializer='uniform',
               mask_zero: bool = False, **kwargs):
    super().__init__(**kwargs)
    hashed_embedding.chunk_attr(output_dim, mode, chunk_size)  # validates
    if input_dim < 1 or memory_size < 1:
      raise ValueError(f'input_dim and memory_size must be >= 1, got {input_dim} '
                       f'and {memory_size}')
    self.input_dim, self.output_dim, self.memory_size = input_dim, output_dim, memory_size
    self.seed, self.mode, self.chunk_size, self.impl = seed, mode, chunk_size, impl
    self.embeddings_initializer = tf.keras.initializers.get(embeddings_initializer)
    self.mask_zero = mask_zero

  def build(self, input_shape):
    self.memory = self.add_weight(name='memory', shape=[self.memory_size],
                                  initializer=self.embeddings_initializer)
    super().build(input_shape)

  def call(self, inputs):
    ids = tf.convert_to_tensor(inputs)
    if not ids.dtype.is_integer:
      ids = tf.cast(ids, tf.int64)  # Embedding accepts float ids too
    with tf.control_dependencies([tf.debugging.assert_less(
        ids, tf.cast(self.input_dim, ids.dtype),
        message=f'ids must be < input_dim={self.input_dim}')]):
      rows = hashed_embedding.hashed_embedding_lookup(
          self.memory, ids, dim=self.output_dim, seed=self.seed, mode=self.mode,
          chunk_size=self.chunk_size, impl=self.impl)
    return tf.reshape(rows, tf.concat([tf.shape(ids), [self.output_dim]], 0))

  def compute_mask(self, inputs, mask=None):
    return tf.not_equal(inputs, 0) if self.mask_zero else None

  def get_config(self):
    return {**super().get_config(), 'input_dim': self.input_dim,
            'output_dim': self.output_dim, 'memory_size': self.memory_size,
            'seed': self.seed, 'mode': self.mode, 'chunk_size': self.chunk_size,
            'impl': self.impl, 'mask_zero': self.mask_zero,
            'embeddings_initializer':
                tf.keras.initializers.serialize(self.embeddings_initializer)}
