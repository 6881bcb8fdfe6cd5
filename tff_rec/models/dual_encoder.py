"""The ID-based dual encoder of Ning et al. (Figure 2).

Context tower: the shared item embedding of the previous movies, averaged over
the non-padding positions (bag of words), then dense layers. Item tower: the
same embedding table looked up. Both L2-normalised; the model outputs the
cosine similarity of each context with every item of the vocabulary, [B, V].
"""

from typing import Sequence

import tensorflow as tf

from tff_rec import losses


@tf.keras.utils.register_keras_serializable('tff_rec')
class GlobalSimilarity(tf.keras.layers.Layer):
  """Cosine similarity of each context with every item row of a shared table."""

  def __init__(self, embedding: tf.keras.layers.Embedding, **kwargs):
    super().__init__(**kwargs)
    self.embedding = embedding

  def call(self, context_embedding):
    items = tf.math.l2_normalize(self.embedding.embeddings[1:], axis=1)  # row 0 pads
    context = tf.math.l2_normalize(context_embedding, axis=1)
    return tf.matmul(context, items, transpose_b=True)


def build_dual_encoder(*, vocab_size: int, context_length: int = 10,
                       embedding_dim: int = 16,
                       context_hidden_dims: Sequence[int] = (16,),
                       spreadout_weight: float = 0.0,
                       seed: int = 0) -> tf.keras.Model:
  """Builds the model; inputs {'context': [B, L] int32 ids, 0 = padding}.

  Initial weights depend only on `seed` (seeded initializers), so every call
  with the same arguments gives the same model, in or out of TFF.
  """
  if vocab_size < 1 or embedding_dim < 1:
    raise ValueError(f'vocab_size and embedding_dim must be >= 1, got '
                     f'{vocab_size} and {embedding_dim}')
  if context_hidden_dims and context_hidden_dims[-1] != embedding_dim:
    raise ValueError(
        f'the last context hidden dim ({context_hidden_dims[-1]}) must equal '
        f'embedding_dim ({embedding_dim}) so contexts and items share a space')
  context = tf.keras.Input(shape=(context_length,), dtype=tf.int32, name='context')
  embedding = tf.keras.layers.Embedding(
      vocab_size + 1, embedding_dim, mask_zero=True, name='item_embedding',
      embeddings_initializer=tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed),
      embeddings_regularizer=(losses.Spreadout(spreadout_weight)
                              if spreadout_weight else None))
  x = tf.keras.layers.GlobalAveragePooling1D(name='bag_of_words')(embedding(context))
  for i, units in enumerate(context_hidden_dims):
    x = tf.keras.layers.Dense(
        units, activation='relu', name=f'context_dense_{i}',
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 1 + i))(x)
  similarities = GlobalSimilarity(embedding, name='similarity')(x)
  return tf.keras.Model(inputs={'context': context}, outputs=similarities,
                        name='dual_encoder')
