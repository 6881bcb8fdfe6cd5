"""The library's objectives: their scores and floors, against the arithmetic by hand."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tff_rec import objectives


def _identity_model(*others: str) -> tf.keras.Model:
  """Predicts its input 'x': the scores are the examples' own (`others`: inputs it
  takes and ignores)."""
  inputs = {name: tf.keras.Input((), name=name) for name in ('x', *others)}
  return tf.keras.Model(inputs, tf.keras.layers.Reshape((1,))(inputs['x']))


def _part(x, labels, items=None) -> objectives.Part:
  features = {'x': np.array(x, np.float32)}
  if items is not None:
    features['item'] = np.array(items)
  return objectives.in_memory(features, np.array(labels, np.float32))


def test_regression_scores_the_rmse_of_a_part_and_floors_the_training_mean():
  objective = objectives.Regression({'test': _part([1, 2, 3], [1, 1, 5])},
                                    train_labels=np.array([2.0, 4.0]))
  assert objective.evaluate(_identity_model(), 'test') == {
      'rmse': pytest.approx(math.sqrt((0 + 1 + 4) / 3))}
  # the mean, 3, for every example: errors 2, 2, 2
  assert objective.floors() == {'mean': {'test/rmse': pytest.approx(2.0)}}


def _logloss(labels, logits) -> float:
  return float(np.mean([math.log1p(math.exp(-z)) if y else math.log1p(math.exp(z))
                        for y, z in zip(labels, logits)]))


def test_clicks_score_every_part_at_once_and_floor_the_click_rate_and_the_items():
  train = _part([0.5, -1, 2], [1, 0, 1], items=[1, 2, 1])
  test = _part([1, -1, 0.2, -0.3], [1, 0, 0, 1], items=[1, 2, 1, 2])
  objective = objectives.Clicks({'train': train, 'test': test}, {'item': 3},
                                default_item='item')
  values = objective.evaluate(_identity_model('item'))
  assert values == {'train_loss': pytest.approx(_logloss([1, 0, 1], [0.5, -1, 2])),
                    'test_logloss': pytest.approx(_logloss([1, 0, 0, 1], [1, -1, 0.2, -0.3])),
                    # positives 1, -0.3 against negatives -1, 0.2: 3 of 4 pairs ordered
                    'test_auc': pytest.approx(0.75)}
  with pytest.raises(ValueError, match='evaluates part "eval"'):
    objective.evaluate(_identity_model('item'), 'test')
  floors = objective.floors()
  rate = 2 / 3  # the training click rate, for every example
  assert floors['constant'] == {
      'eval/train_loss': pytest.approx(-(2 * math.log(rate) + math.log(1 - rate)) / 3),
      'eval/test_logloss': pytest.approx(-(2 * math.log(rate) + 2 * math.log(1 - rate)) / 4),
      'eval/test_auc': 0.5}
  # item 1 was clicked twice in training, item 2 never: the test's positives are
  # one of each, as are its negatives, so either item score orders half the pairs
  assert floors['popularity'] == {'eval/test_auc': pytest.approx(0.5)}
  assert floors['click_rate'] == {'eval/test_auc': pytest.approx(0.5)}
  with pytest.raises(ValueError, match=r"score one feature column \(item\); name it "
                     r"\(floor_item\), got 'user'"):
    objective.floors('user')


def test_retrieval_scores_a_large_catalogue_in_batches_whose_scores_fit(monkeypatch):
  """A batch scores every item for each example: at Goodreads-100's 357,638 items,
  1,024 examples made 1.5 GB of scores at once; the batch now fits EVAL_BATCH_BYTES."""
  items, rng = 20_000, np.random.default_rng(0)
  examples = {'context': rng.integers(1, items, (300, 3)), 'label': rng.integers(1, items, 300)}
  context = tf.keras.Input((3,), name='context', dtype=tf.int64)
  scores = tf.keras.layers.Dense(items)(tf.keras.layers.Flatten()(
      tf.keras.layers.Embedding(items + 1, 4)(context)))
  model = tf.keras.Model({'context': context}, scores)
  objective = objectives.Retrieval(lambda part: examples, items, loss=None)
  whole = objectives.Retrieval(lambda part: examples, items, loss=None).evaluate(model, 'test')
  cost = objectives.example_bytes(model, {'context': examples['context'][:2]})
  assert cost > 4 * items  # at least the scores of every item
  monkeypatch.setattr(objectives, 'EVAL_BATCH_BYTES', 64 * cost)
  batches, dataset = [], objective.dataset
  objective.dataset = lambda examples, model: (  # the size of its first batch
      batches.append(len(next(iter(made := dataset(examples, model)))[1])), made)[1]
  assert objective.evaluate(model, 'test') == pytest.approx(whole)
  assert batches == [64]
