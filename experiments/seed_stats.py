"""Seed statistics of the reproduction tables: mean ± std, and each difference
read by the one rule of experiments.verdicts."""

import numpy as np

from experiments import verdicts

NOT_RUN = 'not run'  # a cell without a result
UNDECIDED = 'undecided'  # neither a difference nor a level is shown by the rule
# What a table's legend says of its comparison columns.
RULE_TEXT = (
    f'a comparison shows the difference of the seeds\' means where Welch\'s test finds it '
    f'at p < {verdicts.RULE.level:g} (experiments.verdicts), "level" where an equivalence '
    f'test shows the means within {100 * verdicts.RULE.margin:g}% of the reference\'s, '
    f'else "{UNDECIDED}" (more seeds may decide it)')


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
  """'mean ± std' (sample std) of a cell's seeds, each times `scale`."""
  if not values:
    return NOT_RUN
  values = [scale * v for v in values]
  std = f' ± {np.std(values, ddof=1):.{digits}f}' if len(values) > 1 else ''
  return f'{np.mean(values):.{digits}f}{std}'


def versus(a: list[float], b: list[float], scale: float = 1.0, digits: int = 3) -> str:
  """Cell a against the reference cell b over seeds, by verdicts.compare: the
  difference of the means (times `scale`) where the rule finds one, 'level' where
  it shows them level, else 'undecided'."""
  if not a or not b:
    return NOT_RUN
  if len(a) < 2 or len(b) < 2:
    return 'one seed: no spread'
  verdict = verdicts.compare(a, b)
  if verdict.word in (verdicts.ABOVE, verdicts.BELOW):
    return f'{scale * verdict.difference:+.{digits}f}'
  return 'level' if verdict.word == verdicts.LEVEL else UNDECIDED


def against_floor(values: list[float], floor: list[float], digits: int = 3) -> str:
  """A row's values over seeds against a no-model floor's over the same seeds
  (a floor that does not vary with the seed: its value once per seed): 'above
  (+d)' / 'below (-d)' where the rule finds a difference, else versus's word."""
  verdict = versus(values, floor, digits=digits)
  if verdict.startswith(('+', '-')):
    return f'{"above" if verdict.startswith("+") else "below"} ({verdict})'
  return verdict
