"""A tff.learning LearningProcess from a round whose state keeps its model under one key."""

import collections

import tensorflow_federated as tff


def learning_process(initialize: tff.Computation, next_fn: tff.Computation,
                     weights_key: str) -> tff.learning.templates.LearningProcess:
  """The process, with get/set_model_weights reading and writing state[weights_key]."""
  state_type = initialize.type_signature.result

  @tff.tensorflow.computation(state_type.member)
  def get_model_weights(state):
    return state[weights_key]

  @tff.tensorflow.computation(state_type.member, get_model_weights.type_signature.result)
  def set_model_weights(state, weights):
    state = collections.OrderedDict(state)  # pylint: disable=unsubscriptable-object
    state[weights_key] = weights
    return state

  return tff.learning.templates.LearningProcess(initialize, next_fn, get_model_weights,
                                                set_model_weights)
