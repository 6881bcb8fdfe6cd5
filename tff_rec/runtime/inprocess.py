"""A TFF round (a learning process, or an aggregation alone) run in this Python
process, as a MapReduce round.

`next` is compiled with tff.backends.mapreduce.get_map_reduce_form_for_computation
and its TensorFlow pieces run here (tensorflow_runner): prepare on the server
state, work and accumulate over each thread's clients (several clients per TF
call: tensorflow_runner.ClientChain), merge across threads, report, the secure
sums simulated exactly (plain sums of inputs checked against 2^bitwidth - 1 or
the max input, sum mod modulus), then update. This is the production shape of
a TFF round, and here custom op libraries and the GPU are visible, which TFF's
native worker cannot offer.
"""

import collections
import concurrent.futures
import dataclasses
import os
from typing import Any, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec import composer
from tff_rec.algorithms import rounds
from tff_rec.runtime import tensorflow_runner


class NotMapReduceCompatibleError(ValueError):
  pass


def _zip_map(fn, params, values: list):
  """fn(param, stacked leaves of `values`) over the structure of `params`."""
  if isinstance(params, tff.structure.Struct):
    return tff.structure.Struct([
        (name, _zip_map(fn, p, [tff.structure.to_elements(v)[i][1] for v in values]))
        for i, (name, p) in enumerate(tff.structure.to_elements(params))])
  return fn(params, np.stack([np.asarray(v) for v in values]))


def _bitwidth_sum(bitwidth, x):
  # `bitwidth` bounds each input, not the sum (TFF's own test backend: a
  # capped sum with max input 2^bitwidth - 1).
  return _capped_sum((1 << int(bitwidth)) - 1, x)


def _capped_sum(max_input, x):
  if (x < 0).any() or (x > max_input).any():
    raise ValueError(f'federated_secure_sum input outside [0, {max_input}]')
  return x.sum(0).astype(x.dtype)


def _modular_sum(modulus, x):
  return (x.astype(np.int64).sum(0) % int(modulus)).astype(x.dtype)


def _grappler_config() -> tf.compat.v1.ConfigProto:
  """Grappler off while TFF compiles the MapReduceForm and the state's initialization
  (CoLR's secure sum with stored users logged a fetch error there): its pass fails on
  Keras' backward functions inside the dataset loop ("function_optimizer failed:
  ... inputs from different frames") and on computations with no result ("Failed
  to detect the fetch node(s)"), and logs each as an error. Grappler still
  optimizes each graph when its session first runs it; the numbers and round
  times are unchanged (DCN FedAvg, dual encoder: metrics identical, in-process
  s/round within the noise of two pairs of runs)."""
  config = tf.compat.v1.ConfigProto()
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


_GRAPPLER = _grappler_config()


def map_reduce_form(computation: tff.Computation):
  """The computation's MapReduceForm, or an error saying why there is none."""
  try:
    return tff.backends.mapreduce.get_map_reduce_form_for_computation(
        computation, grappler_config=_GRAPPLER)
  except (ValueError, TypeError, NotImplementedError) as e:
    raise NotMapReduceCompatibleError(
        'this computation cannot run in-process: its round is not '
        f'MapReduce-compatible ({type(e).__name__}: {str(e)[:500]}). Use '
        '--runtime=native.') from e


def for_runtime(process, runtime: str):
  """The process as `runtime` runs it: in-process, a tff LearningProcess through
  its MapReduceForm, a composer.RoundProcess (or any of the project's rounds whose
  cohort trains in lockstep: Parallelism.in_lockstep) piece by piece (RoundRunner);
  natively (and on remote workers), as it is."""
  if runtime != 'inprocess':
    return process
  round_ = composer.round_of(process)
  lockstep = parallelism().in_lockstep(round_)
  if isinstance(process, composer.RoundProcess) or lockstep:
    return composer.RoundProcess(round_, getattr(process, 'initial_client_states', None),
                                 runner=RoundRunner(round_, lockstep=lockstep))
  if isinstance(process, tff.learning.templates.LearningProcess):
    return InProcessLearningProcess(process)
  raise TypeError(f'no in-process form of {type(process).__name__}')


def _shards(items: Sequence[Any], threads: int) -> list[Sequence[Any]]:
  """Each thread's items, every threads-th from its index; none left empty."""
  return [items[i::threads] for i in range(min(threads, len(items)))]


# Clients whose work one TF call runs: enough to spread a call's fixed cost (on
# DCN at MetaUA's setting, 94 clients: 1.57 s/round at 1, 1.16 at 8, 1.37 at 16),
# and no more than that many clients' memory (tensorflow_runner.memory_bytes)
# fits in CALL_BYTES.
MAX_CLIENTS_PER_CALL = 8
CALL_BYTES = 1 << 29


def default_clients_per_call(work: tff.Computation) -> int:
  """How many clients of `work` one TF call runs."""
  per_client = tensorflow_runner.memory_bytes(work)
  return max(1, min(MAX_CLIENTS_PER_CALL, CALL_BYTES // max(per_client, 1)))


LOCKSTEP = ('auto', 'on', 'off')


@dataclasses.dataclass(frozen=True)
class Parallelism:
  """How in-process rounds spread a cohort: `threads` shards of clients run at once
  (default: one per core), `clients_per_call` clients per TF call (default:
  default_clients_per_call); `lockstep`: a round's clients trained as one
  computation where its algorithm has that form (training.lockstep.Lockstep): 'auto' (the
  default) where that form is the faster (Lockstep.auto), 'on' wherever it has
  one, refusing a round that has not, 'off' never. As a context manager, like
  TFF's execution contexts: the in-process rounds built inside it use it."""
  threads: int | None = None
  clients_per_call: int | None = None
  lockstep: str | None = None

  def __post_init__(self):
    for name, value in self._counts().items():
      if value is not None and value < 1:
        raise ValueError(f'{name} must be >= 1, got {value}')
    if self.lockstep not in (None, *LOCKSTEP):
      raise ValueError(f'lockstep must be one of {LOCKSTEP}, got {self.lockstep!r}')

  def _counts(self) -> dict[str, int | None]:
    return {'threads': self.threads, 'clients_per_call': self.clients_per_call}

  def check_cohort(self, clients_per_round: int) -> None:
    """Refuses settings that a cohort of `clients_per_round` cannot fill."""
    for name, value in self._counts().items():
      if value is not None and value > clients_per_round:
        raise ValueError(f'{name}={value} is more than the {clients_per_round} clients '
                         f'per round; use at most {clients_per_round}')

  def __enter__(self) -> 'Parallelism':
    _PARALLELISM.append(self)
    return self

  def __exit__(self, *unused_exc) -> None:
    _PARALLELISM.remove(self)

  def thread_count(self) -> int:
    return self.threads or os.cpu_count() or 1

  def chunk(self, work: tff.Computation) -> int:
    return self.clients_per_call or default_clients_per_call(work)

  def in_lockstep(self, round_: composer.Round | None) -> bool:
    """Whether `round_`'s clients (None: tff.learning's process's) train in lockstep;
    LockstepRefused for 'on' where they cannot, naming why."""
    mode = self.lockstep or 'auto'
    if mode == 'on' and (round_ is None or round_.lockstep is None):
      raise LockstepRefused('--lockstep=on: ' + (
          round_.lockstep_refusal if round_ else
          "tff.learning's process trains its clients one by one"))
    return (round_ is not None and round_.lockstep is not None
            and (mode == 'on' or mode == 'auto' and round_.lockstep.auto))


class LockstepRefused(ValueError):
  """--lockstep=on for a round whose clients cannot train in lockstep."""


_PARALLELISM = [Parallelism()]


def parallelism(threads: int | None = None, clients_per_call: int | None = None) -> Parallelism:
  """The settings given, else those of the innermost open Parallelism."""
  current = _PARALLELISM[-1]
  return dataclasses.replace(
      current, threads=current.threads if threads is None else threads,
      clients_per_call=current.clients_per_call if clients_per_call is None else clients_per_call)


class InProcessRound:
  """initialize / next of a MapReduce-compatible federated round, in-process:
  next(state at SERVER, client data at CLIENTS) -> its result as a Python container."""

  def __init__(self, initialize: tff.Computation, next_fn: tff.Computation, *,
               threads: int | None = None, clients_per_call: int | None = None):
    settings = parallelism(threads, clients_per_call)
    form = map_reduce_form(next_fn)
    self._threads = settings.thread_count()
    self._result_type = next_fn.type_signature.result
    run = tensorflow_runner.TensorFlowRunner
    self._initialize = run(tff.backends.mapreduce.get_state_initialization_computation(
        initialize, grappler_config=_GRAPPLER))
    self._prepare = run(form.prepare)
    self._zero = run(form.zero, sessions=self._threads)
    self._clients = tensorflow_runner.ClientChain(
        form.work, form.accumulate, sessions=self._threads,
        clients_per_call=settings.chunk(form.work))
    self._merge = run(form.merge)
    self._report = run(form.report)
    self._update = run(form.update)
    self._bitwidth = run(form.secure_sum_bitwidth)(as_python=False)
    self._max_input = run(form.secure_sum_max_input)(as_python=False)
    self._modulus = run(form.secure_modular_sum_modulus)(as_python=False)
    self._pool = concurrent.futures.ThreadPoolExecutor(self._threads)

  def initialize(self):
    return self._initialize()

  def _shard(self, clients: Sequence[Any], client_input):
    """Work and accumulate over one thread's clients, in order."""
    return self._clients(self._zero(as_python=False), client_input, clients)

  def next(self, state, client_data: Sequence[Any]):
    if not client_data:
      raise ValueError('a round needs at least one client')
    client_input = self._prepare(state, as_python=False)
    results = list(self._pool.map(lambda s: self._shard(s, client_input),
                                  _shards(client_data, self._threads)))
    merged = results[0][0]
    for accumulator, _ in results[1:]:
      merged = self._merge([merged, accumulator], as_python=False)
    aggregate = self._report(merged, as_python=False)
    secure = [s for _, shard in results for s in shard]
    output = self._update([state, [aggregate, *self._secure_sums(secure)]],
                          as_python=False)
    return tff.types.type_to_py_container(output, self._result_type)

  def _secure_sums(self, secure: list[list[Any]]) -> list[Any]:
    """The three secure sums over the clients' inputs, computed exactly."""
    return [_zip_map(reduce, params, [client[i] for client in secure])
            for i, (reduce, params) in enumerate((
                (_bitwidth_sum, self._bitwidth), (_capped_sum, self._max_input),
                (_modular_sum, self._modulus)))]

  def close(self) -> None:
    self._pool.shutdown()


class InProcessLearningProcess(InProcessRound):
  """initialize / next / get_model_weights of a LearningProcess, in-process."""

  def __init__(self, process: tff.learning.templates.LearningProcess, *,
               threads: int | None = None):
    super().__init__(process.initialize, process.next, threads=threads)
    self._get_model_weights = tensorflow_runner.TensorFlowRunner(process.get_model_weights)

  def get_model_weights(self, state):
    return self._get_model_weights(state)


class SummedClients:
  """A cohort's client work in-process, for rounds that need each client's own
  output: work(client data, shared input) -> (a part summed over the cohort, a part
  each client returns). Each core's clients run several per TF call (ClientChain),
  their summed parts added in that graph, the cores' sums then added in order.
  A call gives (the sum, [each client's part]) as Python containers."""

  def __init__(self, work: tff.Computation, *, threads: int | None = None):
    settings = parallelism(threads)
    self._threads = settings.thread_count()
    self._summed_type, self._kept_type = work.type_signature.result

    @tff.tensorflow.computation(self._summed_type, self._summed_type)
    def add(a, b):
      return tf.nest.map_structure(tf.add, a, b)

    self._chain = tensorflow_runner.ClientChain(
        work, add, sessions=self._threads, clients_per_call=settings.chunk(work))
    self._zero = tf.nest.map_structure(
        lambda spec: np.zeros(spec.shape, spec.dtype.as_numpy_dtype),
        tff.types.type_to_tf_tensor_specs(self._summed_type))
    self._pool = concurrent.futures.ThreadPoolExecutor(self._threads)

  def __call__(self, shared, client_data: Sequence[Any]):
    results = list(self._pool.map(lambda shard: self._chain(self._zero, shared, shard),
                                  _shards(client_data, self._threads)))
    summed = None
    kept = [None] * len(client_data)
    for i, (shard_sum, shard_kept) in enumerate(results):
      shard_sum = tff.types.type_to_py_container(shard_sum, self._summed_type)
      summed = shard_sum if summed is None else tf.nest.map_structure(np.add, summed,
                                                                      shard_sum)
      kept[i::self._threads] = [tff.types.type_to_py_container(k[0], self._kept_type)
                                for k in shard_kept]
    return summed, kept


def _plain(aggregator) -> bool:
  return type(aggregator) is tff.aggregators.SumFactory  # pylint: disable=unidiomatic-typecheck


def _aggregation_round(round_: composer.Round) -> InProcessRound | None:
  """The round's aggregation alone as a MapReduce round run in-process (TFF's
  secure sums simulated exactly, DP's clipping and noise as TFF computes them);
  None for TFF's plain sum, which the clients' chain sums itself."""
  if _plain(round_.aggregator):
    return None
  aggregation = round_.aggregation_process()
  output = round_.output_type

  @tff.federated_computation
  def initialize():
    return aggregation.initialize()

  if round_.weighted:
    @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(
        tff.StructType([output[rounds.UPDATE], output[rounds.WEIGHT]]), tff.CLIENTS))
    def next_fn(state, values):
      result = aggregation.next(state, values[0], values[1])
      return result.state, tff.federated_zip((result.result, result.measurements))
  else:
    @tff.federated_computation(initialize.type_signature.result,
                               tff.FederatedType(output[rounds.UPDATE], tff.CLIENTS))
    def next_fn(state, values):
      result = aggregation.next(state, values)
      return result.state, tff.federated_zip((result.result, result.measurements))

  return InProcessRound(initialize, next_fn)


def _summed_keys(round_: composer.Round) -> tuple[str, ...]:
  """What of a client's output the cohort sums where it runs: the metrics, and the
  update under a plain sum."""
  return (rounds.METRICS, rounds.UPDATE) if _plain(round_.aggregator) else (rounds.METRICS,)


def _summed_client_work(round_: composer.Round) -> tff.Computation:
  """The round's client work as SummedClients runs it: (client, broadcast) ->
  (what is summed: the metrics, and the update under a plain sum; what each
  client returns: its state and report, and its update and weight otherwise).
  A client is (data, state), or its data."""
  parameters = round_.client_work.type_signature.parameter
  broadcast_type, stateful = parameters[0], round_.keeps_client_state
  client_type = tff.StructType([parameters[1], parameters[2]]) if stateful else parameters[1]
  summed = _summed_keys(round_)

  @tff.tensorflow.computation(client_type, broadcast_type)
  def work(client, broadcast):
    output = (round_.client_work(broadcast, client[0], client[1]) if stateful
              else round_.client_work(broadcast, client))
    return (collections.OrderedDict((k, output[k]) for k in summed),
            collections.OrderedDict((k, v) for k, v in output.items() if k not in summed))

  return work


class LockstepClients:
  """A cohort's client work as its round's lockstep computation (training.lockstep.Lockstep),
  longest clients first, in groups whose clients' memory fits LOCKSTEP_BYTES: (the
  summed part, each client's part in cohort order) as SummedClients gives them,
  summed over the clients in the graph."""

  def __init__(self, round_: composer.Round):
    lockstep = round_.lockstep
    summed = _summed_keys(round_)
    broadcast_type = round_.client_work.type_signature.parameter[0]

    side_by_side = lockstep.work()

    @tff.tensorflow.computation(side_by_side.type_signature.parameter[1], broadcast_type)
    def work(stacked, broadcast):
      output = side_by_side(broadcast, stacked)
      return (collections.OrderedDict(
          (k, tf.nest.map_structure(lambda t: tf.reduce_sum(t, 0), output[k])) for k in summed),
              collections.OrderedDict((k, v) for k, v in output.items() if k not in summed))

    self._lockstep, self._work = lockstep, tensorflow_runner.TensorFlowRunner(work)
    self._group = max(1, LOCKSTEP_BYTES // max(lockstep.client_bytes, 1))

  def __call__(self, broadcast, data: Sequence[Any], states: Sequence[Any]):
    order = sorted(range(len(data)), key=lambda i: -self._lockstep.size(data[i]))
    summed, kept = None, [None] * len(data)
    for start in range(0, len(order), self._group):
      group = order[start:start + self._group]
      group_sum, group_kept = self._work([self._lockstep.stack(
          [data[i] for i in group], [states[i] for i in group] if states else []), broadcast])
      summed = group_sum if summed is None else tf.nest.map_structure(np.add, summed, group_sum)
      for place, i in enumerate(group):
        kept[i] = tf.nest.map_structure(lambda leaf, p=place: leaf[p], group_kept)
    return summed, kept


# What a lockstep group's clients may take together (training.lockstep.Lockstep.client_bytes).
LOCKSTEP_BYTES = 1 << 30


class RoundRunner:
  """A composer.RoundProcess's round in this process, piece by piece: the
  distributor and finalizer here, the cohort's client work several clients per
  TF call (SummedClients) or, `lockstep`, as one computation (LockstepClients),
  the aggregation as its own MapReduce round."""

  def __init__(self, round_: composer.Round, *, lockstep: bool = False):
    run = tensorflow_runner.TensorFlowRunner
    self._round = round_
    self._initialize, self._distributor = run(round_.initialize), run(round_.distributor)
    self._finalizer = None if round_.reports else run(round_.finalizer)
    self._get, self._set = run(round_.get_model_weights), run(round_.set_model_weights)
    self._aggregation = _aggregation_round(round_)
    self._lockstep = LockstepClients(round_) if lockstep else None
    self._clients = None if lockstep else SummedClients(_summed_client_work(round_))

  def initialize(self):
    return {'server': self._initialize(),
            'aggregator': self._aggregation.initialize() if self._aggregation else ()}

  def run(self, state, data: Sequence[Any], client_states: Sequence[Any]):
    broadcast = self._distributor(state['server'])
    if self._lockstep:
      summed, kept = self._lockstep(broadcast, data, client_states)
    else:
      summed, kept = self._clients(
          broadcast, list(zip(data, client_states)) if client_states else list(data))
    if self._aggregation:
      values = [(k[rounds.UPDATE], k[rounds.WEIGHT]) if self._round.weighted
                else k[rounds.UPDATE] for k in kept]
      aggregator, (result, measurements) = self._aggregation.next(state['aggregator'], values)
    else:
      aggregator, result, measurements = (), summed[rounds.UPDATE], ()
    if self._round.reports:
      server, metrics = composer.finish_with_reports(
          self._round, state['server'], broadcast, summed[rounds.METRICS], result,
          measurements, [k[rounds.REPORT] for k in kept])
    else:
      server, metrics = self._finalizer([state['server'], broadcast, summed[rounds.METRICS],
                                         result])
      metrics = rounds.with_measurements(metrics, measurements)
    return ({'server': server, 'aggregator': aggregator}, [k.get(rounds.STATE) for k in kept],
            metrics)

  def get_model_weights(self, server):
    return self._get(server)

  def set_model_weights(self, server, weights):
    return self._set([server, weights])
