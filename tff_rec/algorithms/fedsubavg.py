"""FedSubAvg (Ding et al., NeurIPS 2022) on any task whose model declares tables.

FedSubAvg is FedAvg with aggregators.fedsubavg.FedSubAvgFactory stacked on
its aggregate: each table row's mean update scaled by N / n_m, n_m the row's
feature heat (algorithms.heat). The same correction stacks on other
algorithms (`Training.stack`): FAIR's table update, CoLR's mean factor A (row
scaling commutes with B), FedAdam's mean. Client weights go with the heat:
'clients' (the paper: n_m counts clients, clients weigh equally) or
'examples' (the official code: both count training examples).
"""

import dataclasses

from tff_rec.algorithms import api
from tff_rec.algorithms import baselines


def build(task, options: baselines.WeightingOptions, training, *, name: str) -> api.Built:
  stacked = dataclasses.replace(training, stack=tuple(sorted({*training.stack, 'fedsubavg'})))
  return baselines.build_fedavg(task, options, stacked, name=name)
