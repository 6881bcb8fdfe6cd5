"""CoLR, SCoLR, SVD and top-k table updates on any task whose model declares its tables.

FedMF (tff_rec.algorithms.fedmf) applies these update forms to a matrix
factorization's item table; this applies them to every declared table of any
model (declared_tables: a CTR model's id tables, the dual encoder's item
tables, NeuMF's), as FedAvg does to the rest of the model. A round:

1. The server broadcasts the weights and the round's seed.
2. Each client trains its dense weights in full and, per table,
   * colr / scolr: A (n x r, from zero) in W + A B with W frozen, B the
     round's shared basis (scolr: only its local rank's columns of A);
   * svd / topk: the table itself, then compresses its change;
   and sends the change of its dense weights and its table payloads.
3. The whole update (dense changes and table payloads) goes through one
   inner weighted mean (TFF's MeanFactory, secure sum or DP), around which
   CoLR's FactorSumFactory decodes the mean A's (times B); SVD and top-k
   changes are compressed again for the download. Clients weigh by training
   examples.
4. The server optimizer applies the mean update (SGD at 1.0 adds it).

FedSubAvg stacks on it (--stack=fedsubavg): each table row's mean update is
scaled by N / its heat in examples, as for FAIR.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import registry
from tff_rec.aggregators import factor_sum
from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import declared_tables
from tff_rec.algorithms import item_updates
from tff_rec.algorithms import rounds
from tff_rec.models import table_model
from tff_rec.training import functional

WHY = ("the update forms compress the updates of a model's embedding tables and this "
       "task's model declares none")


def build_round(model: table_model.TableModel, form: item_updates.UpdateForm, *,
                dataset_computation: tff.Computation,
                client_optimizer: tff.learning.optimizers.Optimizer,
                server_optimizer: tff.learning.optimizers.Optimizer,
                seed: int = 0) -> rounds.Parts:
  """The round, for the composer (CoLR's factor sum around the inner weighted mean
  it composes). A client's data: (local rank (scolr; else ignored), the dataset
  computation's arguments: declared_tables.client_data)."""
  initial = collections.OrderedDict(
      (k, np.asarray(v, np.float32)) for k, v in model.initial_weights.items())
  for name in model.tables:
    try:
      form.validate(initial[name].shape[1])
    except ValueError as e:
      raise ValueError(f'table {name} ({initial[name].shape[0]} x '
                       f'{initial[name].shape[1]}): {e}') from None
  widths = collections.OrderedDict((t, initial[t].shape[1]) for t in model.tables)
  dense_floats = sum(v.size for k, v in initial.items() if k not in model.tables)
  tables_up = sum(item_updates.payload_bytes(form, initial[t].shape[0], widths[t])['up']
                  for t in model.tables)  # bytes (scolr: per trained column)
  server_init, get_model_weights, set_model_weights = rounds.server_model(
      initial, server_optimizer, model.keras_view, counts_rounds=True)

  @tff.tensorflow.computation(server_init.type_signature.result)
  def distributor(server):
    return collections.OrderedDict(weights=server['weights'],
                                   seed=factor_sum.round_seed(seed, server['round']))

  client_data_type = tff.StructType([('rank', np.int32),
                                     ('data', dataset_computation.type_signature.parameter)])

  @tff.tensorflow.computation(distributor.type_signature.result, client_data_type)
  def client_work(broadcast, client_data):
    local_rank, dataset = client_data['rank'], dataset_computation(client_data['data'])
    dense, tables = table_model.split(broadcast['weights'], model.tables)
    if form.columns:
      bases = factor_sum.round_bases(broadcast['seed'], form.rank, widths)
      columns = item_updates.low_rank_columns(
          form, factor_sum.round_seeds(broadcast['seed'])[1], local_rank)

      def item_rows(w, name, ids):
        return item_updates.low_rank_rows(tables[name], w[name], bases[name], columns, ids)

      start = collections.OrderedDict(dense)
      start.update((t, tf.zeros([tables[t].shape[0], form.rank])) for t in tables)
    else:
      def item_rows(w, name, ids):
        return tf.gather(w[name], ids)

      start = broadcast['weights']

    def loss(w, batch):
      return model.loss(w, batch, lambda name, ids: item_rows(w, name, ids))

    trained, _, loss_sum, count, _ = functional.train(loss, client_optimizer, start, dataset)
    dense_change = collections.OrderedDict((k, trained[k] - dense[k]) for k in dense)
    if form.columns:
      payload = collections.OrderedDict(
          (t, collections.OrderedDict(factor=trained[t] * columns, columns=columns))
          for t in tables)
      up = tables_up * (tf.reduce_sum(columns) if form.name == 'scolr' else 1.0)
    else:
      payload = collections.OrderedDict(
          (t, item_updates.compress(form, trained[t] - tables[t])) for t in tables)
      up = float(tables_up)
    return collections.OrderedDict(
        update=collections.OrderedDict(dense=dense_change, tables=payload),
        weight=tf.cast(count, tf.float32),
        metrics=collections.OrderedDict(
            loss_sum=loss_sum, num_examples=count, clients=tf.constant(1, tf.int64),
            bytes_up=tf.cast(up, tf.float64)
            + float(dense_floats * item_updates.BYTES_PER_FLOAT)))

  def step(weights, sums, mean, _broadcast):
    update = collections.OrderedDict(mean['dense'])
    for name, table_mean in mean['tables'].items():
      if not form.columns:  # the server's download is compressed too (the official code)
        table_mean = item_updates.compress(form, table_mean)
      update[name] = table_mean
    return (collections.OrderedDict((k, -update[k]) for k in weights),
            rounds.round_metrics(sums['loss_sum'], sums['num_examples'], aggregator=dict(
                bytes_up=sums['bytes_up'] / tf.cast(tf.maximum(sums['clients'], 1),
                                                    tf.float64))))

  return rounds.Parts(
      server_init, distributor, client_work, step, get_model_weights, set_model_weights,
      optimizer=server_optimizer, row_tables=tuple(model.tables),
      around=(lambda mean: factor_sum.FactorSumFactory(form.rank, widths, seed, mean))
      if form.columns else None)


def build(task, options: item_updates.Options, training, *, name: str, form: str):
  """colr, scolr, svd or topk (`form`) on a task's declared tables."""
  item_updates.check_aggregation(options, training, form)
  model = declared_tables.table_model_of(task, name, WHY)
  batches_of, client_data = declared_tables.client_data(task)
  mf_only = options.matrix_factorization_only()
  if mf_only:
    raise api.NotApplicable(f'--{mf_only[0]} applies to a matrix factorization whose user '
                            "vectors stay on their clients (FedMF's round) only")
  ids = list(task.train_client_ids)
  try:
    local_rank = item_updates.local_ranks(options, form, len(ids), task.config.seed)
    parts = build_round(model, item_updates.UpdateForm(form, options.rank),
                        dataset_computation=batches_of,
                        client_optimizer=training.client_optimizer.build(),
                        server_optimizer=training.server_optimizer.build(),
                        seed=task.config.seed)
  except ValueError as e:
    raise api.NotApplicable(f'--algorithm={name}: {e}') from None
  index = {c: k for k, c in enumerate(ids)}

  def client_input(client_id: str, seed: int):
    return (np.int32(local_rank(index[client_id], seed)),
            client_data(client_id, seed))

  return api.Built(parts, ids, client_input)


# The update forms, each its own algorithm: on any model's declared tables this
# module's round; on a matrix factorization's item table FedMF's (fedmf
# implements them there).
SUMMARIES = {
    'colr': 'CoLR: item update A B, B a shared random basis, A summed',
    'scolr': 'SCoLR: CoLR with a local rank per client',
    'svd': 'item update compressed by truncated SVD',
    'topk': 'item update compressed to its largest entries',
}
for _form in item_updates.COMPRESSED:
  _build = registry.with_arguments(build, form=_form)
  registry.register(_form, registry.Algorithm(
      SUMMARIES[_form], {'weight_tables': _build, 'keras': _build}, item_updates.Options,
      aggregators=inner.NAMES, stacks=('fedsubavg',), applies=item_updates.with_secure_sum,
      weighs='examples'))
