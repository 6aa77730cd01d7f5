"""PPO baseline: GAE against a numpy loop, the clipped loss, a short training run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _ppo as ppo


def _numpy_gae(reward, value, active, gamma, lam):
  adv = np.zeros_like(reward)
  for e in range(reward.shape[0]):
    running = 0.0
    for t in reversed(range(reward.shape[1])):
      nxt_active = active[e, t + 1] if t + 1 < reward.shape[1] else False
      nxt_value = value[e, t + 1] if nxt_active else 0.0
      if not active[e, t]:
        running = 0.0
        continue
      delta = reward[e, t] + gamma * nxt_value - value[e, t]
      running = delta + gamma * lam * (running if nxt_active else 0.0)
      adv[e, t] = running
  return adv


def test_gae_matches_a_numpy_loop():
  rng = np.random.default_rng(0)
  reward = rng.normal(size=(3, 9)).astype(np.float32)
  value = rng.normal(size=(3, 9)).astype(np.float32)
  active = np.arange(9)[None] < np.array([[9], [5], [0]])
  config = ppo.PPOConfig(gamma=0.9, gae_lambda=0.8)
  got = ppo._gae(jnp.asarray(reward), jnp.asarray(value), jnp.asarray(active),
                 config)
  np.testing.assert_allclose(np.asarray(got),
                             _numpy_gae(reward, value, active, 0.9, 0.8),
                             rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # compile-bound (20-40 s on 2 cores); CI runs -m slow
def test_initial_policy_is_myopic_and_training_runs(standard_dtype_promotion):
  del standard_dtype_promotion  # optax's adam mixes int32 counts into floats
  params = env_lib.EnvParams(horizon=2.0, base_intensity=8.0)
  config = ppo.PPOConfig(num_envs=4, num_iterations=2, minibatches=2,
                         hidden=(8,))
  start = ppo.init(jax.random.key(0), config)
  obs, _ = env_lib.reset(jax.random.key(1), params)
  mean = ppo.models.apply_mlp(start.policy, ppo.features(obs, params))[0]
  assert float(ppo.shading(mean, config)) == pytest.approx(1.0, abs=0.02)
  trained, curve = jax.jit(lambda k: ppo.train(k, params, config))(
      jax.random.key(2))
  assert curve.shape == (2,) and np.all(np.isfinite(np.asarray(curve)))
  moved = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), trained, start)
  assert max(jax.tree.leaves(moved)) > 0  # the optimiser did update the policy
  bid = ppo.greedy_policy(trained, params, config)(obs)
  assert 0.0 <= float(bid) <= config.max_theta * float(obs.value * obs.kernel)


def test_bad_hyperparameters_raise_named_errors():
  with pytest.raises(ValueError, match="gamma"):
    ppo.PPOConfig(gamma=1.5)
  with pytest.raises(ValueError, match="num_envs"):
    ppo.PPOConfig(num_envs=0)
