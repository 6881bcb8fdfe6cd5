"""Claims judged from records: each verdict word from the rule over the seeds'
readings, floors, rounds to a target, drops, diverged seeds; the README blocks."""

import json
import math
import pathlib
import re

import pytest

from experiments import claims

REPO = pathlib.Path(__file__).resolve().parents[2]
METRIC = 'test/hr'


def _cell(cells: pathlib.Path, name: str, curve, diverged_at: int | None = None):
  """A finished record: `curve` evaluated at rounds 1, 2, ... (None: not evaluated)."""
  (cells / name).mkdir(parents=True)
  lines = ''.join(f'{r},{"" if v is None else v}\n' for r, v in enumerate(curve, 1))
  (cells / name / 'metrics.csv').write_text(f'round,{METRIC}\n{lines}')
  summary = {'train/client_work/train/loss': 0.5}
  if diverged_at is not None:
    summary['diverged_at_round'] = diverged_at
  (cells / name / 'summary.json').write_text(json.dumps(summary))


def _rows(cells, values: dict[str, list[list[float]]]):
  for row, seeds in values.items():
    for seed, curve in enumerate(seeds):
      _cell(cells, f'{row}_s{seed}', curve)


def _claim(comparisons, reading=None, floors=(), seeds=(0, 1, 2)):
  return claims.parse({
      'paper': 'P', 'claim': 'c', 'data': 'D', 'folder': 'f', 'seeds': list(seeds),
      'reading': reading or {'metric': METRIC}, 'floors': list(floors),
      'comparison': [{'a': {'label': a, 'cells': f'{a}_s{{seed}}'},
                      'b': {'label': b, 'cells': f'{b}_s{{seed}}'}, 'paper': word}
                     for a, b, word in comparisons]}, 'test')


@pytest.fixture
def results(tmp_path):
  cells = tmp_path / 'f' / 'cells'
  _rows(cells, {'high': [[0.5, 0.600], [0.5, 0.601], [0.5, 0.602]],
                'low': [[0.5, 0.50], [0.5, 0.51], [0.5, 0.52]],
                'twin': [[0.5, 0.6005], [0.5, 0.6010], [0.5, 0.6015]],  # level with high
                'loose': [[0.5, 0.40], [0.5, 0.60], [0.5, 0.80]]})
  (cells / 'derived.json').write_text(json.dumps({
      'floor s0': [0.7, 0.1], 'floor s1': [0.7, 0.1], 'floor s2': [0.7, 0.1]}))
  return tmp_path


@pytest.mark.parametrize('comparisons, word', [
    ([('high', 'low', 'above')], claims.REPRODUCED),
    ([('high', 'low', 'above'), ('high', 'twin', 'level')], claims.REPRODUCED),
    ([('high', 'low', 'below')], claims.NOT_REPRODUCED),  # decided against the paper
    ([('high', 'twin', 'above')], claims.NOT_REPRODUCED),  # level is a decision too
    ([('loose', 'low', 'above')], claims.UNDECIDED),
    ([('loose', 'low', 'above'), ('high', 'low', 'above')], claims.UNDECIDED),
])
def test_a_claims_verdict_is_every_comparisons_word_against_the_papers(
    results, comparisons, word):
  assert claims.judge(_claim(comparisons), results)[0] == word


def test_rows_both_below_a_floor_are_not_testable_by_the_same_test(results):
  floors = [{'label': 'popularity', 'derived': 'floor s{seed}', 'key': 0}]
  word, judged, shown = claims.judge(_claim([('high', 'low', 'above')], floors=floors), results)
  assert word == claims.NOT_TESTABLE
  assert str(judged[0].verdict) == 'not testable (both below popularity)'
  assert shown == {'popularity': [0.7, 0.7, 0.7]}
  # a floor both rows are above changes nothing
  floors = [{'label': 'low floor', 'derived': 'floor s{seed}', 'key': 1}]
  assert claims.judge(_claim([('high', 'low', 'above')], floors=floors), results)[0] == (
      claims.REPRODUCED)


def test_the_reading_is_the_mean_of_the_last_k_evaluations(results):
  """The last 2 evaluations' mean per seed; read at round 1 alone, 'loose' and
  'low' are both 0.5."""
  judged = claims.judge(_claim([('high', 'low', 'above')], {'metric': METRIC, 'last': 2}),
                        results)[1][0]
  assert judged.a.compared == pytest.approx([0.55, 0.5505, 0.551])
  at_one = claims.judge(_claim([('loose', 'low', 'level')], {'metric': METRIC, 'at_round': 1}),
                        results)
  assert at_one[0] == claims.REPRODUCED


def test_a_diverged_seed_reads_at_its_last_finite_evaluations_and_is_counted(tmp_path):
  cells = tmp_path / 'f' / 'cells'
  _rows(cells, {'ref': [[0.5, 0.5], [0.5, 0.51], [0.5, 0.52]]})
  _cell(cells, 'a_s0', [0.6, 0.7])
  _cell(cells, 'a_s1', [0.65, math.nan], diverged_at=2)  # its last finite value: 0.65
  _cell(cells, 'a_s2', [0.6, 0.72])
  word, judged, _ = claims.judge(_claim([('a', 'ref', 'above')]), tmp_path)
  assert judged[0].a.compared == [0.7, 0.65, 0.72] and judged[0].a.diverged == 1
  assert word == claims.REPRODUCED
  assert '(1 of 3 seeds diverged)' in claims.evidence(_claim([('a', 'ref', 'above')]),
                                                      judged, {})


def test_rounds_to_a_target_count_a_run_that_never_reaches_it_one_past_the_end(tmp_path):
  """The target is the reference's best (here 0.8, less the margin 0.1); `fast`
  reaches it at rounds 2-3, `slow` never does in 4 rounds (counted at 5): fewer
  rounds is better."""
  cells = tmp_path / 'f' / 'cells'
  _rows(cells, {'central': [[0.5, 0.8]] * 3,
                'fast': [[0.5, 0.71, 0.7, 0.7], [0.5, 0.6, 0.71, 0.7], [0.5, 0.75, 0.7, 0.7]],
                'slow': [[0.5, 0.6, 0.6, 0.6], [0.5, 0.6, 0.65, 0.6], [0.5, 0.5, 0.6, 0.6]],
                'never': [[0.1, 0.1, 0.1, 0.1]] * 3})
  reading = {'metric': METRIC, 'rounds_to': 'central_s{seed}', 'margin': 0.1}
  word, judged, _ = claims.judge(_claim([('fast', 'slow', 'above')], reading), tmp_path)
  assert judged[0].a.compared == [2, 3, 2] and judged[0].b.compared == [5, 5, 5]
  assert word == claims.REPRODUCED
  both_never = claims.judge(_claim([('slow', 'never', 'above')], reading), tmp_path)
  assert str(both_never[1][0].verdict) == 'not testable (neither reaches the target)'


def test_a_drop_from_a_centralized_twin_is_better_lower(tmp_path):
  cells = tmp_path / 'f' / 'cells'
  _rows(cells, {'c': [[0.10]] * 3, 'f_small': [[0.09], [0.091], [0.089]],
                'f_big': [[0.05], [0.051], [0.049]]})
  claim = claims.parse({
      'paper': 'P', 'claim': 'c', 'data': 'D', 'folder': 'f', 'reading': {'metric': METRIC},
      'comparison': [{'a': {'label': 'A', 'cells': 'f_small_s{seed}', 'drop_from': 'c_s{seed}'},
                      'b': {'label': 'B', 'cells': 'f_big_s{seed}', 'drop_from': 'c_s{seed}'},
                      'paper': 'above'}]}, 'test')
  word, judged, _ = claims.judge(claim, tmp_path)
  assert judged[0].a.compared == pytest.approx([0.1, 0.09, 0.11])
  assert word == claims.REPRODUCED and judged[0].verdict.difference < 0


@pytest.mark.parametrize('change, message', [
    (lambda c: c.pop('reading'), "'reading' is missing"),
    (lambda c: c.update(colour='red'), "'colour' is not a field"),
    (lambda c: c['comparison'][0].update(paper='better'),
     "paper = 'better'; one of above, level, below"),
    (lambda c: c['comparison'][0]['a'].update(cells='a_s0'),
     "give a record name with {seed} or one name per seed (3)"),
])
def test_a_bad_claim_is_named_with_its_field(change, message):
  raw = {'paper': 'P', 'claim': 'c', 'data': 'D', 'folder': 'f', 'reading': {'metric': METRIC},
         'comparison': [{'a': {'label': 'A', 'cells': 'a_s{seed}'},
                         'b': {'label': 'B', 'cells': 'b_s{seed}'}, 'paper': 'above'}]}
  change(raw)
  with pytest.raises(claims.ClaimError, match=message.replace('(', r'\(').replace(
      ')', r'\)').replace('{', r'\{').replace('}', r'\}')):
    claims.parse(raw, 'claims.toml claim 1')


def test_a_claim_over_a_record_never_committed_is_refused(results):
  with pytest.raises(claims.ClaimError, match='gone_s0: no finished record'):
    claims.judge(_claim([('gone', 'low', 'above')]), results)


def test_a_block_replaces_only_what_is_between_its_markers():
  text = f'# T\n\nprose\n{claims.BEGIN}\nold\n{claims.END}\n\nmore prose\n'
  assert claims.with_block(text, 'NEW', 'R') == '# T\n\nprose\nNEW\n\nmore prose\n'
  with pytest.raises(claims.ClaimError, match='R: needs one line'):
    claims.with_block('# T\n', 'NEW', 'R')


# A verdict's words: outside a generated block they would judge by hand (a word
# in italics is the rule's own definition of it).
VERDICT_WORDS = ('reproduced', 'reproduces', 'not testable', 'within noise', 'beyond noise',
                 'level with', 'does not hold')


def _hand_verdicts(text: str) -> list[str]:
  outside = ''.join(part.split(claims.END, 1)[-1] for part in text.split(claims.BEGIN))
  outside = re.sub(r'\*[^*\n]+\*', '', outside)
  return [w for w in VERDICT_WORDS if w in outside.lower()]


def test_results_readme_states_no_verdict_outside_its_generated_block():
  readme = (REPO / 'results' / 'README.md').read_text()
  assert _hand_verdicts(readme) == []
  # a verdict written by hand is named
  assert _hand_verdicts(readme + '\nFAIR-HET is level with FedAvg.\n') == ['level with']
  assert _hand_verdicts(readme + '\nIts headline *reproduces*.\n') == []  # a definition


def test_every_claim_in_the_committed_file_is_judged_from_committed_records():
  every = claims.load(REPO / 'results' / claims.FILE)
  assert len(every) >= 15
  for claim in every:
    word, judged, _ = claims.judge(claim, REPO / 'results')
    assert word in (claims.REPRODUCED, claims.NOT_REPRODUCED, claims.NOT_TESTABLE,
                    claims.UNDECIDED) and len(judged) == len(claim.comparisons)


@pytest.mark.parametrize('readme', sorted((REPO / 'results').glob('*/README.md')),
                         ids=lambda p: p.parent.name)
def test_no_folder_readme_judges_a_claim_outside_its_generated_block(readme):
  """Nor uses the earlier noise rule's words ("within noise", "level with"): its
  prose reads the tables by the one rule."""
  text = readme.read_text()
  assert _hand_verdicts(text) == []
  assert _hand_verdicts(text + '\nFedAvg is within noise of it.\n') == ['within noise']
