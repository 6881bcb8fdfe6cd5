"""FedAvg, FedSGD and FedProx (and FedAdam / FedAdagrad: FedAvg with that server
optimizer) on any task with a Keras model, and their registration (FedAvg on a
model of weight tables is FAIR's round, on a matrix factorization FedMF's:
those modules implement it).

On a task whose clients' batches are numpy arrays (model kind 'keras_batches')
FedAvg and FedProx are the project's round, its clients the project's loop over
sliced batches (no tf.data pipeline per client: DCN FedAvg's round took 0.34 s
against tff.learning's 0.62, results/benchmarks_runtimes.md); on a task that
offers only datasets ('keras') they are tff.learning's own processes, as is
FedSGD everywhere.
"""

import collections
import dataclasses
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import registry
from tff_rec import settings
from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import heat as heat_lib
from tff_rec.algorithms import rounds
from tff_rec.training import functional
from tff_rec.training import keras_lockstep
from tff_rec.training import optimizers
from tff_rec.training import proximal

# Clients loop over their batches with a dataset iterator, not TFF's default
# Dataset.reduce: a ReduceDataset op instantiates (and graph-optimizes) its
# body function on every call, ~150 ms per client for the dual encoder on
# either runtime, against ~25 ms for the whole iterator loop.
CLIENT_LOOP = tff.learning.LoopImplementation.DATASET_ITERATOR


def build_process(model_fn: Callable[[], tff.learning.models.VariableModel],
                  *, client_optimizer: optimizers.OptimizerConfig,
                  server_optimizer: optimizers.OptimizerConfig,
                  client_loop: tff.learning.LoopImplementation = CLIENT_LOOP,
                  model_aggregator: tff.aggregators.WeightedAggregationFactory | None = None,
                  client_weighting: tff.learning.ClientWeighting = (
                      tff.learning.ClientWeighting.NUM_EXAMPLES),
                  proximal_strength: float = 0.0) -> tff.learning.templates.LearningProcess:
  """FedAvg (client optimizer, E local epochs) as tff.learning composes it; with a
  `proximal_strength` mu > 0, FedProx (FedAvg whose client steps carry the
  proximal term)."""
  _refuse_lazy_adam('fedavg', client_optimizer, server_optimizer)
  return tff.learning.algorithms.build_weighted_fed_avg(
      model_fn, client_optimizer_fn=_client_optimizer(client_optimizer, proximal_strength),
      client_weighting=client_weighting, server_optimizer_fn=server_optimizer.build(),
      loop_implementation=client_loop, model_aggregator=model_aggregator)


def build_fedsgd_process(model_fn: Callable[[], tff.learning.models.VariableModel], *,
                         server_optimizer: optimizers.OptimizerConfig,
                         client_loop: tff.learning.LoopImplementation = CLIENT_LOOP,
                         model_aggregator: tff.aggregators.WeightedAggregationFactory | None = None
                         ) -> tff.learning.templates.LearningProcess:
  """FedSGD: each client returns the gradient of its loss over all its examples at
  the broadcast model (no client optimizer)."""
  _refuse_lazy_adam('fedsgd', None, server_optimizer)
  return tff.learning.algorithms.build_fed_sgd(
      model_fn, server_optimizer_fn=server_optimizer.build(), loop_implementation=client_loop,
      model_aggregator=model_aggregator)


def _refuse_lazy_adam(algorithm: str, client_optimizer: optimizers.OptimizerConfig | None,
                      server_optimizer: optimizers.OptimizerConfig) -> None:
  if client_optimizer and client_optimizer.name == 'lazy_adam':
    raise api.NotApplicable(
        f'--algorithm={algorithm} trains a Keras model whose gradients are made dense, so '
        'lazy_adam would be plain Adam: use adam (lazy_adam is for the FAIR family and the '
        'table forms)')
  if server_optimizer.name == 'lazy_adam':
    raise api.NotApplicable(
        f"--algorithm={algorithm} steps the server's Keras weights by the cohort's dense mean "
        'update, so lazy_adam would be plain Adam: use --server_optimizer=adam')


def build_round(model_fn: Callable[[], tff.learning.models.VariableModel],
                batches_type: tff.Type, *, client_optimizer: tff.learning.optimizers.Optimizer,
                server_optimizer: tff.learning.optimizers.Optimizer,
                uniform: bool = False, keras: keras_lockstep.KerasModel | None = None
                ) -> rounds.Parts:
  """FedAvg's round on sliced batches: each client runs `client_optimizer` over its
  batches from the broadcast weights and sends the change (broadcast - trained),
  weighed by its examples (or equally, `uniform`); the server steps by the
  aggregate, as tff.learning's FedAvg does. Unlike tff.learning's clients, a
  client whose update is not finite is not dropped: the model then is not
  finite, and the run stops saying so (training.loop.Diverged). With `keras`
  (the Keras model model_fn wraps), the round has a lockstep form where the model
  allows one (keras_lockstep.KerasModel.refusal)."""
  initialize, *model_weights = rounds.keras_server_model(model_fn, server_optimizer)
  distributor = tff.tensorflow.computation(lambda state: state['weights'],
                                           initialize.type_signature.result)

  def sent(weights, trained, count, loss_sum):  # each leaf a client's, or the clients'
    return collections.OrderedDict(
        update=[w - t for w, t in zip(weights, trained)],
        weight=tf.ones_like(count, tf.float32) if uniform else tf.cast(count, tf.float32),
        metrics=collections.OrderedDict(loss_sum=loss_sum, count=count))

  @tff.tensorflow.computation(distributor.type_signature.result, batches_type)
  def client_work(weights, batches):
    trained = functional.train(model_fn(), client_optimizer, weights, batches)
    return sent(weights, trained.weights, trained.count, trained.loss_sum)

  def step(weights, sums, aggregate, broadcast):
    del weights, broadcast  # the optimizer steps the server's weights by the aggregate
    return aggregate, rounds.round_metrics(sums['loss_sum'], sums['count'])

  def side_by_side(predict):
    @tff.tensorflow.computation(distributor.type_signature.result,
                                keras_lockstep.stacked_type(batches_type))
    def trained_side_by_side(weights, stacked):
      trained, loss_sum, count = keras_lockstep.train(predict, keras.loss, client_optimizer,
                                                      weights, *stacked)
      return sent([w[None] for w in weights], trained, count, loss_sum)

    return trained_side_by_side

  return rounds.Parts(initialize, distributor, client_work, step, *model_weights,
                      optimizer=server_optimizer, **keras_lockstep.form(keras, side_by_side))


@dataclasses.dataclass(frozen=True)
class FedProxOptions(heat_lib.WeightingOptions):
  proximal_strength: float = settings.described(
      0.01, 'FedProx mu (default 0.01).')

  def __post_init__(self):
    super().__post_init__()
    if self.proximal_strength < 0:
      raise ValueError(f'proximal_strength must be >= 0, got {self.proximal_strength}')


def _client_optimizer(config: optimizers.OptimizerConfig, proximal_strength: float
                      ) -> tff.learning.optimizers.Optimizer:
  client = config.build()
  # FedProx's client steps are proximal (not TFF's own FedProx: see training.proximal).
  return proximal.Proximal(client, proximal_strength) if proximal_strength else client


def build_keras(task, options, training, *, name: str,
                around: Callable[[tff.aggregators.WeightedAggregationFactory],
                                 tff.aggregators.WeightedAggregationFactory] | None = None):
  """FedAvg (FedProx with options' proximal_strength) as a tff.learning process on
  the task's Keras model, fed by its dataset computation; its model_aggregator
  is the composer's, inside `around` (a method's own factory) where given."""
  _refuse_lazy_adam(name, training.client_optimizer, training.server_optimizer)
  weighting = (tff.learning.ClientWeighting.UNIFORM if training.weighting == 'clients'
               else tff.learning.ClientWeighting.NUM_EXAMPLES)
  return _on_datasets(task, lambda model_aggregator: build_process(
      task.model_fn, client_optimizer=training.client_optimizer,
      server_optimizer=training.server_optimizer,
      model_aggregator=around(model_aggregator) if around else model_aggregator,
      client_weighting=weighting, proximal_strength=_proximal_strength(options)))


def build_fedsgd(task, options, training, *, name: str):
  """FedSGD as a tff.learning process on the task's Keras model."""
  del options  # none
  _refuse_lazy_adam(name, None, training.server_optimizer)
  return _on_datasets(task, lambda model_aggregator: build_fedsgd_process(
      task.model_fn, server_optimizer=training.server_optimizer,
      model_aggregator=model_aggregator))


def _on_datasets(task, learning_process: Callable[..., tff.learning.templates.LearningProcess]
                 ) -> api.Built:
  """tff.learning's process (`learning_process(model_aggregator)`: its aggregator
  slot, which the composer fills) fed by the client datasets as the Keras model
  reads them."""
  return api.Built(
      lambda model_aggregator: tff.simulation.compose_dataset_computation_with_learning_process(
          task.dataset_computation, learning_process(model_aggregator)),
      list(task.train_client_ids), task.client_arguments)


def build_on_batches(task, options, training, *, name: str):
  """FedAvg (FedProx with options' proximal_strength) as the project's round
  (build_round) on the task's numpy batches."""
  _refuse_lazy_adam(name, training.client_optimizer, training.server_optimizer)
  parts = build_round(
      task.model_fn, api.batches_type(task),
      client_optimizer=_client_optimizer(training.client_optimizer,
                                         _proximal_strength(options)),
      server_optimizer=training.server_optimizer.build(),
      uniform=training.weighting == 'clients',
      keras=keras_lockstep.KerasModel.of(task))
  return api.Built(parts, list(task.train_client_ids), task.client_batches)


def _proximal_strength(options) -> float:
  return getattr(options, 'proximal_strength', 0.0)  # FedProx's; FedAvg's options have none


COMPOSES = dict(aggregators=inner.NAMES, stacks=('fedsubavg',))

registry.register('fedavg', registry.Algorithm(
    'FedAvg: client optimizer for the local epochs, server optimizer on the mean update',
    {'keras_batches': build_on_batches, 'keras': build_keras}, heat_lib.WeightingOptions,
    **COMPOSES))
_ONE_GRADIENT = 'each client sends the gradient of its loss at the broadcast model'
registry.register('fedsgd', registry.Algorithm(
    'FedSGD: one gradient per client per round', {'keras': build_fedsgd}, **COMPOSES,
    unused_settings=dict(client_optimizer=_ONE_GRADIENT, client_learning_rate=_ONE_GRADIENT)))
# FedProx is FedAvg whose client steps carry a proximal term (its option); on a
# Keras model only.
registry.register('fedprox', registry.Algorithm(
    'FedProx: FedAvg with a proximal term', options=FedProxOptions, base='fedavg',
    without_kinds=('mf', 'weight_tables'), **COMPOSES))
# FedAdam / FedAdagrad are FedAvg with that server optimizer (Reddi et al.).
for _name, _server, _rate in (('fedadam', 'Adam', 0.01), ('fedadagrad', 'Adagrad', 0.1)):
  registry.register(_name, registry.Algorithm(
      f'FedAvg with an {_server} server (Reddi et al.)', options=heat_lib.WeightingOptions,
      base='fedavg', without_kinds=('mf',),  # FedMF's server adds the mean update
      defaults=dict(server_learning_rate=_rate), server_optimizer=_server.lower(),
      **COMPOSES))
