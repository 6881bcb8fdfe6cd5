"""Rate sweeps extended past a best edge (experiments.rate_sweep)."""

import math

import pytest

from experiments import rate_sweep
from experiments import server_rates
from tasks import ctr
from tff_rec import registry


def test_rates_beyond_an_edge_follow_the_1_3_10_ladder():
  assert [rate_sweep.beyond(r, up=True) for r in (0.1, 0.3, 1, 3)] == [0.3, 1, 3, 10]
  assert [rate_sweep.beyond(r, up=False) for r in (0.1, 0.3, 1, 3)] == [0.03, 0.1, 0.3, 1]


def _sweep(scores: dict[float, float], grid=(0.1, 0.3, 1.0)):
  """The sweep over `grid` where rate r scores scores[r] (higher is better)."""
  return rate_sweep.sweep(grid, scores.get, lower_is_better=False, max_extensions=3)


@pytest.mark.parametrize('scores,tried,best', [
    # interior already: nothing added
    ({0.1: 0.6, 0.3: 0.7, 1.0: 0.65}, [0.1, 0.3, 1.0], 0.3),
    # rising at the top: 3 is tried, then 10, where it falls
    ({0.1: 0.6, 0.3: 0.62, 1.0: 0.64, 3.0: 0.66, 10.0: 0.5}, [0.1, 0.3, 1.0, 3.0, 10.0], 3.0),
    # best at the bottom: 0.03 is tried and loses
    ({0.1: 0.7, 0.3: 0.6, 1.0: 0.5, 0.03: 0.65}, [0.03, 0.1, 0.3, 1.0], 0.1),
    # the rate past the edge diverges: the edge is the optimum
    ({0.1: 0.6, 0.3: 0.62, 1.0: 0.64, 3.0: math.nan}, [0.1, 0.3, 1.0, 3.0], 1.0),
    # still rising after 3 extensions: stops there, at the edge
    ({0.1: 0.1, 0.3: 0.2, 1.0: 0.3, 3.0: 0.4, 10.0: 0.5, 30.0: 0.6, 100.0: 0.7},
     [0.1, 0.3, 1.0, 3.0, 10.0, 30.0], 30.0),
    # every rate diverged: the smallest
    ({0.1: math.nan, 0.3: math.nan, 1.0: math.nan}, [0.1, 0.3, 1.0], 0.1),
])
def test_a_best_rate_at_an_edge_extends_the_grid(scores, tried, best):
  swept, chosen = _sweep(scores)
  assert sorted(swept) == tried and chosen == best


def test_an_incomplete_sweep_chooses_nothing():
  swept, chosen = _sweep({0.1: 0.6, 0.3: 0.7, 1.0: 0.8})  # 3 not run
  assert chosen is None and swept[3.0] is None
  assert rate_sweep.describe(swept, chosen) == '0.1, 0.3, 1, 3 (not run)'
  assert rate_sweep.describe({0.1: 0.6, 0.3: 0.7}, 0.3) == '0.1, **0.3**'


def test_a_server_sweep_grid_surrounds_the_rate_the_trainer_would_use_unasked():
  """The default is registry.training's (the task's, then the algorithm's): a cell
  at it runs with no flag, under its plain name."""
  for algorithm, default in (('fedavg', 1.0), ('fedadam', 0.01), ('metaua', 0.1)):
    assert server_rates.default(ctr.Task, algorithm) == default
    assert registry.training(ctr.Task, algorithm).server_optimizer.learning_rate == default
  assert server_rates.grid(0.01) == (0.003, 0.01, 0.03)
  assert server_rates.grid(1.0) == (0.3, 1.0, 3.0)
  assert (server_rates.suffix(0.1, 0.1), server_rates.flags(0.1, 0.1)) == ('', ())
  assert server_rates.suffix(0.3, 0.1) == '_slr0.3'
  assert server_rates.flags(0.3, 0.1) == ('--server_learning_rate=0.3',)
