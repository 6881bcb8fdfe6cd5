"""A tff.learning LearningProcess from a round whose state keeps its model under one key."""

import collections

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
