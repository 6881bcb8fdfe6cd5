"""Learning-rate sweeps whose chosen rate is not at the edge of what was tried.

A grid whose best rate sits at one of its ends is extended past that end along
the 1, 3, 10, 30, ... ladder, one rate at a time, until the best is inside the
rates tried, or the rate past the end diverged (the end is then the optimum),
or `max_extensions` rates were added. A reproduction script scores each rate
(a run of its own); nothing here knows of runs or flags.
"""

from typing import Callable

import numpy as np


def beyond(rate: float, up: bool) -> float:
  """The next rate of the 1, 3, 10, 30, ... ladder above (or below) `rate`."""
  leading = rate / 10 ** np.floor(np.log10(rate))
  factor = (3 if leading < 2 else 10 / 3) if up else (1 / 3 if leading > 2 else 0.3)
  return float(f'{rate * factor:.3g}')


def sweep(grid, score: Callable[[float], float | None], *, lower_is_better: bool,
          max_extensions: int) -> tuple[dict[float, float | None], float | None]:
  """Every rate tried with its score (None: not run; NaN: diverged), and the best
  rate (None until every rate tried has a score)."""
  sign = 1 if lower_is_better else -1
  scores = {rate: score(rate) for rate in grid}
  while True:
    if None in scores.values():
      return scores, None
    finite = {r: s for r, s in scores.items() if np.isfinite(s)}
    if not finite:  # every rate diverged: the smallest, whose finals show as diverged too
      return scores, min(scores)
    best = min(finite, key=lambda r: sign * finite[r])
    edges = [up for up, end in ((True, max(scores)), (False, min(scores))) if best == end]
    if not edges or len(scores) - len(grid) >= max_extensions:
      return scores, best
    rate = beyond(best, edges[0])
    scores[rate] = score(rate)
    if scores[rate] is not None and not np.isfinite(scores[rate]):
      return scores, best  # the rate past the edge diverges: the best is interior


def describe(scores: dict[float, float | None], chosen: float | None) -> str:
  """The rates a sweep tried, the chosen one in bold."""
  return ', '.join(f'**{r:g}**' if r == chosen else f'{r:g}' + (' (not run)' * (s is None))
                   for r, s in sorted(scores.items()))
