"""CTR models: shapes, table names, masking, and no update to rows a client never reads."""

import numpy as np
import pytest
import tensorflow as tf

from tff_rec.models import ctr
from tff_rec.models import tables

VOCAB = {'user': 6, 'movie': 9, 'gender': 3, 'age': 8, 'occupation': 4, 'zip': 5,
         'genres': 4, 'history': 9, 'gender_x_movie': 17, 'age_x_movie': 57}
WIDTHS = {'genres': 2, 'history': 3}


def _batch(columns):
  rng = np.random.default_rng(0)
  batch = {c: rng.integers(1, VOCAB[c], size=(4, WIDTHS[c]) if c in WIDTHS else 4)
           .astype(np.int32) for c in columns}
  if 'history' in batch:
    batch['history'][:, 0] = 0  # padding
  return batch


@pytest.mark.parametrize('name', sorted(ctr.MODELS))
def test_logits_and_tables(name):
  spec = ctr.MODELS[name]
  model = spec.build(VOCAB, WIDTHS, spec.default_dim, 0)
  assert model(_batch(spec.columns)).shape == (4, 1)
  declared = tables.of_keras(model, spec.tables)
  assert [t.name for t in declared] == list(spec.tables)
  assert {t.features for t in declared} == set(spec.tables.values())
  assert {t.width for t in declared} == {spec.default_dim}
  assert sorted(t for t in tables.variable_tables(model, declared) if t) == sorted(spec.tables)


def test_lr_is_a_sum_of_weights_plus_bias():
  spec = ctr.LR
  model = spec.build(VOCAB, WIDTHS, 1, 0)
  batch = _batch(spec.columns)
  weights = {v.name.split('/')[0]: v.numpy() for v in model.trainable_variables}
  expected = sum(weights[c][batch[c], 0] for c in spec.columns) + weights['bias'][0]
  np.testing.assert_allclose(model(batch)[:, 0], expected, rtol=1e-6)


@pytest.mark.parametrize('name', sorted(ctr.MODELS))
def test_rows_outside_the_batch_and_padding_get_exactly_zero_gradient(name):
  spec = ctr.MODELS[name]
  model = spec.build(VOCAB, WIDTHS, spec.default_dim, 0)
  batch = _batch(spec.columns)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.keras.losses.binary_crossentropy(
        tf.ones([4, 1]), model(batch), from_logits=True))
  grads = tape.gradient(loss, model.trainable_variables)
  declared = tables.of_keras(model, spec.tables)
  for variable, grad, table in zip(model.trainable_variables, grads,
                                   tables.variable_tables(model, declared), strict=True):
    if table is None:
      continue
    used = np.unique(np.concatenate([batch[c].reshape(-1) for c in spec.tables[table]]))
    used = used[used > 0] if any(c in WIDTHS for c in spec.tables[table]) else used
    dense = tf.convert_to_tensor(grad).numpy()
    untouched = np.setdiff1d(np.arange(variable.shape[0]), used)
    assert np.all(dense[untouched] == 0), (name, table)
    assert np.any(dense[used] != 0), (name, table)


@pytest.mark.parametrize('name', sorted(ctr.MODELS))
def test_embedding_stddev_scales_every_tables_initial_rows(name):
  spec = ctr.MODELS[name]
  stds = []
  for stddev in (0.01, 0.1):
    model = spec.build(VOCAB, WIDTHS, 8, 0, embedding_stddev=stddev)
    rows = np.concatenate([model.get_layer(t).embeddings.numpy().ravel() for t in spec.tables])
    stds.append(rows.std())
  assert stds[0] == pytest.approx(0.01, rel=0.3)
  assert stds[1] == pytest.approx(10 * stds[0], rel=1e-4)  # same draws, scaled
