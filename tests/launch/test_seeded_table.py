"""Seeded tables from cell records: mean ± std, per-seed values, reused records."""

import json
import math
import re

from absl import app
import pytest

from experiments import run_records
from experiments.papers import seeded_table

pytestmark = pytest.mark.usefixtures('reproduction_flags')
LOSS = run_records.TRAIN_LOSS


def _record(root, name, rounds=3, **summary):
  (root / name).mkdir(parents=True)
  seed = int(re.split(r'[_-]s', name)[-1]) if re.search(r'[_-]s\d+$', name) else 0
  (root / name / 'config.json').write_text(json.dumps(
      {'task': 'loo_ranking', 'data_dir': 'd', 'rounds': rounds, 'seed': seed}))
  (root / name / 'summary.json').write_text(json.dumps(summary))


def test_a_table_reads_its_records_and_never_runs_what_is_missing(tmp_path):
  records = tmp_path / 'cells'
  task = records / 'loo_ranking'
  _record(task, 'a_s0', **{'test/hr': 0.1, LOSS: 0.5})
  _record(task, 'a_s1', **{'test/hr': 0.3, LOSS: 0.4})
  _record(task, 'nan_s0', **{'test/hr': 0.0, LOSS: math.nan})
  _record(task, 'nan_s1', **{LOSS: 0.0, 'diverged_at_round': 2})  # stopped: no test metric
  _record(task, 'old_s0', **{'test/hr': 0.0, LOSS: math.nan})  # from before the trainer stopped
  # A row may reuse another reproduction's record: NAME_sS, or NAME for seed 0.
  _record(tmp_path / 'other', 'paper', **{'test/hr': 0.2, LOSS: 0.3})
  _record(tmp_path / 'other', 'paper_s1', **{'test/hr': 0.4, LOSS: 0.3})
  _record(tmp_path / 'other', 'seeded_s0', **{'test/hr': 0.5, LOSS: 0.3})
  _record(tmp_path / 'other', 'seeded_s1', **{'test/hr': 0.7, LOSS: 0.3})
  _record(tmp_path / 'other', 'single', **{'test/hr': 0.6, LOSS: 0.3})  # seed 0's only
  # or a study's, each seed's named by the path's {seed}
  _record(tmp_path / 'other', 'study-s0', **{'test/hr': 0.8, LOSS: 0.3})
  _record(tmp_path / 'other', 'study-s1', **{'test/hr': 0.9, LOSS: 0.3})
  table = seeded_table.Table(
      'loo_ranking', 'T', ('test/hr',),
      {'a': ('A', ('--x=1',), None), 'nan': ('NaN', (), None), 'old': ('Old', (), None),
       'gone': ('Gone', (), None), 'paper': ('P', (), tmp_path / 'other' / 'paper'),
       'seeded': ('S', (), tmp_path / 'other' / 'seeded'),
       'single': ('One', (), tmp_path / 'other' / 'single'),
       'study': ('Study', (), str(tmp_path / 'other' / 'study-s{seed}'))},
      ('--rounds=3',), None, (('data_dir', 'd'),))

  lines = seeded_table.tabulate(table, [0, 1], str(tmp_path / 'runs'), records,
                                wanted=False)

  assert lines[2] == ('`--task=loo_ranking` --data_dir=d --rounds=3; seeds [0, 1]; '
                      'mean ± std over the seeds (sample std).')
  rows = lines[6:-1]
  assert rows == ['| A | 0.200 ± 0.141 | 0.100, 0.300 |',
                  # diverged, no curve recorded, and no popularity row to read them at
                  '| NaN | diverged | diverged before its first evaluation of hr in 2 of 2 '
                  'seeds |',
                  '| Old | diverged | diverged before its first evaluation of hr in 1 of 1 '
                  'seeds |',
                  '| Gone | not run | not run |',
                  '| P | 0.300 ± 0.141 | 0.200, 0.400 |',
                  '| S | 0.600 ± 0.141 | 0.500, 0.700 |',
                  '| One | 0.600 | 0.600 |',  # seed 1 not run: seed 0's record is not its
                  '| Study | 0.850 ± 0.071 | 0.800, 0.900 |']
  assert not (tmp_path / 'runs').exists()


def test_a_paper_record_made_with_other_flags_is_refused_not_reused(tmp_path):
  _record(tmp_path / 'other', 'paper', rounds=50, **{'test/hr': 0.2, LOSS: 0.3})
  table = seeded_table.Table('loo_ranking', 'T', ('test/hr',),
                             {'paper': ('P', (), tmp_path / 'other' / 'paper')},
                             ('--rounds=3',), None, (('data_dir', 'd'),))

  with pytest.raises(app.UsageError, match=r'--rounds=3 \(recorded: 50\)'):
    seeded_table.tabulate(table, [0], str(tmp_path / 'runs'), tmp_path / 'cells',
                          wanted=False)


def test_a_sweep_picks_its_best_row_and_the_headline_waits_for_every_row(tmp_path):
  records = tmp_path / 'results' / 'cells' / 'loo_ranking'
  _record(records, 'lr1_s0', **{'validation/hr': math.nan, LOSS: math.nan})
  _record(records, 'lr2_s0', **{'validation/hr': 0.3, LOSS: 0.4})
  _record(records, 'best_s0', **{'test/hr': 0.25, LOSS: 0.4})
  rows = {f'lr{r}': (f'rate {r}', (f'--lr={r}',), None) for r in (1, 2, 3)}
  sweep = seeded_table.Table('loo_ranking', 'Sweep', ('validation/hr',), rows,
                             ('--rounds=3',), None, (('data_dir', 'd'),))
  headlines = lambda row: tuple(seeded_table.Table(  # pylint: disable=g-long-lambda
      'loo_ranking', f'{title} at {row}', ('test/hr',), {'best': ('B', (), None)},
      ('--rounds=3',), None, (('data_dir', 'd'),)) for title in ('Head', 'Tail'))

  def table_md():
    seeded_table.sweep_then_headline(['# H', ''], sweep, 'validation/hr', headlines, [0],
                                     str(tmp_path / 'runs'), tmp_path / 'results', False)
    return (tmp_path / 'results' / 'table.md').read_text()

  assert table_md().endswith('The headline rows wait for the whole sweep.')
  _record(records, 'lr3_s0', **{'validation/hr': 0.2, LOSS: 0.4})
  text = table_md()
  assert text.startswith('# H\n\n## Sweep')
  assert '## Head at lr2' in text and '| B | 0.250 | 0.250 |' in text  # NaN counts as worst
  assert text.index('## Head at lr2') < text.index('## Tail at lr2')  # each table, in order


def test_every_row_is_held_against_the_versus_rows_by_the_one_rule(tmp_path):
  records = tmp_path / 'cells'
  values = {'base': (0.30, 0.32), 'close': (0.29, 0.35), 'far': (0.20, 0.21), 'one': (0.1,)}
  for row, seeds in values.items():
    for seed, value in enumerate(seeds):
      _record(records / 'loo_ranking', f'{row}_s{seed}', **{'test/hr': value, LOSS: 0.4})
  table = seeded_table.Table(
      'loo_ranking', 'T', ('test/hr',), {r: (r.upper(), (), None) for r in values},
      ('--rounds=3',), None, (('data_dir', 'd'),), versus=('base',))

  lines = seeded_table.tabulate(table, [0, 1], str(tmp_path / 'runs'), records, wanted=False)

  assert lines[4] == '| method | hr | vs BASE | per seed (hr) |'
  assert [line.split(' | ')[2] for line in lines[6:-1]] == [
      '', 'undecided', '-0.105', 'one seed: no spread']


def test_a_diverged_seed_counts_at_its_last_evaluation_before_it_or_at_popularity(tmp_path):
  """Never dropped: one from before the trainer stopped diverging runs evaluated its
  NaN model as zero hits afterwards (not its result); one stopped before any
  evaluation reads at its seed's popularity."""
  records = tmp_path / 'cells' / 'loo_ranking'
  fine = ('0.4,0.3,0.3', '0.3,0.3,0.4', {})
  runs = {'old': ('0.4,0.3,nan', '0.2,0.5,0.0', {}),  # trained on past NaN, evaluated zero
          # stopped at round 3, which it evaluated (an output overflowing): not its result
          'stopped': ('0.4,0.3,0.3', '0.2,0.6,0.9', {'diverged_at_round': 3}),
          'early': ('nan,,', ',,', {'diverged_at_round': 1})}
  for row, seeds in {'old': ('old', 'fine'), 'stopped': ('stopped', 'fine'),
                     'mixed': ('fine', 'early'), 'early': ('early', 'early')}.items():
    for seed, run in enumerate(seeds):
      losses, hits, summary = runs.get(run, fine)
      name = f'{row}_s{seed}'
      _record(records, name, **{'test/hr': float(hits.split(',')[-1] or 'nan'),
                                LOSS: float(losses.split(',')[-1] or 'nan'), **summary})
      (records / name / 'metrics.csv').write_text(f'round,{LOSS},test/hr\n' + ''.join(
          f'{r},{l},{h}\n' for r, (l, h) in enumerate(zip(losses.split(','),
                                                        hits.split(',')), 1)))
  table = seeded_table.Table(
      'loo_ranking', 'T', ('test/hr',),
      {r: (r.upper(), (), None) for r in ('old', 'stopped', 'mixed', 'early')},
      ('--rounds=3',), '', (('data_dir', 'd'),))
  (tmp_path / 'cells' / run_records.DERIVED_FILE).write_text(json.dumps(
      {seeded_table._popularity_key(table, s): {'test/hr': 0.1 + s / 10}  # pylint: disable=protected-access
       for s in (0, 1)}))

  lines = seeded_table.tabulate(table, [0, 1], str(tmp_path / 'runs'), tmp_path / 'cells',
                                wanted=False)

  diverged = '1 of 2 diverged: read at their last evaluation'
  assert lines[6:-1] == [
      '| popularity | 0.150 ± 0.071 | 0.100, 0.200 |',
      f'| OLD | 0.450 ± 0.071 | 0.500, 0.400 ({diverged}) |',
      f'| STOPPED | 0.500 ± 0.141 | 0.600, 0.400 ({diverged}) |',
      '| MIXED | 0.300 ± 0.141 | 0.400, 0.200 (1 of 2 diverged: 1 before any evaluation, at '
      'popularity) |',
      '| EARLY | diverged | diverged before its first evaluation of hr in 2 of 2 seeds |']


def test_last_k_shows_the_mean_of_each_runs_last_evaluations_and_compares_it(tmp_path):
  """A metric that swings: the final values favour one row, the last three
  evaluations' means the other; the versus columns read the means, popularity's
  being its one value."""
  records = tmp_path / 'cells' / 'loo_ranking'
  curves = {'base': ([0.2, 0.1, 0.3, 0.5], [0.2, 0.1, 0.3, 0.5]),
            'swing': ([0.1, 0.9, 0.9, 0.1], [0.1, 0.9, 0.9, 0.2])}
  for row, seeds in curves.items():
    for seed, curve in enumerate(seeds):
      name = f'{row}_s{seed}'
      _record(records, name, rounds=5, **{'test/hr': curve[-1], LOSS: 0.4})
      (records / name / 'metrics.csv').write_text(
          'round,test/hr\n1,\n' + ''.join(f'{r},{v}\n' for r, v in enumerate(curve, 2)))
  table = seeded_table.Table(
      'loo_ranking', 'T', ('test/hr',), {r: (r.upper(), (), None) for r in curves},
      ('--rounds=5',), '', (('data_dir', 'd'),), versus=('base', 'popularity'), last_k=3)
  (tmp_path / 'cells' / run_records.DERIVED_FILE).write_text(json.dumps(
      {seeded_table._popularity_key(table, s): {'test/hr': 0.4}  # pylint: disable=protected-access
       for s in (0, 1)}))

  lines = seeded_table.tabulate(table, [0, 1], str(tmp_path / 'runs'), tmp_path / 'cells',
                                wanted=False)

  assert 'mean of the last 3 evaluations' in lines[2]
  assert lines[4] == ('| method | hr | hr, mean of the last 3 | vs BASE (mean of the last 3) | '
                      'vs popularity (mean of the last 3) | per seed (hr) |')
  assert lines[6:9] == [
      '| popularity | 0.400 ± 0.000 | 0.400 ± 0.000 | +0.100 |  | 0.400, 0.400 |',
      '| BASE | 0.500 ± 0.000 | 0.300 ± 0.000 |  | -0.100 | 0.500, 0.500 |',
      '| SWING | 0.150 ± 0.071 | 0.650 ± 0.024 | +0.350 | +0.250 | 0.100, 0.200 |']


def test_a_sweep_run_scores_its_metric_nan_when_it_diverged_and_none_unrun():
  assert seeded_table.score({'v': 0.3, LOSS: 0.4}, 'v') == 0.3
  assert math.isnan(seeded_table.score({'v': 0.0, LOSS: math.nan}, 'v'))
  assert math.isnan(seeded_table.score({LOSS: 0.1, 'diverged_at_round': 5}, 'v'))
  assert seeded_table.score('not run', 'v') is None


def test_a_rate_sweep_extends_past_a_winning_edge_and_renders_each_rate():
  """The best of 0.1, 0.3 is the top: 1 is tried and diverges, so 0.3 is chosen,
  inside the rates tried; the table shows every rate, the chosen one in bold."""
  runs = {0.1: {'v': 0.5, 'w': 0.2, LOSS: 0.4}, 0.3: {'v': 0.6, 'w': 0.25, LOSS: 0.3},
          1.0: {'v': 0.0, 'w': 0.0, LOSS: math.nan}}
  asked = []

  def run(rate):
    asked.append(rate)
    return runs[rate]

  swept = seeded_table.sweep_rates((0.1, 0.3), run, 'v', max_extensions=2)

  assert asked == [0.1, 0.3, 1.0] and swept.chosen == 0.3
  assert seeded_table.sweep_lines(swept, 'M, lr', ('v', 'w'), {'v': 0.4, 'w': 0.1}) == [
      '| M, lr | v | w |', '|---|---|---|', '| popularity | 0.400 | 0.100 |',
      '| 0.1 | 0.500 | 0.200 |', '| **0.3** | 0.600 | 0.250 |', '| 1 | diverged | diverged |',
      '', 'Rates tried: 0.1, **0.3**, 1; 0.3 wins, inside the rates tried.', '']


def test_a_sweep_with_an_unrun_rate_chooses_nothing_yet():
  swept = seeded_table.sweep_rates((0.1, 0.3), {0.1: {'v': 0.5, LOSS: 0.4}}.get, 'v',
                                   max_extensions=2)

  assert swept.chosen is None
  lines = seeded_table.sweep_lines(swept, 'M', ('v',))
  assert '| 0.3 | not run |' in lines
  assert lines[-2] == ('Rates tried: 0.1, 0.3 (not run); not chosen yet: the sweep is not '
                       'complete.')


def test_a_sweep_whose_extensions_ran_out_says_its_rate_is_at_the_edge():
  runs = {0.1: {'v': 0.5, LOSS: 0.4}, 0.3: {'v': 0.6, LOSS: 0.4}, 1.0: {'v': 0.7, LOSS: 0.4}}
  swept = seeded_table.sweep_rates((0.1, 0.3), runs.get, 'v', max_extensions=1)

  assert swept.chosen == 1.0
  assert seeded_table.sweep_lines(swept, 'M', ('v',))[-2] == (
      'Rates tried: 0.1, 0.3, **1**; 1 wins, at the edge of the rates tried (its extensions '
      'ran out).')
