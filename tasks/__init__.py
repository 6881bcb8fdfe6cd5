"""Tasks by name: each maps a small config to data, learning processes and evaluation.

A task module has `make_config(**settings)` and `Task`, a class with
ALGORITHMS, ALGORITHM_OPTIONS (trainer flags its learning_process takes),
TRAIN_DEFAULTS (trainer settings it is tuned for), optionally
ALGORITHM_DEFAULTS (algorithm -> settings that override them), EVAL_PARTS
(periodic, final), PROGRESS (metrics shown per round), `describe()`,
`train_client_ids`, `learning_process(algorithm, client_optimizer=,
server_optimizer=, runtime=, **options)`, `evaluate(weights, part)` and
`train_centralized(optimizer, epochs=, eval_every=, on_epoch=)`.
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
