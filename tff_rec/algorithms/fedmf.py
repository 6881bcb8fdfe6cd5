"""Federated matrix factorization with private user vectors, and CoLR.

Item vectors are global; each user's vector lives only on its client and is
never sent or aggregated. Two ways to keep it between rounds:
* stored: the client keeps its trained vector for the next round it joins.
  A MapReduce round cannot hand a value back to a client, so the round is a
  client_state.Round and client_state keeps every user's vector in the
  program state; both runtimes run it.
* reconstructed (TFF's federated reconstruction): each round the client
  starts from its fixed initial vector, fits it with the item table frozen
  for `reconstruction_epochs`, then trains as usual and discards it. The
  round is a plain tff LearningProcess that both runtimes run.

A round: the server broadcasts the item table W and the round's seed; each
client trains its vector and its item update in the chosen form
(item_updates: full, colr, scolr, svd, topk) with SGD for the local epochs,
and sends its payload. Everything a client sends goes through one sum
(`sum_factory`: TFF's plain sum, or its secure sum): the payload and its
coverage (which rows / columns it speaks for). The server divides the two
(a mean per entry), decodes (mean A times B for CoLR; a recompression for
svd and topk), and adds it to W times the server learning rate. Under
--aggregator=dp the payload goes through TFF's DP mean over the cohort
instead (`mean_factory`; the forms whose clients cover every entry). Clients
are weighted equally, as the official code does in effect.

`item_average`: 'cohort' (the paper's FedAvg mean over the cohort, an item
no client touched counts as zero change) or 'touched' (the official code: the
mean over the clients whose training touched the item, positives and
sampled negatives; the client also sends that row mask).
"""

import collections
import dataclasses
import math

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.aggregators import factor_sum
from tff_rec.algorithms import api
from tff_rec.algorithms import capacities
from tff_rec.algorithms import client_state
from tff_rec.algorithms import heat
from tff_rec.algorithms import item_updates
from tff_rec.data import implicit
from tff_rec.data import sliced
from tff_rec.algorithms import templates
from tff_rec.models import mf
from tff_rec.training import functional

ITEM_AVERAGES = ('cohort', 'touched')


@dataclasses.dataclass(frozen=True)
class FedMFConfig:
  num_items: int
  dim: int
  form: item_updates.UpdateForm = item_updates.UpdateForm()
  client_learning_rate: float = 0.5
  server_learning_rate: float = 1.0
  l2: float = 0.0
  reconstruction_epochs: int = 0  # 0: stored user vectors
  item_average: str = 'cohort'
  seed: int = 0

  def __post_init__(self):
    self.form.validate(self.dim)
    if self.item_average not in ITEM_AVERAGES:
      raise ValueError(f'unknown item_average {self.item_average!r}; choose one of '
                       f'{ITEM_AVERAGES}')
    if self.reconstruction_epochs < 0:
      raise ValueError(f'reconstruction_epochs must be >= 0, got {self.reconstruction_epochs}')


def _sgd(learning_rate: float) -> tff.learning.optimizers.Optimizer:
  return tff.learning.optimizers.build_sgdm(learning_rate)


def _loss(config: FedMFConfig, items: tf.Tensor):
  """(weights, batch) -> loss with the item rows read from `items` (frozen)."""
  def loss(weights, batch):
    return mf.loss(weights['user'], mf.frequency_scaled_gather(items, batch['item']),
                   batch['label'], config.l2)
  return loss


def reconstruct_user(config: FedMFConfig, items: tf.Tensor, user: tf.Tensor,
                     batches: sliced.Batches) -> tf.Tensor:
  """The user vector fitted to `batches` with the item table frozen."""
  weights, _, _, _ = functional.train(_loss(config, items), _sgd(config.client_learning_rate),
                                      {'user': user}, batches)
  return weights['user']


@tf.function
def _reconstruct_in_lockstep(items, users, item_ids, labels, mask, learning_rate, l2):
  for step in tf.range(tf.shape(item_ids)[1]):
    users -= learning_rate * mf.user_gradients(
        users, tf.gather(items, item_ids[:, step]), labels[:, step], mask[:, step], l2)
  return users


def reconstruct_users(config: FedMFConfig, items: np.ndarray, users: np.ndarray,
                      item_ids: np.ndarray, labels: np.ndarray, mask: np.ndarray
                      ) -> np.ndarray:
  """reconstruct_user for many users at once (evaluation): the same SGD steps,
  users side by side. item_ids, labels, mask: [users, steps, batch]
  (implicit.padded_batches)."""
  return _reconstruct_in_lockstep(
      tf.constant(items, tf.float32), tf.constant(users, tf.float32), tf.constant(item_ids),
      tf.constant(labels), tf.constant(mask), tf.constant(config.client_learning_rate,
                                                          tf.float32),
      tf.constant(config.l2, tf.float32)).numpy()


def client_training(config: FedMFConfig, items, seed, user, local_rank,
                    batches: sliced.Batches):
  """(payload, coverage, trained user, loss sum, count) of one client.

  payload: [n, d] (full forms, after compression) or [n, R] (A).
  """
  form = config.form
  if config.reconstruction_epochs:
    reconstructing = batches.first_rows('epoch') < config.reconstruction_epochs
    user = reconstruct_user(config, items, user, batches.where(reconstructing))
    batches = batches.where(tf.logical_not(reconstructing))
  if form.columns:
    basis_seed, permutation_seed = factor_sum.round_seeds(seed)
    basis = factor_sum.correlated_basis(basis_seed, form.rank, config.dim)
    columns = (item_updates.column_mask(permutation_seed, form.rank, local_rank)
               if form.name == 'scolr' else tf.ones([form.rank]))
    gradient_scale = math.sqrt(form.rank / config.dim)  # the official code's, see README

    def loss(weights, batch):
      factor = mf.scale_gradient(weights['a'] * columns, gradient_scale)
      rows = (mf.frequency_scaled_gather(items, batch['item'])
              + tf.matmul(mf.frequency_scaled_gather(factor, batch['item']), basis))
      return mf.loss(weights['user'], rows, batch['label'], config.l2)

    start = {'user': user, 'a': tf.zeros([config.num_items, form.rank])}
  else:
    columns = tf.ones([config.dim])

    def loss(weights, batch):
      return _loss(config, weights['items'])(weights, batch)

    start = {'user': user, 'items': items}
  trained, _, loss_sum, count = functional.train(
      loss, _sgd(config.client_learning_rate), start, batches)
  update = trained['a'] * columns if form.columns else trained['items'] - items
  if config.item_average == 'touched':  # rows outside the data get exactly zero change
    rows = tf.cast(tf.reduce_any(tf.not_equal(update, 0.0), axis=1), tf.float32)
  else:
    rows = tf.ones([config.num_items])
  payload = update if form.columns else item_updates.compress(form, update)
  return payload, rows[:, None] * columns[None, :], trained['user'], loss_sum, count


def _upload_bytes(config: FedMFConfig, local_rank: tf.Tensor) -> tf.Tensor:
  sizes = item_updates.payload_bytes(config.form, config.num_items, config.dim)
  up = tf.constant(float(sizes['up']), tf.float64)
  if config.form.name == 'scolr':  # `up` is per trained column
    up *= tf.cast(local_rank, tf.float64)
  if config.item_average == 'touched':  # the row mask, one bit per item
    up += math.ceil(config.num_items / 8)
  return up


def _client_computations(config: FedMFConfig, initial_items: np.ndarray,
                         dataset_computation: tff.Computation):
  """(server_init, prepare, client_update): the server's first state, its
  broadcast of the item table and the round's seed, one client's training."""
  user_type = tff.TensorType(np.float32, [config.dim])

  @tff.tensorflow.computation
  def server_init():
    return collections.OrderedDict(items=tf.constant(initial_items, tf.float32),
                                   round=tf.constant(0, tf.int64))

  @tff.tensorflow.computation(server_init.type_signature.result)
  def prepare(server):
    return collections.OrderedDict(
        items=server['items'], seed=factor_sum.round_seed(config.seed, server['round']))

  @tff.tensorflow.computation(user_type, np.int32, dataset_computation.type_signature.result,
                              prepare.type_signature.result)
  def client_update(user, local_rank, dataset, broadcast):
    payload, coverage, user, loss_sum, count = client_training(
        config, broadcast['items'], broadcast['seed'], user, local_rank, dataset)
    return collections.OrderedDict(
        value=collections.OrderedDict(payload=payload, coverage=coverage),
        user=user,
        metrics=collections.OrderedDict(
            loss_sum=loss_sum, num_examples=count, clients=tf.constant(1, tf.int64),
            bytes_up=_upload_bytes(config, local_rank)))

  return server_init, prepare, client_update


def _server_computations(config: FedMFConfig, prepare: tff.Computation,
                         client_update: tff.Computation, aggregate_type, measurements_type, *,
                         averaged: bool, item_scale: np.ndarray | None):
  """(server_update, round_metrics): the server's step from the aggregate (the
  sums of payload and coverage, or `averaged`: the payload's cohort mean), and
  the round's metrics from the clients' summed metrics and the aggregation's."""
  form = config.form
  sizes = item_updates.payload_bytes(form, config.num_items, config.dim)

  @tff.tensorflow.computation(prepare.type_signature.parameter, prepare.type_signature.result,
                              aggregate_type)
  def server_update(server, broadcast, aggregate):
    mean = (aggregate if averaged
            else aggregate['payload'] / tf.maximum(aggregate['coverage'], 1.0))
    if item_scale is not None:
      mean *= tf.constant(item_scale, tf.float32)[:, None]
    if form.columns:
      basis_seed, _ = factor_sum.round_seeds(broadcast['seed'])
      update = tf.matmul(mean, factor_sum.correlated_basis(basis_seed, form.rank, config.dim))
    else:
      update = item_updates.compress(form, mean)  # svd / topk: the compressed download
    return collections.OrderedDict(items=server['items'] + config.server_learning_rate * update,
                                   round=server['round'] + 1)

  @tff.tensorflow.computation(client_update.type_signature.result['metrics'],
                              measurements_type)
  def round_metrics(sums, measurements):
    clients = tf.cast(tf.maximum(sums['clients'], 1), tf.float64)
    return templates.round_metrics(sums['loss_sum'], sums['num_examples'], aggregator=dict(
        bytes_up=sums['bytes_up'] / clients,
        bytes_down_update=tf.constant(float(sizes['down_update']), tf.float64),
        bytes_down_model=tf.constant(float(sizes['down_model']), tf.float64),
        **collections.OrderedDict(measurements or ())))

  return server_update, round_metrics


def _aggregation(config: FedMFConfig, sum_factory, mean_factory):
  """(factory, averaged): payload and coverage through `sum_factory` (default TFF's
  plain sum), or the payload alone through `mean_factory` (a mean over the cohort,
  e.g. TFF's DP mean: only for forms whose every client covers every entry)."""
  if mean_factory:
    if config.form.name == 'scolr' or config.item_average != 'cohort':
      raise ValueError("a mean factory averages over the cohort; scolr's columns and "
                       "item_average='touched' need each entry's own coverage")
    return mean_factory, True
  return sum_factory or tff.aggregators.SumFactory(), False


def build_stored_round(config: FedMFConfig, initial_items: np.ndarray,
                       dataset_computation: tff.Computation, *,
                       sum_factory: tff.aggregators.UnweightedAggregationFactory | None = None,
                       mean_factory: tff.aggregators.UnweightedAggregationFactory
                       | None = None,
                       item_scale: np.ndarray | None = None) -> client_state.Round:
  """The round whose clients keep their user vectors (client state); payload and
  coverage aggregated as in build_reconstruction_process."""
  aggregation, averaged = _aggregation(config, sum_factory, mean_factory)
  server_init, prepare, client_update = _client_computations(config, initial_items,
                                                             dataset_computation)

  @tff.tensorflow.computation(prepare.type_signature.result,
                              tff.StructType([
                                  ('rank', np.int32),
                                  ('data', dataset_computation.type_signature.parameter)]),
                              client_update.type_signature.parameter[0])
  def client_work(broadcast, client_data, user):
    output = client_update(user, client_data['rank'],
                           dataset_computation(client_data['data']), broadcast)
    return collections.OrderedDict(
        aggregated=output['value']['payload'] if averaged else output['value'],
        sent=output['metrics'], state=output['user'])

  work_output = client_work.type_signature.result
  aggregate_type = client_state.aggregate_type(aggregation, work_output['aggregated'])
  server_update, round_metrics = _server_computations(
      config, prepare, client_update, aggregate_type['result'],
      aggregate_type['measurements'], averaged=averaged, item_scale=item_scale)

  @tff.tensorflow.computation(server_init.type_signature.result,
                              prepare.type_signature.result, work_output['sent'],
                              aggregate_type)
  def update(server, broadcast, summed, aggregate):
    return (server_update(server, broadcast, aggregate['result']),
            round_metrics(summed, aggregate['measurements']))

  return client_state.Round(server_init, prepare, client_work, update, aggregation)


def build_reconstruction_process(config: FedMFConfig, initial_items: np.ndarray,
                                 dataset_computation: tff.Computation, *,
                                 sum_factory: tff.aggregators.UnweightedAggregationFactory
                                 | None = None,
                                 mean_factory: tff.aggregators.UnweightedAggregationFactory
                                 | None = None,
                                 item_scale: np.ndarray | None = None
                                 ) -> tff.learning.templates.LearningProcess:
  """The round with reconstructed user vectors, as a LearningProcess (both runtimes).

  get_model_weights gives the item table: a user's vector is reconstructed
  from its data wherever it is needed (reconstruct_user). Client data: (its
  initial user vector, local rank (scolr; else ignored), the dataset
  computation's arguments); its batches (sliced.Batches) carry 'epoch' (the
  first reconstruction_epochs are reconstruction), 'item' and 'label'. Payload and
  coverage go through `sum_factory` (default TFF's plain sum); `mean_factory`
  (e.g. TFF's DP mean) replaces the sum and the division by coverage with a
  mean over the cohort: the cohort average of the forms whose every client
  covers every entry (not scolr's columns, not 'touched').
  """
  if not config.reconstruction_epochs:
    raise ValueError('a reconstruction process needs reconstruction_epochs >= 1')
  factory, averaged = _aggregation(config, sum_factory, mean_factory)
  server_init, prepare, client_update = _client_computations(config, initial_items,
                                                             dataset_computation)
  value_type = client_update.type_signature.result['value']
  aggregation = factory.create(value_type['payload'] if averaged else value_type)
  aggregation_output = aggregation.next.type_signature.result
  server_update, round_metrics = _server_computations(
      config, prepare, client_update, aggregation_output.result.member,
      aggregation_output.measurements.member, averaged=averaged, item_scale=item_scale)

  @tff.federated_computation
  def initialize():
    server = tff.federated_eval(server_init, tff.SERVER)
    return tff.federated_zip(collections.OrderedDict(
        items=server.items, round=server.round, aggregator=aggregation.initialize()))

  client_data_type = tff.StructType([
      ('user', client_update.type_signature.parameter[0]), ('rank', np.int32),
      ('data', dataset_computation.type_signature.parameter)])

  @tff.federated_computation(initialize.type_signature.result,
                             tff.FederatedType(client_data_type, tff.CLIENTS))
  def next_fn(state, client_data):
    server = tff.federated_zip(collections.OrderedDict(items=state.items, round=state.round))
    broadcast = tff.federated_map(prepare, server)
    datasets = tff.federated_map(dataset_computation, client_data.data)
    outputs = tff.federated_map(client_update, (
        client_data.user, client_data.rank, datasets, tff.federated_broadcast(broadcast)))
    summed = aggregation.next(state.aggregator,
                              outputs.value.payload if averaged else outputs.value)
    server = tff.federated_map(server_update, (server, broadcast, summed.result))
    metrics = tff.federated_map(round_metrics, (tff.federated_sum(outputs.metrics),
                                                summed.measurements))
    new_state = tff.federated_zip(collections.OrderedDict(
        items=server.items, round=server.round, aggregator=summed.state))
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  return templates.learning_process(initialize, next_fn, 'items')


def build_stored_users_process(config: FedMFConfig, initial_items: np.ndarray,
                               initial_users: np.ndarray,
                               dataset_computation: tff.Computation, *,
                               item_scale: np.ndarray | None = None,
                               runtime: str = 'native', **factories
                               ) -> client_state.ClientStateProcess:
  """The round with every user's vector kept on its client between rounds
  (client_state: the clients' state is the [users, d] table of vectors).

  Client inputs are (user index, (local rank, dataset arguments)). Model
  weights: {'items': W, 'users': the vectors}. `factories`: build_stored_round's
  sum_factory or mean_factory.
  """
  if config.reconstruction_epochs:
    raise ValueError('stored user vectors are never reconstructed; set '
                     'reconstruction_epochs=0')
  round_ = build_stored_round(config, initial_items, dataset_computation,
                              item_scale=item_scale, **factories)

  def get_model_weights(state) -> dict[str, np.ndarray]:
    return {'items': np.asarray(state['server']['items']), 'users': state['clients']}

  def set_model_weights(state, weights: dict[str, np.ndarray]):
    state = client_state.with_server(state, items=np.asarray(weights['items'], np.float32))
    return {**state, 'clients': np.asarray(weights['users'], np.float32)}

  return client_state.ClientStateProcess(
      round_, np.asarray(initial_users, np.float32), get_model_weights=get_model_weights,
      set_model_weights=set_model_weights, runtime=runtime)


# The registry's side: FedMF and the item-update forms (colr, scolr, svd, topk)
# on a task with a matrix-factorization model whose user vectors stay private
# (the task's MF attributes: initial tables, each client's rows, its dataset
# computation).
MF = ('initial_items', 'initial_users', 'client_rows', 'mf_dataset_computation', 'user_index')
MF_WHY = ("its model is not a matrix factorization with private user vectors (the item-"
          'update forms compress the update of that item table)')


def is_mf(task) -> bool:
  """Whether `task` is a matrix factorization with private user vectors."""
  return all(hasattr(task, a) for a in MF)


def fastest_runtime(task, unused_training) -> str:
  """In-process for FedMF's round: its clients' sliced batches run there without
  the native worker's per-client calls (CoLR's setting, 60 clients: 0.087 vs 0.159
  s/round in the trainer; results/benchmarks_runtimes.md)."""
  return 'inprocess' if is_mf(task) else 'native'


FORM_OF = {'fedmf': 'full', 'fedavg': 'full', 'fedsubavg': 'full', 'colr': 'colr',
           'scolr': 'scolr', 'svd': 'svd', 'topk': 'topk'}
ITEM_TABLE = 'items'  # the task's table name in client_table_rows
EVAL_SEED_OFFSET = 7_919  # negatives of an evaluation's reconstruction, apart from training's
RECONSTRUCTION_BLOCK = 512  # users reconstructed side by side at evaluation


@dataclasses.dataclass(frozen=True)
class Options:
  rank: int = dataclasses.field(default=4, metadata={
      'help': 'colr / svd: the rank r of the item update; scolr: the global rank R; topk: '
              'keep as many entries as a rank-r factor has bytes (default 4).'})
  local_ranks: str | None = dataclasses.field(default=None, metadata={
      'help': "scolr: each client group's local rank, e.g. 1-2-4 (clients in id order, "
              'equal groups); default: uniform in 1..R, drawn every round.'})
  item_average: str = dataclasses.field(default='cohort', metadata={
      'choices': ITEM_AVERAGES,
      'help': "The server's mean of an item's update: over the cohort (the paper's "
              "FedAvg) or over the clients whose data touched the item (the official "
              'code) (default cohort).'})
  secure_sum_bound: float = dataclasses.field(default=0.0, metadata={
      'help': "Sum the clients' payloads with TFF's secure sum, each value clipped to "
              '+-bound (0: plain sum; default 0). Same as --aggregator=secure '
              '--secure_bound=B.'})

  def __post_init__(self):
    if self.item_average not in ITEM_AVERAGES:
      raise ValueError(f'unknown item_average {self.item_average!r}; choose one of '
                       f'{ITEM_AVERAGES}')
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


def local_ranks(options: Options, name: str, num_clients: int, seed: int):
  """(client index, round seed) -> the client's local rank: scolr's (its group's, or
  uniform in 1..R drawn afresh every round); the rank itself for the other forms."""
  ranks = options.group_ranks()
  if name != 'scolr':
    return lambda client, round_seed: options.rank
  if ranks is None:
    return lambda client, round_seed: int(
        np.random.default_rng([round_seed, 1]).integers(1, options.rank + 1))
  groups = capacities.assign(num_clients, len(ranks), seed=seed)
  return lambda client, round_seed: ranks[groups[client]]


def _factories(options: Options, training, name: str) -> dict:
  """The one sum everything a client sends goes through (plain, or TFF's secure sum),
  or TFF's DP mean over the cohort in its place."""
  if options.secure_sum_bound:
    return dict(sum_factory=tff.aggregators.SecureSumFactory(float(options.secure_sum_bound)))
  if training.aggregator.name == 'dp':
    if name == 'scolr' or options.item_average != 'cohort':
      divides = ('scolr divides each column of A by the clients that trained it'
                 if name == 'scolr' else '--item_average=touched divides each item by the '
                 'clients that touched it')
      raise api.NotApplicable(f'--aggregator=dp averages over the cohort, and {divides}; '
                              'use colr, fedmf, svd or topk with --item_average=cohort')
    return dict(mean_factory=training.aggregator.dp_mean(training.clients_per_round))
  return dict(sum_factory=training.aggregator.sum())


def build(task, options: Options, training, *, name: str):
  """FedMF (name 'fedmf') or an item-update form (colr, scolr, svd, topk)."""
  api.require(task, name, MF, MF_WHY)
  if options.local_ranks is not None and name != 'scolr':
    raise api.NotApplicable(f'--local_ranks applies to scolr only, not --algorithm='
                            f'{name}')
  if training.client_optimizer.name != 'sgd' or training.server_optimizer.name != 'sgd':
    raise api.NotApplicable(
        f'--algorithm={name} trains with SGD at the clients and adds the mean update at '
        f'the server; got {training.client_optimizer.name} / '
        f'{training.server_optimizer.name}')
  stored = task.config.user_state == 'stored'
  if options.secure_sum_bound and training.runtime == 'native':
    raise api.NotApplicable("TFF's native worker has no secure sum; use --runtime=inprocess "
                            'for secure_sum_bound')
  factories = _factories(options, training, name)
  try:
    local_rank = local_ranks(options, name, len(task.train_client_ids), task.config.seed)
    full = FORM_OF[name] == 'full'
    form = item_updates.UpdateForm(FORM_OF[name], 0 if full else options.rank)
    c = task.config
    config = FedMFConfig(
        num_items=task.initial_items.shape[0], dim=task.initial_items.shape[1], form=form,
        client_learning_rate=training.client_optimizer.learning_rate,
        server_learning_rate=training.server_optimizer.learning_rate, l2=c.l2,
        reconstruction_epochs=0 if stored else c.reconstruction_epochs,
        item_average=options.item_average, seed=c.seed)
  except ValueError as e:
    raise api.NotApplicable(f'--algorithm={name}: {e}') from None
  item_scale = None
  if 'fedsubavg' in training.stack:  # clients weigh equally here: heat counts clients
    if options.item_average == 'touched':
      raise api.NotApplicable(
          '--stack=fedsubavg corrects a mean over the cohort; --item_average=touched '
          'already averages each item over the clients that touched it')
    item_scale = heat.row_scales(task, name, 'clients')[ITEM_TABLE]
  epochs = c.local_epochs + config.reconstruction_epochs
  ids = list(task.train_client_ids)
  if stored:
    process = build_stored_users_process(config, task.initial_items, task.initial_users,
                                         task.mf_dataset_computation, item_scale=item_scale,
                                         runtime=training.runtime, **factories)

    def client_input(client_id: str, seed: int):
      user = task.user_index(client_id)
      return user, (np.int32(local_rank(user, seed)), task.client_rows(user, seed, epochs))

    return api.Built(process, ids, client_input)
  process = build_reconstruction_process(
      config, task.initial_items, task.mf_dataset_computation,
      **factories, item_scale=item_scale)

  def client_input(client_id: str, seed: int):  # pylint: disable=function-redefined
    user = task.user_index(client_id)
    return (task.initial_users[user], np.int32(local_rank(user, seed)),
            task.client_rows(user, seed, epochs))

  def evaluate(items, part: str):
    users = reconstructed_users(task, config, np.asarray(items))
    return task.evaluate({'items': np.asarray(items), 'users': users}, part)

  return api.Built(process, ids, client_input, evaluate)


def reconstructed_users(task, config: FedMFConfig, items: np.ndarray) -> np.ndarray:
  """Every user's vector reconstructed from its data with `items` frozen (evaluation)."""
  recon, seed = config.reconstruction_epochs, task.config.seed
  num_users = len(task.initial_users)
  vectors = []
  for block in range(0, num_users, RECONSTRUCTION_BLOCK):
    users = np.arange(block, min(block + RECONSTRUCTION_BLOCK, num_users))
    (item_ids, labels), mask = implicit.padded_batches(
        [task.client_rows(u, [seed, EVAL_SEED_OFFSET, u], recon) for u in users],
        task.config.batch_size)
    vectors.append(reconstruct_users(config, items, task.initial_users[users], item_ids,
                                     labels, mask))
  return np.concatenate(vectors)
