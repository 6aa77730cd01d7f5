"""The shared nnx transformer LM: causality, document masking, FFN hook."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import models

CONFIG = models.TransformerConfig(vocab_size=11, max_len=12, d_model=16,
                                  num_heads=2, num_layers=2, d_ff=32)


def _tokens(seed=0, shape=(2, 12)):
  return jax.random.randint(jax.random.key(seed), shape, 0, 10)


def test_logits_are_causal():
  model = models.Transformer(CONFIG, rngs=nnx.Rngs(0))
  tokens = _tokens()
  changed = tokens.at[:, 7:].set((tokens[:, 7:] + 1) % 10)
  a, _ = model(tokens)
  b, _ = model(changed)
  np.testing.assert_allclose(a[:, :7], b[:, :7], atol=1e-6)
  assert not np.allclose(a[:, 7:], b[:, 7:])


def test_segments_do_not_see_each_other():
  model = models.Transformer(CONFIG, rngs=nnx.Rngs(0))
  tokens = _tokens(1)
  segments = jnp.array([[0] * 5 + [1] * 7] * 2)
  changed = tokens.at[:, :5].set((tokens[:, :5] + 3) % 10)
  a, _ = model(tokens, segments)
  b, _ = model(changed, segments)
  # Position embeddings are absolute, so only the content of segment 0 changed.
  np.testing.assert_allclose(a[:, 5:], b[:, 5:], atol=1e-6)


class _CountingFFN(nnx.Module):

  def __init__(self, d_model):
    self.scale = nnx.Param(jnp.zeros((d_model,)))

  def __call__(self, x, segment_ids=None):
    del segment_ids
    return x * self.scale[...].reshape(1, 1, -1), {"calls": jnp.float32(1.0)}


def test_ffn_factory_is_used_in_every_block_and_aux_is_summed():
  model = models.Transformer(
      CONFIG, rngs=nnx.Rngs(0),
      ffn_factory=lambda config, i, rngs: _CountingFFN(config.d_model))
  _, aux = model(_tokens())
  assert float(aux["calls"]) == CONFIG.num_layers


def test_next_token_loss_matches_numpy_and_mask():
  logits = jax.random.normal(jax.random.key(2), (2, 3, 5))
  targets = jnp.array([[0, 1, 2], [3, 4, 0]])
  log_p = jax.nn.log_softmax(logits, -1)
  nll = -np.take_along_axis(np.asarray(log_p), np.asarray(targets)[..., None], -1)[..., 0]
  np.testing.assert_allclose(models.next_token_loss(logits, targets), nll.mean(),
                             rtol=1e-6)
  mask = jnp.array([[1, 1, 0], [0, 0, 1]])
  np.testing.assert_allclose(models.next_token_loss(logits, targets, mask),
                             nll[np.asarray(mask) == 1].mean(), rtol=1e-6)


def test_bad_configs_and_lengths_are_named_errors():
  with pytest.raises(ValueError, match="divisible by num_heads"):
    models.TransformerConfig(d_model=10, num_heads=4)
  model = models.Transformer(CONFIG, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="exceeds max_len"):
    model(_tokens(shape=(1, 13)))
