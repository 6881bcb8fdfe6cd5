"""What this package's own rounds share with tff.learning's composed processes: a
LearningProcess around a state that keeps its model under one key, and the
composed processes' metrics layout."""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.models import table_model


def learning_process(initialize: tff.Computation, next_fn: tff.Computation,
                     weights_key: str, view: table_model.KerasView | None = None
                     ) -> tff.learning.templates.LearningProcess:
  """The process, with get/set_model_weights reading and writing state[weights_key]:
  as it is, or (`view`) as the Keras model's ModelWeights."""
  state_type = initialize.type_signature.result

  @tff.tensorflow.computation(state_type.member)
  def get_model_weights(state):
    return view.to_model_weights(state[weights_key]) if view else state[weights_key]

  @tff.tensorflow.computation(state_type.member, get_model_weights.type_signature.result)
  def set_model_weights(state, weights):
    state = collections.OrderedDict(state)  # pylint: disable=unsubscriptable-object
    state[weights_key] = view.from_model_weights(weights) if view else weights
    return state

  return tff.learning.templates.LearningProcess(initialize, next_fn, get_model_weights,
                                                set_model_weights)


def round_metrics(loss_sum: tf.Tensor, num_examples: tf.Tensor, *, client_work=(),
                  aggregator=()) -> collections.OrderedDict:
  """A round's metrics as tff.learning's composed processes lay them out: the
  clients' mean training loss and example count under client_work/train (with
  `client_work`'s other entries), what the aggregation reports (bytes moved,
  its factory's measurements) under aggregator."""
  train = collections.OrderedDict(
      loss=loss_sum / tf.cast(tf.maximum(num_examples, 1), loss_sum.dtype),
      num_examples=num_examples)
  return collections.OrderedDict(
      client_work=collections.OrderedDict(train=train, **collections.OrderedDict(client_work)),
      aggregator=collections.OrderedDict(aggregator))
