"""jaxpapers.auctions under Auto and Explicit meshes gives unsharded numbers.

Episodes are vmapped (the environment's documented batching) over keys,
reset states and bids sharded along the mesh's data axis; per-episode
arrays (candidate slots, rollouts, bid grids) and the PPO networks' hidden
width go along the model axis where they divide (see
tests/sharding_checks.py, which traces every case). Seeds are also vmapped
data-parallel around the functions that vmap their own environments or
thetas (PPO's training and rollouts, the best fixed shading).
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxpapers import auctions
from jaxpapers.auctions import _dp_oracle as dp_oracle
from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _mpc as mpc
from jaxpapers.auctions import _myopic as myopic
from jaxpapers.auctions import _ppo as ppo
from tests import sharding_checks

# 12 candidate slots per episode, 8 episodes, 8 points per bid grid row.
_PARAMS = auctions.EnvParams(format="first", horizon=2.0, base_intensity=3.0)
_SECOND = auctions.EnvParams(format="second", horizon=2.0, base_intensity=3.0)
# The DP oracle's setting: count-only saturation, stationary competition.
_ORACLE = auctions.EnvParams(format="second", horizon=2.0, base_intensity=3.0,
                             saturation_measure="count", recency=False,
                             competing_log_amplitude=0.0)
_NUM_STEPS = 3
B, M = 8, 8
_DATA, _GRID = jax.P("data"), jax.P("data", "model")

_KEYS = jax.random.split(jax.random.key(0), B)
_TIMES = jax.random.uniform(jax.random.key(1), (B, M), maxval=24.0)
_BIDS = jax.random.uniform(jax.random.key(2), (B, M), maxval=2.0)
_WON = jax.random.bernoulli(jax.random.key(3), 0.5, (B, M))
_SORTED_TIMES = jnp.sort(_TIMES, axis=-1)
_COUNTS = jnp.floor(jax.random.uniform(jax.random.key(4), (B, M), maxval=5.0))
_REMAINING = jax.random.randint(jax.random.key(9), (B, M), 0, 13)


def _reset_batch(params):
  return jax.jit(jax.vmap(lambda k: auctions.reset(k, params)))(_KEYS)


_OBS, _STATES = _reset_batch(_PARAMS)
_ORACLE_OBS, _ORACLE_STATES = _reset_batch(_ORACLE)
_ORACLE_TABLE = dp_oracle.value_table(_ORACLE, env_lib.num_slots(_ORACLE))
_QUADRATURE = tuple(jnp.asarray(a, jnp.float32)
                    for a in dp_oracle.lognormal_quadrature(0.0, 0.5))

_MPC = auctions.MPCConfig(thetas=(0.0, 0.5, 1.0, 1.5), num_rollouts=8,
                          horizon=1.0, replan_every=4, cem_iterations=2,
                          cem_samples=8, cem_elites=2)
_FUTURES = jax.jit(lambda k, o: mpc.sample_futures(k, o, _PARAMS, _MPC))(
    jax.random.key(5), jax.tree.map(lambda x: x[0], _OBS))
# Rollouts along "data", future slots along "model" where they divide.
_FUTURE_SPECS = jax.tree.map(
    lambda x: jax.P("data", "model" if x.shape[1] % 4 == 0 else None),
    _FUTURES)

_PPO = ppo.PPOConfig(hidden=(8,), num_envs=4, num_iterations=2, epochs=1,
                     minibatches=2)
_PPO_PARAMS = ppo.init(jax.random.key(6), _PPO)
# The hidden width along "model": the first layer's columns, the last's rows.
_PPO_SPECS = ppo.PPOParams(
    *[[{"w": jax.P(None, "model"), "b": jax.P("model")},
       {"w": jax.P("model", None), "b": None}]] * 2, None)
_PPO_BATCH, _ = jax.jit(lambda k, p: ppo.collect(k, p, _PARAMS, _PPO))(
    jax.random.key(7), _PPO_PARAMS)


def _episodes(keys, shading_B):
  """Resets a batch of episodes and bids a shaded value for a few steps."""
  def one(key, shading):
    obs, state = auctions.reset(key, _PARAMS)
    rewards = []
    for _ in range(_NUM_STEPS):
      obs, state, reward, done, info = auctions.step(
          key, state, shading * obs.value * obs.kernel, _PARAMS)
      rewards.append(reward)
    return obs, state, jnp.stack(rewards), done, info
  return jax.vmap(one)(keys, shading_B)


def _market(time_BxM, bid_BxM):
  return (env_lib.intensity(time_BxM, _PARAMS),
          env_lib.competing_log_mean(time_BxM, _PARAMS),
          env_lib.win_probability(bid_BxM, time_BxM, _PARAMS))


def _contexts(win_times_BxM, won_BxM, now_BxM):
  """Prefix contexts of win sequences, combined and read by the kernel."""
  counting = auctions.EnvParams(saturation_measure="count")
  prefix = jax.vmap(lambda t, w: env_lib.context_prefix(t, w, _PARAMS))(
      win_times_BxM, won_BxM)
  later = env_lib.combine(prefix, env_lib.win_context(now_BxM, _PARAMS))
  unchanged = env_lib.combine(env_lib.identity_context((B, M)), prefix)
  return (prefix, later, unchanged,
          env_lib.exposure(later, now_BxM, _PARAMS),
          env_lib.exposure(later, now_BxM, counting),
          env_lib.kernel(later, now_BxM + 1.0, _PARAMS))


def _arrivals(keys, start_B):
  return jax.vmap(lambda k, s: env_lib.sample_arrivals(
      k, _PARAMS, s, 2.0, env_lib.num_slots(_PARAMS)))(keys, start_B)


def _resolve(win_times_BxM, won_BxM, time_BxM, value_BxM, competing_BxM,
             bid_BxM):
  context = jax.vmap(lambda t, w: env_lib.context_prefix(t, w, _PARAMS))(
      win_times_BxM, won_BxM)
  return [env_lib.resolve(context, time_BxM, value_BxM, competing_BxM,
                          bid_BxM, won_BxM, params)
          for params in (_PARAMS, _SECOND)]


def _myopic_bids(valuation_BxM, time_BxM):
  return (myopic.first_price_bid(valuation_BxM, time_BxM, _PARAMS),
          myopic.first_price_bid_fast(valuation_BxM, time_BxM, _PARAMS),
          myopic.myopic_bid(valuation_BxM, time_BxM, _PARAMS, fast=True),
          myopic.myopic_bid(valuation_BxM, time_BxM, _SECOND))


def _policies(obs, theta_B):
  return (myopic.myopic_valuation(obs, _PARAMS),
          myopic.myopic_valuation(obs, _PARAMS, value_observed=False),
          jax.vmap(lambda o, t: myopic.fixed_shading(t, _PARAMS)(o))(
              obs, theta_B))


def _myopic_episodes(keys):
  return jax.vmap(lambda k: myopic.run_episode(
      k, _PARAMS, myopic.fixed_shading(0.8, _PARAMS)))(keys)


def _myopic_batch(states):
  return myopic.run_batch(states, _PARAMS, myopic.fixed_shading(0.8, _PARAMS))


def _value_table(nodes, weights):
  return dp_oracle.value_table(_ORACLE, 6, value_nodes=nodes,
                               value_weights=weights)


def _oracle(states, obs, values, value_BxM, count_BxM, remaining_BxM):
  return (jax.vmap(lambda s, o: dp_oracle.run_oracle_from(
      s, o, values, _ORACLE))(states, obs),
          dp_oracle.oracle_bid(values, value_BxM, count_BxM, remaining_BxM,
                               _ORACLE))


def _surplus(w_BxM, count_BxM):
  return (dp_oracle.expected_surplus(w_BxM, _ORACLE),
          dp_oracle.saturation(count_BxM, _ORACLE),
          dp_oracle.saturation(count_BxM, _SECOND))


def _plans(keys, obs):
  """Futures and both planners per episode, the current item's futures first."""
  def one(key, o):
    futures = mpc.sample_futures(key, o, _PARAMS, _MPC)
    grid = mpc.plan(key, o, _PARAMS, _MPC)
    cem = mpc.plan(key, o, _PARAMS,
                   dataclasses.replace(_MPC, planner="cem"))
    return futures, grid, cem
  return jax.vmap(one)(keys, obs)


def _rollouts(futures, context, key):
  theta = jnp.full(futures.time.shape, 0.9)
  return (mpc.rollout_returns(futures, context, theta, _PARAMS),
          mpc.plan_grid(futures, context, _PARAMS, _MPC),
          mpc.plan_cem(key, futures, context, _PARAMS, _MPC))


def _mpc_episodes(keys):
  return jax.vmap(lambda k: mpc.run_mpc_episode(k, _PARAMS, _MPC))(keys)


def _ppo_policy(ppo_params, obs, u_B):
  return (ppo.features(obs, _PARAMS), ppo.shading(u_B, _PPO),
          jax.vmap(ppo.greedy_policy(ppo_params, _PARAMS, _PPO))(obs))


def _ppo_loss(ppo_params, batch):
  return jax.value_and_grad(ppo.loss)(ppo_params, batch, _PPO)


def _ppo_train(key):
  # optax's adam mixes int32 counts into floats (see the
  # standard_dtype_promotion fixture of tests/conftest.py).
  with jax.numpy_dtype_promotion("standard"):
    return ppo.train(key, _PARAMS, _PPO)


def _ppo_train_seeds(keys):
  """Seeds trained data-parallel: each vmaps its own environments inside."""
  with jax.numpy_dtype_promotion("standard"):  # see _ppo_train
    return jax.vmap(lambda k: ppo.train(k, _PARAMS, _PPO))(keys)


def _ppo_collect_seeds(keys, ppo_params):
  return jax.vmap(lambda k: ppo.collect(k, ppo_params, _PARAMS, _PPO))(keys)


def _best_fixed_shading_seeds(keys, thetas):
  return jax.vmap(lambda k: myopic.best_fixed_shading(k, _PARAMS, thetas))(
      keys)


_CONTEXT_INPUTS = (_SORTED_TIMES, _WON, _SORTED_TIMES + 0.5)

CASES = {
    "auctions.reset+auctions.step": (
        _episodes, (_KEYS, jnp.linspace(0.2, 1.0, B)), (_DATA, _DATA)),
    "auctions.intensity+auctions.competing_log_mean"
    "+auctions.win_probability": (
        _market, (_TIMES, _BIDS), (_GRID, _GRID)),
    "auctions.context_prefix+auctions.combine"
    "+auctions.win_context+auctions.identity_context"
    "+auctions.exposure+auctions.kernel": (
        _contexts, _CONTEXT_INPUTS, (_GRID,) * 3),
    "auctions.sample_arrivals": (
        _arrivals, (_KEYS, jnp.linspace(0.0, 20.0, B)), (_DATA, _DATA)),
    "auctions.resolve": (
        _resolve, (*_CONTEXT_INPUTS, _BIDS + 0.5, _BIDS[::-1], _BIDS),
        (_GRID,) * 6),
    "auctions.first_price_bid+auctions.first_price_bid_fast"
    "+auctions.myopic_bid": (
        _myopic_bids, (_BIDS, _TIMES), (_GRID, _GRID)),
    "auctions.myopic_valuation+auctions.fixed_shading": (
        _policies, (_OBS, jnp.linspace(0.5, 1.2, B)), (_DATA, _DATA)),
    "auctions.run_myopic_episode+auctions.run_myopic_from"
    "+auctions.scan_episode": (
        _myopic_episodes, (_KEYS,), (_DATA,)),
    "auctions.run_myopic_batch": (_myopic_batch, (_STATES,), (_DATA,)),
    "auctions.best_fixed_shading": (
        lambda key, thetas: myopic.best_fixed_shading(key, _PARAMS, thetas),
        (_KEYS[0], jnp.linspace(0.4, 1.2, B)), (None, _DATA)),
    # Seeds data-parallel around the function's own vmap over thetas.
    "auctions.run_myopic_episode+auctions.best_fixed_shading": (
        _best_fixed_shading_seeds, (_KEYS[:4], jnp.linspace(0.4, 1.2, B)),
        (_DATA, None)),
    # ... with the thetas over "model" as well: two vmaps on two mesh axes.
    "auctions.best_fixed_shading+auctions.run_myopic_episode": (
        _best_fixed_shading_seeds, (_KEYS[:4], jnp.linspace(0.4, 1.2, B)),
        (_DATA, jax.P("model"))),
    "auctions.expected_surplus+auctions.oracle_saturation": (
        _surplus, (_BIDS, _COUNTS), (_GRID, _GRID)),
    "auctions.oracle_value_table": (
        _value_table, _QUADRATURE, (jax.P("model"), jax.P("model"))),
    "auctions.run_oracle_from+auctions.oracle_bid": (
        _oracle, (_ORACLE_STATES, _ORACLE_OBS, _ORACLE_TABLE, _BIDS,
                  _COUNTS, _REMAINING),
        (_DATA, _DATA, None, _GRID, _GRID, _GRID)),
    "auctions.sample_futures+auctions.plan": (
        _plans, (_KEYS, _OBS), (_DATA, _DATA)),
    "auctions.rollout_returns+auctions.plan_grid"
    "+auctions.plan_cem": (
        _rollouts, (_FUTURES, jax.tree.map(lambda x: x[0], _OBS.context),
                    jax.random.key(8)),
        (_FUTURE_SPECS, None, None)),
    "auctions.run_mpc_episode+auctions.run_mpc_from": (
        _mpc_episodes, (_KEYS[:2],), (_DATA,)),
    "auctions.ppo_init": (
        jax.vmap(lambda k: ppo.init(k, _PPO)), (_KEYS,), (_DATA,)),
    "auctions.ppo_features+auctions.ppo_shading+auctions.ppo_greedy_policy": (
        _ppo_policy, (_PPO_PARAMS, _OBS, jnp.linspace(-2.0, 2.0, B)),
        (_PPO_SPECS, _DATA, _DATA)),
    "auctions.ppo_collect": (
        lambda key, p: ppo.collect(key, p, _PARAMS, _PPO),
        (jax.random.key(7), _PPO_PARAMS), (None, _PPO_SPECS)),
    "auctions.ppo_loss": (
        _ppo_loss, (_PPO_PARAMS, _PPO_BATCH), (_PPO_SPECS, _DATA)),
    "auctions.ppo_train": (_ppo_train, (_KEYS[0],), (None,)),
    # Seeds data-parallel around train's and collect's own vmap over
    # environments.
    "auctions.ppo_collect+auctions.ppo_features": (
        _ppo_collect_seeds, (_KEYS[:2], _PPO_PARAMS), (_DATA, _PPO_SPECS)),
    "auctions.ppo_train+auctions.ppo_collect": (
        _ppo_train_seeds, (_KEYS[:2],), (_DATA,)),
}

NOT_SHARDED = {
    "auctions.EnvParams": "a static config dataclass of Python numbers,"
                          " validated at construction",
    "auctions.MPCConfig": "a static config dataclass of Python numbers,"
                          " validated at construction",
    "auctions.PPOConfig": "a static config dataclass of Python numbers,"
                              " validated at construction",
    "auctions.num_slots": "a Python int (a static shape) from"
                                      " EnvParams and a Python duration",
    "auctions.integrated_intensity": (
        "a closed form in Python floats of EnvParams and two Python times"),
    "auctions.check_oracle_setting": "validates EnvParams, no arrays",
    "auctions.check_params": "a type check of EnvParams, no arrays",
    "auctions.lognormal_quadrature": (
        "host-side NumPy Gauss-Hermite nodes from Python floats"),
    "auctions.ppo_optimizer": "builds an optax transformation from PPOConfig",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "auctions.run_mpc_episode+auctions.run_mpc_from": ("Explicit",),
    "auctions.best_fixed_shading": ("Explicit",),
    "auctions.best_fixed_shading+auctions.run_myopic_episode":
        ("Explicit",),
    "auctions.run_myopic_episode+auctions.best_fixed_shading":
        ("Explicit",),
    "auctions.run_myopic_episode+auctions.run_myopic_from"
    "+auctions.scan_episode": ("Explicit",),
    "auctions.run_myopic_batch": ("Explicit",),
    "auctions.ppo_collect": ("Explicit",),
    "auctions.ppo_collect+auctions.ppo_features": ("Explicit",),
    "auctions.ppo_loss": ("Auto", "Explicit"),
    "auctions.ppo_train": ("Explicit",),
    "auctions.ppo_train+auctions.ppo_collect": ("Explicit",),
    "auctions.reset+auctions.step": ("Explicit",),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "auctions.run_mpc_episode+auctions.run_mpc_from",
    "auctions.best_fixed_shading+auctions.run_myopic_episode",
    "auctions.run_myopic_episode+auctions.run_myopic_from"
    "+auctions.scan_episode",
    "auctions.ppo_collect",
    "auctions.ppo_collect+auctions.ppo_features",
    "auctions.ppo_train",
    "auctions.ppo_train+auctions.ppo_collect",
    "auctions.reset+auctions.step",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))
