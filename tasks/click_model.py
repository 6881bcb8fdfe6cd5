"""What a task whose Keras model scores clicks offers the Keras algorithms.

A task's clients hold example dicts of int32 feature arrays (its input_spec's
features) and a float 'label'; the model gives one logit per example. Shared
by the CTR and the ranking tasks, which supply `keras_model()`, `input_spec`
and `batches(dataset, seed=)` (their shuffling and epochs).
"""

import collections
import functools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import lean


class ClickModel:

  @staticmethod
  def loss() -> tf.keras.losses.Loss:
    return tf.keras.losses.BinaryCrossentropy(from_logits=True)

  def model_fn(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(self.keras_model(), loss=self.loss(),
                                                input_spec=self.input_spec)

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    """(a client's example arrays, seed) -> its training batches (`batches`)."""
    features, _ = self.input_spec
    examples_type = collections.OrderedDict(
        **{c: tff.TensorType(np.int32, spec.shape) for c, spec in features.items()},
        label=tff.TensorType(np.float32, [None]))

    @tff.tensorflow.computation(examples_type, np.int64)
    def build(examples, seed):
      return lean.lean(self.batches(tf.data.Dataset.from_tensor_slices(examples), seed=seed))

    return build

  def one_pass(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Example dicts -> (features, label [B, 1]) batches, in order."""
    return dataset.batch(self.config.batch_size).map(
        lambda batch: (collections.OrderedDict((k, v) for k, v in batch.items()
                                               if k != 'label'), batch['label'][:, None]))
