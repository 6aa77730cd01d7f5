"""Greedy layerwise expert selection and physical pruning of an MoE model."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import moe

D = 16
MOE = moe.MoEConfig(num_experts=8, k=2, d_hidden=8, routing="emo",
                    grouped_matmul="blocked", block_size=4)


class _TwoMoELayers(nnx.Module):
  """A residual stack of two MoE layers: the smallest multi-layer MoE model."""

  def __init__(self, rngs):
    self.first = moe.MoE(D, MOE, layer_index=0, rngs=rngs)
    self.second = moe.MoE(D, MOE, layer_index=1, rngs=rngs)

  def __call__(self, x, segment_ids=None):
    y, _ = self.first(x, segment_ids)
    x = x + y
    y, _ = self.second(x, segment_ids)
    return x + y


@pytest.fixture(scope="module")
def model():
  return _TwoMoELayers(nnx.Rngs(0))


@pytest.fixture(scope="module")
def inputs():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(2, 16, D)), jnp.float32)
  return x, jnp.asarray([[0] * 7 + [1] * 9] * 2, jnp.int32)


@functools.partial(jax.jit, static_argnums=0)
def _outputs(graphdef, state, x, segment_ids):
  return nnx.merge(graphdef, state)(x, segment_ids)


def _evaluate(model, inputs):
  return _outputs(*nnx.split(nnx.view(model, deterministic=True)), *inputs)


@pytest.mark.parametrize("kept", [
    [np.array([1, 4, 6]), np.array([0, 2, 5, 7])],
    [np.array([3]), None],  # one expert left: top-k shrinks to k = 1
])
def test_pruned_model_equals_full_model_with_experts_masked(model, inputs,
                                                           kept):
  pruned = moe.prune_experts(model, kept)
  masked = moe.mask_experts(model, kept)
  np.testing.assert_allclose(_evaluate(pruned, inputs),
                             _evaluate(masked, inputs), rtol=1e-5, atol=1e-5)
  assert not np.allclose(_evaluate(pruned, inputs), _evaluate(model, inputs),
                         atol=1e-3)
  for layer, keep in zip(moe.moe_layers(pruned), kept):
    size = MOE.num_experts if keep is None else len(keep)
    assert layer.w_gate.shape[0] == layer.router.shape[1] == size
    assert layer.config.k == min(MOE.k, size)
  # The original is untouched.
  assert all(layer.config.num_experts == 8 for layer in moe.moe_layers(model))


def test_greedy_selection_follows_the_pruned_model_layer_by_layer(model,
                                                                  inputs):
  kept = moe.select_experts(model, *inputs, num_experts=3)
  view = nnx.view(model, deterministic=True)
  stats = moe.routing_statistics(view, *inputs)
  top = lambda p: np.sort(np.argsort(-np.asarray(p), kind="stable")[:3])
  np.testing.assert_array_equal(kept[0], top(stats[0]["router_probs"]))
  first_pruned = moe.prune_experts(view, [kept[0], None])
  stats = moe.routing_statistics(first_pruned, *inputs)
  np.testing.assert_array_equal(kept[1], top(stats[1]["router_probs"]))
  for s in stats:
    np.testing.assert_allclose(np.sum(s["router_probs"]), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.sum(s["expert_load"]), 1.0, rtol=1e-5)
  usage = moe.expert_usage(moe.mask_experts(model, kept), *inputs)
  assert usage.shape == (2, 8)
  for layer_usage, keep in zip(np.asarray(usage), kept):
    assert np.all(layer_usage[np.setdiff1d(np.arange(8), keep)] == 0)


def test_bad_subsets_are_named_errors(model, inputs):
  with pytest.raises(ValueError, match="one entry per MoE layer"):
    moe.prune_experts(model, [np.array([0])])
  with pytest.raises(ValueError, match="strictly increasing expert indices"):
    moe.prune_experts(model, [np.array([2, 1]), None])
  with pytest.raises(ValueError, match=r"in \[0, 8\)"):
    moe.mask_experts(model, [None, np.array([3, 8])])
  with pytest.raises(ValueError, match="non-empty 1-D array"):
    moe.prune_experts(model, [np.array([], np.int32), None])
  with pytest.raises(ValueError, match=r"num_experts must lie in \[1, 8\]"):
    moe.select_experts(model, inputs[0], num_experts=9)
  with pytest.raises(ValueError, match="model has no MoE layers"):
    moe.moe_layers(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
