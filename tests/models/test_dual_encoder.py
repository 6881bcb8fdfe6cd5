import numpy as np
import pytest

from tff_rec.models import dual_encoder


def _model(**kwargs):
  return dual_encoder.build_dual_encoder(
      vocab_size=6, context_length=3, embedding_dim=4, context_hidden_dims=(4,),
      **kwargs)


def test_output_is_cosine_of_bag_of_words_context_with_every_item():
  model = _model(seed=3)
  context = np.array([[2, 5, 0], [1, 0, 0]], np.int32)
  sims = model({'context': context}).numpy()
  assert sims.shape == (2, 6)

  table = model.get_layer('item_embedding').embeddings.numpy()
  kernel, bias = model.get_layer('context_dense_0').get_weights()
  bow = np.stack([table[[2, 5]].mean(0), table[[1]].mean(0)])  # padding ignored
  hidden = np.maximum(bow @ kernel + bias, 0)
  unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)
  np.testing.assert_allclose(sims, unit(hidden) @ unit(table[1:]).T, atol=1e-6)


def test_same_seed_same_weights_other_seed_other_weights():
  a, b, c = _model(seed=1), _model(seed=1), _model(seed=2)
  for wa, wb, wc in zip(a.get_weights(), b.get_weights(), c.get_weights(), strict=True):
    np.testing.assert_array_equal(wa, wb)
    if wa.std() > 0:
      assert not np.array_equal(wa, wc)


def test_spreadout_is_a_model_loss_only_when_asked():
  assert _model().losses == []
  model = _model(spreadout_weight=0.1)
  assert len(model.losses) == 1 and float(model.losses[0]) > 0


def test_mismatched_tower_dimensions_are_rejected():
  with pytest.raises(ValueError, match='last context hidden dim'):
    dual_encoder.build_dual_encoder(vocab_size=5, embedding_dim=8,
                                    context_hidden_dims=(4,))
