"""The client loop of the algorithms that step a tff.learning VariableModel
themselves (SCAFFOLD, MetaUA, FedNova): SGD over a dataset, with one hook on
the gradients. FedAvg and FedProx use tff.learning's own client work (FedProx's
proximal term is its hook there); the weight-table models (FAIR, FedMF) train
plain tensors with training.functional.
"""

from typing import Callable, Sequence

import tensorflow as tf
import tensorflow_federated as tff

# gradients -> the gradients the step takes (e.g. SCAFFOLD's g - c_i + c).
GradientHook = Callable[[Sequence[tf.Tensor]], Sequence[tf.Tensor]]


def sgd(model: tff.learning.models.VariableModel, dataset: tf.data.Dataset,
        learning_rate: float, *, hook: GradientHook | None = None):
  """SGD steps on the model's trainable variables, one per batch of `dataset`:
  (steps, loss sum, example count). Call it inside a tf.function, after the
  variables are assigned their start values."""
  variables = model.trainable_variables
  steps, loss_sum, count = tf.constant(0.0), tf.constant(0.0), tf.constant(0.0)
  # iter(): autograph turns a loop over the dataset itself into a slow
  # ReduceDataset op (see baselines.CLIENT_LOOP).
  for batch in iter(dataset):
    with tf.GradientTape() as tape:
      output = model.forward_pass(batch, training=True)
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(output.loss, variables)]
    if hook:
      grads = hook(grads)
    for variable, grad in zip(variables, grads):
      variable.assign_sub(learning_rate * grad)
    size = tf.cast(output.num_examples, tf.float32)
    steps, loss_sum, count = steps + 1.0, loss_sum + output.loss * size, count + size
  return steps, loss_sum, count
