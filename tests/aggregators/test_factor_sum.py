"""CoLR's factor sum: the round's shared basis, and the mean of the clients' A's times it."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_rec.aggregators import factor_sum


def _seed(k):
  return tf.constant([k, 0], tf.int64)


def test_basis_rows_are_orthogonal_scaled_and_unbiased():
  basis = factor_sum.correlated_basis(_seed(1), 4, 16).numpy()
  np.testing.assert_allclose(basis @ basis.T, 4.0 * np.eye(4), atol=1e-5)  # d / r
  np.testing.assert_array_equal(factor_sum.correlated_basis(_seed(1), 4, 16).numpy(), basis)
  # E[B^T B] = I: the mean projection over many rounds' bases.
  mean = np.mean([(lambda b: b.T @ b)(factor_sum.correlated_basis(_seed(k), 2, 8).numpy())
                  for k in range(2000)], axis=0)
  np.testing.assert_allclose(mean, np.eye(8), atol=0.1)


def test_each_table_of_a_round_has_its_own_basis():
  bases = factor_sum.round_bases(factor_sum.round_seed(5, 0), 2, {'users': 3, 'items': 3})
  assert np.abs(bases['users'].numpy() - bases['items'].numpy()).max() > 1e-2


def _value_type(rows, rank):
  return tff.types.to_type(collections.OrderedDict(
      dense=tff.TensorType(np.float32, [2]),
      tables=collections.OrderedDict(t=collections.OrderedDict(
          factor=tff.TensorType(np.float32, [rows, rank]),
          columns=tff.TensorType(np.float32, [rank])))))


def test_result_is_the_weighted_mean_factor_per_trained_column_times_the_basis(tff_runtime):
  process = factor_sum.FactorSumFactory(2, {'t': 3}, seed=5).create(
      _value_type(4, 2), tff.TensorType(np.float32))
  a1 = np.arange(8, dtype=np.float32).reshape(4, 2)
  a2 = np.ones((4, 2), np.float32) * np.float32([1, 0])  # trained column 0 only
  state = process.initialize()
  for round_num in range(2):
    output = process.next(state, [
        {'dense': np.float32([1, 2]), 'tables': {'t': {'factor': a1,
                                                       'columns': np.float32([1, 1])}}},
        {'dense': np.float32([5, 2]), 'tables': {'t': {'factor': a2,
                                                       'columns': np.float32([1, 0])}}}],
        [1.0, 3.0])
    basis = factor_sum.round_bases(factor_sum.round_seed(5, round_num), 2, {'t': 3})['t']
    # column 0: both clients, weights 1 and 3; column 1: the first client alone
    mean = np.stack([(a1[:, 0] + 3 * a2[:, 0]) / 4, a1[:, 1]], axis=1)
    np.testing.assert_allclose(output.result['tables']['t'], mean @ basis.numpy(), atol=1e-5)
    np.testing.assert_allclose(output.result['dense'], [4, 2])  # the inner mean, as it is
    assert output.state['round'] == round_num + 1
    state = output.state
  first = factor_sum.round_bases(factor_sum.round_seed(5, 0), 2, {'t': 3})['t'].numpy()
  assert np.abs(first - basis.numpy()).max() > 1e-2  # a fresh basis every round


def test_value_must_match_the_declared_tables_and_rank():
  with pytest.raises(ValueError, match='expected a factor of 3 columns'):
    factor_sum.FactorSumFactory(3, {'t': 3}, seed=0).create(_value_type(4, 2),
                                                            tff.TensorType(np.float32))
  with pytest.raises(ValueError, match="tables \\['t'\\]"):
    factor_sum.FactorSumFactory(2, {'u': 3}, seed=0).create(_value_type(4, 2),
                                                            tff.TensorType(np.float32))
