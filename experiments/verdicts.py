"""One rule for every comparison of two rows over seeds: above, level, below,
undecided, or not testable.

* above / below: Welch's t-test (unequal variances) on the seeds' values, two-sided
  at `level`: the difference of the means is beyond what the seeds' spread explains;
  above is better (higher, or lower where lower is better).
* level: an equivalence test (TOST, two one-sided Welch tests at `level`) against
  a margin of `margin` x |the reference's mean|: the means are shown to differ by
  less than that. "Within noise" is not "level": a difference neither test decides
  is undecided (more seeds may decide it).
* not testable: both rows are below a floor (by this rule): a model that knows less
  than the floor compared with another such says nothing of the claim.
The rule is fixed before any number is read (RULE); scipy (installed with TFF,
pinned in requirements.txt) gives Student's t distribution.
"""

import dataclasses
import math
from typing import Sequence

import numpy as np
from scipy import stats

ABOVE, LEVEL, BELOW, UNDECIDED, NOT_TESTABLE = (
    'above', 'level', 'below', 'undecided', 'not testable')


@dataclasses.dataclass(frozen=True)
class Rule:
  level: float = 0.05  # of the two-sided difference test, and of each one-sided TOST test
  margin: float = 0.01  # "level with": within this share of the reference's mean


RULE = Rule()


@dataclasses.dataclass(frozen=True)
class Verdict:
  word: str
  difference: float  # mean(a) - mean(b); NaN when there is nothing to compare
  p_difference: float  # Welch's two-sided p
  p_level: float  # TOST's p (the larger of its two one-sided p's)
  why: str = ''  # for not testable / undecided: what is missing

  def __str__(self) -> str:
    if self.word in (ABOVE, BELOW):
      return f'{self.word} ({self.difference:+.3f}, p {_p(self.p_difference)})'
    if self.word == LEVEL:
      return f'level ({self.difference:+.3f}, equivalence p {_p(self.p_level)})'
    if self.word == UNDECIDED and math.isfinite(self.difference):
      return (f'undecided ({self.difference:+.3f}, p {_p(self.p_difference)}, '
              f'equivalence p {_p(self.p_level)})')
    return f'{self.word} ({self.why})' if self.why else self.word


def _p(value: float) -> str:
  return '< 0.001' if value < 0.001 else f'= {value:.3f}'


def _welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
  """The difference's standard error and Welch-Satterthwaite degrees of freedom."""
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  se = math.sqrt(va + vb)
  if se == 0:
    return 0.0, math.inf
  df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
  return se, df


def _one_sided(t: float, df: float) -> float:
  """P(T >= t) for Student's t with `df` degrees of freedom."""
  return float(stats.t.sf(t, df))


def compare(a: Sequence[float], b: Sequence[float], *, higher_is_better: bool = True,
            rule: Rule = RULE) -> Verdict:
  """`a` against the reference `b` (each a value per seed, NaN-free)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if len(a) < 2 or len(b) < 2:
    return Verdict(UNDECIDED, math.nan, math.nan, math.nan,
                   f'{min(len(a), len(b))} seed(s): a test needs 2 or more each')
  difference = float(a.mean() - b.mean())
  se, df = _welch(a, b)
  delta = rule.margin * abs(float(b.mean()))
  if se == 0:  # no spread at all: the difference is what it is
    p_difference = 1.0 if difference == 0 else 0.0
    p_level = 0.0 if abs(difference) < delta else 1.0
  else:
    p_difference = min(1.0, 2 * _one_sided(abs(difference) / se, df))
    # TOST: reject "difference <= -delta" and "difference >= delta", each one-sided
    p_level = max(_one_sided((difference + delta) / se, df),
                  _one_sided((delta - difference) / se, df))
  if p_difference < rule.level:
    better = (difference > 0) == higher_is_better
    word = ABOVE if better else BELOW
  elif p_level < rule.level:
    word = LEVEL
  else:
    word = UNDECIDED
  return Verdict(word, difference, p_difference, p_level)


def higher_is_better(metric: str) -> bool:
  """A loss (logloss, train loss) is better lower; every other metric here higher."""
  return 'loss' not in metric.split('/')[-1]


def below_floor(rows: Sequence[Sequence[float]], floors: dict[str, Sequence[float]], *,
                higher_is_better: bool = True, rule: Rule = RULE) -> str | None:
  """The first of `floors` (name -> a value per seed) that every one of `rows` is
  below by the rule, or None: rows that all know less than a floor say nothing of
  a claim between them."""
  for name, floor in floors.items():
    if all(compare(row, floor, higher_is_better=higher_is_better, rule=rule).word == BELOW
           for row in rows):
      return name
  return None


def judge(a: Sequence[float], b: Sequence[float], metric: str,
          floors: dict[str, Sequence[float]] | None = None, *, rule: Rule = RULE) -> Verdict:
  """`a` against `b` on `metric`, not testable where both are below one of `floors`
  (name -> a value per seed) by the same rule."""
  higher = higher_is_better(metric)
  floor = below_floor((a, b), floors or {}, higher_is_better=higher, rule=rule)
  if floor is not None:
    return Verdict(NOT_TESTABLE, math.nan, math.nan, math.nan, f'both below {floor}')
  return compare(a, b, higher_is_better=higher, rule=rule)
