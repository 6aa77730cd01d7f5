"""GRPO advantages against numpy, PPO-clip against the policy gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.rl import _grpo as grpo


def _numpy_advantages(rewards, groups, std_normalize):
  out = np.zeros_like(rewards)
  for g in np.unique(groups):
    members = groups == g
    r = rewards[members]
    if r.size == 1:
      continue
    centred = r - r.mean()
    out[members] = centred / (r.std(ddof=1) + 1e-6) if std_normalize else centred
  return out


@pytest.mark.parametrize("std_normalize", [True, False])
def test_advantages_match_numpy(std_normalize):
  rng = np.random.default_rng(0)
  rewards = rng.random(24).astype(np.float32)
  rewards[:4] = 1.0  # a constant group: advantage 0, not NaN
  groups = np.repeat(rng.permutation(6), 4).astype(np.int32)
  groups[:4] = 99
  got = jax.jit(grpo.grpo_advantages, static_argnames="std_normalize")(
      jnp.asarray(rewards), jnp.asarray(groups), std_normalize=std_normalize)
  np.testing.assert_allclose(got, _numpy_advantages(rewards, groups,
                                                    std_normalize),
                             rtol=1e-4, atol=1e-5)
  assert np.all(np.asarray(got[:4]) == 0.0)


_advantages = jax.jit(grpo.grpo_advantages)


@pytest.mark.parametrize("offset", [0.0, 0.9, 10.0, 100.0, 1e4])
def test_a_common_offset_does_not_change_the_advantages(offset):
  # One-pass E[R^2] - mean^2 gave +-35,000 instead of +-1.43 at offset 100.
  spread = 0.01 * np.arange(8)
  got = _advantages(jnp.asarray(offset + spread, jnp.float32),
                    jnp.zeros(8, jnp.int32))
  rewards64 = np.float64(np.float32(offset + spread))
  expected = (rewards64 - rewards64.mean()) / (rewards64.std(ddof=1) + 1e-6)
  # What float32 allows: the group mean is off by a few units in the last
  # place of the offset, divided by the spread (the one-pass form was off by
  # 0.22, 900 and 12,800 at offsets 0.9, 10 and 100).
  ulps = 8 * np.finfo(np.float32).eps * max(offset, 1.0) / rewards64.std(ddof=1)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=ulps)


def test_a_nan_reward_stays_in_its_own_group():
  rewards = jnp.array([1.0, jnp.nan, 0.0, 1.0, 0.0, 2.0])
  groups = jnp.array([0, 0, 1, 1, 2, 2])
  got = np.asarray(_advantages(rewards, groups))
  assert np.isnan(got[:2]).all()
  np.testing.assert_allclose(got[2:], [-0.7071, 0.7071, -0.7071, 0.7071],
                             atol=1e-3)


def test_singleton_groups_get_zero_advantage():
  got = grpo.grpo_advantages(jnp.array([1.0, 0.0, 3.0]), jnp.array([0, 0, 1]))
  assert np.isfinite(np.asarray(got)).all()
  assert float(got[2]) == 0.0
  # Bessel-corrected std of (1, 0) is sqrt(1/2).
  np.testing.assert_allclose(got[:2], [0.5 / (np.sqrt(0.5) + 1e-6),
                                       -0.5 / (np.sqrt(0.5) + 1e-6)], rtol=1e-5)


def test_bad_advantage_inputs_are_named():
  with pytest.raises(ValueError, match="group_ids"):
    grpo.grpo_advantages(jnp.zeros(4), jnp.zeros(3, jnp.int32))
  with pytest.raises(TypeError, match="group_ids"):
    grpo.grpo_advantages(jnp.zeros(4), jnp.zeros(4))
  with pytest.raises(ValueError, match="rewards"):
    grpo.grpo_advantages(jnp.zeros((2, 2)), jnp.zeros((2, 2), jnp.int32))


def test_ppo_clip_at_ratio_one_is_the_policy_gradient():
  rng = np.random.default_rng(1)
  theta = jnp.asarray(rng.normal(size=(3, 5)), jnp.float32)
  mask = jnp.asarray([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]],
                     jnp.bool_)
  advantages = jnp.asarray([0.7, -1.3, 2.0], jnp.float32)
  log_probs = lambda t: jax.nn.log_sigmoid(t)  # any differentiable map

  def ppo(t):
    lp = log_probs(t)
    return grpo.ppo_clip_loss(lp, jax.lax.stop_gradient(lp), advantages,
                              mask)[0]

  def policy_gradient(t):
    lp = log_probs(t) * mask.astype(jnp.float32)
    count = jnp.maximum(mask.sum(-1), 1).astype(jnp.float32)
    return -jnp.mean(advantages * lp.sum(-1) / count)

  np.testing.assert_allclose(jax.grad(ppo)(theta),
                             jax.grad(policy_gradient)(theta), rtol=1e-6)
  # The value at ratio 1 is -mean_i A_i over rows with actions (the empty row: 0).
  np.testing.assert_allclose(ppo(theta), -(0.7 - 1.3 + 0.0) / 3, rtol=1e-6)


def test_ppo_clip_clips_outside_the_range():
  old = jnp.zeros((1, 2))
  new = jnp.log(jnp.array([[1.5, 0.5]]))  # ratios 1.5 and 0.5
  mask = jnp.ones((1, 2), jnp.bool_)
  loss, aux = grpo.ppo_clip_loss(new, old, jnp.array([1.0]), mask)
  # A > 0: min(1.5, 1.2) = 1.2 and min(0.5, 0.8) = 0.5.
  np.testing.assert_allclose(loss, -(1.2 + 0.5) / 2, rtol=1e-6)
  assert float(aux["clip_fraction"]) == 1.0
  grad = jax.grad(lambda n: grpo.ppo_clip_loss(n, old, jnp.array([1.0]),
                                               mask)[0])(new)
  assert float(grad[0, 0]) == 0.0 and float(grad[0, 1]) < 0.0
  with pytest.raises(ValueError, match="clip_low"):
    grpo.ppo_clip_loss(new, old, jnp.array([1.0]), mask, clip_low=0.0)
  with pytest.raises(ValueError, match="action_mask_BxL"):
    grpo.ppo_clip_loss(new, old, jnp.array([1.0]), mask[:, :1])
  with pytest.raises(ValueError, match="advantages_B"):
    grpo.ppo_clip_loss(new, old, jnp.array([1.0, 2.0]), mask)
