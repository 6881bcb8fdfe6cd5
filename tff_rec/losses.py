"""Retrieval losses of Ning et al. over global similarities, and spreadout.

Every loss takes the label item ids `y_true` ([B], ids 1..V) and the model's
similarities `y_pred` ([B, V]: row i scores context i against every item,
column j is item j + 1) and returns one loss per example, which Keras averages
over the batch. Scoring against the whole vocabulary lets the batch softmax
read its in-batch columns and the global losses use everything, with one model.

These are written here rather than taken from tfrs.tasks.Retrieval because
TFF's Keras wrapper needs plain Keras losses over the model output, and
Retrieval fuses the loss into a model of its own.
"""

import tensorflow as tf
import tensorflow_recommenders as tfrs

HINGE_MARGIN = 0.9


def _label_columns(y_true: tf.Tensor) -> tf.Tensor:
  return tf.cast(tf.reshape(y_true, [-1]), tf.int32) - 1


def _positive_scores(y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
  return tf.gather(y_pred, _label_columns(y_true), axis=1, batch_dims=1)


@tf.keras.utils.register_keras_serializable('tff_rec')
class BatchSoftmax(tf.keras.losses.Loss):
  """Softmax over in-batch negatives: context i against the B batch labels.

  Batch-sensitive: the negatives are whatever else is in the batch. Two
  optional corrections, both off in the paper, come from tfrs's layers:
  `remove_accidental_hits` masks a negative that is the row's own label
  (popular items repeat within a batch), and `label_frequency` (the share of
  training labels per item, V values) subtracts log q from each in-batch
  column, since a popular item is a negative in proportion to its popularity
  (Yi et al., RecSys 2019).
  """

  def __init__(self, remove_accidental_hits: bool = False,
               label_frequency: list[float] | None = None, **kwargs):
    super().__init__(**kwargs)
    self.remove_accidental_hits = remove_accidental_hits
    self.label_frequency = None if label_frequency is None else [
        float(q) for q in label_frequency]

  def call(self, y_true, y_pred):
    columns = _label_columns(y_true)
    in_batch = tf.gather(y_pred, columns, axis=1)  # [B, B]
    diagonal = tf.range(tf.shape(in_batch)[0])
    if self.label_frequency is not None:
      in_batch = tfrs.layers.loss.SamplingProbablityCorrection()(
          in_batch, tf.gather(tf.constant(self.label_frequency, in_batch.dtype), columns))
    if self.remove_accidental_hits:
      in_batch = tfrs.layers.loss.RemoveAccidentalHits()(
          tf.one_hot(diagonal, tf.shape(in_batch)[0], dtype=in_batch.dtype), in_batch,
          columns)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=diagonal,
                                                          logits=in_batch)

  def get_config(self):
    return {**super().get_config(), 'remove_accidental_hits': self.remove_accidental_hits,
            'label_frequency': self.label_frequency}


@tf.keras.utils.register_keras_serializable('tff_rec')
class GlobalSoftmax(tf.keras.losses.Loss):
  """Softmax over the whole vocabulary (batch-insensitive)."""

  PER_EXAMPLE = True  # a row's loss reads that row only: its clients train in lockstep

  def call(self, y_true, y_pred):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=_label_columns(y_true), logits=y_pred)


@tf.keras.utils.register_keras_serializable('tff_rec')
class SquaredHinge(tf.keras.losses.Loss):
  """max(0, margin - s(x, y))^2 on the positive pair only (batch-insensitive)."""

  PER_EXAMPLE = True

  def __init__(self, margin: float = HINGE_MARGIN, **kwargs):
    super().__init__(**kwargs)
    self.margin = margin

  def call(self, y_true, y_pred):
    return tf.square(tf.nn.relu(self.margin - _positive_scores(y_true, y_pred)))

  def get_config(self):
    return {**super().get_config(), 'margin': self.margin}


@tf.keras.utils.register_keras_serializable('tff_rec')
class Spreadout(tf.keras.regularizers.Regularizer):
  """weight * ||off-diagonal of E E^T||_F over the L2-normalised table rows.

  Pushes item embeddings apart (towards orthogonal). The paper's printed
  formula is garbled; this is the official code's EmbeddingSpreadoutRegularizer
  (Frobenius norm of the off-diagonal cosine similarities). It depends on the
  weights only, so it is batch-insensitive. `skip_rows` leaves out leading
  rows that are not items (the padding row 0).
  """

  def __init__(self, weight: float, skip_rows: int = 1):
    self.weight = weight
    self.skip_rows = skip_rows

  def __call__(self, table):
    rows = tf.math.l2_normalize(table[self.skip_rows:], axis=1)
    # ||off-diagonal of E E^T||_F^2 = ||E^T E||_F^2 - sum_i ||e_i||^4: the
    # d x d Gram matrix instead of the V x V one (V d^2 work, not V^2 d).
    gram = tf.matmul(rows, rows, transpose_a=True)
    squared = tf.reduce_sum(tf.square(gram)) - tf.reduce_sum(
        tf.square(tf.reduce_sum(tf.square(rows), axis=1)))
    # Clamped: float error must not make it negative, nor sqrt's gradient infinite.
    return self.weight * tf.sqrt(tf.maximum(squared, 1e-12))

  def get_config(self):
    return {'weight': self.weight, 'skip_rows': self.skip_rows}


# name -> (loss class, whether the item table carries the spreadout term)
RETRIEVAL_LOSSES = {
    'batch_softmax': (BatchSoftmax, False),
    'batch_softmax_spreadout': (BatchSoftmax, True),
    'hinge_spreadout': (SquaredHinge, True),
    'global_softmax': (GlobalSoftmax, False),
}
