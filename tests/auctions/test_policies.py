"""Myopic bids, MPC (grid and CEM) and the DP oracle against references."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from scipy import optimize
from scipy import stats

from jaxpapers.auctions import _dp_oracle as dp_oracle
from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _mpc as mpc
from jaxpapers.auctions import _myopic as myopic

SMALL = dict(horizon=2.0, base_intensity=8.0)
FAST_MPC = dict(num_rollouts=8, horizon=1.0)


def _first_price_utility(b, nu, t, params):
  mu = params.competing_log_mean + params.competing_log_amplitude * np.sin(
      2 * np.pi * t / params.period)
  return (nu - b) * stats.norm.cdf((np.log(b) - mu) / params.competing_log_std)


@pytest.mark.parametrize("nu,t", [(0.3, 2.0), (1.0, 6.0), (2.5, 18.0)])
def test_first_price_grid_argmax_matches_a_fine_numeric_optimum(nu, t):
  params = env_lib.EnvParams(format="first")
  grid_bid = float(myopic.first_price_bid(jnp.float32(nu), jnp.float32(t), params))
  best = optimize.minimize_scalar(
      lambda b: -_first_price_utility(b, nu, t, params), bounds=(1e-9, nu),
      method="bounded", options={"xatol": 1e-10})
  assert abs(grid_bid - best.x) <= nu / 255 + 1e-6
  assert (_first_price_utility(grid_bid, nu, t, params)
          >= -best.fun * (1 - 1e-3))
  fast = float(myopic.first_price_bid_fast(jnp.float32(nu), jnp.float32(t),
                                           params))
  assert abs(fast - best.x) <= nu / 255 + 1e-4


@pytest.mark.parametrize("reserve,spread,log_mean", [
    (0.0, 0.5, np.log(0.8)), (0.5, 0.5, np.log(0.8)), (0.0, 0.02, 0.0),
    (0.05, 3.0, 0.0), (1.0, 0.5, -5.0)])
def test_first_price_window_finds_the_full_grid_argmax(reserve, spread,
                                                       log_mean):
  # The windowed grid against every grid point, over 24 orders of magnitude
  # of valuation and the edge cases: zero, negative, NaN, infinite, tiny,
  # huge, at and just above the reserve.
  params = env_lib.EnvParams(format="first", reserve=reserve,
                             competing_log_std=spread,
                             competing_log_mean=log_mean)
  rng = np.random.default_rng(0)
  nu = np.exp(rng.uniform(-20.0, 8.0, 20_000)).astype(np.float32)
  nu[:10] = [0.0, -1.0, np.nan, np.inf, 1e-30, 1e30, reserve,
             np.nextafter(np.float32(reserve), np.float32(1)), 1.0, 0.8]
  t = rng.uniform(0.0, 24.0, nu.size).astype(np.float32)

  def full_grid(nu, t):
    bids = nu[:, None] * jnp.linspace(0.0, 1.0, myopic.FIRST_PRICE_GRID)[None]
    utility = (nu[:, None] - bids) * env_lib.win_probability(
        bids, t[:, None], params)
    return jnp.take_along_axis(bids, jnp.argmax(utility, -1)[:, None], -1)[:, 0]

  expected = jax.jit(full_grid)(nu, t)
  got = jax.jit(lambda v, s: myopic.first_price_bid(v, s, params))(nu, t)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_mpc_equals_myopic_exactly_with_the_kernel_off():
  params = env_lib.EnvParams(format="second", saturation=False, recency=False,
                             **SMALL)
  config = mpc.MPCConfig(**FAST_MPC)
  keys = jax.random.split(jax.random.key(0), 3)
  ours = jax.jit(jax.vmap(lambda k: mpc.run_mpc_episode(k, params, config)))(keys)
  mine = jax.jit(jax.vmap(lambda k: myopic.run_episode(
      k, params, myopic.fixed_shading(1.0, params)).episode_return))(keys)
  np.testing.assert_array_equal(np.asarray(ours.episode_return), np.asarray(mine))
  planned = np.asarray(ours.thetas)
  assert np.all((planned == 1.0) | (planned == 0.0))  # 0: blocks past the end
  assert np.sum(planned == 1.0) >= 3


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_mpc_shades_under_saturation_and_beats_myopic():
  # Enough arrivals per hour for saturation to bind, and 8 episodes.
  params = env_lib.EnvParams(format="second", horizon=2.0, base_intensity=30.0)
  config = mpc.MPCConfig(num_rollouts=16, horizon=1.0)
  keys = jax.random.split(jax.random.key(1), 8)
  ours = jax.jit(jax.vmap(lambda k: mpc.run_mpc_episode(k, params, config)))(keys)
  mine = jax.jit(jax.vmap(lambda k: myopic.run_episode(
      k, params, myopic.fixed_shading(1.0, params)).episode_return))(keys)
  assert float(ours.episode_return.mean()) > float(mine.mean())
  planned = np.asarray(ours.thetas)
  assert np.median(planned[planned > 0]) < 1.0


def test_cem_planner_stays_in_bounds_and_near_myopic_without_kernel():
  params = env_lib.EnvParams(format="second", saturation=False, recency=False,
                             **SMALL)
  config = mpc.MPCConfig(planner="cem", cem_samples=16, cem_iterations=2,
                         **FAST_MPC)
  obs, _ = env_lib.reset(jax.random.key(0), params)
  theta = float(jax.jit(lambda k: mpc.plan(k, obs, params, config))(
      jax.random.key(1)))
  assert 0.7 <= theta <= 1.5


def _brute_force_values(params, nodes, weights, horizon):
  """W_k(n) by maximising over a fine bid grid, with scipy integrals over D."""
  dist = stats.lognorm(s=params.competing_log_std,
                       scale=np.exp(params.competing_log_mean))
  fine = np.linspace(0.0, 2.0, 40001)
  # E[D; D <= b] by the trapezoid rule on a fine grid; bids on every 50th point.
  partial = integrate.cumulative_trapezoid(fine * dist.pdf(fine), fine,
                                           initial=0.0)[::50]
  bids = fine[::50]
  win = dist.cdf(bids)
  g = lambda n: 1 / (1 + params.saturation_strength * n)
  values = {(0, n): 0.0 for n in range(horizon + 2)}
  for k in range(1, horizon + 1):
    for n in range(horizon + 1 - k + 1):
      total = 0.0
      for v, w in zip(nodes, weights):
        utility = (win * (v * g(n) + values[(k - 1, n + 1)]) - partial
                   + (1 - win) * values[(k - 1, n)])
        total += w * utility.max()
      values[(k, n)] = total
  return values


def _float64_recursion(params, nodes, weights, max_arrivals):
  """V[k, n] for every k <= K, n <= K + 1 by the recursion itself, in float64.

  No table, so no truncated count axis: V(k, n) recurses to counts n + k,
  and F(w) = int_r^w P(D <= x) dx is integrated numerically (scipy.quad),
  not taken from the closed form the code uses.
  """
  dist = stats.lognorm(s=params.competing_log_std,
                       scale=np.exp(params.competing_log_mean))
  r = params.reserve

  @functools.cache
  def surplus(w):
    return integrate.quad(dist.cdf, r, w, epsabs=1e-13)[0] if w > r else 0.0

  @functools.cache
  def value(k, n):
    if k == 0:
      return 0.0
    gain = value(k - 1, n + 1) - value(k - 1, n)
    g = 1 / (1 + params.saturation_strength * n)
    return value(k - 1, n) + sum(w * surplus(v * g + gain)
                                 for v, w in zip(nodes, weights))

  return np.array([[value(k, n) for n in range(max_arrivals + 2)]
                   for k in range(max_arrivals + 1)])


def test_dp_oracle_equals_brute_force_on_a_tiny_horizon():
  params = env_lib.EnvParams(format="second", saturation_measure="count",
                             recency=False, competing_log_amplitude=0.0,
                             saturation_strength=0.5)
  nodes, weights = np.array([0.6, 1.4]), np.array([0.5, 0.5])
  horizon = 3
  table = np.asarray(dp_oracle.value_table(params, horizon, value_nodes=nodes,
                                           value_weights=weights))
  brute = _brute_force_values(params, nodes, weights, horizon)
  for k in range(1, horizon + 1):
    for n in range(horizon + 1 - k + 1):
      assert table[k, n] == pytest.approx(brute[(k, n)], abs=2e-4), (k, n)
  # Every entry the docstring offers, those with k + n > K + 1 included
  # (they rested on a padded count column: off by up to 2.7e-2 here).
  np.testing.assert_allclose(
      table, _float64_recursion(params, nodes, weights, horizon), atol=1e-6)


def test_dp_oracle_bid_is_at_most_the_myopic_valuation():
  params = env_lib.EnvParams(format="second", saturation_measure="count",
                             recency=False, competing_log_amplitude=0.0,
                             intensity_amplitude=0.0, **SMALL)
  table = dp_oracle.value_table(params, env_lib.num_slots(params))
  gains = np.diff(np.asarray(table), axis=1)
  assert np.all(gains <= 1e-6)
  obs, state = env_lib.reset(jax.random.key(0), params)
  run = jax.jit(lambda s, o, t: dp_oracle.run_oracle_from(s, o, t, params))
  episode = run(state, obs, table)
  valid = np.asarray(state.arrivals.valid)
  bids, nus = np.asarray(episode.bids)[valid], np.asarray(episode.valuations)[valid]
  assert np.all(bids <= nus + 1e-6)
  assert np.any(bids < nus - 1e-3)  # it does shade
  assert np.isfinite(float(episode.episode_return))
  # A NaN bid (here from a damaged table) is flagged, not a lost auction.
  assert np.isnan(float(run(state, obs, table.at[1:, 0].set(jnp.nan))
                        .episode_return))


def test_dp_oracle_bid_is_nan_where_the_table_does_not_reach():
  # A table for K = 2 arrivals covers k = remaining - 1 <= 2 and n <= 2.
  params = env_lib.EnvParams(format="second", saturation_measure="count",
                             recency=False, competing_log_amplitude=0.0)
  table = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
  bids = np.asarray(dp_oracle.oracle_bid(
      table, jnp.ones(3), jnp.array([2.0, 0.0, 3.0]), jnp.array([3, 4, 1]),
      params))
  # Inside: v g(n) + V[k, n+1] - V[k, n] = 1 / (1 + 0.5 n) + 1.
  assert bids[0] == pytest.approx(1 / 2 + 1)
  assert np.isnan(bids[1]) and np.isnan(bids[2])


def test_dp_oracle_rejects_other_settings_and_mpc_bad_config():
  with pytest.raises(ValueError, match="saturation_measure='count'"):
    dp_oracle.value_table(env_lib.EnvParams(recency=False,
                                            competing_log_amplitude=0.0), 5)
  with pytest.raises(ValueError, match="format='second'"):
    dp_oracle.check_setting(env_lib.EnvParams(format="first"))
  with pytest.raises(ValueError, match="planner"):
    mpc.MPCConfig(planner="random")
  with pytest.raises(ValueError, match="cem_elites"):
    mpc.MPCConfig(cem_elites=100)
