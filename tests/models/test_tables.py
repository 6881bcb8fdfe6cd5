"""Declared tables: shapes from the model, errors that name the table."""

import pytest
import tensorflow as tf

from tff_rec.models import tables


def _model():
  ids = tf.keras.Input((), dtype=tf.int32, name='item')
  rows = tf.keras.layers.Embedding(7, 3, name='items')(ids)
  return tf.keras.Model(ids, tf.keras.layers.Dense(1, name='head')(rows))


def test_a_keras_models_tables_take_rows_and_width_from_its_variables():
  model = _model()
  declared = tables.of_keras(model, {'items': ('item',)})
  assert declared == (tables.Table('items', 7, 3, ('item',), private=False),)
  assert tables.variable_tables(model, declared) == ['items', None, None]


def test_one_weight_wide_shapes_and_private_tables():
  declared = tables.declare({'bias': (5,), 'users': (4, 2)},
                            {'users': ['user'], 'bias': ['user']}, private=['users'])
  assert [(t.name, t.rows, t.width, t.private) for t in declared] == [
      ('users', 4, 2, True), ('bias', 5, 1, False)]


@pytest.mark.parametrize('features, private, message', [
    ({'movies': ('item',)}, (), r"declared tables \['movies'\] are not weights of the model"),
    ({'items': ('item',)}, ('users',), r"private tables \['users'\] are not declared"),
])
def test_a_table_the_model_lacks_is_refused_by_name(features, private, message):
  with pytest.raises(ValueError, match=message):
    tables.of_keras(_model(), features, private=private)
