"""CoLR, SCoLR, SVD and top-k on a Keras model's declared tables, as launch.train
runs them, against their maths in numpy: the dense weights train and average as
FedAvg's; a table's client trains A (from zero) in W + A B (CoLR, SCoLR: its
columns) or the table itself, compressed (SVD, top-k); the server's weighted
mean (by examples) decodes mean(A) / mean(columns) times B, or compresses the
mean change again. DCNv2 over a small CTR file's item column (a 121 x 4 table:
tests/algorithms/small_ctr.py), its gradient the task's Keras model's."""

import math

import numpy as np
import pytest

from tests.algorithms import as_trained
from tests.algorithms import reference
from tests.algorithms import small_ctr

RATE, DIM = 0.1, 4


def _local_ranks(run, local_ranks: str | None, rank: int) -> dict:
  """SCoLR's rank of each client: its group's (clients in id order, equal groups),
  or the global rank for the other forms."""
  ids = run.task.train_client_ids
  if local_ranks is None:
    return dict.fromkeys(ids, rank)
  ranks = [int(r) for r in local_ranks.split('-')]
  groups = np.concatenate([np.full(len(g), k) for k, g in
                           enumerate(np.array_split(np.arange(len(ids)), len(ranks)))])
  return {c: ranks[g] for c, g in zip(ids, groups)}


def _table_forms(run, form, rank, *, local_ranks=None, row_scale=None):
  gradient = reference.keras_gradient(run.task)
  names = [v.name for v in run.task.keras_model().trainable_variables]
  table = names.index('item/embeddings:0')
  seed = run.task.config.seed
  weights = run.initial
  low_rank = form in ('colr', 'scolr')
  rank_of = _local_ranks(run, local_ranks, rank)
  for round_num, cohort in enumerate(run.rounds):
    round_basis = reference.basis(seed, round_num, rank, DIM, table=0) if low_rank else None
    updates, columns_sent, counts = [], [], []
    for client in cohort:
      local_rank, batches = client.input
      assert local_rank == rank_of[client.id]
      start = list(weights)
      if low_rank:
        columns = (reference.scolr_columns(seed, round_num, rank, local_rank)
                   if form == 'scolr' else np.ones(rank))
        start[table] = np.zeros((weights[table].shape[0], rank))

        def client_gradient(w, features, labels, columns=columns):
          full = list(w)
          full[table] = weights[table] + (w[table] * columns) @ round_basis
          loss, grads = gradient(full, features, labels)
          grads[table] = (grads[table] @ round_basis.T) * math.sqrt(rank / DIM) * columns
          return loss, grads
      else:
        client_gradient = gradient
      trained, examples, _, _ = reference.local_training(
          client_gradient, start, reference.batches_of(batches), reference.SGD(RATE))
      update = [t - s for t, s in zip(trained, start)]
      if low_rank:
        update[table] = trained[table] * columns
        columns_sent.append(columns)
      else:
        update[table] = {'svd': reference.svd_compress,
                         'topk': reference.topk_compress}[form](update[table], rank)
      updates.append(update)
      counts.append(examples)
    mean = reference.weighted_mean(updates, counts)
    if low_rank:
      shares = reference.weighted_mean([[c] for c in columns_sent], counts)[0]
      mean[table] = np.divide(mean[table], shares, out=np.zeros_like(mean[table]),
                              where=shares > 0) @ round_basis
    else:
      mean[table] = {'svd': reference.svd_compress,
                     'topk': reference.topk_compress}[form](mean[table], rank)
    if row_scale is not None:
      mean[table] = mean[table] * row_scale[:, None]
    weights = [w + m for w, m in zip(weights, mean)]  # the task's server: SGD at 1
  return weights


def _flags(tmp_path, **settings):
  return small_ctr.flags(small_ctr.write(tmp_path), model='dcn', feature_columns='item',
                         embedding_dim=DIM, client_learning_rate=RATE, **settings)


@pytest.mark.parametrize('form, rank, options', [
    ('colr', 1, {}), ('colr', 3, {}), ('scolr', 4, dict(local_ranks='1-2-4')),
    ('svd', 2, {}), ('topk', 1, {})],
    ids=['colr1', 'colr3', 'scolr', 'svd2', 'topk1'])
def test_table_forms_follow_their_maths(monkeypatch, tmp_path, form, rank, options):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(tmp_path, algorithm=form, rank=rank,
                                                        **options))
  reference.assert_matches(run, _table_forms(run, form, rank, **options))


def test_fedsubavg_stacked_on_colr_scales_each_rows_mean_update(monkeypatch, tmp_path):
  """The table forms weigh clients by examples, so the heat counts examples."""
  run = as_trained.train(monkeypatch, tmp_path, *_flags(tmp_path, algorithm='colr', rank=2,
                                                        stack='fedsubavg'))
  scale, = small_ctr.row_scales(run.task, 'examples', None, columns=('item',))
  reference.assert_matches(run, _table_forms(run, 'colr', 2, row_scale=scale))
