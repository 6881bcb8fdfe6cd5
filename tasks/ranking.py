"""Goodreads-100 ranking with NeuMF + BPR (FAIR's task), and its algorithms.

Each user is a client. Training triples: each train positive with
`num_negatives` items drawn uniformly from the items the user never trained
on, shuffled per epoch; redrawn every local epoch (and every round) for the
weight-table NeuMF (FAIR's round and the table forms), every round for the
Keras NeuMF (the other algorithms; its feeds come from client_arrays.
ClientDraws, as loo_ranking's Keras MF's).
Evaluation: the global model scores every item for every user, train items
are excluded, and NDCG@k / recall@k / HR@k are taken against the test items
(the official code's protocol, sklearn's NDCG for binary relevance). Any
dataset in the same per-user line layout works (user_items.load), e.g.
Amazon Beauty sequences with a per-user chronological test split, cut to
its heaviest users as FAIR's paper cut its -100 datasets (`top_users`), and
scored on a validation split instead of test (`held_out`) to choose settings.
"""

import collections
import dataclasses
import functools

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
from tff_rec.data import sliced
from tff_rec.data import user_items
from tff_rec.models import neumf
from tff_rec.models import spec as model_spec
from tff_rec.models import table_model
from tff_rec.training import centralized
from tff_rec.training import loop
from tff_rec.training import optimizers

# The type of Config.interactions: a field of that name shadows the module.
Interactions = interactions.Columns

DEFAULT_DATA_DIR = '../shared/data/goodreads-100'
HELD_OUT = ('test', 'validation')


@dataclasses.dataclass(frozen=True)
class Config:
  data_dir: str = setting.setting(
      DEFAULT_DATA_DIR, 'Dataset: the folder of train.txt and test.txt (user item lists), '
      'one time-ordered sequence file (the file, or its folder), or an interactions file '
      '(CSV/TSV) with --user_column and --item_column.')
  factors: int = setting.setting(8, 'NeuMF factors.')
  mlp_layers: int = setting.setting(1, 'NeuMF MLP layers.')
  num_negatives: int = setting.setting(
      1, 'Sampled negatives per positive, unseen items redrawn every local epoch.')
  l2: float = setting.setting(1e-6, 'L2 decay on the batch embeddings.')
  batch_size: int = setting.setting(512, 'Training batch size.')
  local_epochs: int = setting.setting(5, 'Client epochs per round.', training='federated')
  test_fraction: float = setting.setting(
      0.3, "The last share of each user's items held out for test (single sequence "
      'files only).')
  top_k: int = setting.setting(20, 'Cut-off of the ranking metrics (NDCG, HR, recall).')
  top_users: int = setting.setting(
      0, 'Keep only this many users, those with the most items (FAIR\'s "-100" '
      'datasets); 0 keeps every user.')
  held_out: str = setting.setting(
      'test', 'What evaluation scores: the test items, or a validation split (the last '
      'test_fraction of each train list, test items dropped) for choosing settings.',
      choices=HELD_OUT)
  seed: int = setting.setting(0, 'Seed of every random choice.')
  interactions: Interactions = Interactions()

  def __post_init__(self):
    for name in ('factors', 'mlp_layers', 'num_negatives', 'batch_size', 'local_epochs',
                 'top_k'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.top_users < 0:
      raise ValueError(f'top_users must be >= 0 (0: every user), got {self.top_users}')
    if self.held_out not in HELD_OUT:
      raise ValueError(f'held_out must be one of {HELD_OUT}, got {self.held_out!r}')
    if self.l2 < 0:
      raise ValueError(f'l2 must be >= 0, got {self.l2}')


def _check_catalogue(data: user_items.UserItems, top_k: int) -> None:
  """Refuses a catalogue the task cannot rank: fewer items than top_k, or a user
  who trained on every item (no negative left to draw)."""
  if top_k > data.num_items:
    raise ValueError(f'top_k ({top_k}) is more than the catalogue\'s {data.num_items} '
                     'items; lower top_k')
  users = np.repeat(np.arange(len(data.user_ids)), data.train.counts)
  distinct = np.bincount(np.unique(users * data.num_items + data.train.items) // data.num_items,
                         minlength=len(data.user_ids))
  full = np.flatnonzero(distinct >= data.num_items)
  if len(full):
    raise ValueError(f'{len(full)} users (e.g. user {data.user_ids[full[0]]}) trained on '
                     f'every one of the catalogue\'s {data.num_items} items: there is no '
                     'negative to draw for them; drop them or use a larger catalogue')


def make_config(**values) -> Config:
  return Config(**interactions.nested(values))


class Task(feeds.Feeds):
  """The task; reading the data happens once, in the constructor. The Keras
  NeuMF's clients draw their negatives each round (client_arrays.ClientDraws)."""

  NAME = 'ranking'
  DEFAULT_ALGORITHM = 'fair'
  FLOORS = ('popularity',)  # floors()
  # FAIR's settings (official README: K = 10 clients, fresh client Adam 1e-3,
  # the server replaces the model by the mean); the flags override them.
  TRAIN_DEFAULTS = dict(clients_per_round=10, client_optimizer='adam',
                        client_learning_rate=1e-3, server_optimizer='sgd',
                        server_learning_rate=1.0)

  def __init__(self, config: Config):
    self.config = config
    setting.refuse_unused(
        config, 'test_fraction',
        config.held_out == 'validation' or not user_items.is_pair(config.data_dir,
                                                                  config.interactions),
        'to one sequence or interactions file, and to held_out=validation; a train.txt '
        'and test.txt pair is split already')
    data = user_items.load(config.data_dir, test_fraction=config.test_fraction,
                           columns=config.interactions)
    if config.top_users:
      data = user_items.heaviest(data, config.top_users)
    if config.held_out == 'validation':
      data = user_items.validation_split(data, config.test_fraction)
    self.data = data
    _check_catalogue(data, config.top_k)
    part, k = config.held_out, config.top_k
    self.EVAL_PARTS = (part, part)  # the paper tracks held-out NDCG every N rounds
    self.PROGRESS = {'loss': loop.TRAIN_LOSS, f'ndcg_at_{k}': f'{part}/ndcg_at_{k}',
                     'bytes down': 'train/aggregator/bytes_down'}
    self.shape = neumf.NeuMFShape(len(self.data.user_ids), self.data.num_items,
                                  config.factors, config.mlp_layers)
    self.vocab_size = self.data.num_items
    counts = self.data.train.counts
    self._client_index = client_index.ClientIndex(self.data.user_ids,
                                                  np.flatnonzero(counts > 0))
    self.client_arrays = client_arrays.ClientDraws(
        self._client_index.ids, self._drawn,
        own_seed=lambda client_id: [config.seed, self._client_index[client_id]],
        kept=client_arrays.kept_positives(self._client_index, self.data.train.of, 'positive'))
    # NeuMF's item tables and each user's own rows (private), named as its weights.
    items = ('positive', 'negatives')
    self.model = model_spec.KerasSpec(
        self._keras_model, {'item_gmf': items, 'item_mlp': items, 'user_gmf': ('user',),
                            'user_mlp': ('user',)},
        private=('user_gmf', 'user_mlp'), shapes=self.shape.embedding_shapes)
    self.objective = objectives.ItemRanking(data.train, data.test, part, data.num_items, k,
                                            loss=neumf.BprLoss)

  def user_index(self, client_id: str) -> int:
    return self._client_index[client_id]

  def describe(self) -> str:
    return (f'{len(self.data.user_ids)} users, {self.data.num_items} items'
            + (' (renumbered 0.. in id order: the file\'s ids left over 90% of 0..max unused)'
               if self.data.renumbered else '')
            + f', {self.data.train.counts.sum()} train / {self.data.test.counts.sum()} '
            f'{self.config.held_out} interactions')

  def functional_model(self) -> table_model.TableModel:
    return table_model.TableModel(
        initial_weights=neumf.initial_weights(self.shape, self.config.seed),
        loss=functools.partial(neumf.bpr_loss, l2=self.config.l2),
        tables=[t.name for t in self.tables if not t.private],
        per_user_tables=[t.name for t in self.tables if t.private])

  # The weight-table NeuMF's clients: E epochs of triples, drawn anew each epoch.

  def table_client_arguments(self, client_id: str, seed: int
                             ) -> tuple[np.int32, np.ndarray, np.ndarray]:
    """(user index, positives, negatives): E shuffled epochs of BPR triples."""
    user = self._client_index[client_id]
    positives = self.data.train.of(user)
    rng = np.random.default_rng(seed)
    epochs = self.config.local_epochs
    order = np.concatenate([rng.permutation(len(positives)) for _ in range(epochs)])
    negatives = self._negatives(positives, len(order) * self.config.num_negatives, rng)
    return (np.int32(user), positives[order].astype(np.int32),
            negatives.reshape(len(order), self.config.num_negatives).astype(np.int32))

  def _negatives(self, positives: np.ndarray, count: int, rng) -> np.ndarray:
    return implicit.unseen_items(positives, count, self.data.num_items, rng)

  @functools.cached_property
  def table_dataset_computation(self) -> tff.Computation:
    """(user, positives, negatives) of E epochs -> the client's batches, in TFF.

    Each epoch is batched on its own (its last batch may be partial), as the
    official code's per-epoch DataLoader.
    """
    k, epochs = self.config.num_negatives, self.config.local_epochs

    @tff.tensorflow.computation(np.int32, tff.TensorType(np.int32, [None]),
                                tff.TensorType(np.int32, [None, k]))
    def build(user, positives, negatives):
      return implicit.epoch_batches(
          collections.OrderedDict(user=tf.fill(tf.shape(positives), user),
                                  positive=positives, negatives=negatives),
          epochs, self.config.batch_size)

    return build

  # The Keras NeuMF (the algorithms that train a Keras model) -----------------

  def _keras_model(self) -> tf.keras.Model:
    return neumf.keras_model(self.shape, self.config.num_negatives, self.config.seed)

  def drawn_where_trained(self) -> '_DrawnInClientWork':
    return _DrawnInClientWork(self)

  @functools.cached_property
  def _keras_weight_names(self) -> list[str]:  # read once: tables of every item
    return neumf.keras_weight_names(model_spec.built_to_read(self))

  def _drawn(self, client_id: str, seed) -> client_arrays.Examples:
    """One round's examples: 'user', 'positive' (each train positive once) and
    'negatives' (num_negatives unseen items each, drawn from `seed`), labels
    [n, 1] of ones (BPR reads none; Keras wants one)."""
    user = self._client_index[client_id]
    positives = self.data.train.of(user)
    k = self.config.num_negatives
    negatives = self._negatives(positives, k * len(positives), np.random.default_rng(seed))
    return (collections.OrderedDict(user=np.full(len(positives), user, np.int32),
                                    positive=positives.astype(np.int32),
                                    negatives=negatives.reshape(-1, k).astype(np.int32)),
            np.ones((len(positives), 1), np.float32))

  @property
  def batch_plan(self) -> sliced.Plan:
    return sliced.Plan(self.config.batch_size, self.config.local_epochs)

  def triples_dataset(self, users, positives, negatives) -> tf.data.Dataset:
    """Batches of (user, positive, negatives) triples, in order."""
    return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
        user=users, positive=positives, negatives=negatives)).batch(self.config.batch_size)

  def evaluate(self, weights, part: str = 'test') -> dict[str, float]:
    """The objective's mean NDCG / recall / HR @k of the full model (its weights, or
    the Keras NeuMF's ModelWeights) over users with held-out items."""
    if isinstance(weights, tff.learning.models.ModelWeights):  # the Keras NeuMF's
      weights = dict(zip(self._keras_weight_names, weights.trainable))
    scores = functools.partial(neumf.score_all_items,
                               {k: tf.constant(v) for k, v in weights.items()})
    return self.objective.evaluate(lambda users: scores(tf.constant(users)), part)

  def centralized_epoch(self, epoch: int) -> tf.data.Dataset:
    """One pass over every user's triples (fresh negatives), shuffled across users."""
    rng = np.random.default_rng([self.config.seed, epoch])
    users = np.repeat(np.arange(len(self.data.user_ids)), self.data.train.counts)
    negatives = np.concatenate([
        self._negatives(self.data.train.of(u), self.data.train.counts[u]
                        * self.config.num_negatives, rng)
        for u in range(len(self.data.user_ids))])
    order = rng.permutation(len(users))
    k = self.config.num_negatives
    return self.triples_dataset(
        users[order].astype(np.int32), self.data.train.items[order].astype(np.int32),
        negatives.reshape(-1, k)[order].astype(np.int32))

  def train_centralized(self, optimizer: optimizers.OptimizerConfig, *, epochs: int,
                        eval_every: int, on_epoch) -> dict[str, float]:
    """The same model and loss on every user's triples pooled (the paper's central row).

    One optimizer throughout; test metrics every `eval_every` epochs and
    after the last; `on_epoch(epoch, metrics)` sees every epoch's metrics.
    """
    model, part = self.functional_model(), self.config.held_out
    epoch_of = centralized.FunctionalEpochs(
        lambda w, batch: model.loss(w, batch, neumf.full_item_rows(w)), optimizer.build(),
        model.initial_weights, self.centralized_epoch)
    return centralized.train(
        epoch_of, epochs=epochs, eval_every=eval_every, on_epoch=on_epoch,
        evaluate=lambda: {f'{part}/{k}': v for k, v in self.evaluate(epoch_of.weights, part)
                          .items()})


class _DrawnInClientWork(feeds.PositivesDrawnWhereTrained):
  """The task with each round's draws (the weight-table NeuMF's epochs' order and
  negatives, the Keras NeuMF's negatives) made in TF by its dataset computations,
  from the round's seed (feeds.PositivesDrawnWhereTrained)."""

  def table_client_arguments(self, client_id: str, seed: int):
    return self.client_arguments(client_id, seed)

  @functools.cached_property
  def table_dataset_computation(self) -> tff.Computation:
    k, epochs = self.config.num_negatives, self.config.local_epochs
    triples, num_items = self.wrapped.table_dataset_computation, self.data.num_items

    @tff.tensorflow.computation(*self.ARGUMENT_TYPES)
    def build(user, positives, seed):
      order_seed, negatives_seed = implicit.seeds(seed, 2)
      size = tf.size(positives)
      order = tf.reshape(sliced.permutations_tf(epochs, size, order_seed), [-1])
      negatives = implicit.unseen_items_tf(positives, epochs * size * k, num_items,
                                           negatives_seed)
      return triples(user, tf.gather(positives, order), tf.reshape(negatives, [-1, k]))

    return build

  def examples_tf(self, user, positives, seed):
    k, size = self.config.num_negatives, tf.size(positives)
    negatives = implicit.unseen_items_tf(positives, k * size, self.data.num_items,
                                         implicit.seeds(seed, 1)[0])
    return (collections.OrderedDict(user=tf.fill([size], user), positive=positives,
                                    negatives=tf.reshape(negatives, [-1, k])),
            tf.ones([size, 1]))
