"""Tasks by name: each maps a small config to data, a model and evaluation.

A task module has `make_config(**settings)` and `Task`, a class with NAME,
DEFAULT_ALGORITHM, TRAIN_DEFAULTS (trainer settings it is tuned for),
EVAL_PARTS (periodic, final), PROGRESS (metrics shown per round),
FLOORS (and FLOOR_ITEM where `floors(item)` scores a column a study names),
`describe()`, `train_client_ids`, `evaluate(weights, part)` and
`train_centralized(optimizer, epochs=, eval_every=, on_epoch=)`, plus what its
model offers the algorithms (tff_rec.algorithms.api: a Keras model, declared
tables, a weight-table model, private user vectors). It names no algorithm.
"""

from tasks import ctr
from tasks import loo_ranking
from tasks import next_item
from tasks import ranking

# Tasks by data family. 'ranking' ranks all items against each user's held-out
# share (FAIR's protocol, NeuMF); 'loo_ranking' ranks one held-out item among
# 99 sampled ones (CoLR's leave-one-out protocol, MF with private user rows):
# two protocols, two tasks.
TASKS = {
    'ctr': ctr,
    'loo_ranking': loo_ranking,
    'next_item': next_item,
    'ranking': ranking,
}
# The names by the dataset each task was first written for; committed records
# and older commands use them.
ALIASES = {
    'goodreads_ranking': 'ranking',
    'movielens_ctr': 'ctr',
    'movielens_next_item': 'next_item',
    'movielens_ranking': 'loo_ranking',
}


def canonical(name: str) -> str:
  """A task's registered name, given it or an alias."""
  return ALIASES.get(name, name)


def module(name: str):
  """The module of the task called `name` (or an alias of it)."""
  try:
    return TASKS[canonical(name)]
  except KeyError:
    raise KeyError(f'no task named {name!r}; tasks: {", ".join(sorted(TASKS))} (older names: '
                   f'{", ".join(sorted(ALIASES))})') from None


def register(name: str, module) -> None:
  """Adds a task module of your own (`launch.train --import=MODULE` loads it before
  the flags are made, so its settings become flags)."""
  missing = [a for a in ('Config', 'make_config', 'Task') if not hasattr(module, a)]
  if missing:
    raise TypeError(f'task {name!r}: its module lacks {", ".join(missing)}')
  if name in TASKS or name in ALIASES:
    raise ValueError(f'a task named {name!r} is registered already')
  TASKS[name] = module
