"""MovieLens ranking, leave-one-out, with federated matrix factorization (CoLR's task).

Implicit feedback (every rating is a positive); per user, the latest item is
held out for test and the one before for validation (tff_rec.data.
leave_one_out); users with fewer than `min_interactions` items are skipped and
counted. Each user is a client. A client trains on its positives, each with
`num_negatives` items it never trained on, redrawn every epoch, shuffled per
epoch, with BCE (tff_rec.models.mf). Evaluation ranks the held-out item among
99 fixed unseen items: HR@k and NDCG@k (k = 10). Any single time-ordered
sequence file (`uid item item ...`, e.g. Amazon Beauty) works as well.

For FedMF (the default, tff_rec.algorithms.fedmf, with the item-update forms
colr, scolr, svd and topk; fedavg and fedsubavg are FedMF
here) user vectors never leave their client: FedMF's options say how they are
kept (item_updates.Options: user_state, reconstruction_epochs; a client's
rows then hold the reconstruction's epochs before its local epochs, the
`extra_epochs` of its feed). `l2` is their loss's (and the centralized
MF's): its field's model_kind makes registry.build refuse it elsewhere.

Every other algorithm trains the same score as a Keras model (mf.keras_model)
whose user table is a model weight like any other: broadcast, trained on its
own row by each client and averaged (not private; FedSubAvg's correction
undoes the averaging of a row only its client touches). Its clients draw
their negatives once per round, not per epoch, and it has no L2 term.
"""

import collections
import dataclasses
import functools
import pathlib

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks import setting
from tff_rec import feeds
from tff_rec import objectives
from tff_rec.data import client_arrays
from tff_rec.data import client_index
from tff_rec.data import implicit
from tff_rec.data import interactions
from tff_rec.data import leave_one_out
from tff_rec.data import movielens
from tff_rec.data import sliced
from tff_rec.data import tables
from tff_rec.data import user_items
from tff_rec.models import mf
from tff_rec.models import spec as model_spec
from tff_rec.models import tables as tables_lib
from tff_rec.training import centralized
from tff_rec.training import loop
from tff_rec.training import optimizers

# The type of Config.interactions: a field of that name shadows the module.
Interactions = interactions.Columns

DEFAULT_DATA_DIR = '../shared/data/ml-100k'
EVAL_CANDIDATES = 99  # sampled negatives ranked with the held-out item


@dataclasses.dataclass(frozen=True)
class Config:
  data_dir: str = setting.setting(
      DEFAULT_DATA_DIR, 'Dataset: MovieLens (ml-100k or ml-1m: the folder or its ratings '
      'file), one time-ordered sequence file (the file, or its folder), or an interactions '
      'file (CSV/TSV) with --user_column and --item_column.')
  embedding_dim: int = setting.setting(64, 'Embedding dimension.')
  num_negatives: int = setting.setting(
      4, 'Sampled negatives per positive, unseen items redrawn every local epoch.')
  batch_size: int = setting.setting(256, 'Training batch size.')
  local_epochs: int = setting.setting(2, 'Client epochs per round.', training='federated')
  l2: float = setting.setting(
      5e-4, "L2 decay on the batch embeddings (FedMF's family and the centralized MF; the "
      'Keras MF has none).', model_kind='mf')
  min_interactions: int = setting.setting(
      20, 'Users with fewer items are skipped (and counted).')
  top_k: int = setting.setting(10, 'Cut-off of the ranking metrics (NDCG, HR, recall).')
  seed: int = setting.setting(0, 'Seed of every random choice.')
  interactions: Interactions = Interactions()

  def __post_init__(self):
    for name in ('embedding_dim', 'num_negatives', 'batch_size', 'local_epochs', 'top_k'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.top_k > EVAL_CANDIDATES:  # at 100 of 100 candidates, every HR would be 1
      raise ValueError(f'top_k must be at most {EVAL_CANDIDATES} (each held-out item is '
                       f'ranked among {EVAL_CANDIDATES + 1} candidates), got {self.top_k}')
    if self.l2 < 0:
      raise ValueError(f'l2 must be >= 0, got {self.l2}')
    if self.min_interactions < leave_one_out.MIN_SPLIT:  # before the data is read
      raise ValueError(f'min_interactions must be >= {leave_one_out.MIN_SPLIT} (a training, a '
                       f'validation and a test item), got {self.min_interactions}')


def make_config(**values) -> Config:
  return Config(**interactions.nested(values))


def load(config: Config) -> leave_one_out.LeaveOneOut:
  """MovieLens (100K or 1M), a single sequence file or an interactions file, split
  leave-one-out."""
  root = pathlib.Path(config.data_dir)
  options = dict(min_interactions=config.min_interactions, num_negatives=EVAL_CANDIDATES,
                 seed=config.seed)
  sequences = user_items.sequences(root, config.interactions)
  if sequences is not None:
    return leave_one_out.from_sequences(sequences, **options)
  try:
    return leave_one_out.from_ratings(movielens.load(root).ratings, **options)
  except tables.DataFormatError as e:
    raise tables.DataFormatError(f'{e}; or one time-ordered sequence file *.txt, or a '
                                 f'train.txt/test.txt pair, with '
                                 f'{user_items.EXPECTED}') from None


class _DrawnInClientWork(feeds.PositivesDrawnWhereTrained):
  """The task with its round draws (FedMF's epochs' negatives and order, the
  Keras clients' negatives) made in TF by its dataset computations, from the
  round's seed (feeds.PositivesDrawnWhereTrained)."""

  def mf_client_arguments(self, client_id: str, seed, extra_epochs: int = 0
                          ) -> tuple[np.ndarray, np.int64]:
    del extra_epochs  # drawn by the dataset computation
    user = self.wrapped.user_index(client_id)
    return self.data.train.of(user).astype(np.int32), np.int64(seed)

  @functools.cache
  def mf_dataset_computation(self, extra_epochs: int = 0) -> tff.Computation:
    k, epochs = self.config.num_negatives, extra_epochs + self.config.local_epochs
    rows, num_items = self.wrapped.mf_dataset_computation(extra_epochs), self.data.num_items

    @tff.tensorflow.computation(tff.TensorType(np.int32, [None]), np.int64)
    def build(positives, seed):
      negatives_seed, order_seed = implicit.seeds(seed, 2)
      size = tf.size(positives)
      negatives = tf.reshape(implicit.unseen_items_tf(positives, epochs * k * size, num_items,
                                                      negatives_seed), [epochs, k * size])
      items = tf.concat([tf.tile(positives[None], [epochs, 1]), negatives], axis=1)
      labels = tf.concat([tf.ones([epochs, size]), tf.zeros([epochs, k * size])], axis=1)
      order = sliced.permutations_tf(epochs, (1 + k) * size, order_seed)
      epoch = tf.repeat(tf.range(epochs), (1 + k) * size)
      return rows(epoch, tf.reshape(tf.gather(items, order, batch_dims=1), [-1]),
                  tf.reshape(tf.gather(labels, order, batch_dims=1), [-1]))

    return build

  def examples_tf(self, user, positives, seed):
    """The Keras model's clients: one epoch of examples, the positives and
    num_negatives unseen items each."""
    negatives = implicit.unseen_items_tf(positives, self.config.num_negatives
                                         * tf.size(positives), self.data.num_items,
                                         implicit.seeds(seed, 1)[0])
    items = tf.concat([positives, negatives], 0)
    labels = tf.concat([tf.ones(tf.shape(positives)), tf.zeros(tf.shape(negatives))], 0)
    return (collections.OrderedDict(user=tf.fill(tf.shape(items), user), item=items),
            labels[:, None])


# Copies of the user table a run holds at least: every run its initial one; the
# Keras MF (a model weight) the round's state and the next state's too (FedMF's
# stored users are checked by fedmf, before it makes theirs).
USER_COPIES, KERAS_USER_COPIES = 1, 2


def _check_tables_fit(num_users: int, num_items: int, config: Config, user_copies: int,
                      users: str = '', cure: str = '') -> None:
  """Refuses, before the tables are allocated, a population whose tables do not fit."""
  refusal = mf.tables_too_large(num_users, num_items, config.embedding_dim, user_copies, users)
  if refusal:
    raise ValueError(f'{refusal}; use a smaller --embedding_dim or fewer users{cure}')


class Task(feeds.Feeds):
  """The task; reading and splitting the data happen once, here. The Keras
  model's clients draw their negatives each round (client_arrays.ClientDraws)."""

  NAME = 'loo_ranking'
  DEFAULT_ALGORITHM = 'fedmf'
  FLOORS = ('popularity',)  # floors()
  # The official ML-1M settings (60 clients = 1% of users, SGD 0.5, the server
  # adds the mean update); 10 clients is 1% of ML-100K's 943 users.
  TRAIN_DEFAULTS = dict(clients_per_round=10, client_optimizer='sgd', client_learning_rate=0.5,
                        server_optimizer='sgd', server_learning_rate=1.0)
  EVAL_PARTS = ('validation', 'test')

  def __init__(self, config: Config):
    self.config = config
    k = config.top_k
    self.PROGRESS = {'loss': loop.TRAIN_LOSS, 'val hr': f'validation/hr_at_{k}',
                     'test hr': f'test/hr_at_{k}', 'bytes up': 'train/aggregator/bytes_up'}
    self.data = load(config)
    _check_tables_fit(len(self.data.user_ids), self.data.num_items, config, USER_COPIES)
    self.initial_items = mf.initial_table(self.data.num_items, config.embedding_dim,
                                          config.seed)
    self._client_index = client_index.ClientIndex(self.data.user_ids)
    self.client_arrays = client_arrays.ClientDraws(
        self._client_index.ids, self._drawn,
        own_seed=lambda client_id: [config.seed, self._client_index[client_id]],
        kept=client_arrays.kept_positives(self._client_index, self.data.train.of, 'item'))
    # The Keras MF (every algorithm but FedMF's family): every user's own row
    # (private: a table form never compresses it) and the items.
    self.model = model_spec.KerasSpec(self._keras_model, {'users': ('user',), 'items': ('item',)},
                                      private=('users',))
    self.objective = objectives.SampledRanking(
        self.data.held_out, self.data.negatives, self.data.train.items, self.data.num_items,
        config.top_k, loss=objectives.Clicks.loss)  # BCE on the logits, a click's

  def initial_user_table(self) -> np.ndarray:
    """Every user's starting vector, made anew at each call: a stored run's process
    makes its first state of it and keeps no copy (a third of its user tables:
    244 MB at 10^6 users x 64 floats)."""
    return mf.initial_table(len(self.data.user_ids), self.config.embedding_dim,
                            self.config.seed + 1)

  @functools.cached_property
  def initial_users(self) -> np.ndarray:
    """The starting vectors, made once and kept: reconstructed users start from theirs
    every round, and the Keras algorithms' model starts from them."""
    return self.initial_user_table()

  def describe(self) -> str:
    d = self.data
    skipped = (f', {d.skipped_users} users with < {self.config.min_interactions} items '
               'skipped' if d.skipped_users else '')
    return (f'{len(d.user_ids)} users{skipped}, {d.num_items} items, {len(d.train.items)} '
            f'train positives, leave-one-out; d={self.config.embedding_dim}')

  # Client data ---------------------------------------------------------------

  def client_rows(self, user: int, seed, epochs: int):
    """(epoch, item, label) rows: `epochs` shuffled epochs of the user's positives,
    each with num_negatives fresh unseen items."""
    positives = self.data.train.of(user)
    rng = np.random.default_rng(seed)
    k = self.config.num_negatives
    rows_per_epoch = len(positives) * (1 + k)
    items, labels = [], []
    for _ in range(epochs):
      negatives = implicit.unseen_items(positives, k * len(positives), self.data.num_items, rng)
      epoch_items = np.concatenate([positives, negatives])
      epoch_labels = np.repeat(np.array([1.0, 0.0], np.float32), [len(positives), len(negatives)])
      order = rng.permutation(rows_per_epoch)
      items.append(epoch_items[order])
      labels.append(epoch_labels[order])
    return (np.repeat(np.arange(epochs, dtype=np.int32), rows_per_epoch),
            np.concatenate(items).astype(np.int32), np.concatenate(labels))

  def mf_client_arguments(self, client_id: str, seed, extra_epochs: int = 0
                          ) -> tuple[np.ndarray, ...]:
    """FedMF's client data: the (epoch, item, label) rows of its round's epochs, the
    `extra_epochs` (a reconstruction's) before the local epochs."""
    return self.client_rows(self._client_index[client_id], seed,
                            extra_epochs + self.config.local_epochs)

  def drawn_where_trained(self) -> '_DrawnInClientWork':
    return _DrawnInClientWork(self)

  @functools.cache
  def mf_dataset_computation(self, extra_epochs: int = 0) -> tff.Computation:
    """FedMF's: (epoch, item, label) rows -> batches, epoch by epoch."""
    epochs, batch_size = extra_epochs + self.config.local_epochs, self.config.batch_size

    @tff.tensorflow.computation(tff.TensorType(np.int32, [None]),
                                tff.TensorType(np.int32, [None]),
                                tff.TensorType(np.float32, [None]))
    def build(epoch, item, label):
      return implicit.epoch_batches(collections.OrderedDict(epoch=epoch, item=item, label=label),
                                    epochs, batch_size)

    return build

  def user_index(self, client_id: str) -> int:
    return self._client_index[client_id]

  # The Keras model (every algorithm but FedMF's family) ----------------------

  def _keras_model(self) -> tf.keras.Model:
    _check_tables_fit(len(self.data.user_ids), self.data.num_items, self.config,
                      KERAS_USER_COPIES, ' (the Keras MF\'s user table, a model weight)',
                      ", or FedMF's private users (--algorithm=fedmf)")
    return mf.keras_model(len(self.data.user_ids), self.data.num_items,
                          self.config.embedding_dim, self.config.seed)

  @functools.cached_property
  def _variable_tables(self) -> list[str | None]:
    """The Keras model's table per trainable variable (built once, not per evaluation)."""
    return tables_lib.variable_tables(model_spec.built_to_read(self), self.tables)

  def _drawn(self, client_id: str, seed):
    """One epoch of the client's examples: 'user' and 'item' (positives and
    num_negatives unseen items each, drawn from `seed`), labels [n, 1]."""
    user = self._client_index[client_id]
    _, items, labels = self.client_rows(user, seed, 1)
    return (collections.OrderedDict(user=np.full(len(items), user, np.int32), item=items),
            labels[:, None])

  @property
  def batch_plan(self) -> sliced.Plan:
    return sliced.Plan(self.config.batch_size, self.config.local_epochs)

  # Evaluation -------------------------------------------------------------------

  def evaluate(self, weights, part: str = 'test') -> dict[str, float]:
    """The objective's HR@k and NDCG@k of `part` ('validation' or 'test'), from
    {'items': the item table, 'users': every user's vector} or the Keras model's
    ModelWeights."""
    if isinstance(weights, tff.learning.models.ModelWeights):
      weights = dict(zip(self._variable_tables, weights.trainable))
    return self.objective.evaluate(weights, part)

  # Centralized baseline -----------------------------------------------------------

  def train_centralized(self, optimizer: optimizers.OptimizerConfig, *, epochs: int,
                        eval_every: int, on_epoch) -> dict[str, float]:
    """The same model and loss on all users' rows pooled and shuffled, user
    vectors as a table (each row moving by the mean of its batch occurrences)."""
    c = self.config

    def loss_fn(w, batch):
      return mf.loss(mf.frequency_scaled_gather(w['users'], batch['user']),
                     mf.frequency_scaled_gather(w['items'], batch['item']), batch['label'], c.l2)

    users = np.arange(len(self.data.user_ids))

    def epoch_dataset(epoch: int) -> tf.data.Dataset:
      rows = [self.client_rows(u, [c.seed, epoch, u], 1) for u in users]
      pooled = collections.OrderedDict(
          user=np.repeat(users, [len(r[1]) for r in rows]).astype(np.int32),
          item=np.concatenate([r[1] for r in rows]), label=np.concatenate([r[2] for r in rows]))
      order = np.random.default_rng([c.seed, epoch]).permutation(len(pooled['item']))
      return tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict((k, v[order]) for k, v in pooled.items())).batch(c.batch_size)

    epoch_of = centralized.FunctionalEpochs(
        loss_fn, optimizer.build(), {'users': self.initial_users, 'items': self.initial_items},
        epoch_dataset)

    def evaluate():
      weights = epoch_of.weights
      return {f'{part}/{k}': v for part in self.data.held_out
              for k, v in self.objective.evaluate(weights, part).items()}

    return centralized.train(epoch_of, epochs=epochs, evaluate=evaluate,
                             eval_every=eval_every, on_epoch=on_epoch)
