"""Greedy layerwise expert selection and physical pruning of an MoE LM."""

import functools

from flax import nnx
import jax
import numpy as np
import pytest

from jaxpapers import models
from jaxpapers import moe

CONFIG = models.TransformerConfig(max_len=16, d_model=16, num_heads=2,
                                  num_layers=2)
MOE = moe.MoEConfig(num_experts=8, k=2, d_hidden=8, routing="emo",
                    grouped_matmul="blocked", block_size=4)


@pytest.fixture(scope="module")
def lm():
  return models.Transformer(CONFIG, rngs=nnx.Rngs(0),
                            ffn_factory=moe.moe_ffn_factory(MOE))


@pytest.fixture(scope="module")
def tokens():
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, 256, (2, 16)).astype(np.int32)
  tokens[:, 6] = 256  # EOS: two documents per row
  return jax.numpy.asarray(tokens)


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, state, tokens):
  from jaxpapers.data import text  # pylint: disable=g-import-not-at-top
  return nnx.merge(graphdef, state)(tokens, text.segment_ids(tokens))[0]


def _evaluate(model, tokens):
  return _logits(*nnx.split(nnx.view(model, deterministic=True)), tokens)


@pytest.mark.parametrize("kept", [
    [np.array([1, 4, 6]), np.array([0, 2, 5, 7])],
    [np.array([3]), None],  # one expert left: top-k shrinks to k = 1
])
def test_pruned_model_equals_full_model_with_experts_masked(lm, tokens, kept):
  pruned = moe.prune_experts(lm, kept)
  masked = moe.mask_experts(lm, kept)
  np.testing.assert_allclose(_evaluate(pruned, tokens),
                             _evaluate(masked, tokens), rtol=1e-5, atol=1e-5)
  assert not np.allclose(_evaluate(pruned, tokens), _evaluate(lm, tokens),
                         atol=1e-3)
  for layer, keep in zip(moe.moe_layers(pruned), kept):
    size = MOE.num_experts if keep is None else len(keep)
    assert layer.w_gate.shape[0] == layer.router.shape[1] == size
    assert layer.config.k == min(MOE.k, size)
  # The original is untouched.
  assert all(layer.config.num_experts == 8 for layer in moe.moe_layers(lm))


def test_greedy_selection_follows_the_pruned_model_layer_by_layer(lm, tokens):
  from jaxpapers.data import text  # pylint: disable=g-import-not-at-top
  segments = text.segment_ids(tokens)
  kept = moe.select_experts(lm, tokens, segments, num_experts=3)
  view = nnx.view(lm, deterministic=True)
  stats = moe.routing_statistics(view, tokens, segments)
  top = lambda p: np.sort(np.argsort(-np.asarray(p), kind="stable")[:3])
  np.testing.assert_array_equal(kept[0], top(stats[0]["router_probs"]))
  first_pruned = moe.prune_experts(view, [kept[0], None])
  stats = moe.routing_statistics(first_pruned, tokens, segments)
  np.testing.assert_array_equal(kept[1], top(stats[1]["router_probs"]))
  for s in stats:
    np.testing.assert_allclose(np.sum(s["router_probs"]), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.sum(s["expert_load"]), 1.0, rtol=1e-5)
  usage = moe.expert_usage(moe.mask_experts(lm, kept), tokens, segments)
  assert usage.shape == (2, 8)
  for layer_usage, keep in zip(np.asarray(usage), kept):
    assert np.all(layer_usage[np.setdiff1d(np.arange(8), keep)] == 0)


def test_bad_subsets_are_named_errors(lm, tokens):
  with pytest.raises(ValueError, match="one entry per MoE layer"):
    moe.prune_experts(lm, [np.array([0])])
  with pytest.raises(ValueError, match="strictly increasing expert indices"):
    moe.prune_experts(lm, [np.array([2, 1]), None])
  with pytest.raises(ValueError, match=r"in \[0, 8\)"):
    moe.mask_experts(lm, [None, np.array([3, 8])])
  with pytest.raises(ValueError, match="non-empty 1-D array"):
    moe.prune_experts(lm, [np.array([], np.int32), None])
  with pytest.raises(ValueError, match=r"num_experts must lie in \[1, 8\]"):
    moe.select_experts(lm, tokens, num_experts=9)
  with pytest.raises(ValueError, match="model has no MoE layers"):
    moe.moe_layers(models.Transformer(CONFIG, rngs=nnx.Rngs(0)))
