"""The feeds every algorithm reads, derived from a task's clients in one array
form (tff_rec.data.client_arrays), so a task does not write them.

A task that keeps its clients under `client_arrays` (a ClientArrays, or a
ClientDraws where it draws their examples each round), its model under `model`
(tff_rec.models.spec.KerasSpec) and inherits `Feeds` offers the members of
capabilities.KerasModel, KerasBatches, ClientExamples and FeatureHeat, and a
centralized baseline, without writing them; with an `objective`
(tff_rec.objectives), its loss, evaluation and floors too. A task
whose clients draw negatives beside their positives makes the same feeds draw
them where the clients train with `PositivesDrawnWhereTrained`.
"""

import functools
from typing import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import capabilities
from tff_rec.data import client_arrays
from tff_rec.data import sliced
from tff_rec.training import centralized

CENTRAL_SHUFFLE_BUFFER = 1 << 17  # examples the centralized baseline shuffles among


class Feeds:
  """The members of capabilities.KerasModel, KerasBatches, ClientExamples and
  FeatureHeat, for a task whose `client_arrays` is a ClientArrays (or a
  ClientDraws, less the baseline, which it writes), `model` its
  model and declared tables (tff_rec.models.spec.KerasSpec), `objective` its loss,
  scores and floors (tff_rec.objectives) and `config` its settings (`batch_size`;
  `seed`, MetaUA's query split; one epoch a round: a task overrides `batch_plan`
  for more)."""

  PADDING_ID: int | None = None  # an id of the tables that is no feature (heat skips it)

  @property
  def train_client_ids(self) -> list[str]:
    return self.client_arrays.ids

  def keras_model(self) -> tf.keras.Model:
    return self.model.build()

  @functools.cached_property
  def tables(self) -> tuple:
    """The model's declared tables (models.tables.Table)."""
    return self.model.tables()

  @functools.cached_property
  def input_spec(self):
    return self.client_arrays.input_spec()

  def model_fn(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(self.keras_model(), loss=self.loss(),
                                                input_spec=self.input_spec)

  @property
  def batch_plan(self) -> sliced.Plan:
    return sliced.Plan(self.config.batch_size)

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    return self.client_arrays.dataset_computation(self.batch_plan)

  def client_arguments(self, client_id: str, seed: int) -> tuple:
    return self.client_arrays.arguments(client_id, seed)

  def client_batches(self, client_id: str, seed: int) -> sliced.Batches:
    return self.client_arrays.batches(client_id, self.batch_plan, seed)

  @functools.cached_property
  def batches_computation(self) -> tff.Computation:
    return self.client_arrays.batches_computation(self.batch_plan)

  def client_examples(self, client_id: str) -> dict[str, np.ndarray]:
    features, labels = self.client_arrays.examples(client_id)
    return {**features, client_arrays.LABEL: labels}

  @staticmethod
  def model_input(examples: Mapping[str, np.ndarray]) -> client_arrays.Examples:
    label = client_arrays.LABEL
    return {k: v for k, v in examples.items() if k != label}, examples[label]

  # The objective's: its loss, and its scores of the Keras model.
  def loss(self, *arguments) -> tf.keras.losses.Loss:
    return self.objective.loss(*arguments)

  def evaluate(self, weights, part: str | None = None) -> dict[str, float]:
    """The objective's metrics of the model `weights` on `part` (default: the
    final evaluation's, EVAL_PARTS)."""
    # A fresh model each time: Keras swaps its Model classes to their graph (v1)
    # versions whenever one is built inside a graph, as TFF does tracing model_fn,
    # and predict then fails on a model built eagerly before that.
    model = self.keras_model()
    weights.assign_weights_to(model)
    return self.objective.evaluate(model, part or self.EVAL_PARTS[1])

  def floors(self, *item: str) -> dict[str, dict[str, float]]:
    return self.objective.floors(*item)

  @functools.cache  # read by the heat and by a task's describe (ctr's dispersion)
  def client_table_rows(self) -> dict[str, list[np.ndarray]]:
    return self.client_arrays.table_rows(self.tables, self.PADDING_ID)

  def client_sizes(self) -> list[int]:
    return self.client_arrays.sizes()

  def train_centralized(self, optimizer, *, epochs: int, eval_every: int, on_epoch):
    """The centralized baseline: the Keras model on every client's examples pooled,
    shuffled each epoch and batched as the clients batch, scored by `evaluate` on
    the final part and named as the trainer names it."""
    pooled = tf.data.Dataset.from_tensor_slices(self.client_arrays.pooled())
    epoch_of = centralized.KerasEpochs(
        self.keras_model(), loss=self.loss(), optimizer=optimizer.keras(),
        epoch_dataset=lambda epoch: pooled.shuffle(CENTRAL_SHUFFLE_BUFFER, seed=epoch).batch(
            self.config.batch_size))
    part = self.EVAL_PARTS[1]

    def evaluate():
      weights = tff.learning.models.ModelWeights.from_model(epoch_of.model)
      return {f'{part}/{k}': v for k, v in self.evaluate(weights, part).items()}

    return centralized.train(epoch_of, epochs=epochs, eval_every=eval_every,
                             on_epoch=on_epoch, evaluate=evaluate)


class PositivesDrawnWhereTrained(capabilities.Wrapper):
  """A Feeds task (`wrapped`) whose clients draw their examples each round from
  their train positives (sampled negatives), with the Keras feeds' draws made in
  TF from the round's seed: a client's arguments are its user, its positives
  (fixed) and the seed, which a worker reads from files
  (client_files.ReadWhereTrained). TF's draws are not numpy's: every runtime
  repeats a run drawing here, but it does not repeat a run drawing on the trainer.

  The task has `user_index(client_id)` and `data.train.of(user)` (its positives);
  a subclass gives `examples_tf`."""

  ARGUMENT_TYPES = (np.int32, tff.TensorType(np.int32, [None]), np.int64)  # user, positives, seed

  def examples_tf(self, user: tf.Tensor, positives: tf.Tensor, seed: tf.Tensor
                  ) -> client_arrays.Examples:
    """The client's (features, labels) of one round, drawn by TF from `seed`."""
    raise NotImplementedError

  def client_arguments(self, client_id: str, seed: int) -> tuple:
    user = self.wrapped.user_index(client_id)
    return np.int32(user), self.data.train.of(user).astype(np.int32), np.int64(seed)

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    return self._of_examples(self.wrapped.dataset_computation)

  @functools.cached_property
  def batches_computation(self) -> tff.Computation:
    return self._of_examples(self.wrapped.batches_computation)

  def _of_examples(self, computation: tff.Computation) -> tff.Computation:
    """`computation` (of a client's features, labels and the seed) on the examples
    drawn here."""
    examples = tff.tensorflow.computation(self.examples_tf, *self.ARGUMENT_TYPES)

    @tff.tensorflow.computation(*self.ARGUMENT_TYPES)
    def build(user, positives, seed):
      features, labels = examples(user, positives, seed)
      return computation(features, labels, seed)

    return build
