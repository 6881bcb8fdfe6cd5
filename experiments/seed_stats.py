"""Seed statistics of the reproduction tables: mean ± std, and the rule that a
difference inside the seeds' spread is noise."""

import numpy as np

NOT_RUN = 'not run'  # a cell without a result


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
  """'mean ± std' (sample std) of a cell's seeds, each times `scale`."""
  if not values:
    return NOT_RUN
  values = [scale * v for v in values]
  std = f' ± {np.std(values, ddof=1):.{digits}f}' if len(values) > 1 else ''
  return f'{np.mean(values):.{digits}f}{std}'


def beyond_noise(a: list[float], b: list[float]) -> bool:
  """Whether two cells' means differ by more than the sum of their seeds' stds.

  The reading's rule: a difference inside the seeds' spread is called noise.
  """
  if len(a) < 2 or len(b) < 2:
    return False  # one seed has no spread to judge by
  return abs(np.mean(a) - np.mean(b)) > np.std(a, ddof=1) + np.std(b, ddof=1)


def versus(a: list[float], b: list[float], scale: float = 1.0, digits: int = 3) -> str:
  """Cell a against cell b over seeds: the difference of the means (times
  `scale`) where it is beyond noise (beyond_noise), else 'within noise'."""
  if not a or not b:
    return NOT_RUN
  if len(a) < 2 or len(b) < 2:
    return 'one seed: no spread'
  if not beyond_noise(a, b):
    return 'within noise'
  return f'{scale * (np.mean(a) - np.mean(b)):+.{digits}f}'


def against_floor(values: list[float], floor: list[float], digits: int = 3) -> str:
  """A row's values over seeds against a no-model floor's over the same seeds
  (a floor that does not vary with the seed: its value once per seed): 'above
  (+d)' / 'below (-d)' where beyond noise, else versus's verdict."""
  verdict = versus(values, floor, digits=digits)
  if verdict.startswith(('+', '-')):
    return f'{"above" if verdict.startswith("+") else "below"} ({verdict})'
  return verdict
