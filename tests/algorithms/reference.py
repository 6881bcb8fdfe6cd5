"""The maths of the algorithms, written again in numpy (float64) from their papers,
for tests to hold the library's rounds against: optimizers as TFF defines them,
a client's local training, the models of the small tasks the tests make, CoLR's
basis and the update compressions. Nothing here calls the library's code under
test: TF serves only as the random source the library draws from (stateless
draws from a seed) and, for a Keras model, as the gradient of the task's own
model (`keras_gradient`), which the models' tests check.
"""

import math

import numpy as np
import tensorflow as tf


class SGD:
  def __init__(self, learning_rate: float):
    self.learning_rate = learning_rate

  def start(self, weights):
    del weights
    return None

  def step(self, state, weights, gradients):
    return state, [w - self.learning_rate * g for w, g in zip(weights, gradients, strict=True)]


class Adam:
  """TFF's Adam: bias correction folded into the rate, epsilon outside the root."""

  def __init__(self, learning_rate: float, epsilon: float = 1e-7, beta_1=0.9, beta_2=0.999):
    self.learning_rate, self.epsilon, self.beta_1, self.beta_2 = (
        learning_rate, epsilon, beta_1, beta_2)

  def start(self, weights):
    return 0, [np.zeros_like(w) for w in weights], [np.zeros_like(w) for w in weights]

  def step(self, state, weights, gradients):
    t, m, v = state
    t += 1
    m = [self.beta_1 * a + (1 - self.beta_1) * g for a, g in zip(m, gradients)]
    v = [self.beta_2 * a + (1 - self.beta_2) * g * g for a, g in zip(v, gradients)]
    rate = self.learning_rate * np.sqrt(1 - self.beta_2**t) / (1 - self.beta_1**t)
    return (t, m, v), [w - rate * a / (np.sqrt(b) + self.epsilon)
                       for w, a, b in zip(weights, m, v)]


class Adagrad:
  """TFF's Adagrad: the accumulator starts at `initial`, epsilon inside the root."""

  def __init__(self, learning_rate: float, initial: float = 0.1, epsilon: float = 1e-7):
    self.learning_rate, self.initial, self.epsilon = learning_rate, initial, epsilon

  def start(self, weights):
    return [np.full_like(w, self.initial) for w in weights]

  def step(self, state, weights, gradients):
    state = [p + g * g for p, g in zip(state, gradients)]
    return state, [w - self.learning_rate * g / np.sqrt(p + self.epsilon)
                   for w, g, p in zip(weights, gradients, state)]


def server_optimizer(name: str, learning_rate: float, adaptivity: float | None = None):
  """The server optimizer a run's settings name (Reddi et al.'s tau as the project
  maps it onto TFF's Adam and Adagrad)."""
  if name == 'sgd':
    return SGD(learning_rate)
  if name == 'adam':
    return Adam(learning_rate, *([adaptivity] if adaptivity else []))
  if name == 'adagrad':
    return (Adagrad(learning_rate, adaptivity**2, adaptivity**2) if adaptivity
            else Adagrad(learning_rate))
  raise ValueError(name)


def batches_of(batches):
  """The (features, labels) of each batch of a client's numpy sliced batches
  (Keras's (x, y) columns), in order."""
  (features, labels), starts, ends, rows = batches
  for start, end in zip(starts, ends):
    taken = rows[start:end]
    yield {c: np.asarray(v)[taken] for c, v in features.items()}, np.asarray(labels)[taken]


def local_training(gradient, weights, batches, optimizer, *, hook=None, proximal: float = 0.0):
  """A client's steps from `weights` over `batches` ((features, labels) each):
  (trained weights, examples, steps, summed loss). `gradient(weights, features,
  labels) -> (mean loss, gradients)`; `hook` changes the gradients (SCAFFOLD);
  `proximal` adds FedProx's mu (w - the starting weights)."""
  start = [np.asarray(w, np.float64) for w in weights]
  current, state = list(start), optimizer.start(start)
  examples = steps = 0
  loss_sum = 0.0
  for features, labels in batches:
    loss, grads = gradient(current, features, labels)
    if hook:
      grads = hook(grads)
    grads = [g + proximal * (w - s) for g, w, s in zip(grads, current, start)]
    state, current = optimizer.step(state, current, grads)
    examples += len(labels)
    steps += 1
    loss_sum += loss * len(labels)
  return current, examples, steps, loss_sum


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def bce(labels, logits):
  """Mean binary cross-entropy of logits."""
  return float(np.mean(np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))))


class LogisticRegression:
  """FedSubAvg's LR over id columns: logit = sum of each column's weight for its id
  + a bias; weights [table per column ([rows, 1]), bias [1]], Keras's order."""

  def __init__(self, columns):
    self.columns = list(columns)

  def logits(self, weights, features):
    *tables, bias = weights
    return sum(t[features[c], 0] for t, c in zip(tables, self.columns)) + bias[0]

  def gradient(self, weights, features, labels):
    labels = np.asarray(labels, np.float64).reshape(-1)
    logits = self.logits(weights, features)
    error = (sigmoid(logits) - labels) / len(labels)
    *tables, _ = weights
    grads = []
    for table, column in zip(tables, self.columns):
      g = np.zeros_like(table)
      np.add.at(g[:, 0], features[column], error)
      grads.append(g)
    return bce(labels, logits), grads + [np.array([error.sum()])]


def weighted_mean(values, weights):
  """sum_k w_k v_k / sum_k w_k, per tensor of the values' lists."""
  weights = np.asarray(weights, np.float64)
  return [sum(w * v[i] for w, v in zip(weights, values)) / weights.sum()
          for i in range(len(values[0]))]


def fedavg(run, gradient, batches, client_rate: float, *, weighting: str, proximal=0.0,
           server=None, row_scales=None):
  """FedAvg's rounds from the run's initial model: each client's local SGD at
  `client_rate` over batches(client) (FedProx's term with `proximal`), its update
  (start - trained) weighed by its examples or equally (`weighting`), the mean
  (each table's rows scaled by FedSubAvg's `row_scales`, the first tensors) a
  pseudo-gradient for the server optimizer (default SGD at 1)."""
  server = server or SGD(1.0)
  weights = run.initial
  state = server.start(weights)
  for cohort in run.rounds:
    updates, counts = [], []
    for client in cohort:
      trained, examples, _, _ = local_training(gradient, weights, batches(client),
                                               SGD(client_rate), proximal=proximal)
      updates.append([w - t for w, t in zip(weights, trained)])
      counts.append(examples)
    mean = weighted_mean(updates, counts if weighting == 'examples' else np.ones(len(counts)))
    if row_scales is not None:
      mean = [m * s[:, None] for m, s in zip(mean, row_scales)] + mean[len(row_scales):]
    state, weights = server.step(state, weights, mean)
  return weights


def assert_matches(run, expected, *, rtol=2e-4, atol=2e-6) -> None:
  """The run's final model equals the reference's, tensor by tensor; and the check
  can fail: the reference moved the model far beyond the tolerance."""
  moved = max(np.abs(np.asarray(e) - np.asarray(i)).max()
              for e, i in zip(expected, run.initial, strict=True))
  assert moved > 1e-3, f'the reference barely moved the model ({moved})'
  for a, e in zip(run.final, expected, strict=True):
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _round_seeds(seed: int, round_num: int):
  """(B's seed, the SCoLR permutation's seed) of round `round_num` of a run seeded `seed`."""
  return tf.random.experimental.stateless_split(tf.constant([seed, round_num], tf.int64), 2)


def basis(seed: int, round_num: int, rank: int, dim: int, table: int | None = None
          ) -> np.ndarray:
  """CoLR's B of a round: a Gaussian drawn from the round's seed, its rows
  orthonormalised (u v^T of its SVD) and scaled by sqrt(d / r); a table's own
  basis folds the table's index into that seed."""
  basis_seed = _round_seeds(seed, round_num)[0]
  if table is not None:
    basis_seed = tf.random.experimental.stateless_fold_in(basis_seed, table)
  gaussian = tf.random.stateless_normal([rank, dim], basis_seed).numpy().astype(np.float64)
  u, _, vt = np.linalg.svd(gaussian, full_matrices=False)
  return u @ vt * math.sqrt(dim / rank)


def scolr_columns(seed: int, round_num: int, rank: int, local_rank: int) -> np.ndarray:
  """The columns of A a SCoLR client trains: the first `local_rank` of the round's
  permutation (a uniform draw from the round seed's second half, ranked)."""
  draw = tf.random.stateless_uniform([rank], _round_seeds(seed, round_num)[1]).numpy()
  return (np.argsort(np.argsort(draw)) < local_rank).astype(np.float64)


def svd_compress(matrix, rank):
  """The best rank-r approximation."""
  u, s, vt = np.linalg.svd(matrix, full_matrices=False)
  return (u[:, :rank] * s[:rank]) @ vt[:rank]


def topk_compress(matrix, rank):
  """The n r / 2 largest-magnitude entries (a rank-r factor's bytes of value + index)."""
  k = max(1, matrix.shape[0] * rank // 2)
  kept = np.argsort(-np.abs(matrix).ravel(), kind='stable')[:k]
  out = np.zeros(matrix.size)
  out[kept] = matrix.ravel()[kept]
  return out.reshape(matrix.shape)


def keras_gradient(task):
  """(weights, features, labels) -> (mean loss, gradients) of the task's Keras model
  and loss (a click model's binary cross-entropy of logits), Keras's weight order."""
  model, loss_fn = task.keras_model(), task.loss()

  def gradient(weights, features, labels):
    for variable, value in zip(model.trainable_variables, weights, strict=True):
      variable.assign(value)
    with tf.GradientTape() as tape:
      loss = loss_fn(np.asarray(labels, np.float32).reshape(-1, 1), model(features))
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), [np.asarray(tf.convert_to_tensor(g), np.float64) for g in grads]

  return gradient
