"""Federated matrix factorization with private user vectors, and CoLR.

Item vectors are global; each user's vector lives only on its client and is
never sent or aggregated. Two ways to keep it between rounds:
* stored: the client keeps its trained vector for the next round it joins.
  A MapReduce round cannot hand a value back to a client, so the round
  (composer.Round) has client state: its driver keeps every user's vector in
  the program state.
* reconstructed (TFF's federated reconstruction): each round the client
  starts from its fixed initial vector, fits it with the item table frozen
  for `reconstruction_epochs`, then trains as usual and discards it. The
  round has no client state: a MapReduce round (a tff LearningProcess).

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
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import registry
from tff_rec.aggregators import factor_sum
from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import item_updates
from tff_rec.algorithms import rounds
from tff_rec.data import implicit
from tff_rec.data import sliced
from tff_rec.models import mf
from tff_rec.training import functional
from tff_rec.training import lazy_sgd
from tff_rec.training import lockstep as lockstep_lib

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
    item_updates.check_item_average(self.item_average)
    if self.reconstruction_epochs < 0:
      raise ValueError(f'reconstruction_epochs must be >= 0, got {self.reconstruction_epochs}')


def _loss(config: FedMFConfig, items: tf.Tensor):
  """(weights, batch) -> loss with the item rows read from `items` (frozen)."""
  def loss(weights, batch):
    return mf.loss(weights['user'], mf.frequency_scaled_gather(items, batch['item']),
                   batch['label'], config.l2)
  return loss


def reconstruct_user(config: FedMFConfig, items: tf.Tensor, user: tf.Tensor,
                     batches: sliced.Batches) -> tf.Tensor:
  """The user vector fitted to `batches` with the item table frozen."""
  sgd = tff.learning.optimizers.build_sgdm(config.client_learning_rate)
  return functional.train(_loss(config, items), sgd, {'user': user}, batches).weights['user']


def client_training(config: FedMFConfig, items, seed, user, local_rank,
                    batches: sliced.Batches):
  """(payload, coverage, trained user, loss sum, count) of one client.

  payload: [n, d] (full forms, after compression) or [n, R] (A); coverage: the
  entries it speaks for, [n, d] or [n, R] with item_average 'touched', else per
  column ([d] or [R]; the server's division broadcasts it over the rows).
  """
  form = config.form
  if config.reconstruction_epochs:
    reconstructing = batches.first_rows('epoch') < config.reconstruction_epochs
    user = reconstruct_user(config, items, user, batches.where(reconstructing))
    batches = batches.where(tf.logical_not(reconstructing))
  if form.columns:
    basis_seed, permutation_seed = factor_sum.round_seeds(seed)
    basis = factor_sum.correlated_basis(basis_seed, form.rank, config.dim)
    columns = item_updates.low_rank_columns(form, permutation_seed, local_rank)

    def loss(weights, batch):
      rows = item_updates.low_rank_rows(items, weights['a'], basis, columns, batch['item'],
                                        gather=mf.frequency_scaled_gather)
      return mf.loss(weights['user'], rows, batch['label'], config.l2)

    start = {'user': user, 'a': tf.zeros([config.num_items, form.rank])}
  else:
    columns = tf.ones([config.dim])

    def loss(weights, batch):
      return _loss(config, weights['items'])(weights, batch)

    start = {'user': user, 'items': items}
  # Rows only (the same weights as TFF's SGD): the table is 10^5 rows, a client reads few.
  trained, _, loss_sum, count, _ = functional.train(
      loss, lazy_sgd.LazySGD(config.client_learning_rate), start, batches)
  update = trained['a'] * columns if form.columns else trained['items'] - items
  coverage = _coverage(config, update, columns)
  payload = update if form.columns else item_updates.compress(form, update)
  return payload, coverage, trained['user'], loss_sum, count


def _coverage(config: FedMFConfig, update: tf.Tensor, columns: tf.Tensor) -> tf.Tensor:
  """The entries an update ([..., n, w]; its trained `columns` [..., w]) speaks for,
  client by client or with the clients first."""
  if config.item_average == 'touched':  # rows outside the data get exactly zero change
    rows = tf.cast(tf.reduce_any(tf.not_equal(update, 0.0), axis=-1), tf.float32)
    return rows[..., None] * columns[..., None, :]
  return columns  # every row: a column's sum counts what an [n, d] of it would count per entry


TOUCHED_NOT_STACKED = ('--stack=fedsubavg corrects a mean over the cohort; --item_average='
                       'touched already averages each item over the clients that touched it')


def build_round(config: FedMFConfig, initial_items: np.ndarray,
                dataset_computation: tff.Computation,
                initial_users: np.ndarray | Callable[[], np.ndarray] | None = None, *,
                averaged: bool = False, batch_size: int | None = None) -> rounds.Parts:
  """FedMF's round, for the composer: with `initial_users` (the [users, d] float32
  vectors, or a function making them at each initialize) every user's vector is
  kept on its client between rounds (config.reconstruction_epochs = 0: a
  client's state is its user vector; client inputs are (user index, client
  data)); without, reconstructed (a client brings its fixed initial vector in
  its data).

  Client data: (local rank (scolr; else ignored), the dataset computation's
  arguments), with the initial user vector first when reconstructed; the
  batches (sliced.Batches) carry 'epoch' (the first reconstruction_epochs are
  reconstruction), 'item' and 'label'. Payload and coverage go through the
  composer's unweighted aggregation, a sum (plain or TFF's secure sum) divided
  by the coverage; `averaged` (TFF's DP mean in its place) sends the payload
  alone, averaged over the cohort: the cohort average of the forms whose every
  client covers every entry (not scolr's columns, not 'touched'). Model
  weights: {'items': W}, and the users (rounds.Parts.clients_in_model) when
  stored (a reconstructed user's vector is reconstructed wherever it is
  needed). The server adds the decoded mean update times the server learning
  rate: SGD on its negation, exactly. `batch_size` (the dataset computation's)
  gives stored users' rounds their lockstep client work (training.lockstep.Lockstep), but
  scolr's.
  """
  if (initial_users is None) == (not config.reconstruction_epochs):
    raise ValueError('stored user vectors are never reconstructed (reconstruction_epochs=0 '
                     'with initial_users), and reconstructed ones are not stored')
  if initial_users is not None and not callable(initial_users):
    initial_users = np.asarray(initial_users, np.float32)
  if averaged and (config.form.name == 'scolr' or config.item_average != 'cohort'):
    raise ValueError("a mean factory averages over the cohort; scolr's columns and "
                     "item_average='touched' need each entry's own coverage")
  stored = not config.reconstruction_epochs
  form = config.form
  sizes = item_updates.payload_bytes(form, config.num_items, config.dim)
  user_type = tff.TensorType(np.float32, [config.dim])
  data_type = tff.StructType(
      ([] if stored else [('user', user_type)])
      + [('rank', np.int32), ('data', dataset_computation.type_signature.parameter)])

  # SGD adds the decoded mean update.
  server_optimizer = tff.learning.optimizers.build_sgdm(config.server_learning_rate)
  server_init, get_model_weights, set_model_weights = rounds.server_model(
      {ITEM_TABLE: initial_items}, server_optimizer, counts_rounds=True)

  @tff.tensorflow.computation(server_init.type_signature.result)
  def distributor(server):
    return collections.OrderedDict(items=server['weights'][ITEM_TABLE],
                                   seed=factor_sum.round_seed(config.seed, server['round']))

  def bytes_up(rank):
    up = tf.constant(float(sizes['up']), tf.float64)
    if form.name == 'scolr':  # sizes['up'] is per trained column
      up *= tf.cast(rank, tf.float64)
    if config.item_average == 'touched':  # the row mask, one bit per item
      up += math.ceil(config.num_items / 8)
    return up

  def sent(payload, coverage, loss_sum, count, up):
    """What a client sends (each leaf with the clients first, in lockstep)."""
    return collections.OrderedDict(
        update=(payload if averaged
                else collections.OrderedDict(payload=payload, coverage=coverage)),
        metrics=collections.OrderedDict(loss_sum=loss_sum, num_examples=count,
                                        clients=tf.ones_like(count), bytes_up=up))

  def work(broadcast, client_data, user):
    payload, coverage, user, loss_sum, count = client_training(
        config, broadcast['items'], broadcast['seed'], user, client_data['rank'],
        dataset_computation(client_data['data']))
    output = sent(payload, coverage, loss_sum, count, bytes_up(client_data['rank']))
    if stored:
      output['state'] = user
    return output

  if stored:
    client_work = tff.tensorflow.computation(
        work, distributor.type_signature.result, data_type, user_type)
  else:
    client_work = tff.tensorflow.computation(
        lambda broadcast, client_data: work(broadcast, client_data, client_data['user']),
        distributor.type_signature.result, data_type)

  def step(_weights, sums, aggregate, broadcast):
    mean = (aggregate if averaged
            else aggregate['payload'] / tf.maximum(aggregate['coverage'], 1.0))
    if form.columns:
      basis_seed, _ = factor_sum.round_seeds(broadcast['seed'])
      update = tf.matmul(mean, factor_sum.correlated_basis(basis_seed, form.rank, config.dim))
    else:
      update = item_updates.compress(form, mean)  # svd / topk: the compressed download
    clients = tf.cast(tf.maximum(sums['clients'], 1), tf.float64)
    return {ITEM_TABLE: -update}, rounds.round_metrics(
        sums['loss_sum'], sums['num_examples'], aggregator=dict(
            bytes_up=sums['bytes_up'] / clients,
            bytes_down_update=tf.constant(float(sizes['down_update']), tf.float64),
            bytes_down_model=tf.constant(float(sizes['down_model']), tf.float64)))

  if not stored:
    refusal = ("FedMF's reconstructed users (--user_state=reconstructed) train client by "
               'client; its stored users have a lockstep form')
  elif form.name == 'scolr':
    refusal = ("scolr's clients train columns of ranks of their own, client by client; "
               'fedmf, colr, svd and topk have a lockstep form')
  else:
    refusal = None
  lockstep = None
  if refusal is None and batch_size:
    lockstep = lockstep_lib.Lockstep(*_lockstep_work(
        config, batch_size, distributor.type_signature.result, sent,
        lambda: bytes_up(None)),
        client_bytes=3 * 4 * config.num_items * config.dim)  # change, its sum, coverage
  return rounds.Parts(server_init, distributor, client_work, step, get_model_weights,
                      set_model_weights, optimizer=server_optimizer, row_tables=(ITEM_TABLE,),
                      clients_in_model='users' if stored else None, averaged=averaged,
                      stack_refusal=TOUCHED_NOT_STACKED if config.item_average == 'touched'
                      else None, initial_client_states=initial_users, lockstep=lockstep,
                      lockstep_refusal=refusal or 'built without its batch size')


def _lockstep_work(config: FedMFConfig, batch_size: int, broadcast_type, sent,
                   bytes_up: Callable[[], tf.Tensor]):
  """(stack, work, size) of training.lockstep.Lockstep for FedMF's forms with stored users (all
  but scolr): the clients' rows as implicit.padded_batches lays them out, trained side
  by side (mf.train_in_lockstep); `sent`(payload, coverage, loss sum, count, bytes up)
  -> what each client sends, `bytes_up`() its bytes."""
  form = config.form
  steps = tff.TensorType(np.float32, [None, None, None])
  stacked_type = tff.StructType([
      ('users', tff.TensorType(np.float32, [None, config.dim])),
      ('item', tff.TensorType(np.int32, [None, None, None])), ('label', steps),
      ('mask', steps)])

  def stack(data, users):  # data: (rank, (epoch, item, label)) a client
    (item, label), mask = implicit.padded_batches([rows for _, rows in data], batch_size)
    return collections.OrderedDict(users=np.stack(users).astype(np.float32),
                                   item=item.astype(np.int32), label=label.astype(np.float32),
                                   mask=mask)

  def trained(broadcast, stacked):
    items, clients = broadcast['items'], tf.shape(stacked['users'])[0]
    low_rank = {}
    if form.columns:  # colr: every client trains every column of A
      basis_seed, _ = factor_sum.round_seeds(broadcast['seed'])
      low_rank = dict(basis=factor_sum.correlated_basis(basis_seed, form.rank, config.dim),
                      columns=tf.ones([clients, form.rank]),
                      scale=math.sqrt(form.rank / config.dim))
    update, users, loss_sum, count = mf.train_in_lockstep(
        items, stacked['users'], stacked['item'], stacked['label'], stacked['mask'],
        config.client_learning_rate, config.l2, **low_rank)
    coverage = _coverage(config, update, tf.ones([clients, update.shape[2]]))
    payload = update if form.columns else tf.map_fn(
        lambda one: item_updates.compress(form, one), update)  # svd, topk: client by client
    output = sent(payload, coverage, loss_sum, count, tf.fill(tf.shape(count), bytes_up()))
    output['state'] = users
    return output

  return (stack, lambda: tff.tensorflow.computation(trained, broadcast_type, stacked_type),
          lambda client_data: len(client_data[1][0]))  # its rows


# The registry's side: FedMF and the item-update forms (colr, scolr, svd, topk)
# on a task with a matrix-factorization model whose user vectors stay private
# (api.MODEL_KINDS['mf']: initial tables, each client's rows, its dataset
# computation).
ITEM_TABLE = 'items'  # the task's table name in client_table_rows
EVAL_SEED_OFFSET = 7_919  # negatives of an evaluation's reconstruction, apart from training's
RECONSTRUCTION_BLOCK = 512  # users reconstructed side by side at evaluation


def build(task, options: item_updates.Options, training, *, name: str, form: str = 'full'):
  """FedMF (form 'full') or an item-update form (colr, scolr, svd, topk)."""
  full = form == 'full'
  if full and options.rank != item_updates.Options.rank:
    raise api.NotApplicable(f'--rank applies to the compressed forms (colr, scolr, svd, '
                            f'topk), not --algorithm={name}, which sends the whole update')
  if training.client_optimizer.name != 'sgd' or training.server_optimizer.name != 'sgd':
    raise api.NotApplicable(
        f'--algorithm={name} trains with SGD at the clients and adds the mean update at '
        f'the server; got {training.client_optimizer.name} / '
        f'{training.server_optimizer.name} (fedadam and fedadagrad train the task\'s '
        'Keras model, if it has one)')
  stored = options.user_state == 'stored'
  if stored:
    _check_stored_users_fit(task, name)
  item_updates.check_aggregation(options, training, form)
  try:
    local_rank = item_updates.local_ranks(options, form, len(task.train_client_ids),
                                          task.config.seed)
    c = task.config
    config = FedMFConfig(
        num_items=task.initial_items.shape[0], dim=task.initial_items.shape[1],
        form=item_updates.UpdateForm(form, 0 if full else options.rank),
        client_learning_rate=training.client_optimizer.learning_rate,
        server_learning_rate=training.server_optimizer.learning_rate, l2=c.l2,
        reconstruction_epochs=options.extra_epochs,
        item_average=options.item_average, seed=c.seed)
  except ValueError as e:
    raise api.NotApplicable(f'--algorithm={name}: {e}') from None
  ids = list(task.train_client_ids)
  parts = build_round(config, task.initial_items,
                      task.mf_dataset_computation(options.extra_epochs),
                      task.initial_user_table if stored else None,
                      averaged=training.aggregator.averages, batch_size=task.config.batch_size)

  def client_input(client_id: str, seed: int):  # reconstructed: initial vector first
    user = task.user_index(client_id)
    data = (np.int32(local_rank(user, seed)),
            task.mf_client_arguments(client_id, seed, options.extra_epochs))
    return (user, data) if stored else (task.initial_users[user], *data)

  def evaluate(weights, part: str):  # reconstructed: the users are fitted to score them
    items = np.asarray(weights[ITEM_TABLE])
    return task.evaluate({'items': items, 'users': reconstructed_users(task, config, items)},
                         part)

  return api.Built(parts, ids, client_input, None if stored else evaluate)


# Copies of the user table a stored run holds: the round's state and, while a round
# writes it, the next state (composer.RoundProcess).
STORED_USER_COPIES = 2


def _check_stored_users_fit(task, name: str) -> None:
  """Refuses, before their table is made, stored users whose tables do not fit."""
  num_items, dim = task.initial_items.shape
  refusal = mf.tables_too_large(len(task.train_client_ids), num_items, dim,  # a user a client
                                STORED_USER_COPIES, ' (stored users)')
  if refusal:
    reconstructed = ('--user_state=reconstructed' if name in ('fedmf', *item_updates.COMPRESSED)
                     else '--algorithm=fedmf --user_state=reconstructed')
    raise api.NotApplicable(f'{refusal}; use {reconstructed}, a smaller --embedding_dim or '
                            'fewer users')


def reconstructed_users(task, config: FedMFConfig, items: np.ndarray) -> np.ndarray:
  """Every user's vector reconstructed from its data with `items` frozen (evaluation):
  reconstruct_user's SGD steps, users side by side."""
  recon, seed = config.reconstruction_epochs, task.config.seed
  num_users = len(task.initial_users)
  vectors = []
  for block in range(0, num_users, RECONSTRUCTION_BLOCK):
    users = np.arange(block, min(block + RECONSTRUCTION_BLOCK, num_users))
    (item_ids, labels), mask = implicit.padded_batches(
        [task.client_rows(u, [seed, EVAL_SEED_OFFSET, u], recon) for u in users],
        task.config.batch_size)
    vectors.append(mf.fit_users(items, task.initial_users[users], item_ids, labels, mask,
                                config.client_learning_rate, config.l2))
  return np.concatenate(vectors)


registry.register('fedmf', registry.Algorithm(
    'FedMF: full item-table updates, private user vectors', {'mf': build},
    item_updates.Options, aggregators=inner.NAMES, stacks=('fedsubavg',),
    applies=item_updates.with_secure_sum, weighs='clients'))
# The update forms on a matrix factorization's item table (table_updates
# registers them on other models' tables), and FedAvg on it.
for _form in item_updates.COMPRESSED:
  registry.implement(_form, 'mf', registry.with_arguments(build, form=_form), weighs='clients')
registry.implement('fedavg', 'mf',
                   registry.with_arguments(build, options=item_updates.Options()),
                   weighs='clients')
