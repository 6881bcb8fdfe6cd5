"""MovieLens click-through-rate prediction (FedSubAvg's and MetaUA's task family).

Examples, features and splits: tff_rec.data.ctr (label = rating >= 4, each
user a client; chronological last-10% test by default, or FedSubAvg's random
80/20). Models: FedSubAvg's LR with crosses, DCNv2 (MetaUA), DIN (FedSubAvg's
CTR model), from tff_rec.models.ctr. Metrics: exact AUC and logloss of the
global model on the pooled test examples, and its loss on the pooled training
examples (FedSubAvg's target for the rating task is a train loss).

Algorithms: FedAvg, FedSubAvg, FedProx, FedAdam, FedAdagrad, exact
SCAFFOLD (client control variates kept by the driver: native runtime, small
models), and MetaUA and FedNova (tff_rec.algorithms.metaua: each client's
training examples split once, with a seed, into support and query; native
runtime). All but SCAFFOLD aggregate through FedSubAvgFactory, which reports
the submodel bytes a client would move; only fedsubavg applies the heat
correction. Client weighting goes
with the heat: 'clients' (the paper: n_m counts clients, uniform weights)
or 'examples' (the official code: both weighted by training examples).
"""

import collections
import dataclasses
import functools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import metrics
from tff_rec.aggregators import fedsubavg
from tff_rec.algorithms import baselines
from tff_rec.algorithms import metaua
from tff_rec.algorithms import scaffold
from tff_rec.data import ctr
from tff_rec.data import movielens
from tff_rec.models import ctr as ctr_models

DEFAULT_DATA_DIR = '../shared/data/ml-100k'
ALGORITHMS = ('fedavg', 'fedsubavg', 'fedprox', 'fedadam', 'fedadagrad', 'scaffold', 'metaua',
              'fednova')
HEAT = ('clients', 'examples')
# FedAdam / FedAdagrad are FedAvg with that server optimizer (Reddi et al.).
SERVER_OPTIMIZER_OF = {'fedadam': 'adam', 'fedadagrad': 'adagrad'}
DEFAULT_TEST_FRACTION = {'chronological': 0.1, 'random': 0.2}
EVAL_BATCH_SIZE = 8192


@dataclasses.dataclass(frozen=True)
class Config:
  data_dir: str = DEFAULT_DATA_DIR
  model: str = 'lr'
  split: str = 'chronological'
  test_fraction: float | None = None  # default: 0.1 chronological, 0.2 random
  history_length: int = 10
  embedding_dim: int | None = None  # default: the model's (lr 1, dcn 4, din 18)
  batch_size: int = 16
  local_epochs: int = 1
  local_steps: int = 0  # > 0: at most this many batches per round (FedSubAvg's I)
  seed: int = 0

  def __post_init__(self):
    if self.model not in ctr_models.MODELS:
      raise ValueError(f'unknown model {self.model!r}; choose one of '
                       f'{sorted(ctr_models.MODELS)}')
    if self.split not in ctr.SPLITS:
      raise ValueError(f'unknown split {self.split!r}; choose one of {ctr.SPLITS}')
    for name in ('history_length', 'batch_size', 'local_epochs'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.local_steps < 0 or (self.embedding_dim is not None and self.embedding_dim < 1):
      raise ValueError('local_steps must be >= 0 and embedding_dim >= 1, got '
                       f'{self.local_steps} and {self.embedding_dim}')

  @property
  def resolved_test_fraction(self) -> float:
    return self.test_fraction or DEFAULT_TEST_FRACTION[self.split]


def make_config(**values) -> Config:
  return Config(**values)


class MovieLensCtr:
  """The task; reading the data and building examples happen once, here."""

  ALGORITHMS = ALGORITHMS
  # FedSubAvg's rating task: K = 50 clients per round, mini-batch SGD.
  TRAIN_DEFAULTS = dict(clients_per_round=50, client_optimizer='sgd', client_learning_rate=0.1,
                        server_optimizer='sgd', server_learning_rate=1.0)
  ALGORITHM_DEFAULTS = {'fedadam': dict(server_optimizer='adam', server_learning_rate=0.01),
                        'fedadagrad': dict(server_optimizer='adagrad',
                                           server_learning_rate=0.1),
                        # MetaUA: the paper's FedAdagrad, accumulator from ~0 (Reddi et al.)
                        'metaua': dict(server_optimizer='adagrad', server_learning_rate=0.1,
                                       server_adaptivity=1e-3)}
  ALGORITHM_OPTIONS = ('heat', 'proximal_strength', 'meta_lr', 'attributes', 'client_weighting',
                       'server_lr_scaling', 'query_fraction', 'meta_loss')
  EVAL_PARTS = ('eval', 'eval')
  PROGRESS = {'loss': 'train/client_work/train/loss', 'train loss': 'eval/train_loss',
              'test auc': 'eval/test_auc'}

  def __init__(self, config: Config):
    self.config = config
    self.spec = ctr_models.MODELS[config.model]
    self.examples = ctr.make_examples(
        movielens.load(config.data_dir), split=config.split,
        test_fraction=config.resolved_test_fraction, history_length=config.history_length,
        seed=config.seed)
    ctr.check_ids(self.examples.take(slice(None), self.spec.columns),
                  self.examples.vocab_sizes)
    self.widths = {c: self.examples.features[c].shape[1] for c in self.spec.columns
                   if self.examples.features[c].ndim == 2}
    self._train_rows = self.examples.client_rows(test=False)
    self._client_index = {str(self.examples.user_ids[k]): k for k in self._train_rows}
    self.clients_without_train = len(self.examples.user_ids) - len(self._train_rows)

  @property
  def train_client_ids(self) -> list[str]:
    return list(self._client_index)

  @property
  def dim(self) -> int:
    return self.config.embedding_dim or self.spec.default_dim

  def describe(self) -> str:
    e, c = self.examples, self.config
    skipped = (f' ({self.clients_without_train} users with no training example skipped)'
               if self.clients_without_train else '')
    return (f'{len(self._train_rows)} clients{skipped}, {int((~e.is_test).sum())} train / '
            f'{int(e.is_test.sum())} test examples ({c.split} split), click rate '
            f'{e.labels.mean():.3f}; model {c.model} (dim {self.dim}), feature / parameter '
            'heat dispersion {:.0f} / {:.0f}'.format(*self.heat_dispersion('clients')))

  # Models ------------------------------------------------------------------

  def keras_model(self) -> tf.keras.Model:
    return self.spec.build(self.examples.vocab_sizes, self.widths, self.dim, self.config.seed)

  @functools.cached_property
  def input_spec(self):
    features = collections.OrderedDict(
        (c, tf.TensorSpec([None, *([self.widths[c]] if c in self.widths else [])], tf.int32))
        for c in self.spec.columns)
    return features, tf.TensorSpec([None, 1], tf.float32)

  def model_fn(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(
        self.keras_model(), loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
        input_spec=self.input_spec)

  @functools.cached_property
  def table_of_variable(self) -> list[str | None]:
    """Per trainable variable: the embedding table it is, or None (dense)."""
    return ctr_models.table_variables(self.keras_model(), self.spec)

  # Feature heat ------------------------------------------------------------

  @functools.cache
  def heat(self, mode: str) -> dict[str, np.ndarray]:
    """Per table, n_m: the clients (or their training examples) whose data index row m.

    Row 0, the padding id, is no feature: its heat is 0 (it never moves).
    """
    if mode not in HEAT:
      raise ValueError(f'unknown heat {mode!r}; choose one of {HEAT}')
    rows = list(self._train_rows.values())
    weights = [len(r) for r in rows] if mode == 'examples' else None
    heat = {}
    for table, columns in self.spec.tables.items():
      heat[table] = fedsubavg.feature_heat(
          [np.concatenate([self.examples.features[c][r].reshape(-1) for c in columns])
           for r in rows], self.examples.vocab_sizes[columns[0]], weights)
      heat[table][0] = 0
    return heat

  def heat_population(self, mode: str) -> float:
    """N: what a dense parameter's heat is (clients, or all training examples)."""
    return float(sum(len(r) for r in self._train_rows.values()) if mode == 'examples'
                 else len(self._train_rows))

  def heat_dispersion(self, mode: str) -> tuple[float, float]:
    """(feature, parameter) heat dispersion, max n_m / min n_m: over the tables' rows
    (the paper's Table 1), and over all parameters (dense ones have heat N)."""
    touched = np.concatenate([h[h > 0] for h in self.heat(mode).values()])
    return (fedsubavg.dispersion(touched),
            max(self.heat_population(mode), touched.max()) / touched.min())

  def aggregator(self, algorithm: str, heat: str) -> fedsubavg.FedSubAvgFactory:
    tables = [t is not None for t in self.table_of_variable]
    if algorithm != 'fedsubavg':
      return fedsubavg.FedSubAvgFactory.measuring_only(tables)
    population, rows = self.heat_population(heat), self.heat(heat)
    return fedsubavg.FedSubAvgFactory(
        [None if t is None else fedsubavg.corrections(rows[t], population)
         for t in self.table_of_variable])

  # Federated training ------------------------------------------------------

  def client_arguments(self, client_id: str, seed: int):
    """(features, labels, seed): what `dataset_computation` needs for one client."""
    rows = self._train_rows[self._client_index[client_id]]
    return (collections.OrderedDict(self.examples.take(rows, self.spec.columns)),
            self.examples.labels[rows], np.int64(seed))

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    """A client's example arrays -> its shuffled batches (E epochs, at most I steps)."""
    features, _ = self.input_spec
    feature_type = collections.OrderedDict(
        (c, tff.TensorType(np.int32, spec.shape)) for c, spec in features.items())

    @tff.tensorflow.computation(feature_type, tff.TensorType(np.float32, [None]), np.int64)
    def build(features, labels, seed):
      return self.batches(tf.data.Dataset.from_tensor_slices((features, labels)), seed=seed)

    return build

  def batches(self, dataset: tf.data.Dataset, *, seed) -> tf.data.Dataset:
    c = self.config
    dataset = (dataset.shuffle(1 << 16, seed=seed).repeat(c.local_epochs)
               .batch(c.batch_size).map(lambda x, y: (x, y[:, None])))
    return dataset.take(c.local_steps) if c.local_steps else dataset

  def learning_process(self, algorithm: str, *, client_optimizer: baselines.OptimizerConfig,
                       server_optimizer: baselines.OptimizerConfig, runtime: str,
                       heat: str = 'clients', proximal_strength: float = 0.01,
                       **meta_options):
    """(process, training client ids, client input fn) for one algorithm;
    meta_options: _meta_aggregation's (MetaUA, FedNova)."""
    if algorithm not in ALGORITHMS:
      raise ValueError(f'unknown algorithm {algorithm!r} for movielens_ctr; choose one '
                       f'of {ALGORITHMS}')
    if algorithm == 'scaffold':
      return self._scaffold(client_optimizer, server_optimizer, runtime)
    if algorithm in ('metaua', 'fednova'):
      return self._meta_aggregation(algorithm, client_optimizer, server_optimizer, runtime,
                                    **meta_options)
    if heat not in HEAT:
      raise ValueError(f'unknown heat {heat!r}; choose one of {HEAT}')
    if heat == 'examples' and self.config.local_steps:
      # TFF weighs a client by the examples it processed, which --local_steps
      # caps: no longer its training-set size, which the heat counts.
      raise ValueError('heat=examples weighs clients by the examples they train on, '
                       'proportional to their data only without local_steps; set '
                       'local_steps=0 or use heat=clients')
    if algorithm in SERVER_OPTIMIZER_OF and server_optimizer.name != SERVER_OPTIMIZER_OF[algorithm]:
      raise ValueError(f'{algorithm} is FedAvg with a {SERVER_OPTIMIZER_OF[algorithm]} '
                       f'server optimizer, got {server_optimizer.name}')
    weighting = (tff.learning.ClientWeighting.UNIFORM if heat == 'clients'
                 else tff.learning.ClientWeighting.NUM_EXAMPLES)
    process = baselines.build_process(
        'fedprox' if algorithm == 'fedprox' else 'fedavg', self.model_fn,
        client_optimizer=client_optimizer, server_optimizer=server_optimizer,
        model_aggregator=self.aggregator(algorithm, heat), client_weighting=weighting,
        proximal_strength=proximal_strength)
    process = tff.simulation.compose_dataset_computation_with_learning_process(
        self.dataset_computation, process)
    return process, self.train_client_ids, self.client_arguments

  def _scaffold(self, client_optimizer: baselines.OptimizerConfig,
                server_optimizer: baselines.OptimizerConfig, runtime: str):
    if runtime != 'native':
      raise ValueError('scaffold keeps every client\'s control variate between rounds, '
                       'which a MapReduce round cannot hand back to a client; use '
                       '--runtime=native')
    if client_optimizer.name != 'sgd' or server_optimizer.name != 'sgd':
      raise ValueError('scaffold takes SGD steps at the clients and the server; got '
                       f'{client_optimizer.name} / {server_optimizer.name}')
    ids = self.train_client_ids
    process = scaffold.ScaffoldProcess(
        self.model_fn, self.dataset_computation, num_clients=len(ids),
        client_learning_rate=client_optimizer.learning_rate,
        server_learning_rate=server_optimizer.learning_rate)
    index = {client: k for k, client in enumerate(ids)}

    def client_input(client_id: str, seed: int):
      return index[client_id], self.client_arguments(client_id, seed)

    return process, ids, client_input

  def _meta_aggregation(self, algorithm: str, client_optimizer: baselines.OptimizerConfig,
                        server_optimizer: baselines.OptimizerConfig, runtime: str, *,
                        meta_lr: float = 2.0, attributes=('local_loss',),
                        client_weighting: bool = True, server_lr_scaling: bool = True,
                        query_fraction: float = 0.2, meta_loss: str = 'sum'):
    """MetaUA (or FedNova: FedAvg weights, updates normalised by local steps)."""
    if runtime != 'native':
      raise ValueError(f'{algorithm} aggregates each client\'s update at the server, which '
                       'a MapReduce round cannot; use --runtime=native')
    if client_optimizer.name != 'sgd':
      raise ValueError(f'{algorithm} clients take SGD steps; got {client_optimizer.name}')
    if not 0 <= query_fraction < 1:
      raise ValueError(f'query_fraction must be in [0, 1), got {query_fraction}')
    if algorithm == 'fednova':
      config = metaua.MetaUAConfig(client_weighting=False, server_lr_scaling=False,
                                   normalize_by_steps=True)
      query_fraction = 0.0  # FedNova has no meta loss: clients train on all their data
    else:
      config = metaua.MetaUAConfig(attributes=tuple(attributes), meta_learning_rate=meta_lr,
                                   client_weighting=client_weighting,
                                   server_lr_scaling=server_lr_scaling, meta_loss=meta_loss)
    layers = [v.name.split('/')[0] for v in self.keras_model().trainable_variables]
    groups = [sorted(set(layers), key=layers.index).index(l) for l in layers]
    parameters = sum(int(np.prod(v.shape)) for v in self.keras_model().trainable_variables)
    process = metaua.MetaUAProcess(
        self.model_fn, self.meta_dataset_computation, config=config,
        client_learning_rate=client_optimizer.learning_rate,
        server_optimizer=server_optimizer.build(), groups=groups, model_bytes=4 * parameters)

    def client_input(client_id: str, seed: int):
      return self.meta_client_arguments(client_id, seed, query_fraction)

    return process, self.train_client_ids, client_input

  def meta_client_arguments(self, client_id: str, seed: int, query_fraction: float):
    """((support features, labels, query features, labels, seed), the support's
    metaua.DATA_ATTRIBUTES (examples, click rate, distinct feature values)): a fixed seeded
    split of the client's training examples, round(fraction x n) of them query
    (none for a client of one example)."""
    index = self._client_index[client_id]
    rows = self._train_rows[index]
    query = min(int(round(query_fraction * len(rows))), len(rows) - 1)
    in_query = np.zeros(len(rows), bool)
    in_query[np.random.default_rng([self.config.seed, index]).permutation(len(rows))[:query]] = True
    support, held = rows[~in_query], rows[in_query]  # each in data order
    features = self.examples.take(support, self.spec.columns)
    distinct = sum(len(np.unique(v[v != 0])) for v in features.values())
    labels = self.examples.labels
    return ((collections.OrderedDict(features), labels[support],
             collections.OrderedDict(self.examples.take(held, self.spec.columns)),
             labels[held], np.int64(seed)),
            np.array([len(support), labels[support].mean(), distinct], np.float32))

  @functools.cached_property
  def meta_dataset_computation(self) -> tff.Computation:
    """(support, query arrays, seed) -> (train: E shuffled epochs of the support
    batches, one pass over the support, one pass over the query)."""
    features, _ = self.input_spec
    feature_type = collections.OrderedDict(
        (c, tff.TensorType(np.int32, spec.shape)) for c, spec in features.items())
    labels_type = tff.TensorType(np.float32, [None])

    @tff.tensorflow.computation(feature_type, labels_type, feature_type, labels_type, np.int64)
    def build(support, support_labels, query, query_labels, seed):
      support = tf.data.Dataset.from_tensor_slices((support, support_labels))
      query = tf.data.Dataset.from_tensor_slices((query, query_labels))
      once = lambda d: d.batch(self.config.batch_size).map(lambda x, y: (x, y[:, None]))
      return self.batches(support, seed=seed), once(support), once(query)

    return build

  # Evaluation --------------------------------------------------------------

  @functools.cached_property
  def _evaluation_model(self) -> tf.keras.Model:
    return self.keras_model()

  def logits(self, model: tf.keras.Model, rows: np.ndarray) -> np.ndarray:
    return model.predict(self.examples.take(rows, self.spec.columns),
                         batch_size=EVAL_BATCH_SIZE, verbose=0).reshape(-1)

  def evaluate(self, weights, part: str = 'eval') -> dict[str, float]:
    """Train loss, test AUC and test logloss of the global model."""
    if part != 'eval':
      raise ValueError(f'movielens_ctr evaluates part "eval" only, got {part!r}')
    weights.assign_weights_to(self._evaluation_model)
    return self._metrics(self._evaluation_model)

  def _metrics(self, model: tf.keras.Model) -> dict[str, float]:
    values = {}
    for name, test in (('train', False), ('test', True)):
      rows = self.examples.rows(test)
      logits, labels = self.logits(model, rows), self.examples.labels[rows]
      values[f'{name}_loss' if name == 'train' else 'test_logloss'] = metrics.logloss(
          labels, logits)
      if test:
        values['test_auc'] = metrics.auc(labels, logits)
    return values

  # Centralized baseline (CentralSGD) -----------------------------------------

  def train_centralized(self, optimizer: baselines.OptimizerConfig, *, epochs: int,
                        eval_every: int, on_epoch, steps_per_epoch: int = 0
                        ) -> dict[str, float]:
    """The same model on all training examples pooled.

    With `steps_per_epoch` = I and a batch size of K x the clients' batch, an
    'epoch' is FedSubAvg's CentralSGD round: the examples of one federated
    round, drawn from everyone's data. Otherwise an epoch is one pass.
    """
    model = self.keras_model()  # seeded initializers; no global seed (it leaks)
    model.compile(optimizer=optimizer.keras(),
                  loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
    rows = self.examples.rows(test=False)
    c = self.config
    metrics_now = {}
    for epoch in range(1, epochs + 1):
      order = np.random.default_rng([c.seed, epoch]).permutation(rows)
      if steps_per_epoch:
        order = order[:steps_per_epoch * c.batch_size]
      history = model.fit(self.examples.take(order, self.spec.columns),
                          self.examples.labels[order][:, None], batch_size=c.batch_size,
                          epochs=1, shuffle=False, verbose=0)
      metrics_now = {'train/loss': float(history.history['loss'][-1])}
      if epoch == epochs or (eval_every and epoch % eval_every == 0):
        metrics_now.update({f'eval/{k}': v for k, v in self._metrics(model).items()})
      on_epoch(epoch, metrics_now)
    return metrics_now


Task = MovieLensCtr
