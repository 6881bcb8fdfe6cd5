"""CoLR / SCoLR / SVD / top-k on the declared tables of a model that is not an MF:
NeuMF (Goodreads format) and the CTR task's Keras DCN."""

import dataclasses

import numpy as np
import pytest

from tasks import ctr
from tasks import ranking
from tff_rec import registry
from tff_rec.aggregators import factor_sum
from tff_rec.runtime import inprocess
from tff_rec.training import optimizers

TRAINING = registry.Training(optimizers.OptimizerConfig('sgd', 0.5),
                             optimizers.OptimizerConfig('sgd', 1.0))


def _task(data_dir):
  return ranking.Task(ranking.Config(
      data_dir=str(data_dir), factors=4, batch_size=4, local_epochs=1, seed=1))


def _one_round(task, name, runtime='native', **options):
  built = registry.build(name, task, dataclasses.replace(TRAINING, runtime=runtime), **options)
  process = built.process
  if runtime == 'inprocess':
    process = inprocess.InProcessLearningProcess(process, threads=2)
  state = process.initialize()
  before = process.get_model_weights(state)
  output = process.next(state, [built.client_input(c, 0) for c in built.client_ids[:4]])
  return before, process.get_model_weights(output.state), output.metrics


def test_colr_moves_each_table_inside_the_round_basis_and_the_rest_in_full(
    user_items_dir, tff_runtime):
  task = _task(user_items_dir)
  before, after, metrics = _one_round(task, 'colr', rank=2)
  widths = {t: before[t].shape[1] for t in ('item_gmf', 'item_mlp')}
  bases = factor_sum.round_bases(factor_sum.round_seed(task.config.seed, 0), 2, widths)
  for table in ('item_gmf', 'item_mlp'):
    change = np.asarray(after[table] - before[table])
    basis = bases[table].numpy()
    assert np.abs(change).max() > 1e-4, table
    inside = change @ np.linalg.pinv(basis) @ basis  # the projection onto B's rows
    np.testing.assert_allclose(inside, change, atol=1e-6, err_msg=table)
  kernel = np.asarray(after['mlp_0/kernel'] - before['mlp_0/kernel'])
  assert np.linalg.matrix_rank(kernel, tol=1e-7) == min(kernel.shape)  # dense: in full
  item_floats = 2 * task.data.num_items * 2  # two tables' A, rank 2
  assert metrics['aggregator']['bytes_up'] > 4 * item_floats


def test_svd_at_full_rank_is_fedavg(user_items_dir, tff_runtime):
  task = _task(user_items_dir)
  _, svd, _ = _one_round(task, 'svd', rank=4)
  _, fedavg, _ = _one_round(task, 'fedavg')
  for name in fedavg:
    np.testing.assert_allclose(svd[name], fedavg[name], atol=2e-5, err_msg=name)


def test_scolr_runs_in_process_with_the_native_numbers(user_items_dir, tff_runtime):
  task = _task(user_items_dir)
  _, native, _ = _one_round(task, 'scolr', rank=4, local_ranks='1-3')
  _, local, _ = _one_round(task, 'scolr', 'inprocess', rank=4, local_ranks='1-3')
  for name in native:
    np.testing.assert_allclose(local[name], native[name], atol=1e-6, err_msg=name)


def test_colr_refuses_tables_narrower_than_the_rank_and_fedmfs_item_average(ranking_dir):
  """(CoLR's rounds on a Keras CTR model: tests/algorithms/test_maths_table_updates.py.)"""
  config = dict(data_dir=str(ranking_dir), local_steps=2, batch_size=8)
  dcn = ctr.Task(ctr.Config(model='dcn', **config))
  lr = ctr.Task(ctr.Config(model='lr', **config))
  with pytest.raises(registry.NotApplicable, match=r'table movie \(201 x 1\): rank must'):
    registry.build('colr', lr, TRAINING, rank=2)
  for option, value in (('item_average', 'touched'), ('user_state', 'reconstructed')):
    with pytest.raises(registry.NotApplicable, match=f'--{option} applies to a matrix '
                       "factorization whose user vectors stay on their clients .FedMF's"):
      registry.build('colr', dcn, TRAINING, **{option: value})
