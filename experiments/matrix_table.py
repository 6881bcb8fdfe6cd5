"""launch.matrix's cells and table: the datasets and cells it runs, one cell's run,
and the markdown built from their records alone. No flags here, so a test process
that holds the trainer's flags can rebuild a table too."""

import contextlib
import dataclasses
import json
import math
import pathlib
import time

from tff_rec import registry
from tff_rec import runner
from tff_rec.aggregators import inner
from tff_rec.runtime import inprocess
from tff_rec.training import loop

SHARED = pathlib.Path('../shared/data')


@dataclasses.dataclass(frozen=True)
class Dataset:
  task: str
  data_dir: str
  metric: str  # headline, after the last round
  config: dict = dataclasses.field(default_factory=dict)
  options: dict = dataclasses.field(default_factory=dict)  # the algorithms' (refused if not)


DATASETS = {
    'ml100k_next_item': Dataset('next_item', 'ml-100k', 'test/recall_at_10'),
    'ml100k_ranking': Dataset('loo_ranking', 'ml-100k', 'test/hr_at_10'),
    'ml100k_ranking_recon': Dataset('loo_ranking', 'ml-100k', 'test/hr_at_10',
                                    options=dict(user_state='reconstructed')),
    'ml100k_ctr': Dataset('ctr', 'ml-100k', 'eval/test_auc'),
    'ml100k_ctr_dcn': Dataset('ctr', 'ml-100k', 'eval/test_auc', dict(model='dcn')),
    'ml100k_ctr_din': Dataset('ctr', 'ml-100k', 'eval/test_auc', dict(model='din')),
    'goodreads100': Dataset('ranking', 'goodreads-100', 'test/ndcg_at_20',
                            dict(local_epochs=1)),
    'beauty_ranking': Dataset('ranking', 'amazon-beauty', 'test/ndcg_at_20',
                              dict(local_epochs=1)),
}
CELLS = [('mean', 'native', ''), ('mean', 'inprocess', ''), ('secure', 'inprocess', ''),
         ('dp', 'native', ''), ('mean', 'native', 'fedsubavg')]  # aggregator, runtime, stack
CLIENTS_PER_ROUND = 5  # small: the matrix shows what runs, not how well



def cell_name(dataset: str, algorithm: str, aggregator: str, runtime: str, stack: str) -> str:
  return f'{dataset}/{algorithm}-{aggregator}-{runtime}' + (f'-{stack}' if stack else '')


def read_records(root: pathlib.Path) -> dict[str, dict]:
  """Every cell's record under `root`, by cell name."""
  return {str(p.relative_to(root).with_suffix('')): json.loads(p.read_text())
          for p in root.glob('*/*.json')}


# The rounds of records written before each record held its own: the matrix's
# default then, and the committed table's.
UNRECORDED_ROUNDS = 2


def current(record: dict | None, rounds: int) -> bool:
  """Whether a cell's record was made with `rounds` rounds (a record of other rounds
  is not this table's: it is run again, or shown as not run)."""
  return record is not None and record.get('rounds', UNRECORDED_ROUNDS) == rounds


def shows_effect(record: dict, aggregator: str) -> bool:
  """Whether an OK record of a secure or DP cell holds what showed the aggregation
  took effect (records from before the matrix checked it do not: rerun them)."""
  return aggregator == 'mean' or bool(record.get('evidence'))


def _diverged(record: dict) -> bool:
  return not all(math.isfinite(record[k]) for k in ('value', 'train_loss')
                 if record.get(k) is not None)


def table(records: dict[str, dict], algorithms: list[str], datasets: list[str], *,
          rounds: int, records_dir: str) -> str:
  """The table's markdown; `records_dir` as seen from the table's folder (the
  table names it, so a rebuild elsewhere writes the same bytes)."""
  lines = [
      '# Every algorithm on every task',
      '',
      f'Built by `python -m launch.matrix --rounds={rounds}` from the records in '
      f'`{records_dir}` (relative to this file; {CLIENTS_PER_ROUND} clients a round, the '
      "task's and the algorithm's default settings). A cell is OK with the headline test "
      'metric after the last round (a smoke test: too few rounds to compare methods), N/A with the '
      "registry's reason, or FAIL with the error of a cell that should run and did not. "
      'OK diverged: it ran, and stopped where its training loss or model became inf or NaN '
      "(seen with the DP defaults' noise on 5 clients, and with FedSubAvg's correction on "
      "DCN's tables). "
      "A secure or DP cell is OK only if its rounds' metrics show the aggregation's "
      "effect (the secure sum's bounds, the DP clip and noise equal to the settings; kept "
      'in its record). Columns: aggregator / runtime, '
      'and mean / native with FedSubAvg stacked (--stack=fedsubavg).',
      '']
  for dataset in datasets:
    spec = DATASETS[dataset]
    settings = ''.join(f' --{k}={v}' for k, v in {**spec.config, **spec.options}.items())
    lines += [f'## {dataset} (`--task={spec.task} --data_dir=../shared/data/'
              f'{spec.data_dir}{settings}`, {spec.metric})', '',
              '| algorithm | ' + ' | '.join(f'{a} / {r}' + (f' + {k}' if k else '')
                                            for a, r, k in CELLS) + ' |',
              '|---|' + '---|' * len(CELLS)]
    reasons = {}
    for algorithm in algorithms:
      cells = []
      for aggregator, runtime, stack in CELLS:
        record = records.get(cell_name(dataset, algorithm, aggregator, runtime, stack))
        if not current(record, rounds) or (record['status'] == 'OK'
                                           and not shows_effect(record, aggregator)):
          cells.append('not run')
        elif record['status'] == 'OK' and 'diverged_at_round' in record:
          cells.append(f"OK diverged at round {record['diverged_at_round']}")
        elif record['status'] == 'OK' and _diverged(record):  # records from before the stop
          cells.append(f"OK diverged (train loss {record['train_loss']:.3g})")
        elif record['status'] == 'OK':
          cells.append(f"OK {record['value']:.3f}")
        else:
          key = reasons.setdefault(record['reason'], len(reasons) + 1)
          cells.append(f"{record['status']} [{key}]")
      lines.append(f'| {algorithm} | ' + ' | '.join(cells) + ' |')
    lines += [''] + [f'[{k}] {reason}' for reason, k in reasons.items()] + ['']
  return '\n'.join(lines)


def run_cell(task, dataset: Dataset, algorithm: str, aggregator: str, runtime: str,
             stack: str, rounds: int) -> dict:
  """{'status': 'OK', metric, seconds, evidence} or {'status': 'N/A' or 'FAIL', 'reason'}."""
  training = registry.training(task, algorithm, aggregator=inner.InnerAggregator(aggregator),
                               runtime=runtime,
                               stack=(stack,) if stack else (),
                               clients_per_round=CLIENTS_PER_ROUND)
  started = time.perf_counter()
  try:
    _, metrics = runner.run(  # inside the caller's NativeRuntime, for every cell
        task, algorithm, training, loop.Schedule(
            rounds=rounds, clients_per_round=CLIENTS_PER_ROUND,
            eval_every=0, seed=0),
        context=contextlib.nullcontext(), options=dataset.options)
  except (registry.NotApplicable, inprocess.NotMapReduceCompatibleError) as e:
    return {'status': 'N/A', 'reason': str(e).split('\n')[0][:300]}
  except runner.AggregationNotVisible as e:
    return {'status': 'FAIL', 'reason': str(e)}
  except loop.Diverged as e:  # it ran, its aggregation shown (runner): where it stopped
    return {'status': 'OK', 'metric': dataset.metric, 'value': float('nan'),
            'diverged_at_round': e.round_num, 'diverged': e.what,
            'evidence': evidence(e.metrics), 'seconds': round(time.perf_counter() - started, 1)}
  except Exception as e:  # pylint: disable=broad-except  # a cell that should run and does not
    return {'status': 'FAIL', 'reason': f'{type(e).__name__}: {_last_line(e)}'}
  return {'status': 'OK', 'metric': dataset.metric, 'value': metrics[dataset.metric],
          'train_loss': next((v for k, v in metrics.items() if k.endswith('train/loss')),
                             None),
          'evidence': evidence(metrics),
          'seconds': round(time.perf_counter() - started, 1)}


def evidence(metrics: dict[str, float]) -> dict[str, float]:
  """The last round's metrics that show what the aggregation did."""
  return {k: v for k, v in metrics.items()
          if k.rsplit('/', 1)[-1] in EVIDENCE and k.startswith('train/aggregator/')}


EVIDENCE = ('secure_upper_threshold', 'secure_upper_clipped_count', 'dp_clip', 'dp_stddev')


def _last_line(error: Exception) -> str:
  lines = [l.strip() for l in str(error).splitlines() if l.strip()]
  return (lines[-1] if lines else '')[:300]
