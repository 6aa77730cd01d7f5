"""BitEdit: the Bernoulli KL, both trust radii, the projection and the guidance."""

import functools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from jaxpapers.var import _bitedit as bitedit


def _kl_reference(clean, shift):
  """KL(Bern(q) || Bern(p)) in float64 from the probabilities themselves."""
  p, q = special.expit(clean), special.expit(clean + shift)
  return q * np.log(q / p) + (1 - q) * np.log((1 - q) / (1 - p))


def test_kl_matches_the_probability_formula():
  rng = np.random.default_rng(0)
  clean, shift = rng.uniform(-4, 4, 200), rng.uniform(-3, 3, 200)
  got = bitedit.bernoulli_kl(jnp.asarray(clean, jnp.float32),
                             jnp.asarray(shift, jnp.float32))
  np.testing.assert_allclose(got, _kl_reference(clean, shift), atol=2e-6,
                             rtol=1e-4)


def test_kl_gradient_is_q_one_minus_q_times_shift():
  clean, shift = jnp.linspace(-3, 3, 7), jnp.linspace(-2, 2, 7)
  grad = jax.vmap(jax.grad(bitedit.bernoulli_kl, argnums=1))(clean, shift)
  q = jax.nn.sigmoid(clean + shift)
  np.testing.assert_allclose(grad, q * (1 - q) * shift, atol=1e-6)


@jax.jit
def _exact_projection(seed, epsilon, scale):
  """Random log-odds and tilts, projected exactly: (projected, clipped, kl)."""
  key_clean, key_shift = jax.random.split(jax.random.key(seed))
  clean = 4 * jax.random.normal(key_clean, (512,))
  shift = scale * jax.random.normal(key_shift, (512,))
  projected, clipped = bitedit.project(clean, shift, epsilon, trust="exact")
  return projected, clipped, bitedit.bernoulli_kl(clean, projected)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       epsilon=st.floats(1e-4, 2.0), scale=st.floats(0.1, 20.0))
def test_exact_projection_keeps_every_bit_within_the_budget(seed, epsilon,
                                                            scale):
  projected, clipped, kl = (np.asarray(x) for x in _exact_projection(
      seed, np.float32(epsilon), np.float32(scale)))
  assert kl.max() <= np.float32(epsilon)
  # The radius is the root, not a loose bound: clipped bits sit on the budget.
  assert np.all(kl[clipped] >= epsilon * (1 - 1e-2))


_exact_radius = jax.jit(functools.partial(bitedit.trust_radius, trust="exact"))


def _kl_relative_to_budget(clean, direction, epsilon):
  """KL at the exact radius over epsilon where the radius is finite: in float32
  (as a user evaluates it) and in float64 from the probabilities.

  The radius is infinite exactly where the budget is at least the KL's bound
  along the direction, softplus(-sign * l) (the bit's other value's surprise).
  """
  radius = _exact_radius(clean, direction, epsilon)
  bound = np.logaddexp(0.0, -np.sign(direction) * np.float64(clean))
  np.testing.assert_array_equal(np.isinf(radius), bound <= epsilon)
  finite = np.isfinite(radius)
  shift = (jnp.sign(direction) * radius)[finite]
  clean = clean[finite]
  float32 = np.asarray(bitedit.bernoulli_kl(clean, shift)) / epsilon
  float64 = _kl_reference(np.float64(clean), np.float64(shift)) / epsilon
  return float32, float64


@pytest.mark.parametrize("epsilon", [1e-3, 1e-5, 1e-6, 1e-8])
def test_exact_radius_keeps_the_bound_at_tiny_budgets(epsilon):
  # Log-odds up to |l| = 12, where the KL of a small shift used to be the
  # difference of two log-sigmoids of size 12 (KL/epsilon reached 1.0004,
  # 1.017, 1.12 and 6.5 at these budgets).
  clean = jnp.linspace(-12.0, 12.0, 97)
  for direction in (jnp.ones_like(clean), -jnp.ones_like(clean)):
    float32, float64 = _kl_relative_to_budget(clean, direction, epsilon)
    assert float32.max() <= 1.0 and float64.max() <= 1.0
    # ... and it is the root, not a loose bound (at 1e-8 the rounding
    # allowance, 16 eps32 of first-order terms ~ 1e-4, is 3% of the budget).
    assert float64.min() >= 1 - (1e-2 if epsilon >= 1e-6 else 5e-2)


def test_exact_radius_past_fifty_nats_and_unreachable_budgets():
  clean, up = jnp.array([-45.0]), jnp.array([1.0])
  # The KL towards the bit's other value is bounded by softplus(45) = 45: a
  # budget of 60 cannot be spent, so nothing is clipped (the search used to
  # stop at a shift of 50).
  assert np.isinf(_exact_radius(clean, up, 60.0)).all()
  # Just under that bound the root lies past 50 nats; it is found.
  radius = _exact_radius(clean, up, 44.99)
  assert float(radius[0]) > 50
  float32, float64 = _kl_relative_to_budget(clean, up, 44.99)
  assert float32.max() <= 1.0 and 1 - 1e-3 <= float64.min() <= 1.0


def test_projection_keeps_sign_and_only_shrinks():
  clean = jnp.linspace(-3, 3, 9)
  shift = jnp.array([-9.0, -2.0, -0.1, 0.0, 0.05, 0.3, 1.0, 4.0, 12.0])
  for trust in bitedit.TRUST_MODES:
    projected, clipped = bitedit.project(clean, shift, 0.05, trust=trust)
    assert np.all(np.sign(projected) == np.sign(shift))
    assert np.all(np.abs(projected) <= np.abs(shift))
    np.testing.assert_array_equal(np.asarray(projected)[~np.asarray(clipped)],
                                  np.asarray(shift)[~np.asarray(clipped)])


def test_quadratic_radius_closed_form():
  clean = jnp.array([-2.0, 0.0, 1.5])
  p = special.expit(np.asarray(clean, np.float64))
  expected = np.sqrt(2 * 0.1 / (p * (1 - p) + 1e-6))
  got = bitedit.trust_radius(clean, jnp.ones(3), 0.1)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_quadratic_and_exact_radii_agree_within_5_percent_at_small_budget():
  clean = jnp.linspace(-2, 2, 401)
  assert float(bitedit.quadratic_radius_error(clean, 1e-3).max()) <= 0.05
  # ... but not at a practical budget (so the exact mode is not redundant).
  assert float(bitedit.quadratic_radius_error(clean, 0.1).max()) > 0.3


def test_infinite_budget_is_no_trust_region():
  shift = jnp.array([-30.0, 7.0])
  for trust in bitedit.TRUST_MODES:
    projected, clipped = bitedit.project(jnp.zeros(2), shift, jnp.inf,
                                         trust=trust)
    np.testing.assert_array_equal(projected, shift)
    assert not np.any(clipped)


def _log_odds(seed, shape=(4, 4, 8)):
  rng = np.random.default_rng(seed)
  return [jnp.asarray(2 * rng.standard_normal(shape), jnp.float32)
          for _ in range(3)]


def test_zero_strength_is_the_clean_sampler_exactly():
  tgt, src, unc = _log_odds(0)
  out = bitedit.guide(bitedit.bit_edit(0.0), tgt, src, unc, 3.0)
  np.testing.assert_array_equal(out.log_odds, bitedit.cfg(tgt, unc, 3.0))
  np.testing.assert_array_equal(out.kl, 0.0)
  assert not np.any(out.clipped)


def test_post_cfg_contrast_is_the_cfg_scale_times_the_conditional_one():
  tgt, src, unc = _log_odds(1)
  cond = bitedit.guide(bitedit.bit_edit(0.3, jnp.inf), tgt, src, unc, 3.0)
  post = bitedit.guide(bitedit.bit_edit(0.1, jnp.inf, contrast="post_cfg"),
                       tgt, src, unc, 3.0)
  np.testing.assert_allclose(post.shift, cond.shift, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(cond.shift, 0.3 * (tgt - src), rtol=1e-6)


def test_guide_jits_and_vmaps_with_traced_hyperparameters():
  tgt, src, unc = (jnp.stack(x) for x in zip(_log_odds(2), _log_odds(3)))

  @jax.jit
  def run(strength, epsilon):
    config = bitedit.bit_edit(strength, epsilon, trust="exact")
    return jax.vmap(lambda *x: bitedit.guide(config, *x, 3.0))(tgt, src, unc)

  batched = run(jnp.float32(2.0), jnp.float32(0.1))
  for i in range(2):
    single = bitedit.guide(bitedit.bit_edit(2.0, 0.1, trust="exact"), tgt[i],
                           src[i], unc[i], 3.0)
    np.testing.assert_allclose(batched.log_odds[i], single.log_odds,
                               rtol=1e-6, atol=1e-6)
  assert float(batched.kl.max()) <= 0.1


def test_guided_log_odds_are_differentiable_in_the_logits():
  tgt, src, unc = _log_odds(4)
  loss = lambda t: jnp.sum(bitedit.guide(bitedit.bit_edit(1.0, jnp.inf), t,
                                         src, unc, 3.0).log_odds)
  # With no trust region, guided = 3 tgt - 2 unc + (tgt - src): d/dtgt = 4.
  np.testing.assert_allclose(jax.grad(loss)(tgt), 4.0, rtol=1e-6)


def test_sampled_bits_follow_their_probabilities():
  log_odds = jnp.array([-2.0, 0.0, 1.0, 3.0])
  uniform = jax.random.uniform(jax.random.key(0), (20000, 4))
  freq = bitedit.sample_bits(uniform, jnp.broadcast_to(log_odds, (20000, 4)))
  freq = np.asarray(freq).mean(0)
  p = special.expit(np.asarray(log_odds, np.float64))
  assert np.all(np.abs(np.asarray(freq) - p)
                <= 4 * np.sqrt(p * (1 - p) / 20000))


@pytest.mark.parametrize("kwargs,match", [
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": -1.0}, "epsilon"),
    ({"epsilon": float("nan")}, "epsilon"), ({"strength": -0.5}, "strength"),
    ({"trust": "cubic"}, "trust"), ({"contrast": "pre_cfg"}, "contrast"),
    ({"bisection_steps": 0}, "bisection_steps")])
def test_bad_hyperparameters_are_rejected_at_construction(kwargs, match):
  with pytest.raises(ValueError, match=match):
    bitedit.bit_edit(**kwargs)


def test_bad_logits_are_named():
  tgt, src, unc = _log_odds(5)
  config = bitedit.bit_edit()
  with pytest.raises(ValueError, match="cond_source.*NaN"):
    bitedit.guide(config, tgt, src.at[0, 0, 0].set(jnp.nan), unc, 3.0)
  with pytest.raises(ValueError, match="uncond must have the shape"):
    bitedit.guide(config, tgt, src, unc[:2], 3.0)
  with pytest.raises(ValueError, match="axis of 2"):
    bitedit.log_odds(jnp.zeros((4, 3)))
