"""Capacity schemes: parsing, assignment of clients to tiers, tier forms."""

import numpy as np
import pytest

from tff_rec.algorithms import capacities
from tff_rec.models import compressed_table


def test_parse():
  assert capacities.parse('1x-2x-16x') == [1, 2, 16]
  assert capacities.parse('4X') == [4]


@pytest.mark.parametrize('scheme, message', [
    ('1x-3x', "capacity '3x' in scheme '1x-3x' is not a power of two"),
    ('1x-0x', 'not a power of two'),
    ('1x-half', 'not a power of two'),
    ('2x-2x', 'repeats a capacity'),
])
def test_parse_refuses_bad_schemes(scheme, message):
  with pytest.raises(ValueError, match=message):
    capacities.parse(scheme)


def test_ordered_assignment_is_contiguous_equal_groups():
  np.testing.assert_array_equal(capacities.assign(7, 3), [0, 0, 0, 1, 1, 2, 2])


def test_fractions_and_random_assignment():
  tiers = capacities.assign(10, 2, fractions=[0.2, 0.8], assignment='random', seed=101)
  assert np.bincount(tiers).tolist() == [2, 8]
  assert tiers.tolist() != sorted(tiers.tolist())  # shuffled
  again = capacities.assign(10, 2, fractions=[0.2, 0.8], assignment='random', seed=101)
  np.testing.assert_array_equal(tiers, again)
  # Group sizes are the nearest to the fractions: 0.7 of 4 clients is 3 (0.75), not 2.
  assert np.bincount(capacities.assign(4, 2, fractions=[0.7, 0.3])).tolist() == [3, 1]


@pytest.mark.parametrize('kwargs, message', [
    (dict(num_clients=2, num_tiers=3), 'the scheme has 3 tiers but there are only 2 clients'),
    (dict(num_clients=5, num_tiers=2, fractions=[0.5]), 'must be 2 positive numbers'),
    (dict(num_clients=5, num_tiers=2, fractions=[0.01, 0.99]), 'leave a tier with no client'),
    (dict(num_clients=5, num_tiers=2, assignment='zigzag'),
     "unknown capacity assignment 'zigzag'"),
])
def test_assignment_errors(kwargs, message):
  with pytest.raises(ValueError, match=message):
    capacities.assign(**kwargs)


def test_hashed_tiers_nest_and_share_seeds():
  tiers = capacities.hashed_tiers({'a': (101, 8), 'b': (101, 4)}, [1, 2, 8], seed=3)
  assert list(tiers) == ['1x', '2x', '8x']
  assert isinstance(tiers['1x']['a'], compressed_table.Full)
  m2, m8 = tiers['2x']['a'].memory_size, tiers['8x']['a'].memory_size
  assert (m2, m8) == (404, 101) and m2 % m8 == 0  # 808, a multiple of 8
  b2, b8 = tiers['2x']['b'].memory_size, tiers['8x']['b'].memory_size
  assert (b2, b8) == (200, 50)  # 404 rounded down to 400, a multiple of 8: 202 would not nest
  assert tiers['2x']['a'].seed == tiers['8x']['a'].seed != tiers['2x']['b'].seed
  inconsistent = capacities.hashed_tiers({'a': (101, 8)}, [2, 8], seed=3, consistent=False)
  assert inconsistent['2x']['a'].seed != inconsistent['8x']['a'].seed


def test_hashed_tier_below_one_slot_is_refused():
  with pytest.raises(ValueError, match='capacity 16x leaves table a .3 x 2. less than 1 slot'):
    capacities.hashed_tiers({'a': (3, 2)}, [1, 16], seed=0)


def test_low_rank_tiers_refuse_what_fedhm_cannot_reach():
  tiers = capacities.low_rank_tiers({'a': (359_014, 8)}, [1, 2, 4])
  assert [getattr(f['a'], 'rank', None) for f in tiers.values()] == [None, 3, 1]
  with pytest.raises(ValueError, match=r'FedHM cannot hold table a .* at 8x.*largest '
                                       r'capacity it can reach: 4x'):
    capacities.low_rank_tiers({'a': (359_014, 8)}, [1, 8])
