"""Load-balancing and z-losses against the Switch / OLMoE formulas; global LB."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import moe


def _inputs(seed, batch=8, length=6, num_experts=5, k=2):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(batch, length, num_experts)) * 2
  probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  # Skewed choices: shards see very different loads.
  experts = np.argsort(-probs, axis=-1)[..., :k]
  return jnp.asarray(probs, jnp.float32), jnp.asarray(experts, jnp.int32)


def _numpy_load_balance(probs, experts):
  num_experts, k = probs.shape[-1], experts.shape[-1]
  counts = np.bincount(np.asarray(experts).ravel(), minlength=num_experts)
  f = counts / (probs.shape[0] * probs.shape[1])
  return num_experts / k * np.sum(f * np.asarray(probs).mean((0, 1)))


def test_load_balance_matches_formula_and_is_one_when_balanced():
  probs, experts = _inputs(0)
  np.testing.assert_allclose(moe.load_balance_loss(probs, experts),
                             _numpy_load_balance(probs, experts), rtol=1e-6)
  uniform = jnp.full((2, 5, 5), 0.2)
  round_robin = (jnp.arange(2 * 5 * 2).reshape(2, 5, 2) % 5).astype(jnp.int32)
  np.testing.assert_allclose(moe.load_balance_loss(uniform, round_robin), 1.0,
                             rtol=1e-6)


def test_load_balance_gradient_flows_through_probabilities_only():
  probs, experts = _inputs(1)
  grad = jax.grad(moe.load_balance_loss)(probs, experts)
  counts = np.bincount(np.asarray(experts).ravel(), minlength=5)
  tokens = probs.shape[0] * probs.shape[1]
  expected = (5 / 2) * (counts / tokens) / tokens
  np.testing.assert_allclose(grad, np.broadcast_to(expected, probs.shape),
                             rtol=1e-6)


def test_counts_are_global_over_the_data_axis():
  probs, experts = _inputs(2)
  mesh = jax.make_mesh((4,), ("data",))

  def sharded(data_axis):
    @functools.partial(jax.shard_map, mesh=mesh, in_specs=jax.P("data"),
                       out_specs=jax.P())
    def loss(p, e):
      return jax.lax.pmean(moe.load_balance_loss(p, e, data_axis=data_axis),
                           "data")
    placed = jax.device_put((probs, experts),
                            jax.NamedSharding(mesh, jax.P("data")))
    return jax.jit(loss)(*placed)

  np.testing.assert_allclose(sharded("data"), _numpy_load_balance(probs, experts),
                             rtol=1e-5)
  # Counting per shard ("local" balancing) is a different loss.
  local = np.mean([_numpy_load_balance(probs[i:i + 2], experts[i:i + 2])
                   for i in range(0, 8, 2)])
  np.testing.assert_allclose(sharded(None), local, rtol=1e-5)
  assert abs(local - _numpy_load_balance(probs, experts)) > 1e-3


def test_z_loss_is_mean_squared_logsumexp_over_the_pool():
  logits = jnp.asarray(np.random.default_rng(3).normal(size=(2, 3, 4)),
                       jnp.float32)
  masked = logits.at[..., 1].set(-jnp.inf)
  z = np.asarray(logits, np.float64)
  expected = np.mean(np.log(np.exp(z[..., [0, 2, 3]]).sum(-1)) ** 2)
  np.testing.assert_allclose(moe.router_z_loss(masked), expected, rtol=1e-5)
  grad = jax.grad(moe.router_z_loss)(masked)
  assert np.all(grad[..., 1] == 0) and np.all(np.isfinite(grad))


def test_training_loss_adds_the_weighted_parts():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, 7)) * 3
  targets = rng.integers(0, 7, size=(2, 5))
  args = (jnp.asarray(logits, jnp.float32), jnp.asarray(targets),
          {"load_balance": jnp.float32(2.4), "router_z": jnp.float32(6.0)})
  total, parts = moe.training_loss(*args, num_layers=2, lm_z_weight=0.5,
                                   load_balance_weight=0.2, router_z_weight=0.1)
  log_z = np.log(np.exp(logits).sum(-1))
  ce = np.mean(log_z - np.take_along_axis(logits, targets[..., None], -1)[..., 0])
  assert float(parts["ce"]) == pytest.approx(ce, rel=1e-5)
  assert float(parts["load_balance"]) == pytest.approx(1.2)
  assert float(parts["router_z"]) == pytest.approx(3.0)
  expected = ce + 0.5 * np.mean(log_z ** 2) + 0.2 * 1.2 + 0.1 * 3.0
  assert float(total) == pytest.approx(expected, rel=1e-5)
  # The defaults are the authors' weights.
  default_total, _ = moe.training_loss(*args, num_layers=2)
  expected = ce + 1e-5 * np.mean(log_z ** 2) + 0.1 * 1.2 + 0.001 * 3.0
  assert float(default_total) == pytest.approx(expected, rel=1e-6)
