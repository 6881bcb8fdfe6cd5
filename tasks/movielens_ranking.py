"""MovieLens ranking, leave-one-out, with federated matrix factorization (CoLR's task).

Implicit feedback (every rating is a positive); per user, the latest item is
held out for test and the one before for validation (tff_rec.data.
leave_one_out); users with fewer than `min_interactions` items are skipped and
counted. Each user is a client. A client trains on its positives, each with
`num_negatives` items it never trained on, redrawn every epoch, shuffled per
epoch, with BCE (tff_rec.models.mf). Evaluation ranks the held-out item among
99 fixed unseen items: HR@k and NDCG@k (k = 10). Any single time-ordered
sequence file (`uid item item ...`, e.g. Amazon Beauty) works as well.

User vectors never leave their client: `user_state` 'stored' (kept between
the rounds a client joins; native runtime) or 'reconstructed' (fitted afresh
each round and at evaluation, `reconstruction_epochs`; both runtimes).

Algorithms (tff_rec.algorithms.fedmf): fedmf (full item update; a smaller
--embedding_dim is FedMF at a smaller payload), colr, scolr, svd, topk.
"""

import collections
import dataclasses
import functools
import pathlib

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import metrics
from tff_rec.algorithms import baselines
from tff_rec.algorithms import capacities
from tff_rec.algorithms import fedmf
from tff_rec.algorithms import item_updates
from tff_rec.data import implicit
from tff_rec.data import leave_one_out
from tff_rec.data import movielens
from tff_rec.data import tables
from tff_rec.data import user_items
from tff_rec.models import mf
from tff_rec.training import functional

DEFAULT_DATA_DIR = '../shared/data/ml-100k'
ALGORITHMS = ('fedmf', 'colr', 'scolr', 'svd', 'topk')
FORM_OF = {'fedmf': 'full', 'colr': 'colr', 'scolr': 'scolr', 'svd': 'svd', 'topk': 'topk'}
USER_STATES = ('stored', 'reconstructed')
EVAL_CANDIDATES = 99  # sampled negatives ranked with the held-out item
EVAL_SEED_OFFSET = 7_919  # negatives of an evaluation's reconstruction, apart from training's
RECONSTRUCTION_BLOCK = 512  # users reconstructed side by side at evaluation


@dataclasses.dataclass(frozen=True)
class Config:
  data_dir: str = DEFAULT_DATA_DIR
  embedding_dim: int = 64
  num_negatives: int = 4
  batch_size: int = 256
  local_epochs: int = 2
  l2: float = 5e-4
  min_interactions: int = 20
  user_state: str = 'stored'
  reconstruction_epochs: int = 1  # user_state='reconstructed' only
  top_k: int = 10
  seed: int = 0

  def __post_init__(self):
    for name in ('embedding_dim', 'num_negatives', 'batch_size', 'local_epochs',
                 'reconstruction_epochs', 'top_k'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.l2 < 0:
      raise ValueError(f'l2 must be >= 0, got {self.l2}')
    if self.user_state not in USER_STATES:
      raise ValueError(f'unknown user_state {self.user_state!r}; choose one of {USER_STATES}')

  @property
  def stored(self) -> bool:
    return self.user_state == 'stored'


def make_config(**values) -> Config:
  return Config(**values)


def load(config: Config) -> leave_one_out.LeaveOneOut:
  """MovieLens (100K or 1M) or a single sequence file, split leave-one-out."""
  root = pathlib.Path(config.data_dir)
  options = dict(min_interactions=config.min_interactions, num_negatives=EVAL_CANDIDATES,
                 seed=config.seed)
  sequences = sorted(root.glob('*.txt')) if root.is_dir() else []
  if len(sequences) == 1 and not (root / 'u.data').exists():
    return leave_one_out.from_sequences(user_items.read_lines(sequences[0]), **options)
  try:
    return leave_one_out.from_ratings(movielens.load(root).ratings, **options)
  except tables.DataFormatError as e:
    raise tables.DataFormatError(f'{e}; or one time-ordered sequence file *.txt with '
                                 f'{user_items.EXPECTED}') from None


@dataclasses.dataclass(frozen=True)
class AlgorithmConfig:
  name: str = 'fedmf'
  rank: int = 4                    # colr / svd / topk: r; scolr: the global rank R
  local_ranks: str | None = None   # scolr: e.g. '1-2-4' per client group; None: uniform
  item_average: str = 'cohort'
  secure_sum_bound: float = 0.0    # > 0: TFF's secure sum, values clipped to +-bound

  def __post_init__(self):
    if self.name not in ALGORITHMS:
      raise ValueError(f'unknown algorithm {self.name!r} for movielens_ranking; choose '
                       f'one of {ALGORITHMS}')
    if self.local_ranks is not None and self.name != 'scolr':
      raise ValueError('local_ranks applies to scolr only')
    if self.secure_sum_bound < 0:
      raise ValueError(f'secure_sum_bound must be >= 0, got {self.secure_sum_bound}')

  def group_ranks(self) -> list[int] | None:
    """scolr's local ranks per client group, checked against the global rank."""
    if self.local_ranks is None:
      return None
    try:
      ranks = [int(r) for r in self.local_ranks.split('-')]
    except ValueError:
      raise ValueError(f'local_ranks must look like 1-2-4, got {self.local_ranks!r}') from None
    if not all(1 <= r <= self.rank for r in ranks):
      raise ValueError(f'local ranks {ranks} must be in 1..{self.rank} (the global rank '
                       'R); raise --rank or lower them')
    return ranks


class MovieLensRanking:
  """The task; reading and splitting the data happen once, here."""

  ALGORITHMS = ALGORITHMS
  # The official ML-1M settings (60 clients = 1% of users, SGD 0.5, the server
  # adds the mean update); 10 clients is 1% of ML-100K's 943 users.
  TRAIN_DEFAULTS = dict(clients_per_round=10, client_optimizer='sgd', client_learning_rate=0.5,
                        server_optimizer='sgd', server_learning_rate=1.0)
  ALGORITHM_OPTIONS = ('rank', 'local_ranks', 'item_average', 'secure_sum_bound')
  EVAL_PARTS = ('validation', 'test')
  PROGRESS = {'loss': 'train/train/loss', 'val hr': 'validation/hr_at_10',
              'test hr': 'test/hr_at_10', 'bytes up': 'train/train/bytes_up'}

  def __init__(self, config: Config):
    self.config = config
    self.data = load(config)
    self.initial_items = mf.initial_table(self.data.num_items, config.embedding_dim,
                                          config.seed)
    self.initial_users = mf.initial_table(len(self.data.user_ids), config.embedding_dim,
                                          config.seed + 1)
    self._client_index = {str(u): k for k, u in enumerate(self.data.user_ids)}
    self.fedmf_config = None  # the last learning process's (evaluation reconstructs with it)

  @property
  def train_client_ids(self) -> list[str]:
    return list(self._client_index)

  def describe(self) -> str:
    d = self.data
    skipped = (f', {d.skipped_users} users with < {self.config.min_interactions} items '
               'skipped' if d.skipped_users else '')
    return (f'{len(d.user_ids)} users{skipped}, {d.num_items} items, {len(d.train.items)} '
            f'train positives, leave-one-out; d={self.config.embedding_dim}, '
            f'{self.config.user_state} user vectors')

  # Client data ---------------------------------------------------------------

  @property
  def _epochs(self) -> int:
    c = self.config
    return c.local_epochs + (0 if c.stored else c.reconstruction_epochs)

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

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    epochs, batch_size = self._epochs, self.config.batch_size

    @tff.tensorflow.computation(tff.TensorType(np.int32, [None]),
                                tff.TensorType(np.int32, [None]),
                                tff.TensorType(np.float32, [None]))
    def build(epoch, item, label):
      return implicit.epoch_batches(collections.OrderedDict(epoch=epoch, item=item, label=label),
                                    epochs, batch_size)

    return build

  # Learning processes ----------------------------------------------------------

  def learning_process(self, algorithm: str, *, client_optimizer: baselines.OptimizerConfig,
                       server_optimizer: baselines.OptimizerConfig, runtime: str, **options):
    """(process, training client ids, client input fn); options: AlgorithmConfig's."""
    choice = AlgorithmConfig(name=algorithm, **options)
    if client_optimizer.name != 'sgd' or server_optimizer.name != 'sgd':
      raise ValueError('movielens_ranking trains with SGD at the clients and adds the '
                       f'mean update at the server; got {client_optimizer.name} / '
                       f'{server_optimizer.name}')
    if self.config.stored and runtime != 'native':
      raise ValueError("user_state=stored keeps each client's vector between rounds, "
                       'which a MapReduce round cannot hand back to a client; use '
                       '--runtime=native or --user_state=reconstructed')
    if choice.secure_sum_bound and runtime == 'native':
      raise ValueError("TFF's native worker has no secure sum; use --runtime=inprocess "
                       '(with --user_state=reconstructed) for secure_sum_bound')
    form = item_updates.UpdateForm(FORM_OF[algorithm],
                                   0 if algorithm == 'fedmf' else choice.rank)
    self.fedmf_config = fedmf.FedMFConfig(
        num_items=self.data.num_items, dim=self.config.embedding_dim, form=form,
        client_learning_rate=client_optimizer.learning_rate,
        server_learning_rate=server_optimizer.learning_rate, l2=self.config.l2,
        reconstruction_epochs=0 if self.config.stored else self.config.reconstruction_epochs,
        item_average=choice.item_average, seed=self.config.seed)
    local_rank = self._local_rank_fn(choice)
    ids = self.train_client_ids
    if self.config.stored:
      process = fedmf.StoredUsersProcess(self.fedmf_config, self.initial_items,
                                         self.initial_users, self.dataset_computation)

      def client_input(client_id: str, seed: int):
        user = self._client_index[client_id]
        return user, local_rank(user, seed), self.client_rows(user, seed, self._epochs)
    else:
      sum_factory = (tff.aggregators.SecureSumFactory(float(choice.secure_sum_bound))
                     if choice.secure_sum_bound else None)
      process = fedmf.build_reconstruction_process(
          self.fedmf_config, self.initial_items, self.dataset_computation,
          sum_factory=sum_factory)

      def client_input(client_id: str, seed: int):
        user = self._client_index[client_id]
        return (self.initial_users[user], np.int32(local_rank(user, seed)),
                self.client_rows(user, seed, self._epochs))
    return process, ids, client_input

  def _local_rank_fn(self, choice: AlgorithmConfig):
    """(user, round seed) -> the client's local rank (scolr; the rank otherwise)."""
    ranks = choice.group_ranks()
    if choice.name != 'scolr':
      return lambda user, seed: choice.rank
    if ranks is None:  # uniform in 1..R, drawn afresh every round
      return lambda user, seed: int(np.random.default_rng([seed, 1]).integers(1, choice.rank + 1))
    groups = capacities.assign(len(self.data.user_ids), len(ranks), seed=self.config.seed)
    return lambda user, seed: ranks[groups[user]]

  # Evaluation -------------------------------------------------------------------

  def user_vectors(self, weights) -> np.ndarray:
    """Every user's vector: stored in the weights, or reconstructed from its data."""
    if isinstance(weights, dict) and 'users' in weights:
      return np.asarray(weights['users'])
    if self.fedmf_config is None:
      raise ValueError('reconstructing user vectors needs the learning process built first')
    recon = self.config.reconstruction_epochs
    vectors = []
    for block in range(0, len(self.data.user_ids), RECONSTRUCTION_BLOCK):
      users = np.arange(block, min(block + RECONSTRUCTION_BLOCK, len(self.data.user_ids)))
      (item_ids, labels), mask = implicit.padded_batches(
          [self.client_rows(u, [self.config.seed, EVAL_SEED_OFFSET, u], recon) for u in users],
          self.config.batch_size)
      vectors.append(fedmf.reconstruct_users(self.fedmf_config, np.asarray(weights),
                                             self.initial_users[users], item_ids, labels, mask))
    return np.concatenate(vectors)

  def evaluate(self, weights, part: str = 'test') -> dict[str, float]:
    """HR@k and NDCG@k of the held-out items of `part` ('validation' or 'test')."""
    items = np.asarray(weights['items'] if isinstance(weights, dict) else weights)
    return self._rank_metrics(part, self.user_vectors(weights), items)

  def _rank_metrics(self, part: str, users: np.ndarray, items: np.ndarray
                    ) -> dict[str, float]:
    if part not in self.data.held_out:
      raise ValueError(f'movielens_ranking evaluates "validation" or "test", got {part!r}')
    held_out, negatives = self.data.held_out[part], self.data.negatives[part]
    positive = np.einsum('ud,ud->u', users, items[held_out])
    negative = np.einsum('ud,ucd->uc', users, items[negatives])
    return metrics.sampled_rank_metrics(positive, negative, self.config.top_k)

  def popularity(self, part: str = 'test') -> dict[str, float]:
    """The same metrics ranking items by their number of training users."""
    counts = np.bincount(self.data.train.items, minlength=self.data.num_items)
    held_out, negatives = self.data.held_out[part], self.data.negatives[part]
    return metrics.sampled_rank_metrics(counts[held_out].astype(float),
                                        counts[negatives].astype(float), self.config.top_k)

  # Centralized baseline -----------------------------------------------------------

  def train_centralized(self, optimizer: baselines.OptimizerConfig, *, epochs: int,
                        eval_every: int, on_epoch) -> dict[str, float]:
    """The same model and loss on all users' rows pooled and shuffled, user
    vectors as a table (each row moving by the mean of its batch occurrences)."""
    c = self.config
    weights = {'users': tf.constant(self.initial_users), 'items': tf.constant(self.initial_items)}

    def loss_fn(w, batch):
      return mf.loss(mf.frequency_scaled_gather(w['users'], batch['user']),
                     mf.frequency_scaled_gather(w['items'], batch['item']), batch['label'], c.l2)

    tff_optimizer, state, metrics_now = optimizer.build(), None, {}
    users = np.arange(len(self.data.user_ids))
    for epoch in range(1, epochs + 1):
      rows = [self.client_rows(u, [c.seed, epoch, u], 1) for u in users]
      pooled = collections.OrderedDict(
          user=np.repeat(users, [len(r[1]) for r in rows]).astype(np.int32),
          item=np.concatenate([r[1] for r in rows]), label=np.concatenate([r[2] for r in rows]))
      order = np.random.default_rng([c.seed, epoch]).permutation(len(pooled['item']))
      dataset = tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict((k, v[order]) for k, v in pooled.items())).batch(c.batch_size)
      weights, state, loss_sum, count = functional.train(loss_fn, tff_optimizer, weights,
                                                         dataset, state)
      metrics_now = {'train/loss': float(loss_sum) / max(int(count), 1)}
      if epoch == epochs or (eval_every and epoch % eval_every == 0):
        for part in self.data.held_out:
          metrics_now.update({f'{part}/{k}': v for k, v in self._rank_metrics(
              part, weights['users'].numpy(), weights['items'].numpy()).items()})
      on_epoch(epoch, metrics_now)
    return metrics_now


Task = MovieLensRanking
