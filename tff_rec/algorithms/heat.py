"""Feature heat (FedSubAvg): how many clients' data reach each row of a task's tables.

Counted from the rows each training client's data index (the task's
`client_table_rows`; for BPR and sampled-negative tasks, its positives), in
clients (the paper) or in their training examples (the official code).
"""

import dataclasses

import numpy as np

from tff_rec import capabilities
from tff_rec import settings
from tff_rec.aggregators import fedsubavg
from tff_rec.algorithms import api
from tff_rec.models import tables

HEAT = ('clients', 'examples')
TABLES_WHY = 'its model declares no embedding tables, so there is no feature heat to correct'


def heat(task, mode: str) -> tuple[dict[str, np.ndarray], float]:
  """({table: n_m per row}, N): rows' heat, and a dense parameter's (every client)."""
  rows = task.client_table_rows()
  sizes = task.client_sizes()
  weights = sizes if mode == 'examples' else None
  declared = tables.by_name(task.tables)
  per_table = {table: fedsubavg.feature_heat(clients, declared[table].rows, weights)
               for table, clients in rows.items()}
  population = float(np.sum(sizes) if mode == 'examples' else len(sizes))
  return per_table, population


def row_scales(task, name: str, mode: str, bound: float | None = None
               ) -> dict[str, np.ndarray]:
  """N / n_m per row of each of the task's tables (1 where no client's data reach),
  at most `bound` (fedsubavg.corrections)."""
  api.require(task, name, capabilities.FeatureHeat, TABLES_WHY)
  if mode == 'examples' and getattr(task.config, 'local_steps', 0):
    # TFF weighs a client by the examples it processed, which local_steps caps:
    # no longer its training-set size, which the heat counts.
    raise api.NotApplicable(
        'heat=examples weighs clients by the examples they train on, proportional to '
        'their data only without --local_steps; set --local_steps=0 or --heat=clients')
  rows, population = heat(task, mode)
  return {table: fedsubavg.corrections(h, population, bound) for table, h in rows.items()}


@dataclasses.dataclass(frozen=True)
class WeightingOptions:
  heat: str | None = settings.described(
      None, "Client weights: 'clients' weighs clients equally (FedSubAvg's paper: its heat "
      "counts clients), 'examples' by their training examples (its official code: heat counts "
      "examples) (default: the task's CLIENT_WEIGHTING; examples unless set).", choices=HEAT)

  def __post_init__(self):
    if self.heat not in (None, *HEAT):
      raise ValueError(f'unknown heat {self.heat!r}; choose one of {HEAT}')
