"""lean: a client dataset without tf.data's graph optimizations, same elements."""

import numpy as np
import tensorflow as tf

from tff_rec.data import lean


def test_a_lean_dataset_gives_the_same_shuffled_batches_without_optimizations():
  def batches(dataset):
    return dataset.shuffle(1 << 16, seed=7).repeat(2).batch(4).map(lambda x: x * 2)

  plain = batches(tf.data.Dataset.range(11))
  slim = lean.lean(batches(tf.data.Dataset.range(11)))
  got = [b.numpy() for b in slim]
  for a, b in zip([b.numpy() for b in plain], got, strict=True):
    np.testing.assert_array_equal(a, b)
  assert len(got) == 6 and sorted(np.concatenate(got)) == sorted(list(range(0, 22, 2)) * 2)
  assert got[0].tolist() != [0, 2, 4, 6]  # shuffled
  options = slim.options()
  assert options.experimental_optimization.apply_default_optimizations is False
  assert options.autotune.enabled is False
