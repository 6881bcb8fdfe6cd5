"""The one composer: an algorithm's parts made a process, its aggregation added
here and by no algorithm.

An algorithm's builder returns its round's parts (tff_rec.algorithms.rounds.Parts),
or tff.learning's process as a function of its model_aggregator (the slot
tff.learning's builders leave to their caller). `build_process` composes them
with the aggregation the user chose: the inner one (TFF's mean, secure sum or
DP), inside the method's own factory where its parts have one, and FedSubAvg's
correction when stacked, on the rows of a round's named tables or around the
mean of a Keras model's variables.

A Round is the composed round: the parts with their aggregator and finalizer.
`compose` makes its process: a tff LearningProcess when no client keeps state
and no report comes back (a MapReduce round: every runtime runs it), else a
RoundProcess whose driver keeps every client's state and stacks the reports.
The round's metrics hold the aggregator's measurements under 'aggregator'
(TFF's DP and secure-sum factories report theirs), as tff.learning's do.
"""

import collections
import dataclasses
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.aggregators import fedsubavg
from tff_rec.algorithms import api
from tff_rec.algorithms import heat
from tff_rec.algorithms import rounds
from tff_rec.algorithms.rounds import Factory, METRICS, REPORT, STATE, UPDATE, WEIGHT
from tff_rec.training import lockstep as lockstep_lib


@dataclasses.dataclass(frozen=True)
class Round:
  """A composed round: an algorithm's parts with the aggregator and the finalizer
  made for them here."""
  initialize: tff.Computation
  distributor: tff.Computation
  client_work: tff.Computation
  aggregator: Factory
  finalizer: tff.Computation | Callable[..., Any]
  get_model_weights: tff.Computation
  set_model_weights: tff.Computation
  clients_in_model: str | None = None
  lockstep: lockstep_lib.Lockstep | None = None  # rounds.Parts's
  lockstep_refusal: str = rounds.Parts.lockstep_refusal

  @property
  def output_type(self) -> tff.StructType:
    return self.client_work.type_signature.result

  @property
  def keeps_client_state(self) -> bool:
    return STATE in tff.structure.name_list(self.output_type)

  @property
  def reports(self) -> bool:
    return REPORT in tff.structure.name_list(self.output_type)

  @property
  def weighted(self) -> bool:
    return isinstance(self.aggregator, tff.aggregators.WeightedAggregationFactory)

  def aggregation_process(self) -> tff.templates.AggregationProcess:
    return aggregation_process(self.aggregator, self.client_work)


# client work -> {id(aggregator): (aggregator, its process)}: each creation traces
# the factory's computations again (about 0.5 s), and the composer (for the
# aggregate's type), the round, its runner and the in-process runtime all ask.
_CREATED = weakref.WeakKeyDictionary()


def aggregation_process(aggregator: Factory, client_work: tff.Computation
                        ) -> tff.templates.AggregationProcess:
  """The aggregator's process for what `client_work` sends (its update, and its
  weight when the aggregator is weighted), created once per pair."""
  created = _CREATED.setdefault(client_work, {})
  if id(aggregator) not in created:
    output = client_work.type_signature.result
    process = (aggregator.create(output[UPDATE], output[WEIGHT])
               if isinstance(aggregator, tff.aggregators.WeightedAggregationFactory)
               else aggregator.create(output[UPDATE]))
    created[id(aggregator)] = (aggregator, process)
  return created[id(aggregator)][1]


def aggregate_type(aggregator: Factory, client_work: tff.Computation):
  """The type of the aggregate a finalizer takes."""
  return aggregation_process(aggregator, client_work).next.type_signature.result.result.member


def compose_parts(parts: rounds.Parts, aggregator: Factory, *,
                  row_scales: Mapping[str, np.ndarray] | None = None):
  """The round's process (compose) from an algorithm's parts and the aggregation
  composed around them: `aggregator` (the method's own factory around it is
  added here), `row_scales` (table name -> a scale per row: FedSubAvg stacked)
  scaling those rows of the pseudo-gradient the server steps by, which the
  round then reports (fedsubavg.measured)."""
  aggregator = parts.around(aggregator) if parts.around else aggregator
  if row_scales and (parts.optimizer is None or parts.row_tables is None):
    raise ValueError('row scales need a server step on named tables (Parts.row_tables)')
  if parts.optimizer is not None:
    finalizer = _optimizer_finalizer(parts, aggregator, row_scales)
  elif REPORT in tff.structure.name_list(parts.client_work.type_signature.result):
    finalizer = parts.server_update  # run where the round's driver runs, with the reports
  else:
    finalizer = tff.tensorflow.computation(parts.server_update, *_finalizer_types(
        parts, aggregator))
  round_ = Round(parts.initialize, parts.distributor, parts.client_work, aggregator, finalizer,
                 parts.get_model_weights, parts.set_model_weights, parts.clients_in_model,
                 parts.lockstep, parts.lockstep_refusal)
  return compose(round_, parts.initial_client_states)


def _finalizer_types(parts: rounds.Parts, aggregator: Factory) -> list:
  """The types a finalizer takes: server state, broadcast, summed metrics, aggregate."""
  return [parts.initialize.type_signature.result, parts.distributor.type_signature.result,
          parts.client_work.type_signature.result[METRICS],
          aggregate_type(aggregator, parts.client_work)]


def _optimizer_finalizer(parts: rounds.Parts, aggregator: Factory,
                         row_scales: Mapping[str, np.ndarray] | None) -> tff.Computation:
  """The finalizer of a server_model state: the parts' step, the rows of
  `row_scales`' tables of its pseudo-gradient scaled, then the optimizer's step
  on the weights (and the round's number advanced where the state counts it)."""
  optimizer, step = parts.optimizer, parts.server_update

  @tff.tensorflow.computation(*_finalizer_types(parts, aggregator))
  def finalizer(server, broadcast, sums, aggregate):
    pseudo_gradient, metrics = step(server['weights'], sums, aggregate, broadcast)
    if row_scales:
      pseudo_gradient = collections.OrderedDict(pseudo_gradient)
      for name, scale in row_scales.items():
        pseudo_gradient[name] = fedsubavg.scale_rows(pseudo_gradient[name], scale)
      metrics = rounds.with_measurements(metrics, fedsubavg.measured(row_scales.values()))
    server = collections.OrderedDict(server)  # pylint: disable=unsubscriptable-object
    server['optimizer'], server['weights'] = optimizer.next(
        server['optimizer'], server['weights'], pseudo_gradient)
    if 'round' in server:
      server['round'] += 1
    return server, metrics

  return finalizer


def metric_names(process) -> set[str]:
  """Every field name, at any depth, of what a round of `process` reports (a
  LearningProcess's metrics; a RoundProcess's aggregation measurements and, where
  its finalizer is a TF computation, the finalizer's metrics)."""
  if isinstance(process, RoundProcess):
    types = [process.round.aggregation_process().next.type_signature.result.measurements]
    if isinstance(process.round.finalizer, tff.Computation):
      types.append(process.round.finalizer.type_signature.result[1])
  else:
    types = [process.next.type_signature.result.metrics]
  names = set()
  while types:
    type_ = types.pop()
    if isinstance(type_, tff.FederatedType):
      types.append(type_.member)
    elif isinstance(type_, tff.StructType):
      for name, member in tff.structure.iter_elements(type_):
        names.update([name] if name else [])
        types.append(member)
  return names


def _merge_computation(round_: Round, aggregation: tff.templates.AggregationProcess):
  return tff.tensorflow.computation(
      rounds.with_measurements, round_.finalizer.type_signature.result[1],
      aggregation.next.type_signature.result.measurements.member)


def _federated_initialize(round_: Round, aggregation: tff.templates.AggregationProcess):
  @tff.federated_computation
  def initialize():
    return tff.federated_zip(collections.OrderedDict(
        server=tff.federated_eval(round_.initialize, tff.SERVER),
        aggregator=aggregation.initialize()))

  return initialize


def _clients_round(round_: Round, aggregation: tff.templates.AggregationProcess, work,
                   state, client_data):
  """Inside a federated computation: (broadcast, the clients' outputs of `work`,
  the aggregation's output)."""
  broadcast = tff.federated_map(round_.distributor, state.server)
  outputs = tff.federated_map(work, (tff.federated_broadcast(broadcast), client_data))
  aggregate = (aggregation.next(state.aggregator, outputs[UPDATE], outputs[WEIGHT])
               if round_.weighted else aggregation.next(state.aggregator, outputs[UPDATE]))
  return broadcast, outputs, aggregate


def _finalized(round_: Round, merge: tff.Computation, state, broadcast, outputs, aggregate):
  """Inside a federated computation: (the new state, the round's metrics)."""
  server, metrics = tff.federated_map(round_.finalizer, (
      state.server, broadcast, tff.federated_sum(outputs[METRICS]), aggregate.result))
  return (tff.federated_zip(collections.OrderedDict(server=server, aggregator=aggregate.state)),
          tff.federated_map(merge, (metrics, aggregate.measurements)))


def _learning_process(round_: Round) -> tff.learning.templates.LearningProcess:
  """A round without client state or reports, as a tff LearningProcess."""
  aggregation = round_.aggregation_process()
  data_type = round_.client_work.type_signature.parameter[1]
  merge = _merge_computation(round_, aggregation)
  initialize = _federated_initialize(round_, aggregation)
  state_type = initialize.type_signature.result

  @tff.federated_computation(state_type, tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, client_data):
    broadcast, outputs, aggregate = _clients_round(round_, aggregation, round_.client_work,
                                                   state, client_data)
    return tff.learning.templates.LearningProcessOutput(
        *_finalized(round_, merge, state, broadcast, outputs, aggregate))

  get_model_weights, set_model_weights = rounds.model_weights_accessors(
      state_type.member, lambda state: round_.get_model_weights(state['server']),
      lambda state, weights: {'server': round_.set_model_weights(state['server'], weights)})
  return tff.learning.templates.LearningProcess(initialize, next_fn, get_model_weights,
                                                set_model_weights)


def finish_with_reports(round_: Round, server, broadcast, summed, result, measurements,
                        reports: list) -> tuple[Any, collections.OrderedDict]:
  """The finalizer of a round with reports, run by its driver: (server state, metrics)."""
  stacked = tf.nest.map_structure(lambda *r: np.stack(r), *reports)
  server, metrics = round_.finalizer(server, broadcast, summed, result, stacked)
  return server, rounds.with_measurements(metrics, measurements)


class FederatedRunner:
  """A RoundProcess's round as one federated computation on the current TFF
  context (TFF's native runtime, remote workers). Each client's state and
  report come back with its place in the cohort, because TFF's mergeable
  context (remote workers) returns CLIENTS-placed results in the order its
  subrounds finish."""

  def __init__(self, round_: Round):
    self._round = round_
    aggregation = round_.aggregation_process()
    broadcast_type, data_type, *state_type = round_.client_work.type_signature.parameter
    stateful, reports = round_.keeps_client_state, round_.reports
    input_type = tff.StructType([('place', np.int32), ('data', data_type)]
                                + ([('state', state_type[0])] if stateful else []))
    per_client = [k for k in (STATE, REPORT) if k in tff.structure.name_list(round_.output_type)]

    @tff.tensorflow.computation(broadcast_type, input_type)
    def placed_work(broadcast, client):
      output = (round_.client_work(broadcast, client['data'], client['state']) if stateful
                else round_.client_work(broadcast, client['data']))
      sent = collections.OrderedDict((k, output[k]) for k in (UPDATE, WEIGHT, METRICS)
                                     if k in output)
      sent['kept'] = collections.OrderedDict(place=client['place'],
                                             **{k: output[k] for k in per_client})
      return sent

    initialize = _federated_initialize(round_, aggregation)
    merge = None if reports else _merge_computation(round_, aggregation)

    @tff.federated_computation(initialize.type_signature.result,
                               tff.FederatedType(input_type, tff.CLIENTS))
    def next_fn(state, clients):
      broadcast, outputs, aggregate = _clients_round(round_, aggregation, placed_work, state,
                                                     clients)
      if reports:  # the finalizer runs in the driver
        return (aggregate.state, aggregate.result, aggregate.measurements,
                tff.federated_sum(outputs[METRICS]), broadcast, outputs['kept'])
      new_state, metrics = _finalized(round_, merge, state, broadcast, outputs, aggregate)
      return new_state, outputs['kept'], metrics

    self._initialize, self._next = initialize, next_fn

  def initialize(self) -> dict:
    return dict(self._initialize())

  def run(self, state: dict, data: Sequence[Any], client_states: Sequence[Any]):
    """(new {'server', 'aggregator'} state, the clients' new states, metrics)."""
    clients = [collections.OrderedDict(place=np.int32(i), data=d,
                                       **({'state': client_states[i]} if client_states else {}))
               for i, d in enumerate(data)]
    if self._round.reports:
      aggregator, result, measurements, summed, broadcast, kept = self._next(state, clients)
      kept = sorted(kept, key=lambda k: int(k['place']))  # as sent
      server, metrics = finish_with_reports(self._round, state['server'], broadcast, summed,
                                            result, measurements, [k[REPORT] for k in kept])
      new_state = {'server': server, 'aggregator': aggregator}
    else:
      new_state, kept, metrics = self._next(state, clients)
      kept = sorted(kept, key=lambda k: int(k['place']))  # as sent
    return new_state, [k.get(STATE) for k in kept], metrics

  def get_model_weights(self, server):
    return self._round.get_model_weights(server)

  def set_model_weights(self, server, weights):
    return self._round.set_model_weights(server, weights)


class RoundProcess:
  """initialize / next / get_model_weights / set_model_weights, like a
  LearningProcess, of a round whose clients keep state or report one by one.

  The state is {'server': the round's server state, 'aggregator': its
  aggregation's, 'clients': per leaf of one client's state an [N, ...] array}:
  plain arrays, so the trainer's checkpoints hold every client's state and a
  resumed run continues exactly (the cost: N x one client's state of memory
  where the driver runs). Client inputs are (client index in 0..N-1, its data)
  with client state, else its data. The initial client states are arrays, or a
  function making them at each initialize: then only the state holds them, not
  the process too (a third copy beside the round's state and the next one: 244 MB
  at 10^6 users x 64 floats). `runner` runs the round (initialize; run
  (state, client data, client states) -> (state, new client states, metrics);
  the model weights of a server state): by default FederatedRunner;
  runtime.inprocess runs its pieces in this process instead.
  """

  def __init__(self, round_: Round, initial_client_states=None, *, runner=None):
    if round_.keeps_client_state == (initial_client_states is None):
      raise ValueError('a round whose clients keep state needs their initial states, and '
                       'only such a round takes them')
    self.round = round_
    self.initial_client_states = initial_client_states
    self._runner = runner or FederatedRunner(round_)

  def initialize(self) -> dict:
    state = self._runner.initialize()
    initial = self.initial_client_states
    if initial is not None:
      # Read-only views, never copies: N clients' states can be most of the memory
      # (10^6 users x 64 floats), and next() copies before it writes. The caller
      # must not change the arrays it passed in.
      state['clients'] = tf.nest.map_structure(
          _read_only, initial() if callable(initial) else initial)
    return state

  def next(self, state: dict, client_inputs: Sequence[Any]
           ) -> tff.learning.templates.LearningProcessOutput:
    if not client_inputs:
      raise ValueError('a round needs at least one client')
    stateful = self.round.keeps_client_state
    if stateful:
      indices = [int(index) for index, _ in client_inputs]
      if len(set(indices)) != len(indices):
        raise ValueError(f'a client joins a round once; the cohort repeats one of {indices}')
      data = [d for _, d in client_inputs]
      clients = state['clients']
      states = [tf.nest.map_structure(lambda a, i=i: a[i], clients) for i in indices]
    else:
      data, states = list(client_inputs), []
    new_state, new_states, metrics = self._runner.run(
        {'server': state['server'], 'aggregator': state['aggregator']}, data, states)
    new_state = dict(new_state)
    if stateful:  # a new array: the state passed in stays valid (a checkpoint may hold it)
      leaves = [np.array(a, copy=True) for a in tf.nest.flatten(clients)]
      for index, new in zip(indices, new_states):
        for leaf, value in zip(leaves, tf.nest.flatten(new)):
          leaf[index] = value
      new_state['clients'] = tf.nest.pack_sequence_as(
          clients, [_read_only(leaf) for leaf in leaves])
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  def get_model_weights(self, state: dict):
    weights = self._runner.get_model_weights(state['server'])
    if self.round.clients_in_model:
      weights = {**weights, self.round.clients_in_model: state['clients']}
    return weights

  def set_model_weights(self, state: dict, weights) -> dict:
    key = self.round.clients_in_model
    state = dict(state)
    if key:
      state['clients'] = _read_only(np.asarray(weights[key], np.float32))
      weights = {k: v for k, v in weights.items() if k != key}
    state['server'] = self._runner.set_model_weights(state['server'], weights)
    return state


def _read_only(array) -> np.ndarray:
  view = np.asarray(array).view()
  view.flags.writeable = False
  return view


# A LearningProcess compose made -> its round, for with_client_data.
_ROUND_OF = weakref.WeakKeyDictionary()


def compose(round_: Round, initial_client_states=None):
  """The round's process: a tff LearningProcess when no client keeps state and no
  report comes back, else a RoundProcess."""
  if round_.keeps_client_state or round_.reports:
    return RoundProcess(round_, initial_client_states)
  if initial_client_states is not None:
    raise ValueError('initial client states given for a round whose clients keep none')
  process = _learning_process(round_)
  _ROUND_OF[process] = round_
  return process


def round_of(process) -> Round | None:
  """The round a process of `compose` runs (None: not one of the project's rounds)."""
  return process.round if isinstance(process, RoundProcess) else _ROUND_OF.get(process)


def with_client_data(process, client_data: tff.Computation):
  """The process of compose (round_of) whose clients receive what `client_data`
  (a TF computation, run where the client trains) makes their data from, as
  tff.simulation.compose_dataset_computation_with_learning_process does for
  tff.learning's processes (e.g. a client's examples read from a file there)."""
  round_ = round_of(process)
  work = round_.client_work
  broadcast_type, _, *state_type = work.type_signature.parameter
  raw_type = client_data.type_signature.parameter
  if state_type:
    @tff.tensorflow.computation(broadcast_type, raw_type, state_type[0])
    def reading_work(broadcast, raw, state):
      return work(broadcast, client_data(raw), state)
  else:
    @tff.tensorflow.computation(broadcast_type, raw_type)
    def reading_work(broadcast, raw):
      return work(broadcast, client_data(raw))
  reading = dataclasses.replace(round_, client_work=reading_work, lockstep=None,
                                lockstep_refusal='its clients read their examples where they '
                                'train (--client_data_dir), one at a time')
  return compose(reading, getattr(process, 'initial_client_states', None))


def build_process(parts, task, training: api.Training, name: str):
  """The process of a builder's `parts`, its aggregation composed here and by no
  builder: the inner aggregation the user chose (--aggregator), inside the
  method's own factory where its parts have one (rounds.Parts.around), and
  FedSubAvg's correction when stacked: on the rows of a round's named tables
  (rounds.Parts.row_tables), else around the mean of a Keras model's variables.
  `parts`: rounds.Parts, or tff.learning's process as a function of its
  model_aggregator (the slot tff.learning's builders leave to their caller)."""
  clients = training.clients_per_round
  if isinstance(parts, rounds.Parts):
    if training.stack and parts.stack_refusal:
      raise api.NotApplicable(parts.stack_refusal)
    if parts.weighted:
      inner = training.aggregator.mean(clients)
    elif parts.averaged == training.aggregator.averages:
      inner = training.aggregator.unweighted(clients)
    else:
      raise api.NotHonoured(
          f'--algorithm={name}: its round takes the unweighted aggregate as '
          f'{"a mean" if parts.averaged else "a sum"}, and --aggregator='
          f'{training.aggregator.name} gives '
          f'{"a mean" if training.aggregator.averages else "a sum"}: build it with '
          'averaged=training.aggregator.averages')
    if parts.row_tables is not None:
      return compose_parts(parts, inner, row_scales=training.table_scales(parts.row_tables))
    if parts.optimizer is not None:  # a Keras model's round
      return compose_parts(parts, _keras_aggregator(task, training, name, inner))
    if training.stack:
      raise api.NotHonoured(
          f'--algorithm={name} declares --stack={",".join(training.stack)}, and its round '
          'has no server step on named tables to correct (rounds.Parts.optimizer, '
          'row_tables)')
    return compose_parts(parts, inner)
  if callable(parts):
    return parts(_keras_aggregator(task, training, name, training.aggregator.mean(clients)))
  raise TypeError(f'the builder of --algorithm={name} returned {parts!r} as its process: '
                  "return its round's parts (rounds.Parts), or tff.learning's process as a "
                  'function of its model_aggregator, for the registry to compose')


def _keras_aggregator(task, training: api.Training, name: str, inner):
  """`inner` (a weighted mean); around it FedSubAvg's correction when stacked, or (a
  model with declared tables) a FedSubAvgFactory that only reports the tables'
  submodel bytes."""
  scales = training.table_scales()
  tables = api.table_of_variable(task)
  if tables is None:
    if scales is not None:
      raise api.not_applicable(name, task, heat.TABLES_WHY)
    return inner
  if scales is None:
    return fedsubavg.FedSubAvgFactory.measuring_only([t is not None for t in tables],
                                                     inner=inner)
  return fedsubavg.FedSubAvgFactory([None if t is None else scales[t] for t in tables],
                                    inner=inner)
