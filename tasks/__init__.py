"""Tasks by name: each maps a small config to data, a model and evaluation.

A task module has `make_config(**settings)` and `Task`, a class with NAME,
DEFAULT_ALGORITHM, TRAIN_DEFAULTS (trainer settings it is tuned for),
EVAL_PARTS (periodic, final), PROGRESS (metrics shown per round),
`describe()`, `train_client_ids`, `evaluate(weights, part)` and
`train_centralized(optimizer, epochs=, eval_every=, on_epoch=)`, plus what its
model offers the algorithms (tff_rec.algorithms.api: a Keras model, declared
tables, a weight-table model, private user vectors). It names no algorithm.
"""

from tasks import goodreads_ranking
from tasks import movielens_ctr
from tasks import movielens_next_item
from tasks import movielens_ranking

TASKS = {
    'goodreads_ranking': goodreads_ranking,
    'movielens_ctr': movielens_ctr,
    'movielens_next_item': movielens_next_item,
    'movielens_ranking': movielens_ranking,
}


def register(name: str, module) -> None:
  """Adds a task module of your own (`launch.train --import=MODULE` loads it before
  the flags are made, so its settings become flags)."""
  missing = [a for a in ('Config', 'make_config', 'Task') if not hasattr(module, a)]
  if missing:
    raise TypeError(f'task {name!r}: its module lacks {", ".join(missing)}')
  if name in TASKS:
    raise ValueError(f'a task named {name!r} is registered already')
  TASKS[name] = module
