"""A Keras task's numpy client batches (the project's clients) hold the examples
its tf.data batches (tff.learning's clients) hold, batched alike: the same
rows in another order."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tasks import ctr
from tasks import loo_ranking
from tasks import next_item
from tasks import ranking


def _rows(batches) -> tuple[list[int], collections.Counter]:
  """(batch sizes, the multiset of rows) of an iterable of (x, y) batches."""
  sizes, rows = [], collections.Counter()
  for batch in batches:
    leaves = [np.asarray(v).reshape(len(np.asarray(v)), -1)
              for v in tf.nest.flatten(batch)]
    sizes.append(len(leaves[0]))
    rows.update(tuple(np.concatenate([l[i] for l in leaves]).tolist())
                for i in range(len(leaves[0])))
  return sizes, rows


def _tf_batches(task, client, seed):
  arguments = task.client_arguments(client, seed)
  if len(arguments) == 3:  # a feeds.Feeds task's (features, labels, seed)
    return task.batch_plan.dataset(tf.data.Dataset.from_tensor_slices(arguments[:2]), seed)
  return task.batches(arguments[0], seed=seed)


@pytest.mark.parametrize('name', ['ctr', 'next_item', 'loo_ranking', 'ranking'])
def test_numpy_and_tf_batches_hold_the_same_rows(name, ml100k_dir, ranking_dir,
                                                 user_items_dir):
  task = {
      'ctr': lambda: ctr.Task(ctr.make_config(
          data_dir=str(ml100k_dir), batch_size=4, local_epochs=2, local_steps=5)),
      'next_item': lambda: next_item.Task(
          next_item.make_config(data_dir=str(ml100k_dir), batch_size=3,
                                local_epochs=2, shuffle_buffer=2,
                                drop_remainder=False)),
      'loo_ranking': lambda: loo_ranking.Task(loo_ranking.make_config(
          data_dir=str(ranking_dir), batch_size=8, embedding_dim=4)),
      'ranking': lambda: ranking.Task(ranking.make_config(
          data_dir=str(user_items_dir), batch_size=3, local_epochs=2)),
  }[name]()
  for client in task.train_client_ids[:3]:
    batches = task.client_batches(client, 11)
    numpy_sizes, numpy_rows = _rows(batches.batch(s) for s in range(batches.steps()))
    tf_sizes, tf_rows = _rows(_tf_batches(task, client, 11))
    assert numpy_sizes == tf_sizes
    if name == 'ctr':  # 5 steps of 2 epochs: which rows make the cut depends on the order
      assert set(numpy_rows) <= set(_rows(_tf_batches_all(task, client))[1])
    else:
      assert numpy_rows == tf_rows


def _tf_batches_all(task, client):
  features, labels, _ = task.client_arguments(client, 0)
  return tf.data.Dataset.from_tensor_slices((features, labels)).batch(1 << 16)
