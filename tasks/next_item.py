"""MovieLens next-item retrieval with a dual encoder (Ning et al.).

Builds, from a small config: the per-user ClientData (and the paper's
centralized split), the Keras model and TFF model_fn for a chosen loss, each
client's training dataset, and global recall@1/5/10 evaluation. The model
declares its one table (the item embedding, indexed by context and label).
"""

import dataclasses
import functools

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_federated as tff

from tasks import setting
from tff_rec import feeds
from tff_rec import losses
from tff_rec import objectives
from tff_rec.data import client_arrays
from tff_rec.data import interactions
from tff_rec.data import movielens
from tff_rec.data import next_item
from tff_rec.data import sliced
from tff_rec.data import tables
from tff_rec.data import user_items
from tff_rec.models import dual_encoder
from tff_rec.models import spec as model_spec
from tff_rec.training import centralized
from tff_rec.training import loop
from tff_rec.training import optimizers

# The type of Config.interactions: a field of that name shadows the module.
Interactions = interactions.Columns

DEFAULT_DATA_DIR = '../shared/data/ml-100k'
ITEM_TABLE = 'item_embedding'  # the dual encoder's one table (rows: padding, 1..V)
CENTRALIZED_SPLITS = ('by_example', 'by_user')


@dataclasses.dataclass(frozen=True)
class Config:
  data_dir: str = setting.setting(
      DEFAULT_DATA_DIR, 'Dataset: MovieLens (ml-100k or ml-1m: the folder or its ratings '
      'file), one time-ordered sequence file, "uid item item ..." (e.g. Amazon Beauty: '
      'the file, or its folder), or an interactions file (CSV/TSV) with --user_column and '
      '--item_column.')
  loss: str = setting.setting('global_softmax', "Retrieval loss (global_softmax: the paper's "
                              'best federated).', choices=sorted(losses.RETRIEVAL_LOSSES))
  spreadout_weight: float = setting.setting(
      0.001, 'Weight of the spreadout term of the *_spreadout losses.')
  remove_accidental_hits: bool = setting.setting(
      False, 'batch_softmax*: mask an in-batch negative that is the row\'s own label.')
  logq_correction: bool = setting.setting(
      False, 'batch_softmax*: subtract log(label frequency in training) from each '
      'in-batch logit (a sampling correction; off in the paper).')
  centralized_split: str = setting.setting(
      'by_example', "Centralized baseline's split: by_example (the paper's: all users' "
      'examples shuffled 80/10/10) or by_user (the federated train/validation/test '
      'users, so its test set is the federated one and never trained on).',
      choices=CENTRALIZED_SPLITS, training='centralized')
  embedding_dim: int = setting.setting(16, 'Embedding dimension.')
  batch_size: int = setting.setting(16, 'Training batch size.')
  drop_remainder: bool = setting.setting(
      True, "Drop each client's last partial batch, as the official code does. The "
      "paper's analysis batches all of a client's examples; with short histories "
      '(Amazon Beauty: 92% of users have fewer than 16 examples) dropping leaves most '
      'clients untrained, so pass --nodrop_remainder there.')
  local_epochs: int = setting.setting(1, 'Client epochs per round.', training='federated')
  shuffle_buffer: int = 100
  seed: int = setting.setting(0, 'Seed of every random choice.')
  examples: next_item.NextItemConfig = next_item.NextItemConfig()
  interactions: Interactions = Interactions()

  def __post_init__(self):
    if self.loss not in losses.RETRIEVAL_LOSSES:
      raise ValueError(f'unknown loss {self.loss!r}; choose one of '
                       f'{sorted(losses.RETRIEVAL_LOSSES)}')
    for name in ('embedding_dim', 'batch_size', 'local_epochs', 'shuffle_buffer'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.centralized_split not in CENTRALIZED_SPLITS:
      raise ValueError(f'unknown centralized_split {self.centralized_split!r}; choose '
                       f'one of {CENTRALIZED_SPLITS}')
    setting.refuse_unused(self, 'spreadout_weight', losses.RETRIEVAL_LOSSES[self.loss][1],
                          'to the *_spreadout losses')
    if ((self.remove_accidental_hits or self.logq_correction)
        and losses.RETRIEVAL_LOSSES[self.loss][0] is not losses.BatchSoftmax):
      raise ValueError(f'remove_accidental_hits and logq_correction apply to the batch '
                       f'softmax losses, not loss={self.loss}')


def make_config(*, max_examples_per_user: int | None = None, **values) -> Config:
  """Config from flat settings (the trainers' flags)."""
  if max_examples_per_user is not None:
    values['examples'] = next_item.NextItemConfig(max_examples_per_user=max_examples_per_user)
  return Config(**interactions.nested(values))


def load(data_dir: str, columns: interactions.Columns = interactions.Columns()
         ) -> tuple[pd.DataFrame, np.ndarray]:
  """(ratings, catalogue item ids) of MovieLens (100K or 1M), of one time-ordered
  sequence file *.txt (e.g. Amazon Beauty) or of an interactions file (`columns`
  declared); positions in a sequence stand for timestamps."""
  sequences = user_items.sequences(data_dir, columns)
  if sequences is not None:
    ratings = next_item.ratings_from_sequences(sequences)
    return ratings, ratings['item_id'].unique()
  try:
    data = movielens.load(data_dir)
  except tables.DataFormatError as e:
    raise tables.DataFormatError(f'{e}; or one time-ordered sequence file *.txt, or a '
                                 f'train.txt/test.txt pair, with '
                                 f'{user_items.EXPECTED}') from None
  return data.ratings, data.items['item_id'].to_numpy()


class Task(feeds.Feeds):
  """The task; reading the data happens once, in the constructor. Its clients'
  feeds derive from `client_arrays` (each training user's rows of the examples)."""

  NAME = 'next_item'
  DEFAULT_ALGORITHM = 'fedavg'
  FLOORS = ('popularity',)  # floors()
  # Trainer settings this task is tuned for (the flags override them).
  TRAIN_DEFAULTS = dict(clients_per_round=50, client_optimizer='sgd', client_learning_rate=0.1,
                        server_optimizer='adam', server_learning_rate=0.01)
  EVAL_PARTS = ('validation', 'test')  # every N rounds, after the last
  PADDING_ID = 0  # a context's padding, no item (heat skips it)
  PROGRESS = {'loss': loop.TRAIN_LOSS,
              'val recall_at_10': 'validation/recall_at_10',
              'test recall_at_10': 'test/recall_at_10'}

  def __init__(self, config: Config):
    self.config = config
    ratings, catalogue = load(config.data_dir, config.interactions)
    vocabulary = next_item.item_vocabulary(catalogue)
    self.examples = next_item.make_examples(ratings, vocabulary, config.examples)
    self.split = next_item.federated_split(self.examples, config.examples)
    self.users_with_examples = len(np.unique(self.examples.user))
    self.users_without_examples = ratings['user_id'].nunique() - self.users_with_examples
    self.short_clients = self._check_parts()
    self.train_data = self.split.client_data('train')
    self.vocab_size = self.examples.vocab_size
    ranges = self.split.row_ranges('train')
    self.client_arrays = client_arrays.ClientArrays(
        {'context': self.examples.context}, self.examples.label,
        {c: np.arange(ranges[c][0], sum(ranges[c])) for c in self.train_data.client_ids})
    self.objective = objectives.Retrieval(self.split.pooled, self.vocab_size, self._loss)
    # The item table, shared by both towers: context items and labels index it.
    self.model = model_spec.KerasSpec(self._keras_model, {ITEM_TABLE: ('context', 'label')})

  def _check_parts(self) -> int:
    """Refuses a part with no user; returns how many training clients train nothing
    (their examples fewer than a batch, with drop_remainder)."""
    c, e = self.config, self.config.examples
    for part in next_item.PARTS:
      if not self.split.row_ranges(part):
        raise ValueError(
            f'{c.data_dir}: no {part} user; users with {e.min_timeline_length} or more '
            f'items ({self.users_with_examples} here) are split '
            f'{e.train_fraction:g} / {e.validation_fraction:g} / the rest by id into train, '
            'validation and test')
    sizes = [n for _, n in self.split.row_ranges('train').values()]
    return sum(n < c.batch_size for n in sizes) if c.drop_remainder else 0

  @property
  def train_client_ids(self) -> list[str]:
    """The federated training clients; an error when none of them would train (the
    centralized baseline pools their examples, so only federated training asks)."""
    if self.short_clients == len(self.train_data.client_ids):
      raise ValueError(f'{self.config.data_dir}: no training user has '
                       f'{self.config.batch_size} examples (batch_size), and drop_remainder '
                       "drops each client's last partial batch, so none would train: lower "
                       'batch_size, or turn drop_remainder off')
    return self.train_data.client_ids

  def describe(self) -> str:
    notes = [f'{self.users_without_examples} users with fewer than '
             f'{self.config.examples.min_timeline_length} items skipped'
             ] if self.users_without_examples else []
    notes += [f'{self.short_clients} training clients hold fewer than batch_size examples '
              'and train nothing (drop_remainder)'] if self.short_clients else []
    return (f'{self.vocab_size} items, loss {self.config.loss}'
            + (f' ({"; ".join(notes)})' if notes else ''))

  def _keras_model(self) -> tf.keras.Model:
    _, spreadout = losses.RETRIEVAL_LOSSES[self.config.loss]
    return dual_encoder.build_dual_encoder(
        vocab_size=self.vocab_size,
        context_length=self.config.examples.context_length,
        embedding_dim=self.config.embedding_dim,
        context_hidden_dims=(self.config.embedding_dim,),
        spreadout_weight=self.config.spreadout_weight if spreadout else 0.0,
        seed=self.config.seed)

  def _loss(self, train_labels: np.ndarray | None) -> tf.keras.losses.Loss:
    """The configured loss; a log-q correction counts `train_labels` (default:
    the federated training users' labels)."""
    loss_class, _ = losses.RETRIEVAL_LOSSES[self.config.loss]
    if loss_class is not losses.BatchSoftmax:
      return loss_class()
    frequency = None
    if self.config.logq_correction:
      labels = self.split.pooled('train')['label'] if train_labels is None else train_labels
      frequency = np.bincount(labels, minlength=self.vocab_size + 1)[1:] / len(labels)
    return loss_class(remove_accidental_hits=self.config.remove_accidental_hits,
                      label_frequency=frequency)

  def model_fn(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(
        self.keras_model(), loss=self.loss(), input_spec=self.input_spec,
        metrics=self.objective.metrics())

  @property
  def batch_plan(self) -> sliced.Plan:
    c = self.config
    return sliced.Plan(c.batch_size, c.local_epochs, drop_remainder=c.drop_remainder,
                       buffer=c.shuffle_buffer)

  def evaluate(self, weights: tff.learning.models.ModelWeights, part: str
               ) -> dict[str, float]:
    """The objective's global recall@k of `weights` over the pooled examples of
    `part`'s users, on one model (its evaluation traced once)."""
    weights.assign_weights_to(self._evaluated_model)
    return self.objective.evaluate(self._evaluated_model, part)

  @functools.cached_property
  def _evaluated_model(self) -> tf.keras.Model:
    return self.keras_model()

  def centralized_split(self) -> next_item.CentralizedSplit:
    if self.config.centralized_split == 'by_user':
      return next_item.CentralizedSplit(*map(self.split.pooled, next_item.PARTS),
                                        self.vocab_size)
    return next_item.centralized_split(self.examples, self.config.examples,
                                       seed=self.config.seed)

  def centralized_epoch(self, examples: next_item.Examples, epoch: int
                        ) -> tf.data.Dataset:
    """One shuffled pass over centralized training examples."""
    order = np.random.default_rng([self.config.seed, epoch]).permutation(
        len(examples['label']))
    shuffled = {k: v[order] for k, v in examples.items()}
    return (tf.data.Dataset.from_tensor_slices(shuffled)
            .batch(self.config.batch_size, drop_remainder=self.config.drop_remainder)
            .map(objectives.Retrieval.xy))

  def train_centralized(self, optimizer: optimizers.OptimizerConfig, *, epochs: int,
                        eval_every: int, on_epoch) -> dict[str, float]:
    """The paper's centralized baseline, trained with Keras.

    The split is config.centralized_split's: the paper's (all users' examples
    shuffled and split 80/10/10 by example) or the federated users' (train on
    the training users, test on the test users, as the federated runs).
    Recall@k on validation every `eval_every` epochs, and on test after the
    last. `on_epoch(epoch, metrics)` sees every epoch's metrics.
    """
    split = self.centralized_split()
    if self.config.drop_remainder and len(split.train['label']) < self.config.batch_size:
      raise ValueError(f'{len(split.train["label"])} training examples, fewer than one batch '
                       f'(batch_size {self.config.batch_size}), and drop_remainder drops the '
                       'partial one: lower batch_size, or turn drop_remainder off')
    tf.keras.utils.set_random_seed(self.config.seed)
    model = self.keras_model()
    evaluator = self.objective.evaluator(model)
    datasets = {'validation': self.objective.dataset(split.validation, model),
                'test': self.objective.dataset(split.test, model)}

    def evaluate_on(name):  # the evaluator holds the model
      return lambda: {f'{name}/{k}': v for k, v in evaluator(datasets[name]).items()}

    return centralized.train(
        centralized.KerasEpochs(
            model, loss=self.loss(split.train['label']), optimizer=optimizer.keras(),
            epoch_dataset=lambda epoch: self.centralized_epoch(split.train, epoch)),
        epochs=epochs, evaluate=evaluate_on('validation'),
        final_evaluate=evaluate_on('test'), eval_every=eval_every,
        on_epoch=on_epoch)
