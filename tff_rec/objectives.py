"""What a task trains for and how it is scored: a loss, its metrics on the
evaluated parts of the data, and the floors beside them.

tensorflow-recommenders' Task is a loss plus its metrics; here an objective
also gives its floors (what knows nothing of the user: every table of this
project shows them). A task keeps one as `objective`, and the library's Feeds
forward the task's `loss`, `evaluate` and `floors` to it, on the task's Keras
model. Clicks and Regression read each part's examples a chunk at a time
(`Part`), so wide examples (long histories) are never all in memory at once.
"""

import collections
import dataclasses
import functools
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from tff_rec import metrics
from tff_rec.training import evaluation

Features = Mapping[str, np.ndarray]
# Evaluation's memory is bounded in bytes, not examples: an example's cost grows
# with its width (a DIN history of 229 items cost 18x one of 10, and batches of
# 8192 of them took evaluation from 0.84 to 3.2 GB).
EVAL_BATCH_BYTES = 1 << 27  # every tensor the forward pass computes for one batch
EVAL_BATCH_SIZE = 8192  # examples a batch at most (narrow models)
# Keras' predict copies its whole input into a dataset: chunks of the part's
# features bound that copy whatever the part's size.
EVAL_CHUNK_BYTES = 1 << 25


@dataclasses.dataclass(frozen=True)
class Part:
  """A part of the data an objective scores: its examples' labels, and their
  features read by position (`read(positions, columns)`; columns None: all)."""
  labels: np.ndarray
  read: Callable[[np.ndarray, Sequence[str] | None], Features]

  def __len__(self) -> int:
    return len(self.labels)


def in_memory(features: Features, labels: np.ndarray) -> Part:
  """A part whose features are arrays already in memory."""
  return Part(np.asarray(labels).reshape(-1), lambda at, columns=None: {
      k: np.asarray(v)[at] for k, v in features.items() if columns is None or k in columns})


def predict(model: tf.keras.Model, part: Part) -> np.ndarray:
  """The model's outputs on the part's examples, flat, a chunk at a time, in
  batches whose forward pass computes at most EVAL_BATCH_BYTES. The outputs do not
  depend on the batch size but for float rounding (tests/tasks/test_ctr.py); on
  ML-100K, DCN's and DIN's were the same bits at 8192, 5000 and 331, and LR's,
  DCN's and DIN's at 8192 and 3043 (DIN's batch now)."""
  if not len(part):
    return np.zeros(0, np.float32)
  sample = part.read(np.arange(min(2, len(part))), None)
  batch = batch_size(model, sample, EVAL_BATCH_SIZE)
  row_bytes = sum(v[:1].nbytes for v in sample.values())
  chunk = max(batch, EVAL_CHUNK_BYTES // max(row_bytes, 1))
  return np.concatenate([
      model.predict(part.read(np.arange(start, min(start + chunk, len(part))), None),
                    batch_size=batch, verbose=0).reshape(-1)
      for start in range(0, len(part), chunk)])


def batch_size(model: tf.keras.Model, sample: Features, largest: int) -> int:
  """Examples a batch whose forward pass computes at most EVAL_BATCH_BYTES (at
  most `largest`), for examples shaped as `sample`'s."""
  return int(np.clip(EVAL_BATCH_BYTES // example_bytes(model, sample), 1, largest))


_EXAMPLE_BYTES = {}  # by model class, weights' shapes and features' shapes


def example_bytes(model: tf.keras.Model, features: Features) -> int:
  """What one more example adds to the model's forward pass: the bytes of every
  tensor its graph computes for 2 examples less for 1 (the reads of the
  variables cancel). An upper bound on what predict holds for it at once."""
  widths = tuple((k, v.shape[1:], v.dtype) for k, v in sorted(features.items()))
  key = (type(model), tuple(tuple(w.shape) for w in model.weights), widths)
  if key not in _EXAMPLE_BYTES:
    def graph_bytes(rows: int) -> int:
      spec = {k: tf.TensorSpec((rows, *shape), dtype) for k, shape, dtype in widths}
      graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(
          spec).graph
      return sum(t.shape.num_elements() * t.dtype.size
                 for op in graph.get_operations() for t in op.outputs
                 if t.shape.is_fully_defined()
                 and (t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool))

    _EXAMPLE_BYTES[key] = max(1, graph_bytes(2) - graph_bytes(1))
  return _EXAMPLE_BYTES[key]


class Clicks:
  """Click prediction from logits: binary cross-entropy; every part scored at
  once (part 'eval'): the training part's logloss as train_loss (FedSubAvg's
  target), each other part's logloss and exact AUC; floors: the constant
  predictor at the training click rate, and an item column's training clicks
  (popularity) and smoothed click rate, by test AUC."""

  EVAL_PARTS = ('eval', 'eval')

  def __init__(self, parts: Mapping[str, Part], vocab_sizes: Mapping[str, int],
               default_item: str | None = None):
    """parts: 'train' and 'test' (and 'validation'), in the order metrics list them;
    vocab_sizes: the item columns' (ids 0..size-1) the item floors may score."""
    self.parts, self.vocab_sizes, self.default_item = dict(parts), vocab_sizes, default_item

  @staticmethod
  def loss() -> tf.keras.losses.Loss:
    return tf.keras.losses.BinaryCrossentropy(from_logits=True)

  def evaluate(self, model: tf.keras.Model, part: str = 'eval') -> dict[str, float]:
    if part != 'eval':
      raise ValueError(f'click prediction evaluates part "eval" (every part) only, got '
                       f'{part!r}')
    values = {}
    for name, scored in self.parts.items():
      logits, labels = predict(model, scored), scored.labels
      if name == 'train':
        values['train_loss'] = metrics.logloss(labels, logits)
      else:
        values[f'{name}_logloss'] = metrics.logloss(labels, logits)
        values[f'{name}_auc'] = metrics.auc(labels, logits)
    return values

  def floors(self, item: str | None = None) -> dict[str, dict[str, float]]:
    """By the metric names runs report; `item`: the column the item floors score
    (default_item unless named)."""
    item = item or self.default_item
    if item not in self.vocab_sizes:
      raise ValueError(f'the item floors score one feature column ({", ".join(self.vocab_sizes)}'
                       f'); name it (floor_item), got {item!r}')
    popular, rate = self.item_baselines(item)
    click_rate = float(self.parts['train'].labels.mean())
    logit = np.log(click_rate / (1 - click_rate))
    constant = {'eval/train_loss' if name == 'train' else f'eval/{name}_logloss':
                metrics.logloss(self.parts[name].labels, np.full(len(self.parts[name]), logit))
                for name in sorted(self.parts, key=('train', 'test', 'validation').index)}
    return {'popularity': {'eval/test_auc': popular}, 'click_rate': {'eval/test_auc': rate},
            'constant': {**constant, 'eval/test_auc': 0.5}}

  def item_baselines(self, item: str) -> tuple[float, float]:
    """Test AUC of two scores that know nothing of the user: the `item` column's
    clicks among the training examples (popularity), and its training click
    rate, add-one smoothed."""
    train, test = self.parts['train'], self.parts['test']
    items = train.read(np.arange(len(train)), [item])[item]
    clicks = np.bincount(items, weights=train.labels, minlength=self.vocab_sizes[item])
    shown = np.bincount(items, minlength=self.vocab_sizes[item])
    candidates = test.read(np.arange(len(test)), [item])[item]
    return (metrics.auc(test.labels, clicks[candidates]),
            metrics.auc(test.labels, (clicks[candidates] + 1) / (shown[candidates] + 2)))


class Regression:
  """A rating (or any number) predicted: mean squared error; each part's RMSE;
  floor: the training examples' mean, predicted for every example."""

  def __init__(self, parts: Mapping[str, Part], train_labels: np.ndarray):
    self.parts, self.mean = dict(parts), float(np.mean(train_labels))

  @staticmethod
  def loss() -> tf.keras.losses.Loss:
    return tf.keras.losses.MeanSquaredError()

  def evaluate(self, model: tf.keras.Model, part: str) -> dict[str, float]:
    scored = self.parts[part]
    return {'rmse': _rmse(predict(model, scored), scored.labels)}

  def floors(self) -> dict[str, dict[str, float]]:
    return {'mean': _by_part(self.parts, lambda name: {'rmse': _rmse(
        np.full(len(self.parts[name]), self.mean), self.parts[name].labels)})}


def _by_part(parts, metrics_of: Callable[[str], Mapping[str, float]]) -> dict[str, float]:
  """Each part's metrics, named as runs report them: '<part>/<metric>'."""
  return {f'{part}/{k}': v for part in parts for k, v in metrics_of(part).items()}


def _rmse(predicted: np.ndarray, labels: np.ndarray) -> float:
  return float(np.sqrt(np.mean((np.asarray(predicted, np.float64) - labels) ** 2)))


class ItemRanking:
  """Every item ranked for each user with held-out items, those it trained on
  left out: the mean NDCG, recall and HR @k over those users; floor: popularity
  (items ranked by their training users). It scores `score(users) -> [users,
  items]` a block of users at a time.

  train, held_out: each user's items (`of(user)`; held_out's `counts`), the held
  out ones of `part`.
  """

  BLOCK_SCORES = 1 << 22  # users x items scored at a time: ~4M x 16 floats in NeuMF's MLP

  def __init__(self, train, held_out, part: str, num_items: int, top_k: int,
               loss: Callable[[], tf.keras.losses.Loss]):
    self.train, self.held_out, self.part = train, held_out, part
    self.num_items, self.top_k, self.loss = num_items, top_k, loss

  def evaluate(self, score: Callable[[np.ndarray], tf.Tensor], part: str) -> dict[str, float]:
    if part != self.part:
      raise ValueError(f'this ranking holds out {self.part!r} only, got {part!r} (set '
                       f'held_out={part!r} to score it)')
    users = np.flatnonzero(self.held_out.counts > 0)
    per_user = {}
    block_size = max(1, self.BLOCK_SCORES // self.num_items)
    for start in range(0, len(users), block_size):
      block = users[start:start + block_size]
      scores = np.array(score(block))
      for row, user in enumerate(block):
        scores[row, self.train.of(user)] = -np.inf
      top = tf.math.top_k(scores, self.top_k).indices.numpy()
      values = metrics.top_k_metrics(top, [self.held_out.of(u) for u in block], self.top_k)
      for name, value in values.items():
        per_user.setdefault(name, []).append(value)
    return {name: float(np.mean(np.concatenate(v))) for name, v in per_user.items()}

  def popularity(self, part: str) -> dict[str, float]:
    """The metrics of ranking items by their number of training users."""
    counts = tf.constant(np.bincount(self.train.items, minlength=self.num_items), tf.float32)
    return self.evaluate(lambda users: tf.broadcast_to(counts, [len(users), self.num_items]),
                         part)

  def floors(self) -> dict[str, dict[str, float]]:
    return {'popularity': _by_part([self.part], self.popularity)}


class SampledRanking:
  """Each user's held-out item of a part ranked among its sampled candidates (a
  leave-one-out split's): HR and NDCG @k; floor: popularity (items ranked by
  their training users). It scores {'users': a vector per user, 'items': per
  item} by their dot products, a block of users at a time.

  held_out: part -> [users] item index; candidates: part -> [users, C] item
  indices (read a block at a time); train_items: every training interaction's item.
  """

  BLOCK_USERS = 8192  # users x C x d floats at once otherwise (23.6 GiB at 10^6 users, d 64)

  def __init__(self, held_out: Mapping[str, np.ndarray], candidates, train_items: np.ndarray,
               num_items: int, top_k: int, loss: Callable[[], tf.keras.losses.Loss]):
    self.held_out, self.candidates, self.top_k, self.loss = held_out, candidates, top_k, loss
    self._train_items, self._num_items = train_items, num_items

  def evaluate(self, tables: Mapping[str, np.ndarray], part: str) -> dict[str, float]:
    if part not in self.held_out:
      raise ValueError(f'this ranking evaluates {" or ".join(map(repr, self.held_out))}, got '
                       f'{part!r}')
    users, items = np.asarray(tables['users']), np.asarray(tables['items'])
    positive = np.einsum('ud,ud->u', users, items[self.held_out[part]])
    return self._ranked(part, positive, lambda block, candidates: np.einsum(
        'ud,ucd->uc', users[block], items[candidates]))

  def popularity(self, part: str) -> dict[str, float]:
    """The metrics of ranking items by their number of training users."""
    counts = np.bincount(self._train_items, minlength=self._num_items).astype(float)
    return self._ranked(part, counts[self.held_out[part]], lambda _, candidates: counts[candidates])

  def floors(self) -> dict[str, dict[str, float]]:
    return {'popularity': _by_part(self.held_out, self.popularity)}

  def _ranked(self, part: str, positive: np.ndarray, candidate_scores) -> dict[str, float]:
    """The metrics of the held-out items' `positive` scores, the candidates scored
    (candidate_scores(block of users, their candidates)) and ranked a block of
    users at a time: the candidates are read a block at a time, and users x C
    scores would be as large."""
    candidates = self.candidates[part]
    ranks = [metrics.sampled_ranks(positive[block], candidate_scores(block, candidates[block]))
             for block in (slice(start, start + self.BLOCK_USERS)
                           for start in range(0, len(positive), self.BLOCK_USERS))]
    return metrics.rank_metrics(np.concatenate(ranks), self.top_k)


class Retrieval:
  """The next item retrieved among the whole catalogue from a context of items:
  the task's loss; the global recall@k of the label over each part's examples
  pooled (Keras metrics, per-example means); floor: popularity (items ranked by
  their count among the training labels).

  pooled(part) -> the part's examples, {'context': [n, L], 'label': [n], ...}
  ('train', 'validation', 'test'), made when read; loss(train_labels or None) ->
  the task's Keras loss (a log-q correction counts the labels it is given, by
  default the training part's).
  """

  RECALL_KS = (1, 5, 10)
  BATCH_SIZE = 1024

  def __init__(self, pooled: Callable[[str], Mapping[str, np.ndarray]], vocab_size: int,
               loss: Callable[[np.ndarray | None], tf.keras.losses.Loss]):
    self.pooled, self.vocab_size, self._loss = pooled, vocab_size, loss

  def loss(self, train_labels: np.ndarray | None = None) -> tf.keras.losses.Loss:
    return self._loss(train_labels)

  def metrics(self) -> list[tf.keras.metrics.Metric]:
    return [metrics.GlobalRecall(k) for k in self.RECALL_KS]

  @staticmethod
  def xy(examples):
    """The model's (x, y) of examples."""
    return collections.OrderedDict(context=examples['context']), examples['label']

  def dataset(self, examples: Mapping[str, np.ndarray], model: tf.keras.Model
              ) -> tf.data.Dataset:
    """(x, y) batches of any examples (a centralized split's too) to evaluate
    `model` on: at most BATCH_SIZE examples, fewer where the scores of the whole
    catalogue pass EVAL_BATCH_BYTES (357,638 items: 1.4 MB an example)."""
    batch = batch_size(model, {'context': examples['context'][:2]}, self.BATCH_SIZE)
    return tf.data.Dataset.from_tensor_slices(examples).batch(batch).map(self.xy)

  def evaluator(self, model: tf.keras.Model) -> evaluation.Evaluator:
    """The metrics of `model` on a dataset; its step traced once for that model."""
    return evaluation.Evaluator(model, self.metrics())

  def evaluate(self, model: tf.keras.Model, part: str) -> dict[str, float]:
    """Evaluating one model again and again (its weights assigned between) traces
    its step once."""
    return self._evaluator(model)(self._dataset(part, model))

  @functools.cache
  def _evaluator(self, model: tf.keras.Model) -> evaluation.Evaluator:
    return self.evaluator(model)

  @functools.cache
  def _dataset(self, part: str, model: tf.keras.Model) -> tf.data.Dataset:
    return self.dataset(self.pooled(part), model)

  def floors(self) -> dict[str, dict[str, float]]:
    train = self.pooled('train')
    return {'popularity': _by_part(('validation', 'test'),
                                   lambda part: self.popularity(train, self.pooled(part)))}

  def popularity(self, train: Mapping[str, np.ndarray], test: Mapping[str, np.ndarray]
                 ) -> dict[str, float]:
    """Recall@k of ranking every item by its label count in `train`: the floor any
    learned model must beat; ties count against the label, as for models
    (metrics.label_rank, without its [examples, items] scores: 20 GB at
    Goodreads-100's 357,638 items)."""
    counts = np.bincount(train['label'], minlength=self.vocab_size + 1)[1:]
    below = np.searchsorted(np.sort(counts), counts[np.asarray(test['label']) - 1], 'left')
    rank = self.vocab_size - 1 - below  # the items not strictly below the label
    # float32 means, as of recall_at_k's float32 hits
    return {f'recall_at_{k}': float(np.mean((rank < k).astype(np.float32)))
            for k in self.RECALL_KS}
