"""DynamAuction speed (issue 17): vectorised environment and MPC vs Python loops.

1. Environment steps/s: ``jit(vmap(run_episode))`` over 64 myopic episodes
   (default 24 h, 1872 candidate slots each) against a plain Python loop that
   calls the same compiled single-environment ``step`` (and policy) one step
   at a time. Goal: >= 100x.
2. MPC plans/s: one compiled plan (16 thetas x 64 rollouts of 2 h, common
   random numbers) against a Python loop over thetas and rollouts that steps
   each rollout through the same compiled single-auction ``resolve``.
   Goal: >= 100x.

Both sides run in this process, on the same draws; the Python-loop sides are
timed on a fraction of the work and reported per step / per plan.

Run: ``python -m benchmarks.auctions`` (``--tiny``: second price only, 4
episodes of 1 h, a plan of 2 thetas x 2 rollouts of 15 min, one repeat).
"""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp

import benchmarks
from jaxpapers import profiling
from jaxpapers.auctions import environment as env_lib
from jaxpapers.auctions import mpc
from jaxpapers.auctions import myopic


class Sizes(NamedTuple):
  formats: tuple[str, ...]
  horizon: float  # hours per episode
  num_episodes: int
  loop_steps: int
  mpc: mpc.MPCConfig
  loop_rollouts: int  # of the plan's rollouts, for each of its thetas
  repeats: int


FULL = Sizes(formats=("second", "first"), horizon=24.0, num_episodes=64,
             loop_steps=400, mpc=mpc.MPCConfig(), loop_rollouts=4, repeats=3)
TINY = Sizes(formats=("second",), horizon=1.0, num_episodes=4, loop_steps=10,
             mpc=mpc.MPCConfig(thetas=(0.5, 1.0), num_rollouts=2,
                               horizon=0.25),
             loop_rollouts=1, repeats=1)


def environment_speed(params, sizes):
  slots = env_lib.num_slots(params)
  keys = jax.random.split(jax.random.key(0), sizes.num_episodes)
  policy = myopic.fixed_shading(1.0, params)
  episodes = jax.jit(jax.vmap(
      lambda k: myopic.run_episode(k, params, policy).episode_return))
  seconds = profiling.time_jitted(episodes, keys, repeats=sizes.repeats)
  vector_rate = sizes.num_episodes * slots / seconds

  step = jax.jit(lambda s, b: env_lib.step(jax.random.key(0), s, b, params))
  act = jax.jit(policy)
  obs, state = jax.jit(lambda k: env_lib.reset(k, params))(keys[0])
  obs, state, *_ = step(state, act(obs))  # compile
  start = time.perf_counter()
  for _ in range(sizes.loop_steps):
    obs, state, *_ = step(state, act(obs))
  jax.block_until_ready(state)
  loop_rate = sizes.loop_steps / (time.perf_counter() - start)
  return vector_rate, loop_rate


def mpc_speed(params, sizes):
  config = sizes.mpc
  obs, state = env_lib.reset(jax.random.key(0), params)
  plan = jax.jit(lambda k: mpc.plan(k, obs, params, config))
  vector_rate = 1.0 / profiling.time_jitted(plan, jax.random.key(1),
                                            repeats=min(5, 2 * sizes.repeats))

  futures = jax.jit(lambda k: mpc.sample_futures(k, obs, params, config))(
      jax.random.key(1))
  futures = jax.device_get(futures)

  @jax.jit
  def one_auction(ctx, arrival, theta):
    nu = arrival.value * env_lib.kernel(ctx, arrival.time, params)
    bid = theta * myopic.myopic_bid(nu, arrival.time, params, fast=True)
    out = env_lib.resolve(ctx, arrival.time, arrival.value,
                          arrival.competing_bid, bid, arrival.valid, params)
    return out.context, out.value - out.payment

  slot = lambda m, j: jax.tree.map(lambda x: x[m, j], futures)
  one_auction(state.context, slot(0, 0), jnp.float32(1.0))  # compile
  start = time.perf_counter()
  for theta in config.thetas:
    for m in range(sizes.loop_rollouts):
      ctx, total = state.context, 0.0
      for j in range(futures.time.shape[1]):
        ctx, utility = one_auction(ctx, slot(m, j), jnp.float32(theta))
        total += float(utility)
  loop_seconds = ((time.perf_counter() - start) * config.num_rollouts
                  / sizes.loop_rollouts)
  return vector_rate, 1.0 / loop_seconds


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  for fmt in sizes.formats:
    params = env_lib.EnvParams(format=fmt, horizon=sizes.horizon)
    vector, loop = environment_speed(params, sizes)
    print(f"{fmt}-price environment: {vector:,.0f} steps/s vectorised"
          f" ({sizes.num_episodes} episodes) vs {loop:,.0f} steps/s Python"
          f" loop: {vector / loop:,.0f}x (goal >= 100x)")
    vector, loop = mpc_speed(params, sizes)
    print(f"{fmt}-price MPC: {vector:,.2f} plans/s compiled vs"
          f" {loop:,.4f} plans/s Python loop: {vector / loop:,.0f}x"
          " (goal >= 100x)")


if __name__ == "__main__":
  benchmarks.cli(main)
