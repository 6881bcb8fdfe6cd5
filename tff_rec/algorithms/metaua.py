"""MetaUA (Liu, Twardowski, Wijaya, AdKDD 2022): online meta-learned update aggregation.

Per layer group A (layer-wise partition), the server aggregates the cohort's
updates as

    dw[A] = theta_s[A] * sum_k alpha_k[A] * dw_k[A],
    alpha_k[A] = softmax over the cohort of theta_alpha[A] . z_k[A],

theta_s[A] = sigmoid(rho[A]) in (0, 1), z_k the client's attributes
(standardised over the cohort: the paper leaves their scale open, and a
linear model of raw sample counts would saturate the softmax), then applies
the server optimizer (FedAdagrad by default, as the paper). The meta
parameters (rho, theta_alpha) learn online from a delayed meta loss: each
client of round t also returns g_k, the gradient at the broadcast model w_t
of its loss summed over its query examples (the paper's eq. 1 and 3), and the
server takes one SGD step on d(g_t . w_t) / d theta_{t-1} (eq. 4) before
aggregating round t. The scale of that meta loss is a choice (META_LOSSES):
the paper's sum grows with the cohort and its query sets.

The server keeps of round t-1 not every client's update but what the
derivative needs: w_{t-1}, the optimizer state before its step, and per
group M0 = sum_k alpha_k dw_k and M_j = sum_k alpha_k (z_kj - zbar_j) dw_k
(zbar: the alpha-weighted mean attribute). Since d alpha_k / d theta_alpha_j
= alpha_k (z_kj - zbar_j), the aggregation as a function of theta near
theta_{t-1} is theta_s (M0 + sum_j (theta_alpha_j - theta_alpha_j(t-1)) M_j)
to first order, which is all the gradient needs: differentiating that through
the server optimizer gives eq. 4 exactly, with state of a fixed size.

Clients train on their support examples only. A client with no query example
contributes no meta gradient (counted in the metrics). A non-finite meta
gradient is skipped (counted), and training continues.

The ablations switch the two parts off: without client weighting alpha_k is
FedAvg's n_k / n; without server-lr learning theta_s is 1. With both off it
is FedAdagrad on the support sets. FedNova (Wang et al. 2020), normalised
averaging, is the same round with weights n_k / n, each update divided by
its local steps tau_k and the sum multiplied by sum_k tau_k n_k / n.

Every client's update reaches the server individually (the paper's setting):
the round is the project's round with reports (composer.Round), whose driver
stacks the cohort's reports and runs the server step (MetaUAServer).
"""

import collections
import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import capabilities
from tff_rec import registry
from tff_rec import settings
from tff_rec.algorithms import api
from tff_rec.algorithms import rounds
from tff_rec.data import sliced
from tff_rec.models import spec
from tff_rec.training import functional
from tff_rec.training import keras_lockstep

# Client attributes (the paper's z1..z6), each computed without sending data.
ATTRIBUTES = ('num_samples', 'local_loss', 'update_norm', 'loss_ratio', 'positive_rate',
              'unique_features')
# Statistics of the client's data, passed with its input (the others it computes
# in training; update_norm is per group, taken at the server).
DATA_ATTRIBUTES = ('num_samples', 'positive_rate', 'unique_features')
LOSS_ATTRIBUTES = ('local_loss', 'loss_ratio')  # from the losses around its training
STANDARDISE_EPSILON = 1e-6
# How the cohort's query losses make the meta loss: 'sum' over every query
# example (eq. 1 as written), 'client_mean' (each client's mean, summed over
# the cohort: what a mean-reduced loss per client gives), 'mean' over all the
# cohort's query examples (a scale that does not grow with the cohort).
META_LOSSES = ('sum', 'client_mean', 'mean')


def _client_round(sums, train, weights, start, support, query, counts, *, learns: bool,
                  attributes: Sequence[str]):
  """A client's round (or, trained side by side, the clients' on a leading axis):
  (report for the server, g_k). sums(weights, part[, with_gradient]) -> (the
  part's loss summed over its examples, its gradient); train() -> (trained
  weights, steps, loss sum, count); `start`: the broadcast `weights` as sums
  takes them. Only what the server reads is computed: g_k when it `learns` (else
  zero: FedNova, the 'none' ablation), and of the losses around training
  (local_loss: the support's and query's at w_t; loss_ratio: theirs after training
  over before) those among the `attributes` it weighs clients by."""
  all_count = tf.maximum(counts[0] + counts[1], 1.0)
  report = collections.OrderedDict(support_count=counts[0], query_count=counts[1])
  # g_k: the gradient of the summed query loss at w_t; that loss is local_loss's too
  query_before, gradient = (sums(start, query, with_gradient=True) if learns
                            else (None, [tf.zeros_like(w) for w in start]))
  if learns and set(LOSS_ATTRIBUTES) & set(attributes):
    report['local_loss'] = before = (sums(start, support)[0] + query_before) / all_count
  trained, steps, loss_sum, count = train()
  if learns and 'loss_ratio' in attributes:
    after = (sums(trained, support)[0] + sums(trained, query)[0]) / all_count
    report['loss_ratio'] = after / tf.maximum(before, 1e-12)
  report.update(  # the update flat: each report's tensors cost at the driver (rounds)
      update=tf.concat(
          [tf.reshape(t - w, tf.concat([tf.shape(t)[:len(t.shape) - len(w.shape)], [-1]], 0))
           for t, w in zip(trained, weights)], -1),
      steps=tf.cast(steps, tf.float32), train_loss=loss_sum,
      train_count=tf.cast(count, tf.float32))
  return report, gradient


def _client_work(model, learning_rate: float, weights, train, support, query, **options):
  """One client's round (_client_round) on its tff.learning model's variables."""

  @tf.function  # one function, so its control dependencies order assignments and steps
  def run():
    variables = model.trainable_variables

    def sums(values, batches, with_gradient: bool = False):
      for variable, value in zip(variables, values):
        variable.assign(value)
      total, gradient = tf.constant(0.0), [tf.zeros_like(v) for v in variables]
      for s in tf.range(batches.steps()):
        with tf.GradientTape() as tape:
          output = model.forward_pass(batches.batch(s), training=False)
          batch_total = output.loss * tf.cast(output.num_examples, tf.float32)
        total += batch_total
        if with_gradient:
          gradient = [g + tf.convert_to_tensor(d) for g, d in
                      zip(gradient, tape.gradient(batch_total, variables))]
      return total, gradient

    def trained():
      done = functional.train(model, tff.learning.optimizers.build_sgdm(learning_rate),
                              weights, train)
      return done.weights, done.steps, done.loss_sum, done.count

    counts = [tf.cast(tf.reduce_sum(b.ends - b.starts), tf.float32) for b in (support, query)]
    return _client_round(sums, trained, weights, weights, support, query, counts, **options)

  return run()


def _clients_side_by_side(predict, loss, learning_rate: float, weights, train, support, query,
                          **options):
  """The cohort's rounds (_client_round) in lockstep (keras_lockstep): each part
  the clients' batches stacked ((columns, mask): `train`'s longest first)."""
  clients = tf.shape(train[1])[1]

  def sums(values, part, with_gradient: bool = False):
    return keras_lockstep.loss_sums(predict, loss, values, *part, with_gradient=with_gradient)

  def trained():
    done, loss_sum, count = keras_lockstep.train(
        predict, loss, tff.learning.optimizers.build_sgdm(learning_rate), weights, *train)
    return done, keras_lockstep.steps(train[1]), loss_sum, count

  return _client_round(
      sums, trained, weights,
      [tf.broadcast_to(w, tf.concat([[clients], tf.shape(w)], 0)) for w in weights],
      support, query, [tf.reduce_sum(mask, [0, 2]) for _, mask in (support, query)], **options)


class MetaUAServer:
  """The server's meta step and aggregation, as TF functions of plain tensors."""

  def __init__(self, config: 'Options', optimizer: tff.learning.optimizers.Optimizer,
               groups: Sequence[int], *, normalize_by_steps: bool = False):
    if normalize_by_steps and config.learns:
      raise ValueError('FedNova normalises by local steps with FedAvg weights: turn client '
                       'weighting and server-lr learning off')
    self.config, self.optimizer, self.groups = config, optimizer, list(groups)
    self.normalize_by_steps = normalize_by_steps
    self.num_groups = max(self.groups) + 1

  def _aggregate(self, rho, theta_alpha, m0, mj):
    """The update as a function of theta, exact to first order at theta_{t-1}."""
    scale = tf.sigmoid(rho) if self.config.server_lr_scaling else tf.ones_like(rho)
    shift = theta_alpha - tf.stop_gradient(theta_alpha)  # zero, with gradient 1
    return [scale[g] * (a + tf.tensordot(shift[g], b, axes=1))
            for a, b, g in zip(m0, mj, self.groups)]

  def meta_gradient(self, meta, previous, gradient):
    """d(g_t . w_t) / d(rho, theta_alpha) at theta_{t-1}."""
    meta, previous, gradient = tf.nest.map_structure(tf.convert_to_tensor,
                                                     (meta, previous, gradient))
    rho, theta_alpha = meta['rho'], meta['theta_alpha']
    with tf.GradientTape() as tape:
      tape.watch([rho, theta_alpha])
      update = self._aggregate(rho, theta_alpha, previous['m0'], previous['mj'])
      _, weights = self.optimizer.next(previous['optimizer'], previous['weights'],
                                       [-u for u in update])
      objective = tf.add_n([tf.reduce_sum(g * w) for g, w in zip(gradient, weights)])
    return tape.gradient(objective, [rho, theta_alpha], unconnected_gradients='zero')

  def attributes(self, reports, client_attributes) -> tf.Tensor:
    """[K, G, J] the chosen attributes, standardised over the cohort."""
    columns = []
    for name in self.config.attributes:
      if name == 'update_norm':  # [K, G] the norm of each client's update in each group
        squares = [tf.reduce_sum(tf.square(u), axis=list(range(1, len(u.shape))))
                   for u in reports['update']]
        columns.append(tf.sqrt(tf.stack(
            [tf.add_n([s for s, g in zip(squares, self.groups) if g == group])
             for group in range(self.num_groups)], axis=-1)))
        continue
      value = (reports[name] if name in LOSS_ATTRIBUTES
               else client_attributes[:, DATA_ATTRIBUTES.index(name)])
      columns.append(tf.tile(value[:, None], [1, self.num_groups]))
    z = tf.stack(columns, axis=-1)
    mean, variance = tf.nn.moments(z, axes=[0])
    return (z - mean) / (tf.sqrt(variance) + STANDARDISE_EPSILON)

  def weights(self, theta_alpha, z, num_samples) -> tf.Tensor:
    """[K, G] each client's weight per group."""
    if self.config.client_weighting:
      return tf.nn.softmax(tf.einsum('kgj,gj->kg', z, theta_alpha), axis=0)
    shares = num_samples / tf.reduce_sum(num_samples)
    return tf.tile(shares[:, None], [1, self.num_groups])

  def step(self, state, reports, client_attributes, gradient):
    """(new state, metrics): the meta step (if a previous round exists), then the
    aggregation and server optimizer step of this round."""
    state, reports, client_attributes = tf.nest.map_structure(
        tf.convert_to_tensor, (state, reports, client_attributes))
    meta = dict(state['meta'])
    skipped, step_norm = tf.constant(0.0), tf.constant(0.0)
    if self.config.learns:
      if self.config.meta_loss == 'mean':
        examples = tf.maximum(tf.reduce_sum(reports['query_count']), 1.0)
        gradient = [g / examples for g in gradient]
      grads = self.meta_gradient(meta, state['previous'], gradient)
      finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
      apply = tf.logical_and(finite, state['has_previous'])
      lr = self.config.meta_lr
      meta = {name: tf.where(apply, meta[name] - lr * g, meta[name])
              for name, g in zip(('rho', 'theta_alpha'), grads)}
      step_norm = tf.where(apply, lr * tf.linalg.global_norm(grads), 0.0)
      skipped = tf.cast(tf.logical_and(state['has_previous'], tf.logical_not(finite)),
                        tf.float32)
    num_samples = reports['support_count']
    z = (self.attributes(reports, client_attributes) if self.config.learns  # else unread
         else tf.zeros([tf.size(num_samples), self.num_groups, len(self.config.attributes)]))
    alpha = self.weights(meta['theta_alpha'], z, num_samples)  # [K, G]
    updates = reports['update']
    if self.normalize_by_steps:  # FedNova
      tau = tf.maximum(reports['steps'], 1.0)
      shares = num_samples / tf.reduce_sum(num_samples)
      effective = tf.reduce_sum(tau * shares)
      updates = [u * tf.reshape(effective / tau, [-1] + [1] * (len(u.shape) - 1))
                 for u in updates]
    per_variable = [tf.gather(alpha, g, axis=1) for g in self.groups]  # [K] each
    m0 = [tf.tensordot(a, u, axes=1) for a, u in zip(per_variable, updates)]
    centred = z - tf.einsum('kg,kgj->gj', alpha, z)[None]
    mj = [tf.einsum('k,kj,k...->j...', a, tf.gather(centred, g, axis=1), u)
          for a, g, u in zip(per_variable, self.groups, updates)]
    update = self._aggregate(meta['rho'], meta['theta_alpha'], m0, mj)
    optimizer_state, weights = self.optimizer.next(state['optimizer'], state['weights'],
                                                   [-u for u in update])
    new_state = collections.OrderedDict(
        weights=weights, optimizer=optimizer_state, meta=meta,
        previous=collections.OrderedDict(weights=state['weights'],
                                         optimizer=state['optimizer'], m0=m0, mj=mj),
        has_previous=tf.constant(True), skipped_total=state['skipped_total'] + skipped)
    scale = tf.sigmoid(meta['rho']) if self.config.server_lr_scaling else tf.ones_like(
        meta['rho'])
    metrics = collections.OrderedDict(
        meta_skipped=skipped, meta_skipped_total=new_state['skipped_total'],
        meta_step_norm=step_norm, server_scale_mean=tf.reduce_mean(scale),
        max_client_weight=tf.reduce_mean(tf.reduce_max(alpha, axis=0)))
    return new_state, metrics


def build_round(model_fn, batches_type: tff.Type, *, config: 'Options',
                client_learning_rate: float,
                server_optimizer: tff.learning.optimizers.Optimizer,
                groups: Sequence[int], model_bytes: int,
                normalize_by_steps: bool = False,
                keras: keras_lockstep.KerasModel | None = None) -> rounds.Parts:
  """MetaUA's (and FedNova's) round: the project's round with reports, its
  server step (MetaUAServer) run where the round's driver runs. Its aggregation
  is its own: the query gradients go through the composer's sum (the only
  aggregation it declares), the updates as reports.

  A client's data: (its batches, sliced.Joined of `batches_type`'s three parts:
  train (E shuffled epochs of its support examples), one pass over the support,
  one over the query; the DATA_ATTRIBUTES of its data). It sends its query
  gradient g_k (summed over the cohort; with meta_loss 'client_mean', of its
  mean query loss) and its report (to the server, client by client). With
  `keras` (the Keras model model_fn wraps), the round has a lockstep form where
  the model allows one (keras_lockstep.KerasModel.refusal).
  """
  client_type = tff.types.to_type((
      sliced.Joined(batches_type, tff.TensorType(np.int32, [3])),
      tff.TensorType(np.float32, [len(DATA_ATTRIBUTES)])))

  server = MetaUAServer(config, server_optimizer, groups,
                        normalize_by_steps=normalize_by_steps)
  step = tf.function(server.step)

  def meta_state(state):
    weights, attributes = state['weights'], len(config.attributes)
    return collections.OrderedDict(
        meta=collections.OrderedDict(
            rho=tf.zeros([server.num_groups]),
            theta_alpha=tf.zeros([server.num_groups, attributes])),
        previous=collections.OrderedDict(
            weights=weights, optimizer=state['optimizer'],
            m0=[tf.zeros_like(w) for w in weights],
            mj=[tf.zeros([attributes, *w.shape]) for w in weights]),
        has_previous=tf.constant(False), skipped_total=tf.constant(0.0))

  initialize, get_model_weights, set_model_weights = rounds.keras_server_model(
      model_fn, server.optimizer, meta_state)
  distributor = tff.tensorflow.computation(lambda state: state['weights'],
                                           initialize.type_signature.result)

  def sent(report, gradient, attributes):  # a client's, or the clients' side by side
    if config.meta_loss == 'client_mean':
      per_client = tf.maximum(report['query_count'], 1.0)
      gradient = [g / tf.reshape(per_client, tf.concat(
          [tf.shape(per_client), tf.ones([g.shape.rank - per_client.shape.rank], tf.int32)], 0))
                  for g in gradient]
    report['attributes'] = attributes
    clients = tf.ones_like(report['query_count'], tf.int32)
    return collections.OrderedDict(update=gradient,
                                   metrics=collections.OrderedDict(clients=clients),
                                   report=report)

  @tff.tensorflow.computation(distributor.type_signature.result, client_type)
  def client_work(weights, client):
    return sent(*_client_work(model_fn(), client_learning_rate, weights, *client[0].parts(),
                              learns=config.learns, attributes=config.attributes), client[1])

  def side_by_side(predict):  # the cohort in lockstep: each part's batches stacked
    part = keras_lockstep.stacked_type(batches_type)

    @tff.tensorflow.computation(distributor.type_signature.result, (
        part, part, part, tff.TensorType(np.float32, [None, len(DATA_ATTRIBUTES)])))
    def clients_work(weights, stacked):
      *parts, attributes = stacked
      return sent(*_clients_side_by_side(predict, keras.loss, client_learning_rate, weights,
                                         *parts, learns=config.learns,
                                         attributes=config.attributes), attributes)

    return clients_work

  def stack_clients(data):  # each part's stacked; training's longest first, as they come
    parts = [joined.parts() for joined, _ in data]
    return (keras_lockstep.stack([p[0] for p in parts]),
            *(keras_lockstep.stack([p[k] for p in parts], longest_first=False) for k in (1, 2)),
            np.stack([attributes for _, attributes in data]))

  def finalizer(state, broadcast, summed, gradient, reports):
    del broadcast, summed  # the weights, the clients' count: the reports say it all
    server_state = {k: v for k, v in state.items() if k != 'non_trainable'}
    weights = server_state['weights']  # the flat [K, size] updates -> [K, ...] each
    flat = np.split(reports['update'], np.cumsum([np.size(w) for w in weights])[:-1], axis=1)
    reports = dict(reports, update=[f.reshape(-1, *np.shape(w)) for f, w in zip(flat, weights)])
    new_state, meta_metrics = step(server_state, reports, reports['attributes'],
                                   list(gradient))
    new_state = tf.nest.map_structure(np.asarray, new_state)
    new_state['non_trainable'] = state['non_trainable']
    new_state = collections.OrderedDict((k, new_state[k]) for k in state)  # the type's order
    counts = reports['train_count']
    upload = model_bytes * (2 if config.learns else 1)  # dw_k (and g_k)
    metrics = collections.OrderedDict(  # laid out as tff.learning's
        client_work=collections.OrderedDict(train=collections.OrderedDict(
            loss=float(reports['train_loss'].sum() / max(counts.sum(), 1.0)),
            num_examples=float(counts.sum()))),
        aggregator=collections.OrderedDict(bytes_up=float(upload)))
    if config.learns:  # the learned weights and step: MetaUA's aggregation
      metrics['client_work']['clients_without_query'] = float(
          (reports['query_count'] == 0).sum())
      metrics['aggregator']['meta'] = tf.nest.map_structure(np.asarray, meta_metrics)
    return new_state, metrics

  return rounds.Parts(initialize, distributor, client_work, finalizer, get_model_weights,
                      set_model_weights, **keras_lockstep.form(
                          keras, side_by_side, stack_data=stack_clients,
                          size_of=lambda client: keras_lockstep.size(client[0].parts()[0]),
                          state_bytes=3 * model_bytes,  # the start, g_k, the update
                          # DCN, 94 clients: 1.24-1.55x (MetaUA), 1.07-1.43x (FedNova)
                          # client by client's round (results/benchmarks_runtimes.md)
                          auto=True))


# The registry's side: MetaUA and FedNova on any task with a Keras model whose
# clients' examples come as one dict of per-example arrays with a 'label' key
# (task.client_examples), made the model's input by task.model_input and
# batched by task.batch_plan.
CLIENT_EXAMPLES_WHY = ("its clients' examples are not a table of per-example arrays, "
                       'which the support / query split needs')


@dataclasses.dataclass(frozen=True)
class Options:
  meta_lr: float = settings.described(
      2.0, "MetaUA's SGD learning rate on the meta parameters (default 2.0, the paper's).")
  attributes: tuple[str, ...] = settings.described(
      ('local_loss',), 'MetaUA client attributes (z1..z6): num_samples, local_loss, '
      'update_norm, loss_ratio, positive_rate, unique_features (default local_loss).')
  client_weighting: bool = settings.described(
      True, 'MetaUA: learn client weights (off: FedAvg weights) (default on).')
  server_lr_scaling: bool = settings.described(
      True, 'MetaUA: learn the per-layer server learning-rate scale (off: 1) (default on).')
  meta_loss: str = settings.described(
      'sum', "MetaUA's meta loss over the cohort's query examples: summed (the paper's eq. 1), "
      "each client's mean summed, or the mean over all (default sum).", choices=META_LOSSES)
  query_fraction: float = settings.described(
      0.2, "MetaUA: share of each client's training examples held out as its query set (default "
      '0.2).')

  def __post_init__(self):
    unknown = [a for a in self.attributes if a not in ATTRIBUTES]
    if unknown or not self.attributes:
      raise ValueError(f'attributes must be a non-empty subset of {ATTRIBUTES}, got '
                       f'{list(self.attributes)}')
    if self.meta_loss not in META_LOSSES:
      raise ValueError(f'unknown meta_loss {self.meta_loss!r}; choose one of {META_LOSSES}')
    if self.meta_lr <= 0:
      raise ValueError(f'meta learning rate must be > 0, got {self.meta_lr}')
    if not 0 <= self.query_fraction < 1:
      raise ValueError(f'query_fraction must be in [0, 1), got {self.query_fraction}')

  @property
  def learns(self) -> bool:
    return self.client_weighting or self.server_lr_scaling


# FedNova: FedAvg weights, nothing learned, no query set.
FEDNOVA = Options(client_weighting=False, server_lr_scaling=False, query_fraction=0.0)


def build_fednova(task, options, training, *, name: str):
  """FedNova: FedAvg weights, updates normalised by local steps; no query set."""
  del options  # none
  return build(task, FEDNOVA, training, name=name, normalize_by_steps=True)


def build(task, config: Options, training, *, name: str, normalize_by_steps: bool = False):
  """MetaUA (or, `normalize_by_steps`, FedNova) on the task's Keras model."""
  api.require(task, name, capabilities.ClientExamples, CLIENT_EXAMPLES_WHY)
  if training.client_optimizer.name != 'sgd':
    raise api.NotApplicable(f'--algorithm={name}: its clients take SGD steps; got '
                            f'--client_optimizer={training.client_optimizer.name}')
  variables = spec.built_to_read(task).trainable_variables
  layers = [v.name.split('/')[0] for v in variables]
  groups = [sorted(set(layers), key=layers.index).index(l) for l in layers]
  parameters = sum(int(np.prod(v.shape)) for v in variables)
  ids, query = list(task.train_client_ids), config.query_fraction
  position = {client: k for k, client in enumerate(ids)}

  def client_input(client_id: str, seed: int):
    parts, attributes = split_client(task, client_id, position[client_id], seed, query)
    return sliced.joined(parts), attributes

  parts = build_round(
      task.model_fn, sliced.tff_type(client_input(ids[0], 0)[0].batches), config=config,
      client_learning_rate=training.client_optimizer.learning_rate,
      server_optimizer=training.server_optimizer.build(), groups=groups,
      model_bytes=4 * parameters, normalize_by_steps=normalize_by_steps,
      keras=keras_lockstep.KerasModel.of(task))
  return api.Built(parts, ids, client_input)


def split_client(task, client_id: str, index: int, seed: int, query_fraction: float):
  """((train, support, query batches), the support's DATA_ATTRIBUTES): a fixed
  seeded split of the client's training examples (seeded by the task's seed and
  the client's position), round(fraction x n) of them query (none for a client
  of one example); the training batches shuffled from the round's `seed`."""
  examples = task.client_examples(client_id)
  count = len(examples['label'])
  query = min(int(round(query_fraction * count)), count - 1)
  in_query = np.zeros(count, bool)
  in_query[np.random.default_rng([task.config.seed, index]).permutation(count)[:query]] = True
  support, held = np.flatnonzero(~in_query), np.flatnonzero(in_query)
  distinct = sum(len(np.unique(v[support][v[support] != 0]))
                 for k, v in examples.items() if k != 'label')
  plan = task.batch_plan  # the three share the columns: one copy travels (sliced.joined)
  columns = tf.nest.map_structure(np.asarray, task.model_input(examples))
  batches = (plan.batches(columns, seed, support),
             sliced.in_order(columns, plan.batch_size, support),
             sliced.in_order(columns, plan.batch_size, held))
  return batches, np.array([len(support), examples['label'][support].mean(), distinct],
                           np.float32)


WEIGHS_ONE_BY_ONE = ("its server weighs each client's update individually (MetaUA's softmax "
                     "weights, FedNova's step normalisation), not as a sum of clients' "
                     'values that secure sums, DP or a stacked correction could wrap')
registry.register('metaua', registry.Algorithm(
    'MetaUA: client weights and server step learned online', {'keras_batches': build}, Options,
    dict(server_optimizer='adagrad', server_learning_rate=0.1, server_adaptivity=1e-3),
    composition_note=WEIGHS_ONE_BY_ONE))
registry.register('fednova', registry.Algorithm(
    'FedNova: updates normalised by local steps', {'keras_batches': build_fednova},
    composition_note=WEIGHS_ONE_BY_ONE))
