"""Tasks by name: each maps a small config to data, model_fn and evaluation."""

from tasks import movielens_next_item

TASKS = {
    'movielens_next_item': movielens_next_item.MovieLensNextItem,
}
