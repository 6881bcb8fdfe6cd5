"""A client's batches as row ranges of its columns, for loops over tf.range.

Inside a TF graph a tf.data iterator costs 3-9 ms per client on this machine
(its dataset functions are instantiated at each iterator), against under 1 ms
for a tf.range loop that slices the same batches: more than a small client's
training (FedMF at CoLR's setting: 60 clients of ~9 batches a round). Our own
training loop (training.functional) takes these as well as datasets;
tff.learning's client work needs datasets (`as_dataset`).
"""

import collections
from typing import NamedTuple

import tensorflow as tf

from tff_rec.data import lean


class Batches(NamedTuple):
  """Batch s is rows [starts[s], ends[s]) of every column. A NamedTuple: TFF
  keeps it as it passes between computations."""
  columns: collections.OrderedDict  # name -> [rows, ...]
  starts: tf.Tensor  # [steps] int32
  ends: tf.Tensor  # [steps] int32

  def steps(self) -> tf.Tensor:
    return tf.size(self.starts)

  def batch(self, step: tf.Tensor) -> collections.OrderedDict:
    start, end = self.starts[step], self.ends[step]
    return collections.OrderedDict((k, v[start:end]) for k, v in self.columns.items())

  def first_rows(self, column: str) -> tf.Tensor:
    """Each batch's first value of `column`."""
    return tf.gather(self.columns[column], self.starts)

  def where(self, keep: tf.Tensor) -> 'Batches':
    """The batches whose `keep` ([steps] bool) is true, in order."""
    return Batches(self.columns, tf.boolean_mask(self.starts, keep),
                   tf.boolean_mask(self.ends, keep))

  def as_dataset(self) -> tf.data.Dataset:
    return lean.lean(tf.data.Dataset.from_tensor_slices((self.starts, self.ends)).map(
        lambda start, end: collections.OrderedDict(
            (k, v[start:end]) for k, v in self.columns.items())))
