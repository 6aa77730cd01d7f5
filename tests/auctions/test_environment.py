"""DynamAuction environment: monoid laws, the scan fold, thinning, rewards, errors."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _myopic as myopic

SMALL = env_lib.EnvParams(horizon=2.0, base_intensity=8.0)
# One compiled episode for every shading (theta is traced).
_SHADED_EPISODE = jax.jit(lambda k, theta: myopic.run_episode(
    k, SMALL, myopic.fixed_shading(theta, SMALL)))


def _random_context(rng, size):
  count = rng.integers(0, 5, size).astype(np.float32)
  log_exposure = np.where(count > 0, rng.normal(0, 3, size), -np.inf)
  last_win = np.where(count > 0, rng.uniform(0, 24, size), -np.inf)
  return env_lib.Context(*(jnp.asarray(x, jnp.float32)
                           for x in (count, log_exposure, last_win)))


def _assert_contexts_close(a, b):
  for x, y in zip(a, b):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_monoid_laws_on_random_elements(seed):
  rng = np.random.default_rng(seed)
  a, b, c = (_random_context(rng, 16) for _ in range(3))
  e = env_lib.identity_context((16,))
  _assert_contexts_close(env_lib.combine(env_lib.combine(a, b), c),
                         env_lib.combine(a, env_lib.combine(b, c)))
  _assert_contexts_close(env_lib.combine(a, e), a)
  _assert_contexts_close(env_lib.combine(e, a), a)
  _assert_contexts_close(env_lib.combine(a, b), env_lib.combine(b, a))


def test_associative_scan_equals_sequential_fold_of_an_episode():
  params = SMALL
  episode = _SHADED_EPISODE(jax.random.key(3), jnp.float32(1.0))
  times = episode.final_state.arrivals.time
  won = episode.won
  assert int(won.sum()) > 3
  prefix = jax.jit(env_lib.context_prefix, static_argnums=2)(times, won, params)
  # A plain Python fold of the same wins.
  ctx = env_lib.identity_context()
  for t, w in zip(np.asarray(times), np.asarray(won)):
    if w:
      ctx = env_lib.combine(ctx, env_lib.win_context(jnp.float32(t), params))
  _assert_contexts_close(jax.tree.map(lambda x: x[-1], prefix), ctx)
  # The environment's own sequential contexts (before each slot) are the
  # exclusive prefix.
  exclusive = jax.tree.map(
      lambda p, e: jnp.concatenate([e[None], p[:-1]]), prefix,
      env_lib.identity_context())
  _assert_contexts_close(exclusive, episode.contexts)


def test_a_nan_bid_makes_the_episode_return_nan_not_a_lost_auction():
  # The environment reads a NaN bid as a losing one; the episode runner
  # flags it, so a broken policy cannot pass for one that bid low.
  episode = _SHADED_EPISODE(jax.random.key(3), jnp.float32(jnp.nan))
  assert np.isnan(float(episode.episode_return))
  assert not np.any(np.asarray(episode.won))  # the step itself: every bid lost
  clean = _SHADED_EPISODE(jax.random.key(3), jnp.float32(0.0))  # not flagged
  assert float(clean.episode_return) == 0.0


def test_thinning_counts_match_the_integrated_intensity():
  params = env_lib.EnvParams()
  num = 400
  arrivals = jax.jit(jax.vmap(lambda k: env_lib.sample_arrivals(
      k, params, jnp.float32(0.0), params.horizon, env_lib.num_slots(params))))(
          jax.random.split(jax.random.key(0), num))
  for start, end in ((0.0, 6.0), (6.0, 12.0), (12.0, 18.0), (0.0, 24.0)):
    inside = arrivals.valid & (arrivals.time >= start) & (arrivals.time < end)
    counts = np.asarray(inside.sum(1), np.float64)
    expected = env_lib.integrated_intensity(start, end, params)
    # Poisson: mean = variance = integrated intensity; 4 s.e. at this seed.
    assert abs(counts.mean() - expected) < 4 * math.sqrt(expected / num), (
        start, end, counts.mean(), expected)
    assert 0.8 < counts.var(ddof=1) / expected < 1.2
  # Valid arrivals come first and in time order.
  times = np.asarray(arrivals.time)
  assert np.all(np.diff(times, axis=1) >= 0)
  valid = np.asarray(arrivals.valid)
  assert np.all(valid[:, :-1] >= valid[:, 1:])


def test_step_rewards_sum_to_the_return_and_delay_hides_rewards():
  for delay in (True, False):
    params = env_lib.EnvParams(horizon=3.0, base_intensity=10.0, delay=delay,
                               format="second")
    episode = jax.jit(lambda k, p=params: myopic.run_episode(
        k, p, myopic.fixed_shading(1.0, p)))(jax.random.key(1))
    np.testing.assert_allclose(float(episode.revealed_rewards.sum()),
                               float(episode.episode_return), rtol=1e-5)
    won = np.asarray(episode.won)
    state = episode.final_state
    a = state.arrivals
    realised = a.value * env_lib.kernel(episode.contexts, a.time, params)
    utility = np.where(won, np.asarray(realised)
                       - np.asarray(a.competing_bid), 0.0)
    last = int(state.num_valid) - 1
    seen = np.asarray(episode.revealed_rewards)
    if delay:
      # Values arrive late: before the last step the buyer has seen less.
      assert seen[:last].sum() < utility[:last].sum() - 1e-3
    else:
      # Without delay the buyer sees each win's utility at its own step.
      np.testing.assert_allclose(seen, utility, rtol=1e-5, atol=1e-6)


def test_second_price_pays_at_most_the_bid_and_first_price_pays_the_bid():
  for fmt in ("first", "second"):
    params = env_lib.EnvParams(format=fmt)
    context = env_lib.identity_context()
    out = env_lib.resolve(context, jnp.float32(1.0), jnp.float32(2.0),
                          jnp.float32(0.7), jnp.float32(1.0), jnp.bool_(True),
                          params)
    assert bool(out.won)
    assert float(out.payment) == (1.0 if fmt == "first" else pytest.approx(0.7))
    lost = env_lib.resolve(context, jnp.float32(1.0), jnp.float32(2.0),
                           jnp.float32(1.2), jnp.float32(1.0), jnp.bool_(True),
                           params)
    assert not bool(lost.won) and float(lost.payment) == 0.0


def test_kernel_closed_form_and_flags():
  params = env_lib.EnvParams()
  ctx = env_lib.combine(env_lib.win_context(jnp.float32(1.0), params),
                        env_lib.win_context(jnp.float32(2.0), params))
  t = 2.5
  exposure = math.exp(-0.5 * (t - 1.0)) + math.exp(-0.5 * (t - 2.0))
  expected = 1 / (1 + 0.5 * exposure) * (1 - math.exp(-0.5 / 0.25))
  assert float(env_lib.kernel(ctx, jnp.float32(t), params)) == pytest.approx(
      expected, rel=1e-5)
  off = env_lib.EnvParams(saturation=False, recency=False)
  assert float(env_lib.kernel(ctx, jnp.float32(t), off)) == 1.0
  count = env_lib.EnvParams(saturation_measure="count", recency=False)
  assert float(env_lib.kernel(ctx, jnp.float32(t), count)) == pytest.approx(0.5)
  assert float(env_lib.kernel(env_lib.identity_context(), jnp.float32(t),
                              params)) == 1.0


def test_reset_and_step_vmap_over_episodes():
  params = SMALL
  keys = jax.random.split(jax.random.key(0), 4)
  obs, state = jax.jit(jax.vmap(env_lib.reset, in_axes=(0, None)))(keys, params)
  obs, state, reward, done, info = jax.jit(jax.vmap(
      env_lib.step, in_axes=(0, 0, 0, None)))(keys, state, obs.value, params)
  assert reward.shape == done.shape == info["won"].shape == (4,)
  assert np.all(np.asarray(state.index) == 1)


@pytest.mark.parametrize("field,value,match", [
    ("base_intensity", -1.0, "base_intensity"),
    ("intensity_amplitude", 1.5, "intensity_amplitude"),
    ("saturation_strength", -0.1, "saturation_strength"),
    ("reserve", 1e3, "reserve"),
    ("horizon", 0.0, "horizon"),
    ("format", "third", "format"),
])
def test_bad_input_raises_a_named_error(field, value, match):
  with pytest.raises(ValueError, match=match):
    env_lib.EnvParams(**{field: value})


def test_reveal_steps_count_the_arrivals_before_each_reveal_time():
  # The binary search behind EnvState.reveal_step, against numpy's, ties and
  # out-of-range queries included, at sizes around powers of two.
  rng = np.random.default_rng(0)
  for n in (1, 2, 7, 8, 9, 64):
    values = np.sort(rng.integers(0, 10, n)).astype(np.float32)
    queries = rng.integers(-1, 12, 3 * n).astype(np.float32)
    got = jax.jit(env_lib._count_below)(values, queries)  # pylint: disable=protected-access
    np.testing.assert_array_equal(got, np.searchsorted(values, queries, "left"))


def _policy_nan_above(params, threshold):
  """The myopic bid, NaN on items worth more than ``threshold`` (a broken policy)."""
  myopic_policy = myopic.fixed_shading(1.0, params)
  return lambda obs: jnp.where(obs.value > threshold, jnp.nan,
                               myopic_policy(obs))


# 39 slots: two chunks of run_batch and a padded third.
_BATCH_PARAMS = env_lib.EnvParams(format="first", horizon=2.5,
                                  base_intensity=8.0)


@functools.lru_cache(maxsize=None)
def _reset_batch(size):
  keys = jax.random.split(jax.random.key(4), size)
  return (keys,) + jax.jit(jax.vmap(env_lib.reset, in_axes=(0, None)),
                           static_argnums=1)(keys, _BATCH_PARAMS)


def test_run_batch_gives_the_numbers_of_vmapped_run_from():
  # 6 first-price episodes: NaN bids break some and not others, and the last
  # is marked past its first step, which under jit gives a NaN return.
  params = _BATCH_PARAMS
  policy = _policy_nan_above(params, 2.0)
  keys, obs, states = _reset_batch(6)
  expected = jax.jit(jax.vmap(lambda s, o, k: myopic.run_from(
      s, o, k, params, policy)))(states, obs, keys)
  marked = states._replace(index=states.index.at[5].set(1))
  got = jax.jit(lambda s: myopic.run_batch(s, params, policy))(marked)
  assert np.isnan(float(got.episode_return[5]))
  expected, got = jax.tree.map(lambda x: x[:5], (expected, got))
  broken = np.isnan(np.asarray(expected.episode_return))
  assert 0 < broken.sum() < 5
  # The utilities agree to float32 rounding (XLA sums them in another
  # order); everything else is equal.
  for a, b in ((expected.episode_return, got.episode_return),
               (expected.final_state.utility, got.final_state.utility)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6)
  same = lambda a, b: np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
  jax.tree.map(same, expected._replace(episode_return=None, final_state=None),
               got._replace(episode_return=None, final_state=None))
  jax.tree.map(same, expected.final_state._replace(utility=None),
               got.final_state._replace(utility=None))


def test_run_batch_refuses_bad_input():
  params = _BATCH_PARAMS
  policy = myopic.fixed_shading(1.0, params)
  _, obs, states = _reset_batch(6)
  with pytest.raises(ValueError, match="past it"):
    myopic.run_batch(states._replace(index=states.index.at[1].set(1)),
                     params, policy)
  with pytest.raises(ValueError, match="batch of episodes of 39 slots"):
    myopic.run_batch(jax.tree.map(lambda x: x[0], states), params, policy)
  with pytest.raises(TypeError, match="EnvState"):
    myopic.run_batch(obs, params, policy)
  with pytest.raises(ValueError, match="one bid per observation"):
    myopic.run_batch(states, params, lambda o: jnp.stack([o.value] * 2))
