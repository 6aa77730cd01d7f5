"""The nnx MoE layer: EMO's formulas, modes, expert/data parallelism, errors."""

import dataclasses
import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import moe

B, L, D = 4, 12, 16
BASE = moe.MoEConfig(num_experts=8, k=2, d_hidden=8, routing="emo",
                     pool_size=(2, 8), grouped_matmul="blocked", block_size=4)


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.normal(size=(B, L, D)), jnp.float32)
  segments = jnp.asarray(np.cumsum(rng.random((B, L)) < 0.2, axis=1),
                         jnp.int32)
  return x, segments


@functools.partial(jax.jit, static_argnums=0)
def _apply(graphdef, state, x, segments, key):
  """The layer (or model) with its pool stream reseeded: a pure function."""
  layer = nnx.merge(graphdef, state)
  nnx.reseed(layer, pool=key)
  return layer(x, segments)


def _run(layer, x, segments, key=0):
  return _apply(*nnx.split(layer), x, segments, jax.random.key(key))


@jax.jit
def _expected(weights, x, segments, pool_BxL):
  """Written out: router, EMO routing, experts, shared expert, losses."""
  router, experts, shared = weights
  r = moe.emo_route(x @ router, segments, pool_size=pool_BxL, k=BASE.k)
  y = moe.swiglu(x, *shared)
  for e in range(experts.gate.shape[0]):
    gate_e = jnp.sum(jnp.where(r.experts == e, r.gates, 0.0), axis=-1)
    y = y + gate_e[..., None] * moe.swiglu(
        x, experts.gate[e], experts.up[e], experts.down[e])
  return y, {"load_balance": moe.load_balance_loss(r.probs, r.experts),
             "router_z": moe.router_z_loss(r.logits)}


def _weights(layer):
  return (layer.router[...],
          moe.ExpertWeights(layer.w_gate[...], layer.w_up[...],
                            layer.w_down[...]),
          (layer.shared_gate[...], layer.shared_up[...],
           layer.shared_down[...]))


def _fixed_pool(size):
  return jnp.full((B, L), size, jnp.int32)


@pytest.mark.parametrize("dispatch", ["dropless", "capacity"])
def test_output_and_losses_follow_the_written_out_layer(dispatch):
  config = dataclasses.replace(BASE, pool_size=3, dispatch=dispatch,
                               capacity_factor=float(BASE.num_experts))
  layer = moe.MoE(D, config, rngs=nnx.Rngs(0))
  x, segments = _inputs()
  y, aux = _run(layer, x, segments)
  y_ref, aux_ref = _expected(_weights(layer), x, segments, _fixed_pool(3))
  np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
  for name in ("load_balance", "router_z"):
    np.testing.assert_allclose(aux[name], aux_ref[name], rtol=1e-5)
  if dispatch == "capacity":
    assert float(aux["dropped_fraction"]) == 0.0  # capacity = every pair


def test_training_pools_are_drawn_per_document_and_layer_from_the_stream():
  def draws(layer_index, key, shared=False):
    config = dataclasses.replace(BASE, pool_shared_across_layers=shared)
    layer = moe.MoE(D, config, layer_index=layer_index, rngs=nnx.Rngs(0))
    nnx.reseed(layer, pool=key)
    return np.asarray(layer.pool_sizes(B, L))

  first = draws(0, 5)
  assert first.min() >= 2 and first.max() <= 8 and len(np.unique(first)) > 3
  np.testing.assert_array_equal(draws(0, 5), first)
  assert not np.array_equal(draws(0, 6), first)
  assert not np.array_equal(draws(1, 5), first)
  np.testing.assert_array_equal(draws(1, 5, shared=True),
                                draws(0, 5, shared=True))
  layer = moe.MoE(D, BASE, rngs=nnx.Rngs(0))
  assert not np.array_equal(layer.pool_sizes(B, L), layer.pool_sizes(B, L))


def test_evaluation_view_routes_per_token_or_with_the_eval_pool():
  x, segments = _inputs(2)
  emo = moe.MoE(D, BASE, rngs=nnx.Rngs(0))
  topk = moe.MoE(D, dataclasses.replace(BASE, routing="topk"), rngs=nnx.Rngs(0))
  y_eval, _ = _run(nnx.view(emo, deterministic=True), x, segments)
  np.testing.assert_allclose(y_eval, _run(topk, x, segments)[0], rtol=1e-6)
  pooled = moe.MoE(D, dataclasses.replace(BASE, eval_pool_size=3),
                   rngs=nnx.Rngs(0))
  assert pooled.pool_sizes(B, L) is not None
  y_pool, _ = _run(nnx.view(pooled, deterministic=True), x, segments)
  np.testing.assert_allclose(
      y_pool, _expected(_weights(pooled), x, segments, _fixed_pool(3))[0],
      rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("overrides,with_grads", [
    (dict(dispatch="dropless", grouped_matmul="blocked"), True),
    (dict(dispatch="capacity", capacity_factor=1.0, routing="topk"), False),
])
def test_sharded_equals_unsharded(overrides, with_grads):
  config = dataclasses.replace(BASE, **overrides)
  sharded_config = dataclasses.replace(config, data_axis="data",
                                       expert_axis="expert")
  x, segments = _inputs(3)

  def loss_and_grads(layer_config):
    graphdef, params, rest = nnx.split(
        moe.MoE(D, layer_config, rngs=nnx.Rngs(0)), nnx.Param, ...)

    def loss(params, rest):
      layer = nnx.merge(graphdef, params, rest, copy=True)
      nnx.reseed(layer, pool=jax.random.key(4))
      y, aux = layer(x, segments)
      return jnp.sum(y ** 2) + aux["load_balance"] + aux["router_z"], aux

    if with_grads:
      return jax.jit(jax.value_and_grad(loss, has_aux=True))(params, rest)
    return jax.jit(loss)(params, rest), {}

  (value, aux), grads = loss_and_grads(config)
  with jax.set_mesh(jax.make_mesh((2, 4), ("data", "expert"))):
    (value_s, aux_s), grads_s = loss_and_grads(sharded_config)
  np.testing.assert_allclose(value_s, value, rtol=1e-5)
  assert set(aux_s) == set(aux)
  for name in aux:
    np.testing.assert_allclose(aux_s[name], aux[name], rtol=1e-5, atol=1e-7)
  for a, b in zip(jax.tree.leaves(grads_s), jax.tree.leaves(grads)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("overrides,match", [
    (dict(pool_size=9), "exceeds the number of routed experts 8"),
    (dict(pool_size=(1, 6)), "k=2 exceeds pool_size"),
    (dict(eval_pool_size=12), "exceeds the number of routed experts"),
    (dict(k=9), "k must lie in"),
    (dict(routing="hash"), "routing must be one of"),
    (dict(dispatch="dense"), "dispatch must be one of"),
    (dict(capacity_factor=0.0), "capacity_factor must be > 0"),
])
def test_bad_configs_are_named_errors(overrides, match):
  with pytest.raises(ValueError, match=match):
    dataclasses.replace(BASE, **overrides)


def test_bad_calls_are_named_errors():
  x, segments = _inputs()
  layer = moe.MoE(D, BASE, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="segment_ids must be non-decreasing"):
    layer(x, segments[:, ::-1])
  for overrides, match in [
      (dict(expert_axis="model"), "expert_axis='model' is not an axis"),
      (dict(num_experts=6, pool_size=(2, 6), expert_axis="expert"),
       "num_experts=6 must be divisible by the size 4"),
  ]:
    bad = moe.MoE(D, dataclasses.replace(BASE, **overrides), rngs=nnx.Rngs(0))
    with jax.set_mesh(jax.make_mesh((2, 4), ("data", "expert"))):
      with pytest.raises(ValueError, match=match):
        bad(x, segments)
  with pytest.raises(ValueError, match="not an axis of the current mesh"):
    moe.MoE(D, dataclasses.replace(BASE, data_axis="data"),
            rngs=nnx.Rngs(0))(x, segments)
