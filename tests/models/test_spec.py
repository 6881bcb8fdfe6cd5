import dataclasses

import tensorflow as tf

from tff_rec.models import spec


def _model():
  return tf.keras.Sequential([tf.keras.Input([2]), tf.keras.layers.Dense(1)])


class _Task:
  def __init__(self):
    self.builds = 0

  def keras_model(self):
    self.builds += 1
    return _model()


@dataclasses.dataclass
class _UnhashableTask(_Task):  # a dataclass with eq: no hash, so no weak key
  builds: int = 0


def test_a_tasks_model_to_read_is_built_once_per_task_and_fresh_where_it_cannot_be_kept():
  task, other = _Task(), _Task()
  first = spec.built_to_read(task)
  assert spec.built_to_read(task) is first and task.builds == 1
  assert spec.built_to_read(other) is not first and other.builds == 1
  unhashable = _UnhashableTask()
  assert spec.built_to_read(unhashable) is not spec.built_to_read(unhashable)
  assert unhashable.builds == 2
