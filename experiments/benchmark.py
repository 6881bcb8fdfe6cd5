r"""Benchmarks that print ratios measured in one run (never timed unit tests).

  python -m launch.benchmark --what=op,round --output=results/benchmarks.md

op:    hashed embedding lookup forward+backward, custom op vs pure-TF
       composite: 32k ids, dim 16, memory sizes 1e4..1e7, CPU. Time per step
       and peak resident memory (each case in a fresh process), plus the
       largest intermediate tensor of each graph: the op must never build a
       [ids, dim] index tensor.
round: one FedAvg round of the dual encoder on ML-100K (50 clients, batch
       16, 1 epoch) on the native and in-process runtimes with the same
       cohorts, against the floor: the same examples trained sequentially in
       one tf.function. Both runtimes use our iterator client loop; native
       is also timed with TFF's default Dataset.reduce loop.
runtimes: rounds of the papers' workloads (issue 16's table: FedMF at CoLR's
       setting, DCN FedAvg / MetaUA / FedNova at MetaUA's, FedSubAvg LR, FAIR
       1x-2x, the dual encoder), each built by the registry as the trainer
       builds it, timed on the native and in-process runtimes with the same
       cohorts (not in the default list: about 5 minutes).
fair_round: FAIR 1x-2x-4x-8x rounds (10 clients) on both runtimes, each in a
       fresh process: round time and the peak memory of the trainer and its
       TFF worker. With --synthetic_items=1351679 (and client_memory): a table
       of AmazonProduct-100's size.
remote: rounds of three workloads on the native runtime and on TFF workers
       (launch.worker) on loopback, 1 and 2 of them: clients per second and
       the per-round overhead of going remote.
client_bytes: what a round hands the workers for its cohort, the clients'
       examples against their index and seed with --client_data_dir (the
       workers read the examples), for FedSubAvg LR and DCN FedAvg on one
       loopback worker, and whether both end with the same weights.
eval_memory: DIN (the CTR task's defaults otherwise) on MovieLens-100K, on Amazon
       Beauty's interactions as DIN's clicks and on a synthetic headerless DIN
       file whose histories grow to 229 items, 3 rounds then the task's
       evaluation, on both runtimes, each in a fresh process: the peak resident
       memory (trainer + its TFF worker) while training and while evaluating.
population: FedMF with stored users and CoLR r=4 on synthetic populations
       of 10^4 and 10^6 users (power-law interaction counts over a 10^5-item
       catalogue, seeded), 1,000 clients a round, on the in-process runtime,
       each in a fresh process: seconds per round, and the resident memory at
       its peak while the data are read, once built and at its peak in the rounds.
population_memory: the same populations' ranking task built in a fresh process
       per size: the resident memory while reading and splitting, once built,
       and once glibc returned its freed heap; what the task's arrays hold.
soak: --soak_rounds rounds (1,000) of FedMF (in-process), FAIR 1x-2x (both
       runtimes) and DCN FedAvg (native), each in a fresh process through the
       runner as launch.train runs them: the resident memory of the trainer and
       its TFF worker every 50 rounds, and its slope over the last half;
       --soak_worker_growth_limit_mb bounds the native worker's growth.
record_memory: no run: every committed cell record of 1,000 rounds or more
       (results/*/cells), the slope of the trainer's and TFF worker's resident
       memory over its last half, by results folder and runtime.
native_start: the native runtime (a TFF worker binary on a free port) started and
       closed 5 times in this process: seconds each. A start that waits out
       gRPC's first reconnect backoff takes about 1 s; the binary needs 0.05 s.
lazy_adam: FAIR 1x-2x on Goodreads-100 (10 clients, in-process), dense Adam
       against lazy_adam (rows and hashed slots a step read, moved in place),
       alternated twice in one run: seconds per round and their ratio.
study:  the guide's study (docs/studies/ml100k_ctr.toml), its 60 rounds, 2 seeds, run
       by launch.study with one cell at a time and two: the study's time beyond
       its cells' runs, the ratio of the two, and whether both give one table.
client_memory: one Goodreads-100 client's training (FAIR's client step: a
       tier's item tables, NeuMF, fresh Adam, 1 epoch) at capacities 1x..16x,
       each in a fresh process that holds only that tier: the item tables'
       floats against the measured peak resident memory growth while training.
"""

import collections
import contextlib
import ctypes
import dataclasses
import gc
import json
import math
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
import numpy as np
import pandas as pd
import tensorflow as tf

from experiments import synthetic

flags.DEFINE_string('output', None, 'Also write the markdown report here.')
flags.DEFINE_string('data_dir', '../shared/data/ml-100k', 'MovieLens 100K.')
flags.DEFINE_integer('rounds', 5, 'Timed rounds per runtime (after 1 warm-up).')
flags.DEFINE_integer('clients_per_round', 50, 'Cohort size.')
flags.DEFINE_string('goodreads_dir', '../shared/data/goodreads-100', 'Goodreads-100.')
flags.DEFINE_multi_enum('eval_memory_data', ['movielens', 'beauty', 'long_histories'],
                        ['movielens', 'beauty', 'long_histories'],
                        'eval_memory: the data (long_histories: a synthetic DIN file, '
                        'histories to 229 items).')
flags.DEFINE_string('beauty_sequences', '../shared/data/amazon-beauty/Beauty.txt',
                    "eval_memory: Amazon Beauty's sequence file (DIN's clicks are drawn from it).")
flags.DEFINE_integer('synthetic_items', None, 'client_memory and fair_round: instead of '
                     'Goodreads-100, synthetic user-item lists over this many items (e.g. '
                     "1351679, FAIR's AmazonProduct-100), written to --synthetic_dir.",
                     lower_bound=2)
flags.DEFINE_string('synthetic_dir', '/tmp/tff_rec_synthetic', 'Where synthetic data go.')
flags.DEFINE_multi_string('workload', None, 'runtimes and client_bytes: only the workloads whose '
                          'name contains one of these (e.g. --workload=DCN); default all.')
flags.DEFINE_integer('soak_rounds', 1000, 'soak: rounds of each workload (at least 200: '
                     'two samples in the last half).', lower_bound=200)
flags.DEFINE_multi_string('soak', None, 'soak: only the workloads whose name contains one '
                          'of these.')
flags.DEFINE_float('soak_worker_growth_limit_mb', None, "soak: the native runtime's bound on "
                   "its TFF worker's growth (launch.train's --worker_growth_limit_mb); "
                   'default: none, to see the worker as TFF leaves it.', lower_bound=0)
flags.DEFINE_multi_string('population', None, 'population: only the algorithms whose name '
                          'contains one of these (e.g. --population=CoLR).')
flags.DEFINE_integer('population_sittings', 1, 'population: run the sizes this many times '
                     'in turn (10^4, 10^6, 10^4, ...); each 10^6 case is compared with the '
                     '10^4 case just before it (this machine is shared: its speed drifts).',
                     lower_bound=1)
flags.DEFINE_string('records_dir', 'results', 'record_memory: the committed results.')
flags.DEFINE_string('_case', None, 'Internal: run one case in this process, print JSON.')

FLAGS = flags.FLAGS
NUM_IDS, DIM = 32768, 16
MEMORY_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)


def _largest_intermediate_bytes(function, *args) -> int:
  """The biggest statically shaped tensor any op of the traced graph produces."""
  graph = function.get_concrete_function(*args).graph
  largest = 0
  for op in graph.get_operations():
    for t in op.outputs:
      if t.shape.is_fully_defined() and t.dtype != tf.resource and t.dtype != tf.variant:
        largest = max(largest, t.shape.num_elements() * t.dtype.size)
  return largest


def _op_case(impl: str, memory_size: int) -> dict:
  from tff_rec.ops import hashed_embedding  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  memory = tf.Variable(rng.normal(size=memory_size).astype(np.float32))
  ids = tf.constant(rng.integers(0, 1_000_000, size=NUM_IDS), tf.int64)
  weights = tf.constant(rng.normal(size=(NUM_IDS, DIM)).astype(np.float32))

  @tf.function
  def step(ids):
    with tf.GradientTape() as tape:
      out = hashed_embedding.hashed_embedding_lookup(memory, ids, dim=DIM, seed=1, impl=impl)
      loss = tf.reduce_sum(out * weights)
    return tf.convert_to_tensor(tape.gradient(loss, memory))

  step(ids)  # trace and warm up
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  repeats = 20
  started = time.perf_counter()
  for _ in range(repeats):
    step(ids).numpy()
  seconds = (time.perf_counter() - started) / repeats
  peak_growth_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
  return {'ms': 1000 * seconds, 'peak_growth_mb': peak_growth_kb / 1024,
          'largest_mb': _largest_intermediate_bytes(step, ids) / 2**20}


def _in_fresh_process(case: str) -> dict:
  done = subprocess.run([sys.executable, '-m', 'launch.benchmark', f'--_case={case}',
                         f'--goodreads_dir={_goodreads_dir()}', f'--data_dir={FLAGS.data_dir}',
                         f'--beauty_sequences={FLAGS.beauty_sequences}',
                         f'--synthetic_dir={FLAGS.synthetic_dir}', f'--rounds={FLAGS.rounds}',
                         f'--soak_rounds={FLAGS.soak_rounds}',
                         *([f'--soak_worker_growth_limit_mb={FLAGS.soak_worker_growth_limit_mb}']
                           if FLAGS.soak_worker_growth_limit_mb is not None else [])],
                        stdout=subprocess.PIPE, text=True, check=True)  # its progress: stderr
  return json.loads(done.stdout.strip().splitlines()[-1])


SYNTHETIC_USERS, SYNTHETIC_TRAIN, SYNTHETIC_TEST = 200, 40, 10


def _goodreads_dir() -> str:
  """Goodreads-100, or (--synthetic_items) user-item lists drawn uniformly from
  that many items, the last item in one list so the catalogue has them all."""
  if not FLAGS.synthetic_items:
    return FLAGS.goodreads_dir
  root = pathlib.Path(FLAGS.synthetic_dir) / f'items_{FLAGS.synthetic_items}'
  if not (root / 'test.txt').exists():
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    lists = [rng.choice(FLAGS.synthetic_items, SYNTHETIC_TRAIN + SYNTHETIC_TEST, replace=False)
             for _ in range(SYNTHETIC_USERS)]
    lists[0][0] = FLAGS.synthetic_items - 1
    for name, part in (('train.txt', slice(0, SYNTHETIC_TRAIN)),
                       ('test.txt', slice(SYNTHETIC_TRAIN, None))):
      (root / name).write_text(''.join(f'{u} {" ".join(map(str, items[part]))}\n'
                                       for u, items in enumerate(lists)))
  return str(root)


def bench_op() -> str:
  lines = ['| memory m | op ms | composite ms | speed-up | op largest tensor MB | '
           'composite largest tensor MB | op peak RSS growth MB | composite peak RSS growth MB |',
           '|---|---|---|---|---|---|---|---|']
  for m in MEMORY_SIZES:
    r = {}
    for impl in ('op', 'composite'):
      r[impl] = _in_fresh_process(f'op:{impl}:{m}')
    lines.append(f'| {m:,} | {r["op"]["ms"]:.2f} | {r["composite"]["ms"]:.2f} | '
                 f'{r["composite"]["ms"] / r["op"]["ms"]:.1f}x | '
                 f'{r["op"]["largest_mb"]:.1f} | {r["composite"]["largest_mb"]:.1f} | '
                 f'{r["op"]["peak_growth_mb"]:.0f} | {r["composite"]["peak_growth_mb"]:.0f} |')
    print(lines[-1], flush=True)
  return '\n'.join(lines)


def _seconds_per_round(process, cohorts) -> float:
  """Mean seconds of a round over cohorts[1:], after cohorts[0] as a warm-up (the
  round benchmark's hand-built processes; registered workloads run through
  `_run_rounds`, as the trainer runs them)."""
  state = process.initialize()
  state = process.next(state, cohorts[0]).state
  started = time.perf_counter()
  for cohort in cohorts[1:]:
    state = process.next(state, cohort).state
  return (time.perf_counter() - started) / (len(cohorts) - 1)


# name: (task, task settings, algorithm, clients per round, trainer settings, options)
_DCN = dict(model='dcn', embedding_dim=4, batch_size=15, local_epochs=3)
RUNTIME_WORKLOADS = {
    'FedMF d=64, 2 epochs, batch 256 (CoLR)': (
        'loo_ranking', dict(embedding_dim=64), 'fedmf', 60, {}, {}),
    'FedMF d=64, reconstructed users (CoLR)': (
        'loo_ranking', dict(embedding_dim=64), 'fedmf', 60, {}, dict(user_state='reconstructed')),
    'Keras MF d=64, FedProx (leave-one-out)': (
        'loo_ranking', dict(embedding_dim=64), 'fedprox', 60, {}, {}),
    'DCN FedAvg, 3 epochs, batch 15 (MetaUA)': (
        'ctr', _DCN, 'fedavg', 94, dict(client_learning_rate=0.01), {}),
    # the trainer's default meta loss (the target: within 1.3x of DCN FedAvg)
    'DCN MetaUA': ('ctr', _DCN, 'metaua', 94, dict(client_learning_rate=0.01), {}),
    'DCN FedNova': ('ctr', _DCN, 'fednova', 94, dict(client_learning_rate=0.01), {}),
    'FedSubAvg LR': ('ctr', dict(model='lr'), 'fedsubavg', 50, {}, {}),
    'FAIR 1x-2x, Goodreads-100': ('ranking', {}, 'fair', 10, {},
                                  dict(capacities='1x-2x')),
    'dual encoder FedAvg': ('next_item', {}, 'fedavg', 50, {}, {}),
}


FLOOR_TASKS = ('ctr', 'next_item')  # Keras models _client_batches reads


def _client_batches(task, client: str, seed: int) -> list:
  """A client's training batches of a Keras task (click models, next item), as its
  clients take them (task.client_batches), each an (x, y) of numpy arrays."""
  batches = task.client_batches(client, seed)
  return [tf.nest.map_structure(np.asarray, batches.batch(s))
          for s in range(int(batches.steps()))]


def _cohorts(ids, clients: int) -> list[list[str]]:
  """The cohorts of the rounds `_run_rounds` runs (the round loop's, seed 0)."""
  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  return [loop.sample_cohort(sorted(ids), clients, seed=0, round_num=r)
          for r in range(1, FLAGS.rounds + 2)]


def _floor_seconds(task, clients: int) -> float:
  """The floor of a Keras workload: mean seconds per round of the cohort's batches
  (built beforehand), trained one after the other by one tf.function SGD step on
  one Keras model: no TFF, no data pipeline, no per-client reset, one core."""
  model, loss_fn = task.keras_model(), task.loss()

  @tf.function(reduce_retracing=True)
  def step(x, y):
    with tf.GradientTape() as tape:
      loss = loss_fn(y, model(x, training=True))
    for variable, gradient in zip(model.trainable_variables,
                                  tape.gradient(loss, model.trainable_variables)):
      variable.assign_sub(0.01 * tf.convert_to_tensor(gradient))

  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  rounds = [[b for c in cohort for b in _client_batches(task, c, loop.client_seed(0, r, c))]
            for r, cohort in enumerate(_cohorts(task.train_client_ids, clients), start=1)]
  for batch in rounds[0]:
    step(*batch)
  started = time.perf_counter()
  for batches in rounds[1:]:
    for batch in batches:
      step(*batch)
  return (time.perf_counter() - started) / (len(rounds) - 1)


def _task(task_name: str, settings: dict):
  import tasks  # pylint: disable=g-import-not-at-top
  module = tasks.module(task_name)
  data_dir = FLAGS.goodreads_dir if task_name == 'ranking' else FLAGS.data_dir
  return module.Task(module.make_config(**{'data_dir': data_dir, **settings}))


@dataclasses.dataclass(frozen=True)
class _Rounds:
  seconds: float  # median train/round_seconds of the rounds after the first (a warm-up)
  built: object  # registry.Built
  state: object  # the process state after the last round
  metrics: list  # each round's metrics


def _run_rounds(task, runtime: str, algorithm: str, clients: int, trainer: dict,
                options: dict, *, context=None, client_data_dir=None,
                on_start=None) -> _Rounds:
  """FLAGS.rounds + 1 rounds of a workload, never evaluated, run as the trainer
  runs them (runner.run: its build, runtime and round loop; a round's seconds
  include making its clients' inputs)."""
  from tff_rec import runner  # pylint: disable=g-import-not-at-top
  from tff_rec import registry  # pylint: disable=g-import-not-at-top
  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  training = registry.training(task, algorithm, runtime=runtime, clients_per_round=clients,
                               **trainer)
  rounds, started = [], []

  def start(run):
    started.append(run)
    if on_start:
      on_start(run)

  state, _ = runner.run(
      task, algorithm, training, loop.Schedule(FLAGS.rounds + 1, clients, eval_every=None),
      options=options, context=context, client_data_dir=client_data_dir, on_start=start,
      on_round=lambda _, metrics: rounds.append(dict(metrics)))
  return _Rounds(float(np.median([m['train/round_seconds'] for m in rounds[1:]])),
                 started[0].built, state, rounds)


def _chosen(names) -> list[str]:
  """The workloads --workload names (a part of their name), by default all."""
  return [name for name in names if not FLAGS.workload or any(w in name for w in FLAGS.workload)]


def _lockstep_seconds(task, algorithm: str, clients: int, trainer: dict, options: dict
                      ) -> float | None:
  """In-process seconds a round with the cohort in lockstep; None where the
  workload's round has no lockstep form (--lockstep=on refuses it)."""
  from tff_rec.runtime import inprocess  # pylint: disable=g-import-not-at-top
  try:
    return _run_rounds(task, 'inprocess', algorithm, clients, trainer, options,
                       context=inprocess.Parallelism(lockstep='on')).seconds
  except inprocess.LockstepRefused:
    return None


def _rounds_memory_case(workload: int, lockstep: str) -> dict:
  """RUNTIME_WORKLOADS' `workload`-th in-process with --lockstep=`lockstep`, in this
  (fresh) process: the peak resident memory while its rounds run, beside what the
  process held when they began (built, before round 1)."""
  from tff_rec.runtime import inprocess  # pylint: disable=g-import-not-at-top
  task_name, settings, algorithm, clients, trainer, options = list(
      RUNTIME_WORKLOADS.values())[workload]
  task = _task(task_name, settings)
  with _PeakRss(0.005) as peak:
    def start(_):
      peak.begin('rounds')
    _run_rounds(task, 'inprocess', algorithm, clients, trainer, options,
                context=inprocess.Parallelism(lockstep=lockstep), on_start=start)
  return {'start_mb': peak.start / 2**20, 'peak_mb': peak.peaks['rounds'] / 2**20}


def bench_runtimes() -> str:
  from tff_rec.runtime import inprocess  # pylint: disable=g-import-not-at-top
  lines = ['| workload | clients | native s/round | in-process s/round | in-process lockstep '
           's/round | floor s/round | in-process / native | in-process / lockstep | '
           'in-process / floor | rounds\' peak MB above their start, in-process / lockstep |',
           '|---|---|---|---|---|---|---|---|---|---|']
  floors = {}
  chosen = {name: RUNTIME_WORKLOADS[name] for name in _chosen(RUNTIME_WORKLOADS)}
  if not chosen:
    raise app.UsageError(f'--workload={",".join(FLAGS.workload)} matches no workload of '
                         f'{list(RUNTIME_WORKLOADS)}')
  for name, (task_name, settings, algorithm, clients, trainer, options) in chosen.items():
    task = _task(task_name, settings)
    native = _run_rounds(task, 'native', algorithm, clients, trainer, options).seconds
    sequential = _run_rounds(task, 'inprocess', algorithm, clients, trainer, options,
                             context=inprocess.Parallelism(lockstep='off')).seconds
    lockstep = _lockstep_seconds(task, algorithm, clients, trainer, options)
    # The same examples whatever the algorithm: one floor per task and cohort size.
    floor_key = (task_name, tuple(sorted(settings.items())), clients)
    if floor_key not in floors:
      floors[floor_key] = (_floor_seconds(task, clients) if task_name in FLOOR_TASKS
                           else None)
    floor = floors[floor_key]
    memory = '-'
    if lockstep:  # each in a fresh process: its peak is its rounds'
      index = list(RUNTIME_WORKLOADS).index(name)
      memory = ' / '.join(
          f'{r["peak_mb"] - r["start_mb"]:.0f}' for r in (
              _in_fresh_process(f'rounds_memory:{index}:{mode}') for mode in ('off', 'on')))
    lines.append(f'| {name} | {clients} | {native:.3f} | {sequential:.3f} | '
                 + (f'{lockstep:.3f}' if lockstep else 'no lockstep form') + ' | '
                 + (f'{floor:.3f}' if floor else 'not measured') + ' | '
                 f'{sequential / native:.2f} | '
                 + (f'{sequential / lockstep:.2f}' if lockstep else '-') + ' | '
                 + (f'{sequential / floor:.2f}' if floor else '-') + f' | {memory} |')
    print(lines[-1], flush=True)
  return (f'Median of {FLAGS.rounds} rounds after a warm-up, the same cohorts on every '
          'runtime, run through the trainer\'s own path (runner.run: its build, runtime and '
          'round loop; train/round_seconds, which includes making its clients\' inputs), '
          f'{os.cpu_count()} CPU cores. In-process: client by client (--lockstep=off) and '
          'with the cohort in lockstep (--lockstep=on), where the workload has that form. '
          'Floor: the same batches, built beforehand, through one tf.function SGD step on '
          'one Keras model, one after the other (no TFF, no data pipeline, one core); not '
          'measured for the weight-table models (FedMF, FAIR). Peak MB: where the workload '
          'has a lockstep form, its in-process rounds again, each mode in a fresh process: '
          'the resident memory\'s peak while the rounds run less what the process held as '
          'they began (built, before round 1).\n\n' + '\n'.join(lines))


def bench_native_start(times: int = 5) -> str:
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  rows = []
  for _ in range(times):
    started = time.perf_counter()
    runtime = native.NativeRuntime().install()
    ready = time.perf_counter()
    runtime.close()
    rows.append(f'| {ready - started:.3f} | {time.perf_counter() - ready:.3f} |')
  return '| start s | close s |\n|---|---|\n' + '\n'.join(rows)


def bench_lazy_adam() -> str:
  task = _task('ranking', {})
  optimizers = ('adam', 'lazy_adam')
  bandwidth = _memory_bandwidth()
  lines = ['| pass | dense Adam s/round | lazy_adam s/round | dense / lazy | dense Adam\'s '
           'memory-traffic floor s/round | dense / floor |', '|---|---|---|---|---|---|']
  for attempt in (1, 2):  # alternated: the machine's load falls on both alike
    dense, lazy = [_run_rounds(task, 'inprocess', 'fair', 10, dict(client_optimizer=name),
                               dict(capacities='1x-2x')) for name in optimizers]
    floor = float(np.median([_adam_traffic(m, task.config.batch_size)
                             for m in dense.metrics[1:]])) / bandwidth
    lines.append(f'| {attempt} | {dense.seconds:.2f} | {lazy.seconds:.2f} | '
                 f'{dense.seconds / lazy.seconds:.2f}x | {floor:.3f} | '
                 f'{dense.seconds / floor:.1f}x |')
    print(lines[-1], flush=True)
  return (f'Median of {FLAGS.rounds} rounds after a warm-up, the same cohorts, run as '
          f'launch.train runs them, {os.cpu_count()} CPU cores. Dense Adam\'s floor: the '
          'bytes its steps must move (every step reads a client\'s weights, gradient and two '
          'moments and writes weights and moments: 7 x 4 bytes a float; a client\'s floats '
          'are its tier\'s; each tier\'s steps as its examples / batch size, '
          'with no partial batch) over the memory bandwidth measured here '
          f'({bandwidth / 1e9:.1f} GB/s: {_BANDWIDTH_HOW}), a lower bound of a round\'s '
          'optimizer work alone (the forward and backward passes not counted).\n\n'
          + '\n'.join(lines))


_BANDWIDTH_HOW = 'the best of 5 numpy additions of two 256 MiB float32 arrays into a third'


def _memory_bandwidth() -> float:
  """Bytes a second this machine moves, reading and writing (_BANDWIDTH_HOW)."""
  a, b, c = (np.ones(2**26, np.float32) for _ in range(3))
  best = math.inf
  for _ in range(5):
    started = time.perf_counter()
    np.add(a, b, out=c)
    best = min(best, time.perf_counter() - started)
  return 3 * a.nbytes / best


def _adam_traffic(metrics: dict, batch_size: int) -> float:
  """The bytes dense Adam's steps of a FAIR round must move, at least: each tier's
  examples / batch size steps, each moving 7 times its clients' floats."""
  prefix = 'train/aggregator/bytes_per_client/'
  return sum(7 * tier_bytes * metrics[f'train/client_work/examples/{k[len(prefix):]}']
             / batch_size for k, tier_bytes in metrics.items() if k.startswith(prefix))


STUDY = 'docs/studies/ml100k_ctr.toml'  # the guide's study, at a size set below
STUDY_SETTINGS = ('rounds=60', 'eval_every=5', 'seeds=[0,1]', 'selection.last=2',
                  'selection.extend=0')


def _study_run(folder: pathlib.Path, parallel: int) -> dict:
  """launch.study as a user runs it, in a fresh folder: its wall time, the time its
  cells' runs took (its own report), and its table."""
  started, cpu = time.perf_counter(), _children_cpu()
  done = subprocess.run(
      [sys.executable, '-m', 'launch.study', f'--spec={STUDY}', f'--output_dir={folder}',
       f'--parallel={parallel}', *(f'--set={s}' for s in STUDY_SETTINGS)],
      capture_output=True, text=True, check=False)
  wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
  if done.returncode:
    raise RuntimeError(f'launch.study failed: {done.stderr[-2000:]}')
  line = next(l for l in done.stdout.splitlines() if l.startswith("the cells' runs took"))
  runs, study = (float(w) for w in re.findall(r'([\d.]+) s', line)[:2])
  return {'wall': wall, 'study': study, 'runs': runs, 'cores': cpu / wall,
          'cells': len(list((folder / 'cells').glob('*-s*'))),
          'table': (folder / 'table.md').read_text()}


def _children_cpu() -> float:
  """CPU seconds (user and system) of the finished child processes and theirs."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def bench_study() -> str:
  """A study's own cost beyond its cells' runs, and its cells side by side."""
  with tempfile.TemporaryDirectory() as scratch:
    serial = _study_run(pathlib.Path(scratch) / 'serial', 1)
    print(f'serial: {serial["wall"]:.1f} s', flush=True)
    side = _study_run(pathlib.Path(scratch) / 'parallel', 2)
  overhead = serial['study'] / serial['runs'] - 1
  return (f'`python -m launch.study --spec={STUDY} '
          + ' '.join(f'--set={s}' for s in STUDY_SETTINGS) + f'`: {serial["cells"]} cells, '
          f'{os.cpu_count()} CPU cores, each study in a fresh folder and process. "study": '
          "from the launcher's first cell to its last (its workers' start, the plans, the "
          'records); "wall": the whole command (Python, TensorFlow and the data read '
          'for the floors included).\n\n'
          '| --parallel | cells\' runs s (sum) | study s | wall s | cores busy (CPU s / wall s) |'
          '\n|---|---|---|---|---|\n'
          + ''.join(f'| {n} | {r["runs"]:.1f} | {r["study"]:.1f} | {r["wall"]:.1f} | '
                    f'{r["cores"]:.2f} |\n' for n, r in ((1, serial), (2, side))) + '\n'
          f'Own overhead, one cell at a time (study / runs - 1): {100 * overhead:.1f}%. '
          f'Two at once against one: {side["study"] / serial["study"]:.2f}x the study, '
          f'{side["wall"] / serial["wall"]:.2f}x the wall. Same table both ways: '
          f'{"yes" if side["table"] == serial["table"] else "NO"}.')


REMOTE_WORKLOADS = ('dual encoder FedAvg', 'FedSubAvg LR', 'FedMF d=64, 2 epochs, batch 256 '
                    '(CoLR)')


@contextlib.contextmanager
def _loopback_workers(count: int):
  """`count` launch.worker processes on free loopback ports: their addresses;
  stopped on leaving."""
  import portpicker  # pylint: disable=g-import-not-at-top
  workers = []
  try:
    for _ in range(count):
      port = portpicker.pick_unused_port()
      workers.append((f'localhost:{port}', subprocess.Popen(
          [sys.executable, '-m', 'launch.worker', f'--port={port}'],
          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    yield [address for address, _ in workers]
  finally:
    for _, process in workers:
      process.terminate()
      process.wait()


def bench_remote() -> str:
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  from tff_rec.runtime import remote  # pylint: disable=g-import-not-at-top
  lines = ['| workload | clients | native s/round | 1 worker s/round | 2 workers s/round | '
           'clients/s native / 1 / 2 workers | remote overhead s/round (1 worker) |',
           '|---|---|---|---|---|---|---|']
  with _loopback_workers(2) as workers:
    for name in REMOTE_WORKLOADS:
      task_name, settings, algorithm, clients, trainer, options = RUNTIME_WORKLOADS[name]
      task = _task(task_name, settings)
      seconds = []
      for runtime in (native.NativeRuntime(),
                      *(remote.RemoteRuntime(workers[:n]) for n in (1, 2))):
        seconds.append(_run_rounds(task, 'native', algorithm, clients, trainer, options,
                                   context=runtime).seconds)
      rates = ' / '.join(f'{clients / s:.0f}' for s in seconds)
      lines.append(f'| {name} | {clients} | ' + ' | '.join(f'{s:.3f}' for s in seconds)
                   + f' | {rates} | {seconds[1] - seconds[0]:+.3f} |')
      print(lines[-1], flush=True)
  return (f'Mean of {FLAGS.rounds} rounds after a warm-up, the same cohorts; the workers '
          f'are launch.worker processes on loopback, on the same {os.cpu_count()} cores as '
          'the trainer, so this shows the cost of going remote, not a speed-up.\n\n'
          + '\n'.join(lines))


CLIENT_BYTES_WORKLOADS = ('FedSubAvg LR', 'DCN FedAvg, 3 epochs, batch 15 (MetaUA)', 'DCN MetaUA',
                         'DCN FedNova', 'FedMF d=64, 2 epochs, batch 256 (CoLR)',
                         'FedMF d=64, reconstructed users (CoLR)',
                         'Keras MF d=64, FedProx (leave-one-out)',
                         'FAIR 1x-2x, Goodreads-100')


def _nbytes(value) -> int:
  return sum(np.asarray(leaf).nbytes for leaf in tf.nest.flatten(value))


def bench_client_bytes() -> str:
  """What the trainer hands a round: its cohort's client data, with the examples
  in memory and with --client_data_dir (each client's index and seed; batches
  no task's plan made also their row numbers), beside the
  model it broadcasts; the files run checked equal on one loopback worker and
  natively."""
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  from tff_rec.runtime import remote  # pylint: disable=g-import-not-at-top
  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  lines = ['| workload | clients | client data a round: examples / files | model broadcast '
           '(per worker) | s/round on 1 worker: examples / files | same weights: files on '
           'the worker and natively | same weights: files and examples |',
           '|---|---|---|---|---|---|---|']

  def same(a, b):
    return 'yes' if all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)) else 'no'

  pathlib.Path(FLAGS.synthetic_dir).mkdir(parents=True, exist_ok=True)
  with _loopback_workers(1) as workers:
    for name in _chosen(CLIENT_BYTES_WORKLOADS):
      task_name, settings, algorithm, clients, trainer, options = RUNTIME_WORKLOADS[name]
      task = _task(task_name, settings)
      sent, seconds, weights = [], [], []
      for on_files, runtime in ((False, 'remote'), (True, 'remote'), (True, 'native')):
        folder = pathlib.Path(tempfile.mkdtemp(dir=FLAGS.synthetic_dir))

        def measure(run):  # what the rounds' cohorts are handed
          sent.append(np.mean([_nbytes([run.built.client_input(c, loop.client_seed(0, r, c))
                                        for c in cohort])
                               for r, cohort in enumerate(_cohorts(run.built.client_ids,
                                                                   clients), start=1)]))

        rounds = _run_rounds(
            task, 'native', algorithm, clients, trainer, options, on_start=measure,
            context=remote.RemoteRuntime(workers) if runtime == 'remote' else None,
            client_data_dir=str(folder) if on_files else None)
        seconds.append(rounds.seconds)
        with native.NativeRuntime():  # the run's own context is closed
          model = rounds.built.process.get_model_weights(rounds.state)
        weights.append(tf.nest.flatten(getattr(model, 'trainable', model)))  # or a dict's
        shutil.rmtree(folder)
      lines.append(f'| {name} | {clients} | {sent[0] / 1024:,.1f} KB / {sent[1] / 1024:,.2f} '
                   f'KB | {_nbytes(weights[0]) / 1024:,.1f} KB | {seconds[0]:.3f} / '
                   f'{seconds[1]:.3f} | {same(weights[1], weights[2]).upper()} | '
                   f'{same(weights[0], weights[1])} |')
      print(lines[-1], flush=True)
  return (f'{FLAGS.rounds + 1} rounds of each workload on one launch.worker on loopback '
          '(seconds: the mean after the first), the same cohorts; client data: the bytes '
          'of the values the trainer passes a round for its cohort (the clients\' example '
          'arrays, or with --client_data_dir their index and seed, and for batches no '
          "task's plan made their row numbers); the model: its "
          "trainable weights' bytes, which the round sends each worker. Same weights: the "
          'files run on the worker and natively (must be YES), and the runs with and '
          'without files (no where the clients draw in TF where they train what numpy '
          'draws on the trainer: the rankings\' negatives, the order of a task\'s own '
          'batches).\n\n'
          + '\n'.join(lines))


def bench_round() -> str:
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tasks import next_item  # pylint: disable=g-import-not-at-top
  from tff_rec.algorithms import baselines  # pylint: disable=g-import-not-at-top
  from tff_rec.runtime import inprocess  # pylint: disable=g-import-not-at-top
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  from tff_rec.training import optimizers  # pylint: disable=g-import-not-at-top

  task = next_item.Task(next_item.Config(
      data_dir=FLAGS.data_dir))

  def fedavg(client_loop=baselines.CLIENT_LOOP):
    return tff.simulation.compose_dataset_computation_with_learning_process(
        task.dataset_computation,
        baselines.build_process(task.model_fn,
                                client_optimizer=optimizers.OptimizerConfig('sgd', 0.1),
                                server_optimizer=optimizers.OptimizerConfig('adam', 0.01),
                                client_loop=client_loop))

  process = fedavg()
  ids = task.train_client_ids
  seeded = [[(c, loop.client_seed(0, r, c))
             for c in loop.sample_cohort(ids, FLAGS.clients_per_round, seed=0, round_num=r)]
            for r in range(FLAGS.rounds + 1)]
  cohorts = [[task.client_arguments(c, seed) for c, seed in cohort] for cohort in seeded]

  def time_rounds(proc):
    return _seconds_per_round(proc, cohorts)

  with native.NativeRuntime():
    native_s = time_rounds(process)
    # TFF's default client loop, Dataset.reduce, for reference.
    native_reduce_s = time_rounds(fedavg(tff.learning.LoopImplementation.DATASET_REDUCE))
  local = inprocess.InProcessLearningProcess(process)
  inprocess_s = time_rounds(local)
  local.close()

  # The floor: every client's batches of a round, one after the other, in
  # one tf.function with a plain SGD step (no TFF, no per-client reset).
  model = task.keras_model()
  loss_fn, optimizer = task.loss(), tf.keras.optimizers.SGD(0.1)
  datasets = [[tf.nest.map_structure(tf.convert_to_tensor, task.client_batches(c, seed))
               .as_dataset() for c, seed in cohort] for cohort in seeded]

  @tf.function
  def train(dataset):
    for x, y in dataset:
      with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True)) + tf.add_n(model.losses or [0.0])
      optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))

  def concatenated(cohort_datasets):
    out = cohort_datasets[0]
    for d in cohort_datasets[1:]:
      out = out.concatenate(d)
    return out

  train(concatenated(datasets[0]))
  started = time.perf_counter()
  for cohort in datasets[1:]:
    train(concatenated(cohort))
  floor_s = (time.perf_counter() - started) / FLAGS.rounds
  examples = np.mean([sum(len(l) // 16 * 16 for _, l, _ in c) for c in cohorts[1:]])
  return '\n'.join([
      f'FedAvg round, {FLAGS.clients_per_round} clients (~{examples:.0f} examples), '
      f'mean of {FLAGS.rounds} rounds after a warm-up, {os.cpu_count()} CPU cores:',
      '',
      '| runtime | s/round | vs in-process |', '|---|---|---|',
      f'| native, TFF\'s default Dataset.reduce client loop | {native_reduce_s:.3f} | '
      f'{native_reduce_s / inprocess_s:.2f}x |',
      f'| native (TFF C++ worker) | {native_s:.3f} | {native_s / inprocess_s:.2f}x |',
      f'| in-process (MapReduceForm) | {inprocess_s:.3f} | 1.00x |',
      f'| floor: sequential tf.function | {floor_s:.3f} | {floor_s / inprocess_s:.2f}x |',
      '',
      f'Targets: native / in-process >= 2: {native_s / inprocess_s:.2f}; '
      f'in-process / floor <= 1.5: {inprocess_s / floor_s:.2f}.'])


CAPACITIES = (1, 2, 4, 8, 16)


class _PeakRss:
  """The peak resident memory, in bytes, of this process (and, with `children`,
  its child processes too), sampled every `interval_s` while the block runs."""

  def __init__(self, interval_s: float, *, children: bool = False):
    import psutil  # pylint: disable=g-import-not-at-top
    self._process, self._interval_s, self._children = psutil.Process(), interval_s, children
    self.start = self.peak = self._rss()
    self.phase = None  # set by the caller: `peaks` holds each phase's peak
    self.peaks: dict[str, int] = {}
    self._done = threading.Event()
    self._sampler = threading.Thread(target=self._sample, daemon=True)

  def begin(self, phase: str) -> None:
    """From here on `start` is the memory now, and samples count towards `phase`."""
    self.start, self.phase = self._rss(), phase

  def _rss(self) -> int:
    family = [self._process, *(self._process.children(recursive=True)
                               if self._children else ())]
    return sum(p.memory_info().rss for p in family if p.is_running())

  def _sample(self):
    while not self._done.is_set():
      phase = self.phase
      rss = self._rss()
      self.peak = max(self.peak, rss)
      if phase is not None and phase == self.phase:  # a sample across a change: neither's
        self.peaks[phase] = max(self.peaks.get(phase, 0), rss)
      time.sleep(self._interval_s)

  def __enter__(self) -> '_PeakRss':
    self._sampler.start()
    return self

  def __exit__(self, *unused_exc) -> None:
    self._done.set()
    self._sampler.join()


def _client_memory_case(capacity: int) -> dict:
  """Peak RSS growth of one client's training at one capacity, sampled every 2 ms."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tasks import ranking  # pylint: disable=g-import-not-at-top
  from tff_rec.algorithms import capacities  # pylint: disable=g-import-not-at-top
  from tff_rec.training import functional  # pylint: disable=g-import-not-at-top

  task = ranking.Task(ranking.Config(
      data_dir=_goodreads_dir(), local_epochs=1))
  model = task.functional_model()
  forms = capacities.hashed_tiers(task.shape.table_shapes(), [capacity], seed=1,
                                  impl='op')[f'{capacity}x']
  median = np.argsort(task.data.train.counts, kind='stable')[len(task.data.user_ids) // 2]
  client = str(task.data.user_ids[median])
  user, positives, negatives = task.client_arguments(client, 0)
  dataset = task.triples_dataset(np.full(len(positives), user), positives, negatives)
  # From before the tier's tables exist: a small client's one batch leaves
  # nothing to measure after a warm-up, so the peak includes the tracing.
  with _PeakRss(0.002) as memory:
    # What the client holds: its tier's tables (random values: sizes are what count).
    weights = {k: tf.constant(v) for k, v in model.initial_weights.items() if k not in forms}
    weights.update({k: tf.random.normal(f.spec().shape) for k, f in forms.items()})

    def loss(w, batch):
      return model.loss(w, batch, lambda name, ids: forms[name].rows(w[name], ids))

    optimizer = tff.learning.optimizers.build_adam(1e-3)
    functional.train(loss, optimizer, weights, dataset.take(1))  # trace and warm up
    started = time.perf_counter()
    functional.train(loss, optimizer, weights, dataset)
    seconds = time.perf_counter() - started
  floats = sum(f.num_floats for f in forms.values())
  return {'table_floats': floats, 'table_mb': 4 * floats / 2**20,
          'peak_growth_mb': (memory.peak - memory.start) / 2**20, 'seconds': seconds,
          'examples': len(positives)}


FAIR_ROUND = dict(capacities='1x-2x-4x-8x')
FAIR_ROUND_CLIENTS = 10


def _fair_round_case(runtime: str) -> dict:
  """FAIR 1x-2x-4x-8x rounds on one runtime: seconds per round, and the peak
  resident memory of this process and its TFF worker (the server's side and,
  in-process, the clients' too), sampled every 10 ms."""
  task = _task('ranking', dict(local_epochs=1))
  with _PeakRss(0.01, children=True) as memory:
    seconds = _run_rounds(task, runtime, 'fair', FAIR_ROUND_CLIENTS, {}, FAIR_ROUND).seconds
  return {'seconds': seconds, 'peak_rss_mb': memory.peak / 2**20,
          'items': int(task.data.num_items)}


def bench_fair_round() -> str:
  lines = ['| runtime | lookup | s / round | peak RSS MB (trainer + its TFF worker) |',
           '|---|---|---|---|']
  items = None
  for runtime, lookup in (('native', 'composite'), ('inprocess', 'op')):
    r = _in_fresh_process(f'fair_round:{runtime}')
    items = r['items']
    lines.append(f'| {runtime} | {lookup} | {r["seconds"]:.2f} | {r["peak_rss_mb"]:.0f} |')
    print(lines[-1], flush=True)
  return (f'FAIR {FAIR_ROUND["capacities"]}, {FAIR_ROUND_CLIENTS} clients a round, 1 '
          f'local epoch, {items:,} items; mean of {FLAGS.rounds} rounds after a '
          'warm-up, each runtime in a fresh process.\n\n' + '\n'.join(lines))


EVAL_MEMORY_ROUNDS = 3
# A headerless DIN file of 100k rows whose histories grow to 229 items (the issue's
# export had 1,859 users and histories up to 229 long).
LONG_HISTORY_USERS_ROWS = (435, 230)
LONG_HISTORIES = dict(columns=['label', 'user', 'item', 'history'], client_column='user',
                      feature_columns=('user', 'item'), list_columns=('history',))


def _eval_memory_case(dataset: str, runtime: str) -> dict:
  """DIN trained EVAL_MEMORY_ROUNDS rounds through the runner (as launch.train
  runs it), then evaluated: the peak resident memory of this process and its TFF
  worker while training (the rounds before the first evaluation) and while
  evaluating, sampled every 5 ms."""
  from tff_rec import runner  # pylint: disable=g-import-not-at-top
  from tff_rec import registry  # pylint: disable=g-import-not-at-top
  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  settings = dict(model='din', data_dir=FLAGS.data_dir if dataset == 'movielens'
                  else FLAGS.beauty_sequences)
  with tempfile.TemporaryDirectory() as scratch:  # the task reads its file whole
    if dataset == 'long_histories':
      settings.update(LONG_HISTORIES, data_dir=str(synthetic.write_din_clicks(
          pathlib.Path(scratch) / 'clicks.csv', *LONG_HISTORY_USERS_ROWS)))
    task = _task('ctr', settings)
  evaluate = task.evaluate

  def evaluate_in_its_phase(weights, part):
    memory.phase = 'evaluation'
    try:
      return evaluate(weights, part)
    finally:  # what evaluating left resident is not training's
      memory.phase = None

  task.evaluate = evaluate_in_its_phase
  training = registry.training(task, 'fedavg', runtime=runtime)
  schedule = loop.Schedule(EVAL_MEMORY_ROUNDS, training.clients_per_round,
                           eval_every=EVAL_MEMORY_ROUNDS)
  with _PeakRss(0.005, children=True) as memory:
    memory.phase = 'training'
    runner.run(task, 'fedavg', training, schedule)
  return {'training_mb': memory.peaks['training'] / 2**20,
          'evaluation_mb': memory.peaks['evaluation'] / 2**20,
          'examples': len(task.examples.labels), 'clients': len(task.train_client_ids),
          'clients_per_round': training.clients_per_round}


def bench_eval_memory() -> str:
  lines = ['| data | examples | runtime | peak MB training | peak MB evaluating | ratio |',
           '|---|---|---|---|---|---|']
  for dataset in FLAGS.eval_memory_data:
    for runtime in ('native', 'inprocess'):
      r = _in_fresh_process(f'eval_memory:{dataset}:{runtime}')
      lines.append(f'| {dataset} ({r["clients"]:,} clients) | {r["examples"]:,} | {runtime} | '
                   f'{r["training_mb"]:.0f} | {r["evaluation_mb"]:.0f} | '
                   f'{r["evaluation_mb"] / r["training_mb"]:.2f}x |')
      print(lines[-1], flush=True)
  return (f'DIN, FedAvg with the CTR task\'s defaults ({r["clients_per_round"]} clients a '
          f'round), {EVAL_MEMORY_ROUNDS} rounds, then the evaluation (train loss, test AUC '
          'and logloss over every example), each case in a fresh process. Peak resident '
          'memory of the trainer and its TFF worker (native), sampled every 5 ms.\n\n'
          + '\n'.join(lines))


POPULATION_SIZES = (10**4, 10**6)
POPULATION_ITEMS = 10**5
POPULATION_CLIENTS = 1000
POPULATION_ALGORITHMS = {'FedMF, stored users': ('fedmf', {}),
                         'CoLR r=4, stored users': ('colr', dict(rank=4))}
POPULATION_DIM = 64
# Interaction counts: a Pareto tail from MIN_COUNT (mean about 3 x MIN_COUNT at
# exponent 1.5), capped: a few heavy users, most with a handful of items.
POPULATION_MIN_COUNT, POPULATION_MAX_COUNT, POPULATION_EXPONENT = 5, 2000, 1.5


def synthetic_population(users: int, items: int, seed: int, root: pathlib.Path
                         ) -> pathlib.Path:
  """A sequence file (`uid item item ...`) of `users` users whose interaction
  counts follow a power law, items drawn uniformly from `items`; written once."""
  path = root / (f'population_{users}_{items}_s{seed}_{POPULATION_MIN_COUNT}_'
                 f'{POPULATION_MAX_COUNT}_{POPULATION_EXPONENT}.txt')
  if path.exists():
    return path
  rng = np.random.default_rng(seed)
  counts = np.minimum(POPULATION_MAX_COUNT, np.floor(
      POPULATION_MIN_COUNT * (1 - rng.random(users)) ** (-1 / POPULATION_EXPONENT))
                      ).astype(np.int64)
  if counts.sum() < items:
    raise ValueError(f'{users} users hold {counts.sum()} interactions, fewer than the '
                     f'{items} items of the catalogue')
  interactions = rng.integers(0, items, counts.sum())
  # Every item of the catalogue once, at random places: the tables have the same
  # size whatever the population.
  interactions[rng.choice(len(interactions), items, replace=False)] = np.arange(items)
  lines = (f'{u} {" ".join(map(str, chunk))}\n'
           for u, chunk in enumerate(np.split(interactions, np.cumsum(counts)[:-1])))
  root.mkdir(parents=True, exist_ok=True)
  partial = path.with_suffix('.partial')
  with partial.open('w') as f:
    f.writelines(lines)
  partial.rename(path)
  return path


def _population_case(users: int, algorithm: str) -> dict:
  """One algorithm's rounds on a synthetic population, in this process: seconds
  per round (FLAGS.rounds after a warm-up), resident memory before the task is
  read, at its peak while it is read, once it is built with the algorithm, and
  at its peak over the rounds."""
  from tff_rec.training import resources  # pylint: disable=g-import-not-at-top
  path = synthetic_population(users, POPULATION_ITEMS, 0, pathlib.Path(FLAGS.synthetic_dir))
  name, options = POPULATION_ALGORITHMS[algorithm]
  built_mb = []

  def start(_):
    built_mb.append(resources.memory_metrics()['memory/rss_mb'])
    memory.phase = 'rounds'

  with _PeakRss(0.01) as memory:
    memory.phase = 'reading'
    started = time.perf_counter()
    task = _task('loo_ranking', dict(data_dir=str(path), min_interactions=POPULATION_MIN_COUNT,
                                     embedding_dim=POPULATION_DIM))
    read_s = time.perf_counter() - started
    memory.phase = None
    seconds = _run_rounds(task, 'inprocess', name, POPULATION_CLIENTS, {}, options,
                          on_start=start).seconds
  return {'users': len(task.data.user_ids), 'items': int(task.data.num_items),
          'interactions': int(len(task.data.train.items)), 'read_s': read_s,
          'seconds': seconds, 'start_mb': memory.start / 2**20, 'built_mb': built_mb[0],
          'reading_peak_mb': memory.peaks['reading'] / 2**20,
          'rounds_peak_mb': memory.peaks['rounds'] / 2**20, 'peak_mb': memory.peak / 2**20}


def bench_population() -> str:
  lines = ['| algorithm | users | train interactions | s / round | vs 10^4 | MB before '
           'reading | MB peak while reading | MB built | MB peak in the rounds | rounds\' '
           'peak growth vs 10^4 | user vectors MB (N x '
           f'{POPULATION_DIM} floats) | reading the data s |', '|---' * 12 + '|']
  for algorithm in POPULATION_ALGORITHMS:
    if FLAGS.population and not any(a in algorithm for a in FLAGS.population):
      continue
    for _ in range(FLAGS.population_sittings):
      results = {}
      for users in POPULATION_SIZES:
        r = results[users] = _in_fresh_process(f'population:{users}:{algorithm}')
        small = results[POPULATION_SIZES[0]]
        lines.append(
            f'| {algorithm} | {r["users"]:,} | {r["interactions"]:,} | {r["seconds"]:.3f} | '
            f'{r["seconds"] / small["seconds"]:.2f}x | {r["start_mb"]:.0f} | '
            f'{r["reading_peak_mb"]:.0f} | {r["built_mb"]:.0f} | {r["rounds_peak_mb"]:.0f} | '
            f'{r["rounds_peak_mb"] - small["rounds_peak_mb"]:+.0f} MB | '
            f'{r["users"] * POPULATION_DIM * 4 / 2**20:.0f} | {r["read_s"]:.0f} |')
        print(lines[-1], flush=True)
  return (f'{POPULATION_CLIENTS:,} clients a round, d={POPULATION_DIM}, in-process runtime, '
          f'mean of {FLAGS.rounds} rounds after a warm-up; each case in a fresh process; '
          f'the sizes in turn, {FLAGS.population_sittings} time(s), each row against the '
          '10^4 row before it.\n\n' + '\n'.join(lines))


def _held_bytes(obj, path: str, held: collections.Counter, seen: set, depth: int = 0) -> None:
  """Adds to held[path] the bytes of the numpy arrays (and the containers, strings and
  numbers) that `obj` reaches, each counted once, by attribute path (3 deep)."""
  if id(obj) in seen:
    return
  seen.add(id(obj))
  if isinstance(obj, np.ndarray):
    base = obj if obj.base is None or not isinstance(obj.base, np.ndarray) else obj.base
    if base is obj or id(base) not in seen:
      seen.add(id(base))
      held[path] += base.nbytes + sys.getsizeof(np.empty(0))
    return
  held[path] += sys.getsizeof(obj)
  if isinstance(obj, dict):
    children = [*obj.keys(), *obj.values()]
  elif isinstance(obj, (list, tuple, set)):
    children = list(obj)
  elif hasattr(obj, '__dict__') and 'tensorflow' not in type(obj).__module__:
    for name, value in vars(obj).items():
      _held_bytes(value, f'{path}.{name}' if depth < 2 else path, held, seen, depth + 1)
    return
  else:
    return
  for child in children:
    _held_bytes(child, path, held, seen, depth + 1)


def _population_memory_case(users: int) -> dict:
  """Resident memory while a synthetic population's ranking task is read and
  split, once built, and once glibc returned its freed heap (malloc_trim); and
  what the task's arrays hold, by attribute."""
  from tff_rec.training import resources  # pylint: disable=g-import-not-at-top
  path = synthetic_population(users, POPULATION_ITEMS, 0, pathlib.Path(FLAGS.synthetic_dir))
  with _PeakRss(0.01) as memory:
    task = _task('loo_ranking', dict(data_dir=str(path), min_interactions=POPULATION_MIN_COUNT,
                                     embedding_dim=POPULATION_DIM))
  built = resources.memory_metrics()['memory/rss_mb']
  gc.collect()
  try:  # glibc keeps freed small blocks resident until asked to return them
    ctypes.CDLL('libc.so.6').malloc_trim(0)
  except (OSError, AttributeError):  # not glibc: the last two columns then match
    pass
  held = collections.Counter()
  _held_bytes(task, 'task', held, set())
  trimmed = resources.memory_metrics()['memory/rss_mb']
  # What evaluating costs now that the candidates are drawn again when read.
  rng = np.random.default_rng(0)
  weights = {'users': rng.normal(size=(len(task.data.user_ids), POPULATION_DIM)),
             'items': rng.normal(size=(task.data.num_items, POPULATION_DIM))}
  weights = {k: v.astype(np.float32) for k, v in weights.items()}
  started = time.perf_counter()
  task.evaluate(weights, 'validation')
  evaluate_s = time.perf_counter() - started
  started = time.perf_counter()
  task.objective.popularity('validation')
  return {'users': len(task.data.user_ids), 'start_mb': memory.start / 2**20,
          'peak_mb': memory.peak / 2**20, 'built_mb': built, 'trimmed_mb': trimmed,
          'held_mb': {k: v / 2**20 for k, v in held.most_common() if v >= 2**20},
          'evaluate_s': evaluate_s, 'popularity_s': time.perf_counter() - started}


def bench_population_memory() -> str:
  lines = ['| users | MB before reading | MB peak while reading and splitting | MB built | MB '
           'once the freed heap is returned | MB the task\'s arrays hold | of which (MB) | '
           's to evaluate (validation) | s for popularity |', '|---' * 9 + '|']
  for users in POPULATION_SIZES:
    r = _in_fresh_process(f'population_memory:{users}')
    parts = ', '.join(f'{k.removeprefix("task.")} {v:.0f}' for k, v in r['held_mb'].items())
    lines.append(f'| {r["users"]:,} | {r["start_mb"]:.0f} | {r["peak_mb"]:.0f} | '
                 f'{r["built_mb"]:.0f} | {r["trimmed_mb"]:.0f} | '
                 f'{sum(r["held_mb"].values()):.0f} | {parts} | {r["evaluate_s"]:.1f} | '
                 f'{r["popularity_s"]:.1f} |')
    print(lines[-1], flush=True)
  return ('The ranking task (leave-one-out) of the synthetic populations above, built in a '
          'fresh process per size; "freed heap returned": after gc and glibc\'s '
          'malloc_trim(0); the arrays: numpy arrays (and containers) the task reaches, each '
          'counted once, by attribute (those of 1 MB or more); then one evaluation of random '
          'user and item vectors, and the popularity floor, on the validation part.\n\n'
          + '\n'.join(lines))


SOAK_EVERY = 50
SOAK_TARGET = 0.05  # MB a round over the last half (issue 40)
# name: (the RUNTIME_WORKLOADS entry it runs, runtime).
SOAK_WORKLOADS = {
    'FedMF d=64 (CoLR), in-process': ('FedMF d=64, 2 epochs, batch 256 (CoLR)', 'inprocess'),
    'FAIR 1x-2x, Goodreads-100, native': ('FAIR 1x-2x, Goodreads-100', 'native'),
    'FAIR 1x-2x, Goodreads-100, in-process': ('FAIR 1x-2x, Goodreads-100', 'inprocess'),
    'DCN FedAvg (MetaUA), native': ('DCN FedAvg, 3 epochs, batch 15 (MetaUA)', 'native'),
}


def _soak_case(workload: str) -> dict:
  """FLAGS.soak_rounds rounds of one workload through the runner: resident MB of
  this process and of its children (the TFF worker) every SOAK_EVERY rounds; a
  progress line every round (on stderr, with both)."""
  from launch import progress  # pylint: disable=g-import-not-at-top
  from tff_rec import runner  # pylint: disable=g-import-not-at-top
  from tff_rec import registry  # pylint: disable=g-import-not-at-top
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  from tff_rec.training import loop  # pylint: disable=g-import-not-at-top
  runs, runtime = SOAK_WORKLOADS[workload]
  task_name, settings, name, clients, trainer, options = RUNTIME_WORKLOADS[runs]
  task = _task(task_name, settings)
  training = registry.training(task, name, runtime=runtime, clients_per_round=clients,
                               **trainer)
  # Unbounded by default: the soak measures the worker as TFF leaves it.
  context = native.NativeRuntime(worker_growth_limit_mb=FLAGS.soak_worker_growth_limit_mb) \
      if runtime == 'native' else None
  samples = []
  show = progress.Progress(FLAGS.soak_rounds, 'round', {
      'MB': 'memory/rss_mb', 'worker MB': 'memory/children_rss_mb'})

  def sample(round_num, metrics):  # the round loop measured its memory (resources)
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the case's result
      show(round_num, metrics)
    # The last round is sampled after its evaluation: not a round's memory.
    if round_num % SOAK_EVERY == 0 and round_num < FLAGS.soak_rounds:
      samples.append((round_num, metrics['memory/rss_mb'], metrics['memory/children_rss_mb']))

  started = time.perf_counter()
  # Evaluated once, after the last round: the rounds are what is soaked.
  runner.run(task, name, training, loop.Schedule(FLAGS.soak_rounds, clients, eval_every=0),
             options=options, context=context, on_round=sample)
  return {'samples': samples, 'seconds': time.perf_counter() - started,
          'worker_restarts': context.restarts if context else 0}


def _slope(samples: list, column: int) -> float:
  """MB a round over the last half of the rounds (least squares)."""
  last = [s for s in samples if s[0] >= samples[-1][0] / 2]
  return float(np.polyfit([s[0] for s in last], [s[column] for s in last], 1)[0])


def bench_soak() -> str:
  lines = ['| workload | rounds | s / round | trainer MB: first sample / last | trainer MB '
           'a round (last half) | worker MB: first / last | worker MB a round (last half) '
           '| worker MB: largest sample | worker replaced |', '|---|---|---|---|---|---|---|---|---|']
  series = []
  for workload in SOAK_WORKLOADS:
    if FLAGS.soak and not any(w in workload for w in FLAGS.soak):
      continue
    r = _in_fresh_process(f'soak:{workload}')
    samples = r['samples']
    first, last = samples[0], samples[-1]
    lines.append(f'| {workload} | {FLAGS.soak_rounds} | {r["seconds"] / FLAGS.soak_rounds:.2f} | '
                 f'{first[1]:.0f} / {last[1]:.0f} | {_slope(samples, 1):+.4f} | '
                 f'{first[2]:.0f} / {last[2]:.0f} | {_slope(samples, 2):+.4f} | '
                 f'{max(s[2] for s in samples):.0f} | {r["worker_restarts"]} |')
    series.append(f'{workload}: ' + ', '.join(f'{s[0]}: {s[1]:.0f}+{s[2]:.0f}'
                                              for s in samples))
    print(lines[-1], flush=True)
  bound = FLAGS.soak_worker_growth_limit_mb
  return ('Resident MB every 50 rounds (trainer + worker); TFF\'s native worker '
          + (f'replaced once it grew {bound:g} MB' if bound is not None else 'unbounded')
          + ':\n\n'
          + '\n'.join(f'- {s}' for s in series) + '\n\n' + '\n'.join(lines))


RECORD_MIN_ROUNDS = 1000


def bench_record_memory() -> str:
  """Every committed run of RECORD_MIN_ROUNDS rounds or more (results/*/cells):
  the slope of its resident memory over its last half (the last round, after the
  final evaluation, left out; evaluation rounds in), grouped by results folder
  and runtime. No run is made: the records measured it as they trained."""
  groups = collections.defaultdict(lambda: {'trainer': [], 'worker': []})
  memory = ['round', 'memory/rss_mb', 'memory/children_rss_mb']  # the soak's samples
  for metrics in sorted(pathlib.Path(FLAGS.records_dir).glob('*/cells/**/metrics.csv')):
    rows = pd.read_csv(metrics)
    if not set(memory) <= set(rows) or rows['round'].max() < RECORD_MIN_ROUNDS:
      continue
    samples = rows.loc[rows['round'] < rows['round'].max(), memory].to_numpy()
    runtime = json.loads((metrics.parent / 'config.json').read_text()).get('runtime', '?')
    group = groups[(metrics.relative_to(FLAGS.records_dir).parts[0], runtime)]
    group['trainer'].append(_slope(samples, 1))
    if samples[:, 2].max() > 0:
      group['worker'].append(_slope(samples, 2))

  def cell(slopes) -> str:
    return (f'{np.median(slopes):+.3f} / {max(slopes):+.3f} '
            f'({sum(s > SOAK_TARGET for s in slopes)} above)' if slopes else '-')

  lines = ['| results | runtime | runs | trainer MB a round: median / max | TFF worker MB '
           'a round: median / max |', '|---|---|---|---|---|']
  for (folder, runtime), slopes in sorted(groups.items()):
    lines.append(f'| {folder} | {runtime} | {len(slopes["trainer"])} | '
                 f'{cell(slopes["trainer"])} | {cell(slopes["worker"])} |')
  return (f'Committed runs of {RECORD_MIN_ROUNDS:,} rounds or more: the slope of resident '
          f'memory over each run\'s last half (least squares; "above": over '
          f'{SOAK_TARGET} MB a round, the soak\'s target).\n\n' + '\n'.join(lines))


def bench_client_memory() -> str:
  lines = ['| capacity | item-table floats | item tables MB | measured peak growth MB (from '
           'before its tables; with tracing) | vs 1x | seconds for the epoch |',
           '|---|---|---|---|---|---|']
  results = {c: _in_fresh_process(f'client_memory:{c}') for c in CAPACITIES}
  for c, r in results.items():
    lines.append(f'| {c}x | {r["table_floats"]:,} | {r["table_mb"]:.1f} | '
                 f'{r["peak_growth_mb"]:.1f} | '
                 f'{r["peak_growth_mb"] / results[1]["peak_growth_mb"]:.2f} | '
                 f'{r["seconds"]:.2f} |')
    print(lines[-1], flush=True)
  return (f'One median client ({results[1]["examples"]} positives, batch 512, fresh '
          'Adam: parameters, Adam m and v, dense gradients and temporaries all scale with '
          'the tables).\n\n' + '\n'.join(lines))


def _client_memory_heading() -> str:
  data = (f'{FLAGS.synthetic_items:,} synthetic items' if FLAGS.synthetic_items
          else 'Goodreads-100')
  return f'FAIR client memory by capacity ({data}, CPU)'


# Each benchmark by name: its report section's heading (some name their
# settings) and what runs it, in the report's order.
BENCHMARKS = {
    'op': (lambda: 'Hashed embedding lookup: op vs composite (forward + backward, '
           f'{NUM_IDS} ids, dim {DIM}, CPU)', bench_op),
    'round': (lambda: 'Round time: in-process vs native', bench_round),
    'runtimes': (lambda: "The papers' workloads: native vs in-process", bench_runtimes),
    'remote': (lambda: 'Remote TFF workers on loopback vs native', bench_remote),
    'client_bytes': (lambda: 'What a round sends: examples against client files',
                     bench_client_bytes),
    'fair_round': (lambda: 'A FAIR round: server and client memory', bench_fair_round),
    'soak': (lambda: f'Soak: {FLAGS.soak_rounds} rounds', bench_soak),
    'population': (lambda: 'Populations of 10^4 and 10^6 users', bench_population),
    'population_memory': (lambda: 'Where the population memory goes',
                          bench_population_memory),
    'eval_memory': (lambda: 'Evaluation memory against training memory', bench_eval_memory),
    'record_memory': (lambda: 'Memory over the committed long runs', bench_record_memory),
    'native_start': (lambda: 'The native runtime: start and close', bench_native_start),
    'lazy_adam': (lambda: 'FAIR 1x-2x: dense Adam against lazy_adam', bench_lazy_adam),
    'client_memory': (_client_memory_heading, bench_client_memory),
    'study': (lambda: "A study's own cost, and its cells side by side", bench_study),
}
flags.DEFINE_list('what', ['op', 'round', 'client_memory'],
                  f'Benchmarks to run, of: {", ".join(BENCHMARKS)} (see above).')
flags.register_validator('what', lambda names: set(names) <= set(BENCHMARKS),
                         f'--what takes names of {", ".join(BENCHMARKS)}')


def main(argv):
  del argv
  if FLAGS._case:  # pylint: disable=protected-access
    kind, *args = FLAGS._case.split(':')  # pylint: disable=protected-access
    if kind == 'op':
      print(json.dumps(_op_case(args[0], int(args[1]))))
    elif kind == 'rounds_memory':
      print(json.dumps(_rounds_memory_case(int(args[0]), args[1])))
    elif kind == 'fair_round':
      print(json.dumps(_fair_round_case(args[0])))
    elif kind == 'soak':
      print(json.dumps(_soak_case(args[0])))
    elif kind == 'population':
      print(json.dumps(_population_case(int(args[0]), args[1])))
    elif kind == 'population_memory':
      print(json.dumps(_population_memory_case(int(args[0]))))
    elif kind == 'eval_memory':
      print(json.dumps(_eval_memory_case(*args)))
    else:
      print(json.dumps(_client_memory_case(int(args[0]))))
    return
  sections = [f'## {heading()}\n\n{run()}' for name, (heading, run) in BENCHMARKS.items()
              if name in FLAGS.what]
  report = '# Benchmarks\n\n' + '\n\n'.join(sections) + '\n'
  print(report)
  if FLAGS.output:
    pathlib.Path(FLAGS.output).write_text(report)

