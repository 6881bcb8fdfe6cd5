"""CoLR on MovieLens-100K, the paper's Figures 3-4 and Tables 2 and 4, rendered
from the records of the study colr_movielens.toml beside this module.

The study chose each configuration's client rate and ran its seeds; this adds
what is the paper's own: HR@10 against the payload a client uploads (FedMF at
d = 1..64 against CoLR at d = 64, r = 1..32), CoLR against SVD and top-k
compression at the same budgets, time per round (communication estimated from
the bytes at the bandwidth the paper's Table 2 implies, computation measured),
SCoLR's global ranks, and the secure sum beside the plain one with what an
additive sum makes of each method's payloads (CoLR exact; SVD factors and top-k
pairs wrong). Values from the data (popularity, the additive sums) are derived
once into the records (experiments.run_records.derived), so the table rebuilds
without the data.
"""

import collections
import functools
import pathlib

import numpy as np
import pandas as pd
import tensorflow as tf

from experiments import files
from experiments import plots
from experiments import run_records
from experiments import seed_stats
from experiments import study as study_lib
from tasks import loo_ranking
from tff_rec.aggregators import factor_sum
from tff_rec.aggregators import inner
from tff_rec.algorithms import fedmf
from tff_rec.algorithms import item_updates
from tff_rec.data import implicit

FULL_DIM = 64
DIMS = (1, 2, 4, 8, 16, 32, 64)
RANKS = (1, 2, 4, 8, 16, 32)
GLOBAL_RANKS = (2, 4, 8, 16, 32, 64)
COMPRESSIONS = {'colr': 'CoLR', 'svd': 'SVD', 'topk': 'top-k'}
SECURE_RANK = 4
SECURE = {'plain sum': 'colr_recon_plain', 'secure sum': 'colr_recon_secure'}
SECURE_CLIPPED = tuple(f'train/aggregator/{c}' for c in inner.CLIPPED_COUNTS)
# The paper's Table 2: FedMF-64 on ML-1M moves 0.95 MB up and 0.95 MB down a
# client a round and is charged 80.43 min of communication over 1000 rounds,
# 2.7 s per MB moved: about 0.37 MB/s.
SECONDS_PER_MB = 80.43 * 60 / 1000 / (2 * 3706 * 64 * 4 / 2**20)
PAPER_RATE = 0.5  # the paper's client SGD rate
RATE = 'client_learning_rate'
HR, NDCG = 'test/hr_at_10', 'test/ndcg_at_10'
PAPER = ('ML-1M (d = 64): CoLR keeps about 94% of FedMF-64\'s HR at 1/16 of the payload '
         '(r = 4) and beats FedMF at every equal payload; SVD is competitive on ML-1M, top-k '
         'trails; SCoLR matches CoLR at the same uplink budget (Table 4: HR 63.9 / 63.3 / '
         '62.1 / 61.0 / 59.9 / 57.8 at R = 64 / 32 / 16 / 8 / 4 / 2).')


def _sweep_table(plan: study_lib.Plan, names, floor: float) -> list[str]:
  """Validation HR@10 of every configuration at each rate it tried (the chosen in bold)."""
  tried = {name: {dict(k)[RATE]: s for k, s in plan.methods[name].tried.items()}
           for name in names}
  rates = sorted({r for scores in tried.values() for r in scores})

  def shown(name, rate):
    if rate not in tried[name]:
      return ''
    value = tried[name][rate]
    text = 'not run' if value is None else 'diverged' if np.isnan(value) else f'{value:.3f}'
    return f'**{text}**' if rate == _rate(plan, name) else text

  def chosen(name):
    rate, scores = _rate(plan, name), tried[name]
    if rate is None:
      return 'not yet'
    inside = min(scores) < rate < max(scores)
    return f'{rate:g}' + ('' if inside else ' (edge: extensions ran out)')

  return ['| configuration | ' + ' | '.join(f'{r:g}' for r in rates) + ' | chosen |',
          '|---|' + '---|' * (len(rates) + 1),
          f'| popularity | {floor:.3f}' + ' |' * len(rates) + ' |',
          *(f'| {name} | ' + ' | '.join(shown(name, r) for r in rates)
            + f' | {chosen(name)} |' for name in names)]


def _rate(plan: study_lib.Plan, name: str) -> float | None:
  chosen = plan.methods[name].chosen
  return None if chosen is None else chosen[RATE]


def _metrics(records: study_lib.Records, cell: str) -> pd.DataFrame | None:
  path = records.path(cell) / 'metrics.csv'
  return pd.read_csv(path) if path.exists() else None


def _result(records: study_lib.Records, cells: list[str]) -> dict | None:
  """Over a configuration's finished seeds: HR and NDCG (lists), KB up / down per
  client per round and seconds per round (means)."""
  runs = [(records.summary(c), _metrics(records, c))
          for c in cells if records.finished(c)]
  if not runs:
    return None
  return dict(
      hr=[s[HR] for s, _ in runs], ndcg=[s[NDCG] for s, _ in runs],
      kb_up=np.mean([run_records.recorded(r, 'train/aggregator/bytes_up').mean() for _, r in runs])
      / 1024,
      kb_down=np.mean([run_records.recorded(s, 'train/aggregator/bytes_down_update')
                       for s, _ in runs]) / 1024,
      seconds=np.mean([r['train/round_seconds'].median() for _, r in runs]))


def _fmt(result: dict | None, base: dict | None = None) -> str:
  """'HR (share of FedMF-64's) / NDCG', each mean ± std over the seeds."""
  if result is None:
    return 'not run'
  share = f' ({100 * np.mean(result["hr"]) / np.mean(base["hr"]):.0f}%)' if base else ''
  return f'{seed_stats.spread(result["hr"])}{share} / {seed_stats.spread(result["ndcg"])}'


def additive_sum_errors(task, clients: int = 10, rank: int = SECURE_RANK) -> dict[str, float]:
  """Relative error, against the sum the server needs, of summing each method's
  payloads elementwise, as an additive (secure) aggregation does: one round
  of `clients` real client updates at the initial model.

  CoLR: sum(A) B vs sum(A B). SVD: (sum U S)(sum V)^T vs sum(U S V^T). Top-k:
  summed (index, value) pairs decoded vs the sum of the sparse updates.
  """
  items = tf.constant(task.initial_items)
  seed = tf.constant([task.config.seed, 0], tf.int64)
  dim, num_items = task.config.embedding_dim, task.data.num_items
  payloads = collections.defaultdict(list)
  for user in range(clients):
    rows = task.client_rows(user, [task.config.seed, user], task.config.local_epochs)
    dataset = implicit.epoch_batches(
        collections.OrderedDict(epoch=rows[0], item=rows[1], label=rows[2]),
        task.config.local_epochs, task.config.batch_size)
    for form in ('full', 'colr'):
      config = fedmf.FedMFConfig(num_items=num_items, dim=dim, l2=task.config.l2,
                                 form=item_updates.UpdateForm(form, rank))
      payload, *_ = fedmf.client_training(config, items, seed, tf.constant(
          task.initial_users[user]), rank, dataset)
      payloads[form].append(payload.numpy().astype(np.float64))
  basis = factor_sum.correlated_basis(factor_sum.round_seeds(seed)[0], rank, dim).numpy()
  k = item_updates.UpdateForm('topk', rank).top_k(num_items)
  svd, top = [], []
  for update in payloads['full']:
    u, s, vt = np.linalg.svd(update, full_matrices=False)
    svd.append((u[:, :rank] * s[:rank], vt[:rank]))
    kept = np.argsort(-np.abs(update.ravel()))[:k]
    top.append((kept, update.ravel()[kept]))

  def error(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))

  size = num_items * dim
  summed_indices = sum(i for i, _ in top) % size  # an additive channel sums them too
  decoded = np.zeros(size)
  np.add.at(decoded, summed_indices, sum(v for _, v in top))
  sparse_sum = np.zeros(size)
  for indices, values in top:
    np.add.at(sparse_sum, indices, values)
  return {
      'CoLR: sum(A) B': error(sum(payloads['colr']) @ basis,
                              sum(a @ basis for a in payloads['colr'])),
      'SVD: (sum U S)(sum V)': error(sum(a for a, _ in svd) @ sum(b for _, b in svd),
                                     sum(a @ b for a, b in svd)),
      'top-k: summed (index, value) pairs': error(decoded, sparse_sum),
  }


ROUNDING = 1e-12  # float64 sums of rounded client payloads differ from run to run below this


def _relative_error(value: float) -> str:
  """An error at float64 rounding says so, rather than digits a rerun does not keep."""
  return f'< {ROUNDING:.0e} (float64 rounding)' if value < ROUNDING else f'{value:.2e}'


def _plot(path: pathlib.Path, series: dict[str, dict[int, dict]], title: str) -> None:
  fig, ax = plots.figure()
  for label, results in series.items():
    points = sorted((r['kb_up'], np.mean(r['hr'])) for r in results.values() if r)
    if points:
      ax.plot(*zip(*points), marker='o', label=label)
  ax.set_xscale('log', base=2)
  plots.save(fig, ax, path, xlabel='upload per client per round (KB, log scale)',
             ylabel='test HR@10', title=title)


def render(study, folder: pathlib.Path, plan: study_lib.Plan, task) -> None:
  """table.md, payload_hr.png and compression_hr.png into `folder`, from its records
  (`task(seed)`: the study's task, built only for a value not derived yet)."""
  records = study_lib.Records(folder)
  derived = functools.partial(run_records.derived, records.folder / study_lib.RECORDS)
  first = study.seeds[0]
  config = study.spec(next(iter(study.methods)), {}, first).task_config
  describe = derived('describe', lambda: task(first).describe())
  num_items = derived('num_items', lambda: task(first).data.num_items)
  scores = [derived(f'popularity_test_s{seed}',
                    lambda seed=seed: task(seed).objective.popularity('test'))
            for seed in study.seeds]  # each seed draws the negatives
  popularity = dict(hr=[s['hr_at_10'] for s in scores], ndcg=[s['ndcg_at_10'] for s in scores])
  validation_floor = derived(f'popularity_validation_s{first}',
                             lambda: task(first).objective.popularity('validation'))['hr_at_10']
  rates = {name: _rate(plan, name) for name in study.methods}
  cells = {name: [study_lib.cell_name(name, plan.methods[name].chosen, s) for s in study.seeds]
           for name, rate in rates.items() if rate is not None}
  results = {name: _result(records, cells[name]) if name in cells else None for name in rates}
  base = results['fedmf_d64']
  grid = next(iter(study.methods.values())).grid[RATE]
  swept = [name for name, method in study.methods.items() if method.choice_of is None]
  bound = study.methods[SECURE['secure sum']].options['secure_sum_bound']
  secure = {'plain sum': SECURE['plain sum'], f'secure sum (bound {bound:g})': SECURE['secure sum']}
  _plot(folder / 'payload_hr.png',
        {'FedMF (d = 1..64)': {d: results[f'fedmf_d{d}'] for d in DIMS},
         'CoLR (d = 64, r = 1..32)': {r: results[f'colr_r{r}'] for r in RANKS}},
        f'{num_items} items: HR@10 against payload (Figure 3)')
  _plot(folder / 'compression_hr.png',
        {label: {r: results[f'{a}_r{r}'] for r in RANKS} for a, label in COMPRESSIONS.items()},
        'CoLR against compressing the full update (Figure 4)')

  def kb(result):
    return f'{result["kb_up"]:.1f}' if result else '-'

  def vs_popularity(result):  # HR@10 / NDCG@10 against popularity's over the seeds (each
    # draws its negatives)
    return ' / '.join(seed_stats.versus(result[m], popularity[m])
                      for m in ('hr', 'ndcg')) if result else '-'

  floor = f'Popularity (the floor): {_fmt(popularity)}; "vs popularity" on HR@10 / NDCG@10.'

  def sgd(name):
    return f'{rates[name]:g}' if rates.get(name) is not None else '-'

  figure3 = ['| payload | FedMF d | SGD | up KB | HR / NDCG | vs popularity | CoLR r | SGD | '
             'up KB | HR / NDCG (% of FedMF-64 HR) | vs popularity |', '|---|' + '---|' * 10]
  for d, r in zip(DIMS, (*RANKS, None)):
    fedmf_d, colr = results[f'fedmf_d{d}'], results.get(f'colr_r{r}') if r else None
    figure3.append(f'| 1/{FULL_DIM // d} | {d} | {sgd(f"fedmf_d{d}")} | {kb(fedmf_d)} | '
                   f'{_fmt(fedmf_d)} | {vs_popularity(fedmf_d)} | {r or "-"} | '
                   f'{sgd(f"colr_r{r}")} | {kb(colr)} | '
                   f'{_fmt(colr, base) if r else "-"} | {vs_popularity(colr)} |')
  figure4 = ['| r | SGD (CoLR / SVD / top-k) | up KB (CoLR / SVD / top-k) | CoLR | SVD | '
             'top-k | vs popularity, HR / NDCG (CoLR; SVD; top-k) |',
             '|---|---|---|---|---|---|---|']
  for r in RANKS:
    row = [results[f'{a}_r{r}'] for a in COMPRESSIONS]
    figure4.append(f'| {r} | {" / ".join(sgd(f"{a}_r{r}") for a in COMPRESSIONS)} | '
                   f'{" / ".join(kb(x) for x in row)} | '
                   + ' | '.join(_fmt(x, base) for x in row)
                   + f' | {"; ".join(vs_popularity(x) for x in row)} |')
  table2 = ['| method | up + down KB per client | communication s / round (est.) | '
            'computation s / round (measured) |', '|---|---|---|---|']
  for name in ['fedmf_d64', *(f'{a}_r{r}' for a in COMPRESSIONS for r in RANKS)]:
    x = results[name]
    if x:
      moved = x['kb_up'] + x['kb_down']
      table2.append(f'| {name} | {moved:.0f} | {moved / 1024 * SECONDS_PER_MB:.3f} | '
                    f'{x["seconds"]:.3f} |')
  table4 = ['| global rank R | SGD | mean up KB | HR / NDCG | vs popularity |',
            '|---|---|---|---|---|']
  for big in GLOBAL_RANKS:
    x = results[f'scolr_R{big}']
    table4.append(f'| {big} | {sgd(f"scolr_R{big}")} | {kb(x)} | {_fmt(x, base)} | '
                  f'{vs_popularity(x)} |')
  secure_rows = ['| CoLR r = 4, reconstructed users, in-process | SGD | HR / NDCG | vs popularity | '
                 'values clipped (upper / lower, all rounds and seeds) |', '|---|---|---|---|---|']
  for label, name in secure.items():
    frames = [f for f in (_metrics(records, c) for c in cells.get(name, [])) if f is not None]
    counts = [c for c in SECURE_CLIPPED  # the plain sum clips nothing
              if frames and run_records.recorded(frames[0], c, None) is not None]
    clipped = ' / '.join(f'{sum(run_records.recorded(f, c).sum() for f in frames):.0f}'
                         for c in counts) or '-'
    secure_rows.append(f'| {label} | {sgd(name)} | {_fmt(results[name])} | '
                       f'{vs_popularity(results[name])} | {clipped} |')
  tf.get_logger().setLevel('ERROR')  # each client's training traces its own loss once
  errors = derived(f'additive_sum_errors_s{config.seed}', lambda: additive_sum_errors(task(first)))
  additive = ['| payloads summed elementwise (as secure aggregation does) | relative error |',
              '|---|---|'] + [f'| {k} | {_relative_error(v)} |' for k, v in errors.items()]
  text = f"""# CoLR on MovieLens-100K: Figures 3-4, Tables 2 and 4 of Nguyen et al.

{describe}. Test HR@10 / NDCG@10 after {study.rounds} rounds of
{loo_ranking.Task.TRAIN_DEFAULTS['clients_per_round']} clients (the held-out
item ranked among 99 unseen items; ties count against it); (%) = share of
FedMF-64's HR. Client SGD (each embedding row moves by the mean gradient of its
batch occurrences, as the official code) at each configuration's rate chosen on
validation (below; the paper's is {PAPER_RATE:g}), {config.local_epochs} local epochs, batch
{config.batch_size}, {config.num_negatives} negatives per positive, decay {config.l2}; the
server adds the cohort's mean update. User vectors stored on their clients. Mean ± std over
seeds {list(study.seeds)}; {seed_stats.RULE_TEXT}. "vs popularity": a
row's HR@10 / NDCG@10 against popularity's over the same seeds (each draws the evaluation
negatives, so popularity has a spread too).

| | HR@10 / NDCG@10 | vs popularity |
|---|---|---|
| popularity (items by training users) | {_fmt(popularity)} | |
| FedMF d = 64, client SGD {sgd('fedmf_d64')} | {_fmt(base)} | {vs_popularity(base)} |

## Client learning rates: validation, seed 0

Each configuration's `launch.train` run at seed 0 for each rate tried; validation HR@10
(each user's second-to-last item; the test item untouched) after round {study.rounds}. The
rates {", ".join(f"{r:g}" for r in grid)}, extended past a winning edge (at most
{study.selection.extend} more); the chosen one (bold) runs over the seeds. The secure sum runs at the
plain sum's rate.

{chr(10).join(_sweep_table(plan, swept, validation_floor))}

## Figure 3: FedMF at smaller d against CoLR at d = 64, same payload

{floor}

{chr(10).join(figure3)}

![HR against payload](payload_hr.png)

## Figure 4: CoLR against SVD and top-k compression at the same budget

{floor}

{chr(10).join(figure4)}

![CoLR, SVD, top-k](compression_hr.png)

## Table 2: time per round

Communication estimated at {1 / SECONDS_PER_MB:.2f} MB/s each way (what the paper's Table 2
charges FedMF-64); computation = the simulated round's median wall time here (10 clients
one after another on 2 CPU cores, SVD and top-k included).

{chr(10).join(table2)}

## Table 4: SCoLR, local ranks uniform in 1..R every round

{floor}

{chr(10).join(table4)}

## Secure aggregation

{floor}

{chr(10).join(secure_rows)}

What an additive aggregation (secure sum, homomorphic encryption) computes from each method's
payloads, against the sum the server needs (one round of 10 real client updates at the
initial model, rank {SECURE_RANK}):

{chr(10).join(additive)}

Paper: {PAPER}
"""
  files.write_text(folder / 'table.md', text)
