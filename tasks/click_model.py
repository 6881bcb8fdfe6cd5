"""What a task whose Keras model scores clicks offers the Keras algorithms.

A task's clients hold example dicts of int32 feature arrays (its input_spec's
features) and a float 'label'; the model gives one logit per example. Shared
by the CTR and the ranking tasks, which supply `keras_model()`, `input_spec`,
`batch_plan` (their batching, shuffling and epochs) and `client_arguments`
(a client's (examples, seed) in a round).
"""

import collections
import functools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.data import lean
from tff_rec.data import sliced


class ClickModel:

  @staticmethod
  def loss() -> tf.keras.losses.Loss:
    return tf.keras.losses.BinaryCrossentropy(from_logits=True)

  def model_fn(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(self.keras_model(), loss=self.loss(),
                                                input_spec=self.input_spec)

  @property
  def _examples_type(self) -> collections.OrderedDict:
    features, _ = self.input_spec
    return collections.OrderedDict(
        **{c: tff.TensorType(np.int32, spec.shape) for c, spec in features.items()},
        label=tff.TensorType(np.float32, [None]))

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    """(a client's example arrays, seed) -> its training batches (`batches`)."""
    @tff.tensorflow.computation(self._examples_type, np.int64)
    def build(examples, seed):
      return lean.lean(self.batches(examples, seed=seed))

    return build

  @functools.cached_property
  def batches_computation(self) -> tff.Computation:
    """(a client's example arrays, seed) -> client_batches' batches, their order
    drawn by TF (where a client reads its examples from files)."""
    @tff.tensorflow.computation(self._examples_type, np.int64)
    def build(examples, seed):
      return self.batch_plan.batches_tf(self.model_input(examples), seed)

    return build

  @staticmethod
  def model_input(examples):
    """Example dicts (a batch, or a client's numpy arrays) -> Keras's
    (features, label [n, 1])."""
    return (collections.OrderedDict((k, v) for k, v in examples.items() if k != 'label'),
            examples['label'][:, None])

  def batches(self, examples, *, seed) -> tf.data.Dataset:
    """Training batches of a client's examples (a dict of arrays or tensors),
    shuffled by TF (tff.learning's clients). They are sliced in Keras's (x, y)
    form rather than mapped to it: a map instantiates its function at every
    client's iterator, 7 ms a client on DCN, most of a small client's round."""
    return self.batch_plan.dataset(
        tf.data.Dataset.from_tensor_slices(self.model_input(examples)), seed)

  def client_batches(self, client_id: str, seed: int) -> sliced.Batches:
    """The client's training batches in a round, shuffled by numpy from `seed`
    (the project's clients)."""
    examples, _ = self.client_arguments(client_id, seed)
    return self.batch_plan.batches(self.model_input(examples), seed)
