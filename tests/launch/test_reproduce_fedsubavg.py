"""The FedSubAvg reproduction's rate sweeps: grids extended past a best edge."""

import math

import pytest

from launch import reproduce_fedsubavg as reproduce


def test_rates_beyond_an_edge_follow_the_1_3_10_ladder():
  assert [reproduce._beyond(r, up=True) for r in (0.1, 0.3, 1, 3)] == [0.3, 1, 3, 10]
  assert [reproduce._beyond(r, up=False) for r in (0.1, 0.3, 1, 3)] == [0.03, 0.1, 0.3, 1]


def _sweep(monkeypatch, scores: dict[float, float], grid=(0.1, 0.3, 1.0)):
  """The sweep over `grid` where rate r scores scores[r] (higher is better)."""
  monkeypatch.setattr(reproduce, '_spec', lambda setting: dict(
      rates=grid, central_rates=grid, metric='eval/validation_auc', lower_is_better=False))
  monkeypatch.setattr(reproduce, '_rounds', lambda setting, kind: 20)
  monkeypatch.setattr(reproduce, '_run', lambda *args: args[2])  # the cell: its rate
  monkeypatch.setattr(reproduce, '_final_value', lambda rate, metric: scores.get(rate))
  return reproduce._sweep('din', 'fedavg')


@pytest.mark.parametrize('scores,tried,best', [
    # interior already: nothing added
    ({0.1: 0.6, 0.3: 0.7, 1.0: 0.65}, [0.1, 0.3, 1.0], 0.3),
    # rising at the top: 3 is tried, then 10, where it falls
    ({0.1: 0.6, 0.3: 0.62, 1.0: 0.64, 3.0: 0.66, 10.0: 0.5}, [0.1, 0.3, 1.0, 3.0, 10.0], 3.0),
    # best at the bottom: 0.03 is tried and loses
    ({0.1: 0.7, 0.3: 0.6, 1.0: 0.5, 0.03: 0.65}, [0.03, 0.1, 0.3, 1.0], 0.1),
    # the rate past the edge diverges: the edge is the optimum
    ({0.1: 0.6, 0.3: 0.62, 1.0: 0.64, 3.0: math.nan}, [0.1, 0.3, 1.0, 3.0], 1.0),
    # still rising after MAX_EXTENSIONS: stops there, at the edge
    ({0.1: 0.1, 0.3: 0.2, 1.0: 0.3, 3.0: 0.4, 10.0: 0.5, 30.0: 0.6, 100.0: 0.7},
     [0.1, 0.3, 1.0, 3.0, 10.0, 30.0], 30.0),
])
def test_a_best_rate_at_an_edge_extends_the_grid(monkeypatch, scores, tried, best):
  assert reproduce.MAX_EXTENSIONS == 3
  swept, chosen = _sweep(monkeypatch, scores)
  assert sorted(swept) == tried and chosen == best


def test_an_incomplete_sweep_chooses_nothing(monkeypatch):
  swept, chosen = _sweep(monkeypatch, {0.1: 0.6, 0.3: 0.7, 1.0: 0.8})  # 3 not run
  assert chosen is None and swept[3.0] is None
  assert reproduce._grid(swept, chosen) == '0.1, 0.3, 1, 3 (not run)'


@pytest.mark.parametrize('dataset', list(reproduce.DATASETS))
def test_every_dataset_runs_din_with_its_validation_part(monkeypatch, dataset):
  monkeypatch.setattr(reproduce, '_dataset', lambda: reproduce.DATASETS[dataset])
  task = reproduce._spec('din')['task']
  assert task['validation_fraction'] == 0.1 and task['model'] == 'din'
  assert reproduce._spec('din')['metric'] == 'eval/validation_auc'
