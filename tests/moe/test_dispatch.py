"""Dropless and capacity paths against a per-expert loop (MaxText's MoeLoopBlock)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import moe

B, L, D, F, E, K = 2, 12, 8, 6, 6, 2


def _weights(seed=0, num_experts=E):
  rng = np.random.default_rng(seed)
  return moe.ExpertWeights(
      *(jnp.asarray(rng.normal(size=shape) / np.sqrt(shape[1]), jnp.float32)
        for shape in ((num_experts, D, F), (num_experts, D, F),
                      (num_experts, F, D))))


def _routing(seed=1, skew=0.0):
  """Top-k routing of random tokens (numpy: no eager JAX compilations)."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(B, L, D))
  logits = rng.normal(size=(B, L, E)) + skew * np.arange(E)
  probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  experts = np.argsort(-probs, axis=-1, kind="stable")[..., :K]
  gates = np.take_along_axis(probs, experts, -1)
  return (jnp.asarray(x, jnp.float32), jnp.asarray(experts, jnp.int32),
          jnp.asarray(gates, jnp.float32))


def _loop_reference(x, experts, gates, weights):
  """Every expert on every token, weighted by the token's gates for it."""
  y = jnp.zeros_like(x)
  for e in range(weights.gate.shape[0]):
    gate_e = jnp.sum(jnp.where(experts == e, gates, 0.0), axis=-1)
    out = moe.swiglu(x, weights.gate[e], weights.up[e], weights.down[e])
    y = y + gate_e[..., None] * out
  return y


def _capacity_reference(x, experts, gates, weights, capacity):
  """Pairs in priority order (slot, then position) fill each expert's slots."""
  experts, gates = np.asarray(experts), np.asarray(gates)
  kept = np.zeros(experts.shape, bool)
  for b in range(B):
    used = np.zeros(E, int)
    for j in range(K):
      for t in range(L):
        e = experts[b, t, j]
        if used[e] < capacity:
          kept[b, t, j] = True
          used[e] += 1
  y = jax.jit(_loop_reference)(x, jnp.asarray(experts),
                               jnp.asarray(gates * kept), weights)
  return y, int((~kept).sum())


DROPLESS = [("ragged_dot", 16), ("blocked", 1), ("blocked", 4), ("blocked", 16)]


def _loss(fn, weights, x, gates, experts):
  return jnp.sum(fn(x, experts, gates, weights) ** 2)


@functools.cache
def _dropless(grouped_matmul, block_size):
  """One jitted function per backend, shared by the tests that use it."""
  return jax.jit(functools.partial(moe.dropless_experts,
                                   grouped_matmul=grouped_matmul,
                                   block_size=block_size))


_reference_grad = jax.jit(jax.grad(functools.partial(_loss, _loop_reference),
                                   argnums=(0, 1, 2)))


@pytest.mark.parametrize("skew", [0.0, 3.0])  # 3.0: nearly all to a few experts
@pytest.mark.parametrize("grouped_matmul,block_size", DROPLESS)
def test_dropless_matches_loop_reference(grouped_matmul, block_size, skew):
  x, experts, gates = _routing(skew=skew)
  weights = _weights()
  np.testing.assert_allclose(_dropless(grouped_matmul, block_size)(
                                 x, experts, gates, weights),
                             jax.jit(_loop_reference)(x, experts, gates, weights),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("grouped_matmul", ["ragged_dot", "blocked"])
def test_dropless_gradients_match_loop_reference(grouped_matmul):
  x, experts, gates = _routing(skew=3.0)
  weights = _weights()
  run = functools.partial(moe.dropless_experts, grouped_matmul=grouped_matmul,
                          block_size=4)
  got = jax.jit(jax.grad(functools.partial(_loss, run), argnums=(0, 1, 2)))(
      weights, x, gates, experts)
  expected = _reference_grad(weights, x, gates, experts)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("grouped_matmul", ["ragged_dot", "blocked"])
def test_expert_shards_sum_to_the_full_output(grouped_matmul):
  x, experts, gates = _routing(seed=2)
  weights = _weights()
  run = _dropless(grouped_matmul, 4)
  shards = [run(x, experts, gates,
                jax.tree.map(lambda w, s=s: w[s:s + 3], weights),
                expert_offset=s) for s in (0, 3)]
  np.testing.assert_allclose(shards[0] + shards[1],
                             jax.jit(_loop_reference)(x, experts, gates, weights),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("capacity", [1, 3, L * K])
def test_capacity_path_matches_loop_reference_with_drops(capacity):
  x, experts, gates = _routing(seed=3, skew=1.0)
  weights = _weights()
  run = jax.jit(functools.partial(moe.capacity_experts, capacity=capacity))
  y, dropped = run(x, experts, gates, weights)
  y_ref, dropped_ref = _capacity_reference(x, experts, gates, weights,
                                           capacity)
  np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
  assert int(dropped) == dropped_ref
  if capacity == L * K:
    assert dropped_ref == 0
  # Shards of experts see the same per-expert queues.
  halves = [run(x, experts, gates,
                jax.tree.map(lambda w, s=s: w[s:s + 3], weights),
                expert_offset=s) for s in (0, 3)]
  np.testing.assert_allclose(halves[0][0] + halves[1][0], y, rtol=1e-5,
                             atol=1e-5)
  assert int(halves[0][1] + halves[1][1]) == dropped_ref


def test_capacity_formula_and_bad_arguments():
  assert moe.expert_capacity(128, 3, 31, 1.25) == 16  # ceil(15.48)
  assert moe.expert_capacity(4, 1, 64, 1.0) == 1
  with pytest.raises(ValueError, match="capacity_factor must be > 0"):
    moe.expert_capacity(8, 2, 4, 0.0)
  x, experts, gates = _routing()
  with pytest.raises(ValueError, match="grouped_matmul must be"):
    moe.dropless_experts(x, experts, gates, _weights(), grouped_matmul="dense")
  with pytest.raises(ValueError, match="block_size must be an int >= 1"):
    moe.dropless_experts(x, experts, gates, _weights(), grouped_matmul="blocked",
                         block_size=0)
