"""Click-through-rate prediction (FedSubAvg's and MetaUA's task family).

On MovieLens, or on a CTR file of your own (a CSV / TSV with a header, or
without one and its fields named by `columns`; `data_dir` names the file and
the config declares its label, client and feature columns:
tff_rec.data.ctr_file), with LR or DCNv2 over those columns,
or DIN over its user, item and history columns. Interactions without labels
(an interactions file with its columns declared, or a sequence file) become
DIN's clicks (tff_rec.data.sequence_clicks: each interaction a click with the
user's earlier items as history, beside a sampled non-click; each user's last
pair is test), the rows launch.sequence_clicks writes as a CTR file.

Examples, features and splits: tff_rec.data.ctr (label = rating >= 4, each
user a client; chronological last-10% test by default, or FedSubAvg's random
80/20). Models: FedSubAvg's LR with crosses, DCNv2 (MetaUA), DIN (FedSubAvg's
CTR model), from tff_rec.models.ctr. Metrics: exact AUC and logloss of the
global model on the pooled test examples, and its loss on the pooled training
examples (FedSubAvg's target for the rating task is a train loss).

The model declares its embedding tables (`tables`, and the rows each
training client's data index, `client_table_rows`), so FedSubAvg's heat
can be counted; clients' examples come as one dict of per-example arrays
(`client_examples`), which MetaUA splits into support and query. Clients weigh
equally by default (CLIENT_WEIGHTING: FedSubAvg's paper).
"""

import dataclasses
import functools
import pathlib

import numpy as np
import tensorflow as tf

from tasks import setting
from tff_rec import feeds
from tff_rec import objectives
from tff_rec.aggregators import fedsubavg
from tff_rec.data import client_arrays
from tff_rec.data import ctr
from tff_rec.data import ctr_file
from tff_rec.data import interactions
from tff_rec.data import movielens
from tff_rec.data import sequence_clicks
from tff_rec.data import sliced
from tff_rec.data import tables
from tff_rec.data import user_items
from tff_rec.models import ctr as ctr_models
from tff_rec.models import spec as model_spec
from tff_rec.models import tables as tables_lib
from tff_rec.training import centralized
from tff_rec.training import loop
from tff_rec.training import optimizers

# The type of Config.interactions: a field of that name shadows the module.
Interactions = interactions.Columns

DEFAULT_DATA_DIR = '../shared/data/ml-100k'
CTR_FILE_SUFFIXES = ('.csv', '.tsv')
DEFAULT_TEST_FRACTION = {'chronological': 0.1, 'random': 0.2}


@dataclasses.dataclass(frozen=True)
class Config:
  data_dir: str = setting.setting(
      DEFAULT_DATA_DIR, 'Dataset: MovieLens (the folder or its ratings file), a CTR file '
      'of your own (.csv or .tsv) with its columns declared, or interactions as DIN\'s clicks: '
      'an interactions file (CSV/TSV) with --user_column and --item_column, or one '
      'time-ordered sequence file (the file, or its folder).')
  model: str = setting.setting(
      'lr', "CTR model: FedSubAvg's LR with gender x movie and age x movie crosses, "
      "DCNv2 (MetaUA's), DIN (FedSubAvg's CTR model).", choices=tuple(ctr_models.MODELS))
  split: str = setting.setting(
      'chronological', "Test examples: each user's last ones (MetaUA) or a random share "
      'of all (FedSubAvg).', choices=ctr.SPLITS)
  test_fraction: float | None = setting.setting(
      None, "The test share: of each user's last examples (chronological) or of all "
      '(random); none: 0.1 chronological, 0.2 random.')
  validation_fraction: float = setting.setting(
      0.0, 'A validation part taken from the training examples by the test part\'s rule '
      "(that share of each user's last training examples, or of all at random), evaluated "
      'beside test to choose rates and rounds on; 0: none.')
  history_length: int = setting.setting(10, 'Clicked movies in the DIN history.')
  embedding_dim: int | None = setting.setting(
      None, "Embedding dimension (none: the model's, lr 1, dcn 4, din 18).")
  embedding_stddev: float = setting.setting(
      ctr_models.EMBEDDING_STDDEV, "Stddev of the embedding tables' normal initialisation.")
  batch_size: int = setting.setting(16, 'Training batch size.')
  local_epochs: int = setting.setting(1, 'Client epochs per round.', training='federated')
  local_steps: int = setting.setting(
      0, "At most this many client batches per round (FedSubAvg's I; 0: whole epochs).",
      training='federated')
  seed: int = setting.setting(0, 'Seed of every random choice.')
  # A CTR file of your own (data_dir names a .csv / .tsv file): its columns.
  label_column: str = setting.setting(
      'label', 'CTR file: the label column, a number; > 0 is a click.')
  client_column: str | None = setting.setting(
      None, 'CTR file: the column that names the client (user) of each row.')
  feature_columns: tuple[str, ...] = setting.setting(
      (), 'CTR file: id feature columns (any strings; an empty field is padding).')
  list_columns: tuple[str, ...] = setting.setting(
      (), 'CTR file: id-list feature columns, e.g. a DIN history "12,7,30" (items joined '
      'by --list_separator).')
  list_separator: str = setting.setting(',', 'CTR file: the separator of id-list items.')
  test_column: str | None = setting.setting(
      None, 'CTR file: a column marking the test rows (a number; > 0 is test). When set, '
      '--split and --test_fraction do not apply (and are refused).')
  interactions: Interactions = Interactions()

  def __post_init__(self):
    if self.model not in ctr_models.MODELS:
      raise ValueError(f'unknown model {self.model!r}; choose one of '
                       f'{sorted(ctr_models.MODELS)}')
    if self.split not in ctr.SPLITS:
      raise ValueError(f'unknown split {self.split!r}; choose one of {ctr.SPLITS}')
    for name in ('history_length', 'batch_size', 'local_epochs'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.test_fraction is not None and not 0 < self.test_fraction < 1:
      raise ValueError(f'test_fraction must be in (0, 1), got {self.test_fraction}')
    if not 0 <= self.validation_fraction < 1:
      raise ValueError(f'validation_fraction must be in [0, 1), got {self.validation_fraction}')
    if self.embedding_stddev <= 0:
      raise ValueError(f'embedding_stddev must be > 0, got {self.embedding_stddev}')
    if self.local_steps < 0:
      raise ValueError(f'local_steps must be >= 0, got {self.local_steps}')
    if self.embedding_dim is not None and self.embedding_dim < 1:
      raise ValueError(f'embedding_dim must be >= 1, got {self.embedding_dim}')
    setting.refuse_unused(self, 'embedding_dim', self.model != 'lr',
                          'to the models with embeddings (dcn, din), not lr')
    setting.refuse_unused(self, 'history_length', self.model == 'din' and not self.client_column,
                          "to DIN's history (model din) made from MovieLens or interactions; a "
                          "CTR file's history is its list columns")
    setting.refuse_unused(self, 'list_separator', bool(self.list_columns),
                          "to a CTR file's list_columns")

  @property
  def resolved_test_fraction(self) -> float:
    if self.test_fraction is None:
      return DEFAULT_TEST_FRACTION[self.split]
    return self.test_fraction


def make_config(**values) -> Config:
  for name in ('feature_columns', 'list_columns'):  # flags give lists
    if name in values:
      values[name] = tuple(values[name])
  return Config(**interactions.nested(values))


def read_examples(config: Config) -> tuple[ctr.CtrExamples, ctr_models.CtrModel]:
  """The examples of a CTR file with the declared columns, of an interactions or
  sequence file as DIN's clicks, or of MovieLens; the model."""
  path = pathlib.Path(config.data_dir)
  if config.client_column is not None:
    columns, spec = _with_model(ctr_file.Columns(
        config.label_column, config.client_column, config.feature_columns,
        config.list_columns, config.list_separator, config.test_column), config.model)
    file = tables.file_of(path, CTR_FILE_SUFFIXES, 'CTR file')
    if config.test_column is not None:
      _check_no_split(config, f'test_column ({config.test_column})')
    if config.interactions.declared:
      given = [f'--{f.name}' for f in dataclasses.fields(config.interactions)
               if f.name != 'columns' and getattr(config.interactions, f.name) is not None]
      raise ValueError(f'{", ".join(given)} declare an interactions file, and --client_column '
                       f'a CTR file: leave out {" and ".join(given)} (a CTR file without a '
                       'header names its fields with --columns)')
    return ctr_file.read(file, columns, names=config.interactions.columns, split=config.split,
                         test_fraction=config.resolved_test_fraction, seed=config.seed), spec
  if (path.is_file() and path.suffix.lower() in CTR_FILE_SUFFIXES
      and not config.interactions.declared):
    raise ValueError(f'{path}: declare its columns: a CTR file\'s --client_column and '
                     '--feature_columns (and --label_column unless it is "label"), or an '
                     'interactions file\'s --user_column and --item_column')
  try:
    sequences = user_items.sequences(path, config.interactions)
  except tables.DataFormatError as e:
    if config.interactions.declared:  # an interactions file's own error
      raise
    raise tables.DataFormatError(
        f'{e}; or, a CTR file (one example a line, a header or --columns): declare its '
        '--client_column and --feature_columns (and --label_column unless it is "label")'
        ) from None
  if sequences is not None:
    _check_no_split(config, "DIN's clicks (each user's last click and non-click are test)")
    columns, spec = _with_model(sequence_clicks.CTR_COLUMNS, config.model)
    # as read back from the CTR file launch.sequence_clicks writes
    return sequence_clicks.din_examples(
        sequences, history_length=config.history_length, seed=config.seed,
        shared_vocabularies=columns.shared_vocabularies), spec
  return (ctr.make_examples(movielens.load(path), split=config.split,
                            test_fraction=config.resolved_test_fraction,
                            history_length=config.history_length, seed=config.seed),
          ctr_models.MODELS[config.model])


def _check_no_split(config: Config, marks: str) -> None:
  """Refuses split settings where the data mark the test examples themselves."""
  if config.split != Config.split or config.test_fraction is not None:
    raise ValueError(f'{marks} marks the test examples: split and test_fraction do not '
                     'apply; leave them out')


def _check_parts(examples: ctr.CtrExamples, data_dir: str) -> None:
  """Refuses an empty part, and a part AUC scores (test, validation) of clicks only
  or non-clicks only."""
  for part in ('train', 'test') + (('validation',) if examples.is_validation is not None
                                   else ()):
    labels = examples.labels[examples.rows(part)]
    if not len(labels):
      raise ValueError(f'{data_dir}: no {part} example')
    if part != 'train' and labels.min() == labels.max():
      raise ValueError(f'{data_dir}: every {part} example is a '
                       f'{"click" if labels[0] else "non-click"} (a label > 0 is a click): '
                       'AUC needs both')


def _with_model(columns: ctr_file.Columns, model: str
                ) -> tuple[ctr_file.Columns, ctr_models.CtrModel]:
  """The model over declared columns, and the columns with the vocabulary each of
  its tables shares between them."""
  spec = ctr_models.for_columns(model, columns.features, columns.list_features)
  return dataclasses.replace(columns, shared_vocabularies=tuple(
      indexing for indexing in spec.tables.values() if len(indexing) > 1)), spec


class Task(feeds.Feeds):
  """The task; reading the data and building examples happen once, here. Its
  training clients are client_arrays.ClientArrays (the feeds come from it)."""

  NAME = 'ctr'
  DEFAULT_ALGORITHM = 'fedavg'
  CLIENT_WEIGHTING = 'clients'  # FedSubAvg's paper: clients weigh equally
  FLOORS = ('popularity', 'click_rate', 'constant')  # floors()
  FLOOR_ITEM = True  # floors(item): the item floors score a column a study may name
  # FedSubAvg's rating task: K = 50 clients per round, mini-batch SGD.
  TRAIN_DEFAULTS = dict(clients_per_round=50, client_optimizer='sgd', client_learning_rate=0.1,
                        server_optimizer='sgd', server_learning_rate=1.0)
  EVAL_PARTS = objectives.Clicks.EVAL_PARTS
  PADDING_ID = 0  # an empty field, a history's padding: no feature (heat skips it)
  PROGRESS = {'loss': loop.TRAIN_LOSS, 'train loss': 'eval/train_loss',
              'test auc': 'eval/test_auc'}

  def __init__(self, config: Config):
    self.config = config
    self.examples, self.spec = read_examples(config)
    if config.validation_fraction:
      self.examples = self.examples.with_validation(config.split, config.validation_fraction,
                                                    config.seed)
    _check_parts(self.examples, config.data_dir)
    ctr.check_ids(self.examples.take(slice(None), self.spec.columns),
                  self.examples.vocab_sizes)
    self.widths = {c: self.examples.features[c].shape[1] for c in self.spec.columns
                   if self.examples.features[c].ndim == 2}
    # Seeded initializers; no global seed (it leaks). DIN's movie table: movie and history.
    self.model = model_spec.KerasSpec(functools.partial(
        self.spec.build, self.examples.vocab_sizes, self.widths, self.dim, config.seed,
        embedding_stddev=config.embedding_stddev), self.spec.tables)
    train_rows = self.examples.client_rows('train')
    # Labels [n, 1], as Keras' binary cross-entropy takes them.
    self.client_arrays = client_arrays.ClientArrays(
        self.examples.take(slice(None), self.spec.columns), self.examples.labels[:, None],
        {str(self.examples.user_ids[k]): rows for k, rows in train_rows.items()})
    self.clients_without_train = len(self.examples.user_ids) - len(train_rows)
    parts = ('train', 'validation', 'test') if config.validation_fraction else ('train', 'test')
    self.objective = objectives.Clicks(
        {part: self._part(part) for part in parts},
        {c: self.examples.vocab_sizes[c] for c in self.spec.columns},
        default_item=next((c for c in ('movie', 'item') if c in self.spec.columns),
                          self.spec.columns[1] if config.model == 'din' else None))

  def _part(self, part: str) -> objectives.Part:
    rows = self.examples.rows(part)
    return objectives.Part(self.examples.labels[rows], lambda at, columns: self.examples.take(
        rows[at], columns or self.spec.columns))

  @property
  def dim(self) -> int:
    return self.config.embedding_dim or self.spec.default_dim

  def describe(self) -> str:
    e, c = self.examples, self.config
    skipped = (f' ({self.clients_without_train} users with no training example skipped)'
               if self.clients_without_train else '')
    split = (f'marked by {c.test_column}' if c.test_column else
             "each user's last click and non-click" if e.test_marked else f'{c.split} split')
    validation = (f'{len(e.rows("validation"))} validation / '
                  if c.validation_fraction else '')
    return (f'{len(self.train_client_ids)} clients{skipped}, {len(e.rows("train"))} train / '
            f'{validation}{len(e.rows("test"))} test examples ({split}), click rate '
            f'{e.labels.mean():.3f}; model {c.model} (dim {self.dim}), feature / parameter '
            'heat dispersion {:.0f} / {:.0f}'.format(*self.heat_dispersion()))

  def heat_dispersion(self) -> tuple[float, float]:
    """(feature, parameter) heat dispersion, max n_m / min n_m with n_m the clients
    whose data index row m: over the tables' rows (FedSubAvg's Table 1), and over
    all parameters (a dense one is involved in every client)."""
    declared = tables_lib.by_name(self.tables)
    touched = np.concatenate([
        h[h > 0] for h in (fedsubavg.feature_heat(rows, declared[t].rows)
                           for t, rows in self.client_table_rows().items())])
    return (fedsubavg.dispersion(touched),
            max(len(self.train_client_ids), touched.max()) / touched.min())

  # Federated training ------------------------------------------------------

  @property
  def batch_plan(self) -> sliced.Plan:
    """Training batches: shuffled, E epochs, at most I steps."""
    c = self.config
    return sliced.Plan(c.batch_size, c.local_epochs, c.local_steps)

  # Centralized baseline (CentralSGD) -----------------------------------------

  def train_centralized(self, optimizer: optimizers.OptimizerConfig, *, epochs: int,
                        eval_every: int, on_epoch, steps_per_epoch: int = 0
                        ) -> dict[str, float]:
    """The same model on all training examples pooled.

    With `steps_per_epoch` = I and a batch size of K x the clients' batch, an
    'epoch' is FedSubAvg's CentralSGD round: the examples of one federated
    round, drawn from everyone's data. Otherwise an epoch is one pass.
    """
    rows = self.examples.rows('train')
    c = self.config

    def epoch_dataset(epoch: int) -> tf.data.Dataset:
      order = np.random.default_rng([c.seed, epoch]).permutation(rows)
      if steps_per_epoch:
        order = order[:steps_per_epoch * c.batch_size]
      return tf.data.Dataset.from_tensor_slices((
          self.examples.take(order, self.spec.columns),
          self.examples.labels[order][:, None])).batch(c.batch_size)

    epoch_of = centralized.KerasEpochs(
        self.keras_model(),
        loss=self.loss(),
        optimizer=optimizer.keras(), epoch_dataset=epoch_dataset)
    return centralized.train(
        epoch_of, epochs=epochs, eval_every=eval_every, on_epoch=on_epoch,
        evaluate=lambda: {f'eval/{k}': v for k, v in self.objective.evaluate(
            epoch_of.model).items()})
