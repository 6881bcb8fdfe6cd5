"""Capacity schemes ('1x-2x-4x'): which client gets which tier, and each tier's table forms.

A capacity c (a power of two) means a client holds each item table in 1/c of
its floats. FAIR's tiers hash the n x d elements of a table into m / c slots
with one hash for every tier (consistent); m is n*d rounded down to a
multiple of the largest capacity, so every tier's size divides every larger
one's and the subspaces nest (collapsible). FedHM's tiers factor the table
at rank int(n d / (c (n + d))).
"""

import collections
from typing import Mapping, Sequence

import numpy as np

from tff_rec.models import compressed_table

ASSIGNMENTS = ('ordered', 'random')
INCONSISTENT_SEED_STRIDE = 1_000_003  # per tier, for the inconsistent ablation


def parse(scheme: str) -> list[int]:
  """'1x-2x-4x' -> [1, 2, 4]; each a power of two, no repeats."""
  capacities = []
  for part in scheme.split('-'):
    text = part.strip().lower().removesuffix('x')
    if not text.isdigit() or int(text) < 1 or int(text) & (int(text) - 1):
      raise ValueError(f'capacity {part!r} in scheme {scheme!r} is not a power of two '
                       'followed by x (e.g. 1x-2x-4x)')
    capacities.append(int(text))
  if len(set(capacities)) != len(capacities):
    raise ValueError(f'capacity scheme {scheme!r} repeats a capacity')
  return capacities


def assign(num_clients: int, num_tiers: int, *, fractions: Sequence[float] | None = None,
           assignment: str = 'ordered', seed: int = 0) -> np.ndarray:
  """Tier index of each client (clients in id order).

  'ordered' splits clients in id order into contiguous groups (the paper's
  scheme); 'random' does the same after a seeded permutation. Group sizes are
  equal (np.array_split) or follow `fractions` (one per tier, summing to 1).
  """
  if assignment not in ASSIGNMENTS:
    raise ValueError(f'unknown capacity assignment {assignment!r}; choose one of {ASSIGNMENTS}')
  if num_tiers > num_clients:
    raise ValueError(f'the scheme has {num_tiers} tiers but there are only '
                     f'{num_clients} clients; use at most {num_clients} tiers')
  if fractions is None:
    sizes = [len(g) for g in np.array_split(np.arange(num_clients), num_tiers)]
  else:
    if len(fractions) != num_tiers or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
      raise ValueError(f'capacity fractions {list(fractions)} must be {num_tiers} '
                       'positive numbers summing to 1')
    bounds = np.round(np.cumsum(fractions) * num_clients).astype(int)
    sizes = np.diff(np.concatenate([[0], bounds])).tolist()
    if min(sizes) < 1:
      raise ValueError(f'capacity fractions {list(fractions)} leave a tier with no '
                       f'client among {num_clients}')
  tiers = np.repeat(np.arange(num_tiers, dtype=np.int32), sizes)
  if assignment == 'random':
    tiers = tiers[np.random.default_rng(seed).permutation(num_clients)]
  return tiers


def hashed_tiers(table_shapes: Mapping[str, tuple[int, int]], capacities: Sequence[int],
                 *, seed: int, consistent: bool = True) -> collections.OrderedDict:
  """FAIR's tiers: tier label -> table name -> Full (1x) or Hashed (cx)."""
  largest = max(capacities)
  tiers = collections.OrderedDict()
  for index, capacity in enumerate(capacities):
    forms = collections.OrderedDict()
    for table_index, (name, (rows, dim)) in enumerate(table_shapes.items()):
      if capacity == 1:
        forms[name] = compressed_table.Full(rows, dim)
        continue
      memory = rows * dim // largest * largest // capacity
      if memory < 1:
        raise ValueError(f'capacity {capacity}x leaves table {name} ({rows} x {dim}) '
                         'less than 1 slot; use smaller capacities')
      table_seed = seed + 7919 * table_index
      if not consistent:
        table_seed += INCONSISTENT_SEED_STRIDE * (index + 1)
      forms[name] = compressed_table.Hashed(rows, dim, memory, table_seed)
    tiers[f'{capacity}x'] = forms
  return tiers


def low_rank_tiers(table_shapes: Mapping[str, tuple[int, int]], capacities: Sequence[int]
                   ) -> collections.OrderedDict:
  """FedHM's tiers: Full (1x) or LowRank at FedHM's rank; refuses rank 0."""
  tiers = collections.OrderedDict()
  for capacity in capacities:
    forms = collections.OrderedDict()
    for name, (rows, dim) in table_shapes.items():
      if capacity == 1:
        forms[name] = compressed_table.Full(rows, dim)
        continue
      rank = compressed_table.fedhm_rank(rows, dim, capacity)
      if rank < 1:
        reachable = [c for c in (2 ** k for k in range(1, 20))
                     if compressed_table.fedhm_rank(rows, dim, c) >= 1]
        raise ValueError(
            f'FedHM cannot hold table {name} ({rows} x {dim}) at {capacity}x: its rank '
            f'int(n d / (c (n + d))) would be 0 (largest capacity it can reach: '
            f'{max(reachable, default=1)}x)')
      forms[name] = compressed_table.LowRank(rows, dim, rank)
    tiers[f'{capacity}x'] = forms
  return tiers
