"""Matrix factorization for implicit feedback (FedMF, as CoLR trains it).

score(u, i) = <user vector, item row>; loss: binary cross-entropy on
(user, item, label) rows (positives and sampled negatives), averaged over
the batch, plus `l2` x the squared norms of the batch's user and item rows
/ batch size (the official code's decay on the batch's embeddings).

Each item row moves by the mean of its occurrences' gradients in the batch,
not their sum divided by the batch size: item lookups go through
`frequency_scaled_gather`. That is the update of CoLR's official code
(PyTorch embeddings with scale_grad_by_freq and the learning rate multiplied
by the batch size), which the paper's learning rates (0.5 on ML-1M) assume.
The user vector, in every row of a client's batch, moves by the batch mean.
"""

import numpy as np
import tensorflow as tf

from tff_rec.training import resources


INITIAL_BLOCK = 1 << 14  # rows drawn at once: float64 draws of 10^6 users were 488 MB


# Copies of the item table a run holds at least: the initial one, the round's
# state and the next state's while a round writes it.
ITEM_COPIES = 3


def tables_too_large(num_users: int, num_items: int, dim: int, user_copies: int,
                     users: str = '') -> str | None:
  """resources.too_large for a factorization's float32 tables, before they are made:
  `user_copies` of the users' (`users`: whose, for the message) and ITEM_COPIES of
  the items'."""
  return resources.too_large(
      4 * dim * (num_users * user_copies + num_items * ITEM_COPIES),
      f'{num_users} users x {dim} floats x {user_copies}{users} and {num_items} items x '
      f'{dim} floats x {ITEM_COPIES} (copies of each table)')


def initial_table(rows: int, dim: int, seed: int) -> np.ndarray:
  """N(0, 1/dim) entries, as the official code (a dot product of two has variance 1/dim):
  float64 draws of one stream, scaled, as float32, a block of rows at a time."""
  rng = np.random.default_rng(seed)
  table = np.empty((rows, dim), np.float32)
  for start in range(0, rows, INITIAL_BLOCK):
    block = rng.standard_normal((min(INITIAL_BLOCK, rows - start), dim))
    block /= np.sqrt(dim)
    table[start:start + len(block)] = block
  return table


def initial_user(user: int, dim: int, seed: int) -> np.ndarray:
  """The starting vector of one user: a function of (seed, user) only."""
  return initial_table(1, dim, [seed, user])[0]


def keras_model(num_users: int, num_items: int, dim: int, seed: int) -> tf.keras.Model:
  """The same score as a Keras model over {'user', 'item'} ids -> [batch, 1] logits,
  tables the layers 'users' and 'items' (N(0, 1/dim) entries, from `seed`), for the
  algorithms that train Keras models. Plain lookups: no frequency scaling and no
  L2 term (a regularization loss would keep table forms away), unlike `loss`."""
  def table(name, rows, offset):
    return tf.keras.layers.Embedding(rows, dim, name=name, embeddings_initializer=tf.keras
                                     .initializers.RandomNormal(stddev=dim ** -0.5,
                                                                seed=seed + offset))
  user = tf.keras.Input((), dtype=tf.int32, name='user')
  item = tf.keras.Input((), dtype=tf.int32, name='item')
  logit = tf.keras.layers.Dot(axes=1)([table('users', num_users, 1)(user),
                                       table('items', num_items, 0)(item)])
  return tf.keras.Model({'user': user, 'item': item}, logit, name='mf')


def frequency_scaled_gather(table: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
  """tf.gather whose gradient for each occurrence of an id is scaled by
  (number of ids) / (occurrences of that id): with a batch-mean loss, each
  row then moves by the mean gradient of its occurrences."""

  @tf.custom_gradient
  def gather(table):
    def grad(upstream):
      _, index, counts = tf.unique_with_counts(ids)
      scale = tf.cast(tf.size(ids), upstream.dtype) / tf.cast(
          tf.gather(counts, index), upstream.dtype)
      return tf.IndexedSlices(upstream * scale[:, None], ids, tf.shape(table, tf.int64))
    return tf.gather(table, ids), grad

  return gather(table)


def scale_gradient(x: tf.Tensor, scale: float) -> tf.Tensor:
  """x in the forward pass; its gradient times `scale` in the backward pass."""

  @tf.custom_gradient
  def identity(x):
    return tf.identity(x), lambda upstream: tf.convert_to_tensor(upstream) * scale

  return identity(x)


def loss(users: tf.Tensor, item_rows: tf.Tensor, labels: tf.Tensor, l2: float) -> tf.Tensor:
  """Mean BCE of the batch's (user, item) rows plus the L2 term.

  users: [batch, d] rows, or one [d] vector (a client's) for every row.
  """
  users = tf.broadcast_to(users, tf.shape(item_rows))
  bce = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
      labels=labels, logits=tf.reduce_sum(users * item_rows, axis=-1)))
  batch = tf.cast(tf.shape(item_rows)[0], tf.float32)
  return bce + l2 * (tf.reduce_sum(tf.square(item_rows)) + tf.reduce_sum(tf.square(users))
                     ) / batch


def user_gradients(users: tf.Tensor, item_rows: tf.Tensor, labels: tf.Tensor,
                   mask: tf.Tensor, l2: float) -> tf.Tensor:
  """The gradient of `loss` with respect to each user's vector, for many users at once.

  users [N, d]; item_rows [N, B, d], labels and mask [N, B]: user n's batch is
  its rows with mask 1 (a user with none gets a zero gradient). Closed form:
  mean over the batch of (sigmoid(score) - label) x item row, plus 2 l2 u.
  """
  error = (tf.sigmoid(tf.einsum('nd,nbd->nb', users, item_rows)) - labels) * mask
  return _user_gradients(users, item_rows, error, tf.reduce_sum(mask, axis=1, keepdims=True),
                         l2)


def _user_gradients(users, item_rows, error, rows, l2):
  """user_gradients of the rows' errors ((sigmoid - label) x mask) and counts ([N, 1])."""
  gradient = tf.einsum('nb,nbd->nd', error, item_rows) + 2.0 * l2 * users * rows
  return tf.math.divide_no_nan(gradient, rows)


@tf.function
def _fit_in_lockstep(items, users, item_ids, labels, mask, learning_rate, l2):
  for step in tf.range(tf.shape(item_ids)[1]):
    users -= learning_rate * user_gradients(
        users, tf.gather(items, item_ids[:, step]), labels[:, step], mask[:, step], l2)
  return users


def fit_users(items: np.ndarray, users: np.ndarray, item_ids: np.ndarray, labels: np.ndarray,
              mask: np.ndarray, learning_rate: float, l2: float) -> np.ndarray:
  """Many users' vectors fitted by SGD side by side, the item table frozen: step s
  takes each user's batch s. item_ids, labels, mask: [users, steps, batch]
  (implicit.padded_batches)."""
  return _fit_in_lockstep(
      tf.constant(items, tf.float32), tf.constant(users, tf.float32), tf.constant(item_ids),
      tf.constant(labels), tf.constant(mask), tf.constant(learning_rate, tf.float32),
      tf.constant(l2, tf.float32)).numpy()


def train_in_lockstep(items: tf.Tensor, users: tf.Tensor, item_ids: tf.Tensor,
                      labels: tf.Tensor, mask: tf.Tensor, learning_rate: float, l2: float,
                      basis: tf.Tensor | None = None, columns: tf.Tensor | None = None,
                      scale: float = 1.0):
  """Many clients' SGD on `loss`, side by side, each on its own copy of the item
  table: step s takes each client's batch s (item_ids, labels, mask [clients, steps,
  batch]: implicit.padded_batches); a client whose batches ended stays as it is.
  Each step is the sequential one (training.functional, lazy_sgd on
  frequency_scaled_gather's rows) in closed form, summed in another order: equal to
  float tolerance. A step computes the clients up to the last one still training:
  clients ordered longest first, that is only those still training.

  With `basis` [r, d] (CoLR), a client trains a factor A instead, from zero, its
  rows those of the table plus A's times `basis`, A's gradient on its `columns`
  ([clients, r] 0/1) scaled by `scale` (item_updates.low_rank_rows).

  Returns (each client's change to the table [clients, items, d], or its A [clients,
  items, r], its user vector, its sum over examples of its batches' mean loss, its
  example count).
  """
  clients, num_items = tf.shape(users)[0], tf.shape(items)[0]
  width = items.shape[1] if basis is None else basis.shape[0]
  # Each client's change to its table (or its A), rows written in place (Empty:
  # stateful, a buffer of its own).
  changes = tf.raw_ops.Empty(shape=[clients * num_items, width], dtype=tf.float32, init=True)

  def table_rows(ids, change):  # the rows `ids` of a client's table, given its change's
    return tf.gather(items, ids) + (change if basis is None else tf.matmul(change, basis))

  offsets = tf.range(clients)[:, None] * num_items  # client c's rows start at c x items
  training = tf.reduce_any(mask > 0, axis=2)  # [clients, steps]
  positions = tf.range(1, clients + 1)

  def step(s, changes, users, loss_sum, count):
    k = tf.reduce_max(tf.where(training[:, s], positions, 0))  # the clients [0, k) train
    ids, y, m, u = item_ids[:k, s], labels[:k, s], mask[:k, s], users[:k]
    flat = ids + offsets[:k]  # into `changes`
    rows = table_rows(ids, tf.gather(changes, flat))  # [k, batch, d]
    size = tf.reduce_sum(m, axis=1)
    logits = tf.einsum('cd,cbd->cb', u, rows)
    bce = tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits) * m
    loss = tf.math.divide_no_nan(
        tf.reduce_sum(bce, 1) + l2 * (tf.einsum('cbd,cb->c', tf.square(rows), m)
                                      + size * tf.reduce_sum(tf.square(u), 1)), size)
    error = (tf.sigmoid(logits) - y) * m
    trained = u - learning_rate * _user_gradients(u, rows, error, size[:, None], l2)
    # A row's step: the mean over its occurrences of (sigmoid - label) x user, plus 2
    # l2 row (the batch mean's gradient scaled by batch / occurrences).
    error_sums = tf.math.unsorted_segment_sum(error, flat, k * num_items)
    occurrences = tf.math.unsorted_segment_sum(m, flat, k * num_items)
    touched = tf.cast(tf.where(occurrences > 0)[:, 0], tf.int32)
    mean_error = tf.gather(error_sums, touched) / tf.gather(occurrences, touched)
    change = tf.gather(changes, touched)
    row_steps = (mean_error[:, None] * tf.gather(u, touched // num_items)
                 + 2.0 * l2 * table_rows(touched % num_items, change))
    if basis is not None:  # A's rows' steps: the rows' through the basis, on A's columns
      row_steps = scale * tf.gather(columns, touched // num_items) * tf.matmul(
          row_steps, basis, transpose_b=True)
    with tf.control_dependencies([rows]):  # its read of `changes` first
      changes = tf.raw_ops.InplaceUpdate(x=changes, i=touched,
                                         v=change - learning_rate * row_steps)
    rest = tf.zeros([clients - k])
    return (s + 1, changes, tf.ensure_shape(tf.concat([trained, users[k:]], 0), users.shape),
            loss_sum + tf.ensure_shape(tf.concat([loss * size, rest], 0), loss_sum.shape),
            count + tf.cast(tf.ensure_shape(tf.concat([size, rest], 0), count.shape), tf.int64))

  _, changes, users, loss_sum, count = tf.while_loop(
      lambda s, *_: s < tf.shape(item_ids)[1], step,
      (0, changes, users, tf.zeros([clients]), tf.zeros([clients], tf.int64)))
  return tf.reshape(changes, [clients, num_items, width]), users, loss_sum, count
