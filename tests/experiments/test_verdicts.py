"""The one verdict rule: Welch's test for a difference, TOST for "level", not
testable below a floor."""

import math

import numpy as np
import pytest
from scipy import stats

from experiments import verdicts


def test_the_difference_test_is_welchs():
  rng = np.random.default_rng(0)
  for _ in range(20):
    a, b = rng.normal(0.7, 0.01, 3), rng.normal(0.705, 0.02, 5)
    got = verdicts.compare(a, b)
    assert got.p_difference == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert got.difference == pytest.approx(a.mean() - b.mean())


def test_level_is_an_equivalence_test_its_confidence_interval_inside_the_margin():
  """TOST at level a says level exactly when the (1 - 2a) interval of the difference
  lies inside +-margin x |reference|: the same test written another way."""
  rng = np.random.default_rng(1)
  decided = 0
  for _ in range(200):
    a, b = rng.normal(0.700, 0.002, 3), rng.normal(rng.uniform(0.69, 0.71), 0.002, 3)
    got = verdicts.compare(a, b)
    se = math.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 3)
    df = se ** 4 / ((a.var(ddof=1) / 3) ** 2 / 2 + (b.var(ddof=1) / 3) ** 2 / 2)
    half = stats.t.ppf(0.95, df) * se
    delta = 0.01 * abs(b.mean())
    inside = -delta < got.difference - half and got.difference + half < delta
    assert (got.p_level < 0.05) == inside
    decided += inside
  assert 0 < decided < 200  # both outcomes were met


@pytest.mark.parametrize('a, b, metric, word', [
    ([0.70, 0.71, 0.72], [0.60, 0.61, 0.62], 'eval/test_auc', 'above'),
    ([0.60, 0.61, 0.62], [0.70, 0.71, 0.72], 'eval/test_auc', 'below'),
    ([0.60, 0.61, 0.62], [0.70, 0.71, 0.72], 'eval/test_logloss', 'above'),  # lower: better
    ([0.7000, 0.7002, 0.6998], [0.7001, 0.6999, 0.7003], 'eval/test_auc', 'level'),
    ([0.60, 0.70, 0.80], [0.65, 0.70, 0.75], 'eval/test_auc', 'undecided'),
    ([0.70, 0.70], [0.70, 0.70], 'eval/test_auc', 'level'),  # no spread, the same
    ([0.71, 0.71], [0.70, 0.70], 'eval/test_auc', 'above'),  # no spread, apart
])
def test_each_word_where_the_seeds_decide_it(a, b, metric, word):
  assert verdicts.judge(a, b, metric).word == word


def test_one_seed_decides_nothing_and_rows_below_a_floor_are_not_testable():
  got = verdicts.judge([0.7], [0.6, 0.61], 'eval/test_auc')
  assert (got.word, str(got)) == ('undecided',
                                  'undecided (1 seed(s): a test needs 2 or more each)')
  floors = {'popularity': [0.80, 0.81, 0.80]}
  got = verdicts.judge([0.70, 0.71, 0.72], [0.60, 0.61, 0.62], 'eval/test_auc', floors)
  assert str(got) == 'not testable (both below popularity)'
  # one row above the floor: the comparison stands
  assert verdicts.judge([0.90, 0.91, 0.92], [0.60, 0.61, 0.62], 'eval/test_auc',
                        floors).word == 'above'
  assert str(verdicts.judge([0.70, 0.71, 0.72], [0.60, 0.61, 0.62], 'eval/test_auc')
             ) == 'above (+0.100, p < 0.001)'
