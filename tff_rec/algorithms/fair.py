"""FAIR (Desai et al.): federated averaging in random subspaces, one per capacity tier.

A round (Algorithm 1 of the paper):
1. The server reduces the full item tables theta to every tier's form
   (tier cx: psi = S^T theta / S^T 1 in n*d/c hashed floats; 1x: theta).
2. Each sampled client trains E local epochs on its tier's form only, with a
   fresh client optimizer (the official code's fresh Adam), and returns it.
3. The server recovers each returned form into the full space (S psi) and
   takes the weighted mean over the cohort (weights: training examples).
   The mean replaces the model through the server optimizer (SGD with
   learning rate 1 is the paper's plain replacement).
Non-table weights (user embeddings, MLP) are trained and averaged in full.

Everything runs in one MapReduce-compatible round so that both runtimes can
execute it: the broadcast carries every tier's form and each client keeps
its own (MapReduceForm has no federated_select). A client's training holds
only its own tier's tensors (the other branches of its tf.switch_case never
run). The bytes a real deployment would move per client (its tier's tables,
the non-table weights, one row of each per-user table) are reported as
metrics, as are the tiers' client and example counts.

Baselines are the same process with other tiers: FedAvg (one 1x tier),
FAIR-HOM (one tier at the smallest capacity), FedHM (low-rank tiers) and
inconsistent subspaces (hashed tiers with different seeds).
"""

import collections
import dataclasses
from typing import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import registry
from tff_rec import settings
from tff_rec.aggregators import inner
from tff_rec.aggregators import tier_recovery
from tff_rec.algorithms import api
from tff_rec.algorithms import capacities
from tff_rec.algorithms import declared_tables
from tff_rec.algorithms import rounds
from tff_rec.models import compressed_table
from tff_rec.models import table_model
from tff_rec.training import functional

def bytes_per_client(model: table_model.TableModel, forms: Mapping[str, object]) -> int:
  """What one client of a tier downloads (and uploads) in a real deployment."""
  floats = 0
  for name, value in model.initial_weights.items():
    if name in model.per_user_tables:
      floats += int(np.prod(value.shape[1:]))
    elif name not in model.tables:
      floats += value.size
  return (sum(compressed_table.num_bytes(f) for f in forms.values())
          + compressed_table.BYTES_PER_FLOAT * floats)


def build_round(model: table_model.TableModel, tiers: Mapping[str, Mapping[str, object]], *,
                dataset_computation: tff.Computation,
                client_optimizer: tff.learning.optimizers.Optimizer,
                server_optimizer: tff.learning.optimizers.Optimizer | None = None
                ) -> rounds.Parts:
  """FAIR's round, for the composer (TierRecoveryFactory recovers the tiers' tables
  around the inner weighted mean it composes; FedSubAvg's correction, stacked,
  scales model - recovered mean row by row: FAIR's clients return weights, not
  updates).

  Args:
    model: weights, loss and table names.
    tiers: tier label -> table name -> form (compressed_table.Full, Hashed,
      LowRank), in tier index order.
    dataset_computation: a client's data -> its training batches (E epochs;
      declared_tables.client_data). A client's data is (tier index, its data).
    client_optimizer: trained from a fresh state by every client every round.
    server_optimizer: applied to (model - recovered mean); default SGD with
      learning rate 1, the paper's replacement of the model by the mean.
  """
  labels = list(tiers)
  for label, forms in tiers.items():
    if set(forms) != set(model.tables):
      raise ValueError(f'tier {label} has forms for {sorted(forms)}, expected the '
                       f'model\'s tables {sorted(model.tables)}')
  server_optimizer = server_optimizer or tff.learning.optimizers.build_sgdm(1.0)
  tier_bytes = np.array([bytes_per_client(model, tiers[l]) for l in labels], np.float64)
  server_init, get_model_weights, set_model_weights = rounds.server_model(
      model.initial_weights, server_optimizer, model.keras_view)

  @tff.tensorflow.computation(server_init.type_signature.result)
  def distributor(server):
    dense, tables = table_model.split(server['weights'], model.tables)
    return collections.OrderedDict(
        dense=dense,
        tiers=collections.OrderedDict(
            (label, collections.OrderedDict(
                (name, tiers[label][name].reduce(tables[name])) for name in model.tables))
            for label in labels))

  client_data_type = tff.StructType([('tier', np.int32),
                                     ('data', dataset_computation.type_signature.parameter)])

  @tff.tensorflow.computation(distributor.type_signature.result, client_data_type)
  def client_work(broadcast, client_data):
    dataset = dataset_computation(client_data['data'])

    def branch(label):
      def run():
        weights = collections.OrderedDict(broadcast['dense'])
        weights.update(broadcast['tiers'][label])
        forms = tiers[label]

        def loss(w, batch):
          return model.loss(w, batch, lambda name, ids: forms[name].rows(w[name], ids))

        trained, _, loss_sum, count, _ = functional.train(loss, client_optimizer, weights,
                                                          dataset)
        dense, tables = table_model.split(trained, model.tables)
        update = collections.OrderedDict(
            dense=dense, tiers=tier_recovery.client_payload(tiers, label, tables))
        return update, loss_sum, count
      return run

    tier = client_data['tier']
    update, loss_sum, count = tf.switch_case(tier, [branch(l) for l in labels])
    in_tier = tf.one_hot(tier, len(labels), dtype=tf.int64)
    return collections.OrderedDict(
        update=update, weight=tf.cast(count, tf.float32),
        metrics=collections.OrderedDict(
            loss_sum=loss_sum, num_examples=count, clients=in_tier, examples=in_tier * count))

  def step(weights, sums, mean, _broadcast):
    target = {**mean['dense'], **mean['tiers']}
    pseudo_gradient = collections.OrderedDict((k, weights[k] - target[k]) for k in weights)
    moved = tf.reduce_sum(tf.cast(sums['clients'], tf.float64) * tier_bytes)
    return pseudo_gradient, rounds.round_metrics(
        sums['loss_sum'], sums['num_examples'],
        client_work={k: collections.OrderedDict(
            (label, sums[k][i]) for i, label in enumerate(labels))
                     for k in ('clients', 'examples')},
        aggregator=dict(
            bytes_per_client=collections.OrderedDict(zip(labels, tier_bytes)),
            bytes_down=moved, bytes_up=moved))  # a client uploads what it downloaded

  return rounds.Parts(server_init, distributor, client_work, step, get_model_weights,
                      set_model_weights, optimizer=server_optimizer,
                      around=lambda mean: tier_recovery.TierRecoveryFactory(tiers, mean),
                      row_tables=tuple(model.tables))


# The registry's side: FAIR and its baselines on any task whose model declares
# its tables (declared_tables), fed by declared_tables.client_data.
FUNCTIONAL_WHY = ("FAIR trains hashed forms of item tables and this task's model declares "
                  'no item tables in a form FAIR can compress')


ASSIGNMENTS = capacities.ASSIGNMENTS  # the Options field `capacities` hides the module


@dataclasses.dataclass(frozen=True)
class Options:
  capacities: str = settings.described(
      '1x-2x', 'Capacity scheme, e.g. 1x-2x-4x: clients in id order split into equal groups, '
      'one per capacity (default 1x-2x).')
  capacity_fractions: tuple[float, ...] | None = settings.described(
      None, 'Share of clients in each capacity group, e.g. 0.2,0.8 (default: equal groups).')
  capacity_assignment: str = settings.described(
      'ordered', 'ordered: groups by client id (the paper); random: after a seeded shuffle '
      '(default ordered).', choices=ASSIGNMENTS)

  def __post_init__(self):  # capacity_assignment: capacities.assign checks it
    capacities.parse(self.capacities)


def build(task, options: Options, training, *, name: str, subspaces: str = 'hashed',
          consistent: bool = True, clients: str = 'all'):
  """FAIR-HET and its baselines. subspaces: 'hashed' (FAIR) or 'low_rank' (FedHM);
  consistent: one hash seed for every tier (False: the paper's ablation); clients:
  'all' at their capacities, 'smallest' (all at the smallest capacity: FAIR-HOM)
  or 'full' (only the clients of the 1x tier: FULL-TRN)."""
  model = declared_tables.table_model_of(task, name, FUNCTIONAL_WHY)
  batches_of, client_data = declared_tables.client_data(task)
  shapes = collections.OrderedDict(
      (t, np.shape(model.initial_weights[t])) for t in model.tables)
  ids = list(task.train_client_ids)
  seed = task.config.seed
  scheme = capacities.parse(options.capacities)
  try:
    if clients == 'smallest':
      scheme = [max(scheme)]
    elif clients == 'full':
      if min(scheme) != 1:
        raise ValueError(f'{name} needs a 1x tier; scheme {options.capacities} has none')
      full = capacities.assign(len(ids), len(scheme), fractions=options.capacity_fractions,
                               assignment=options.capacity_assignment,
                               seed=seed) == scheme.index(min(scheme))
      ids, scheme = [c for c, keep in zip(ids, full) if keep], [1]
    if subspaces == 'low_rank':
      tiers = capacities.low_rank_tiers(shapes, scheme)
    else:
      tiers = capacities.hashed_tiers(shapes, scheme, seed=seed + 1, consistent=consistent)
    grouping = options.capacity_fractions is not None or (
        options.capacity_assignment != Options.capacity_assignment)
    if grouping and len(scheme) == 1 and clients != 'full':  # full chose by them
      one = name if clients == 'smallest' else f'--capacities={options.capacities}'
      raise ValueError('--capacity_fractions and --capacity_assignment split the clients '
                       f'into capacity groups, and {one} has one; leave them out')
    tier_of = capacities.assign(
        len(ids), len(scheme),
        fractions=options.capacity_fractions if len(scheme) > 1 else None,
        assignment=options.capacity_assignment, seed=seed)
  except ValueError as e:
    raise api.NotApplicable(f'--algorithm={name}: {e}') from None
  tier_of = dict(zip(ids, tier_of.tolist()))
  parts = build_round(model, tiers, dataset_computation=batches_of,
                      client_optimizer=training.client_optimizer.build(),
                      server_optimizer=training.server_optimizer.build())

  def client_input(client_id: str, seed: int):
    return np.int32(tier_of[client_id]), client_data(client_id, seed)

  return api.Built(parts, ids, client_input)


# FAIR and its baselines, each its own algorithm: the one round with other tiers.
FAMILY = {
    'fair': ('FAIR-HET: each capacity tier trains a consistent hashed subspace of the item '
             'tables', {}),
    'fair_hom': ('FAIR-HOM: everyone at the smallest capacity', dict(clients='smallest')),
    'full_trn': ('FULL-TRN: only the clients of the 1x tier train', dict(clients='full')),
    'fedhm': ('FedHM: item tables factored at a low rank per tier',
              dict(subspaces='low_rank')),
    'fair_inconsistent': ("FAIR with a hash seed per tier (the paper's ablation)",
                          dict(consistent=False)),
}
for _name, (_summary, _arguments) in FAMILY.items():
  _build = registry.with_arguments(build, **_arguments)
  registry.register(_name, registry.Algorithm(
      _summary, {'weight_tables': _build, 'keras': _build}, Options, aggregators=inner.NAMES,
      stacks=('fedsubavg',), weighs='examples'))
# FedAvg on a model of weight tables (NeuMF) is FAIR's round with one full tier.
registry.implement('fedavg', 'weight_tables',
                   registry.with_arguments(build, options=Options('1x')), weighs='examples')
