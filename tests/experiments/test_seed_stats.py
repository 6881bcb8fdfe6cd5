"""The reproduction tables' seed statistics: mean ± std, and differences read by
experiments.verdicts' rule."""

import pytest

from experiments.papers import cell_records
from experiments import seed_stats


def test_spread_is_mean_and_sample_std_of_the_seeds():
  assert seed_stats.spread([0.1, 0.2, 0.3]) == '0.200 ± 0.100'
  assert seed_stats.spread([0.1234], scale=100, digits=1) == '12.3'
  assert seed_stats.spread([]) == cell_records.NOT_RUN


@pytest.mark.parametrize('a, b, expected', [
    ([0.30, 0.31, 0.32], [0.20, 0.21, 0.22], '+0.100'),  # Welch p < 0.001
    ([0.30, 0.35, 0.40], [0.25, 0.30, 0.35], 'undecided'),  # p = 0.29
    # gap 0.021 beyond the stds added (0.02), the old rule's "beyond noise": p = 0.06
    ([0.30, 0.31, 0.32], [0.279, 0.289, 0.299], 'undecided'),
    ([0.300, 0.301, 0.302], [0.3005, 0.3010, 0.3015], 'level'),  # within 1%, TOST p < 0.001
    ([0.3], [0.2, 0.21], 'one seed: no spread'),
    ([], [0.2], cell_records.NOT_RUN),
])
def test_versus_reads_a_difference_by_the_one_rule(a, b, expected):
  assert seed_stats.versus(a, b) == expected


def test_versus_scales_the_difference_it_shows():
  assert seed_stats.versus([0.30, 0.31, 0.32], [0.20, 0.21, 0.22], 100, 1) == '+10.0'


@pytest.mark.parametrize('values, floor, expected', [
    ([0.80, 0.81, 0.82], [0.75, 0.75, 0.75], 'above (+0.060)'),  # an exact floor: row's std only
    ([0.70, 0.71, 0.72], [0.74, 0.75, 0.76], 'below (-0.040)'),  # Welch p = 0.008
    ([0.70, 0.75, 0.80], [0.74, 0.74, 0.74], 'undecided'),
    ([0.8], [0.74], 'one seed: no spread'),
    ([], [0.74], cell_records.NOT_RUN),
])
def test_against_floor_names_the_side_only_where_the_rule_finds_one(values, floor, expected):
  assert seed_stats.against_floor(values, floor) == expected
