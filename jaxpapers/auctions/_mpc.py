r"""Myopic-optimal MPC: receding-horizon choice of a shading multiplier.

Every ``replan_every`` arrivals the planner draws ``num_rollouts`` futures
of ``horizon`` hours from the environment's model (arrivals, values and
competing bids; the current item's value is the observed one) and scores
shading multipliers :math:`\theta` of the myopic bid
(:func:`jaxpapers.auctions.myopic_bid`) on them, holding
:math:`\theta` fixed inside a rollout while the context evolves. All
candidates share the same futures (common random numbers), so their
differences are not sampling noise. The best :math:`\theta` is bid until
the next plan.

* ``planner="grid"``: :math:`\theta \in \{0, 0.1, \dots, 1.5\}`; ties go to
  the :math:`\theta` closest to 1 (myopic).
* ``planner="cem"``: a :math:`\theta` per ``cem_segment`` hours of the
  horizon, by the cross-entropy method (``cem_iterations`` rounds of
  ``cem_samples`` sequences, refitting a Gaussian to ``cem_elites``).

With the kernel off (:math:`K \equiv 1`) and a second-price auction, bidding
:math:`\nu` maximises every arrival's utility on every sample path, so the
grid planner returns :math:`\theta = 1` exactly and MPC *is* myopic bidding.

**Reconstruction**: DynamAuction's abstract names MPC on top of the
myopic-optimal valuation; the shading family, horizon, rollout count,
re-planning period and the CEM variant are ours. Rollouts ignore the
revelation delay (it does not change the return) and use the tabulated
first-price bid (:func:`jaxpapers.auctions.first_price_bid_fast`).

Example::

  params = environment.EnvParams()
  ep = run_mpc_episode(jax.random.key(0), params, MPCConfig())

References:
  DynamAuction (abstract only); Rubinstein & Kroese, *The Cross-Entropy
  Method* (2004); Camacho & Bordons, *Model Predictive Control* (2007).
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _myopic as myopic

_PLANNERS = ("grid", "cem")


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class MPCConfig:
  """Planner settings (static); validated at construction.

  ``thetas`` may be given as any 1-D sequence or array of finite numbers
  >= 0; it is stored as a tuple of floats (the config is hashed as a static
  argument). The counts are ints >= 1, the durations finite hours > 0.
  """

  thetas: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(16))
  num_rollouts: int = 64
  horizon: float = 2.0
  replan_every: int = 10
  planner: str = "grid"
  cem_iterations: int = 4
  cem_samples: int = 64
  cem_elites: int = 8
  cem_segment: float = 0.5

  def __post_init__(self):
    if self.planner not in _PLANNERS:
      raise ValueError(f"planner must be one of {_PLANNERS}; got {self.planner!r}.")
    thetas = self.thetas
    try:
      ndim = np.ndim(thetas)
    except ValueError:  # a ragged nesting
      ndim = None
    if isinstance(thetas, (str, bytes)) or ndim != 1:
      raise ValueError("thetas must be a non-empty 1-D sequence of shadings;"
                       f" got {thetas!r}.")
    thetas = tuple(_checks.check_real(f"thetas[{i}]", t, low=0)
                   for i, t in enumerate(thetas))
    if not thetas:
      raise ValueError("thetas must be non-empty (the grid, and CEM's bounds).")
    object.__setattr__(self, "thetas", thetas)
    for name in ("num_rollouts", "replan_every", "cem_iterations",
                 "cem_samples", "cem_elites"):
      object.__setattr__(self, name,
                         _checks.check_int(name, getattr(self, name), 1))
    if not self.cem_elites <= self.cem_samples:
      raise ValueError(f"cem_elites={self.cem_elites} must be <= cem_samples="
                       f"{self.cem_samples}.")
    for name in ("horizon", "cem_segment"):
      object.__setattr__(self, name, _checks.check_real(
          name, getattr(self, name), low=0, low_open=True, why=" hours"))

  @property
  def num_segments(self) -> int:
    return max(1, round(self.horizon / self.cem_segment))


def _check_arguments(params, config) -> None:
  env_lib.check_params(params)
  if not isinstance(config, MPCConfig):
    raise TypeError(f"config must be an MPCConfig; got {type(config).__name__}.")


def sample_futures(key: jax.Array, obs: env_lib.Observation,
                   params: env_lib.EnvParams, config: MPCConfig
                   ) -> env_lib.Arrivals:
  """``[num_rollouts, 1 + slots]`` futures: the current item, then the horizon."""
  _check_arguments(params, config)
  slots = env_lib.num_slots(params, config.horizon)

  def one(k):
    bid_key, rest_key = jax.random.split(k)
    rest = env_lib.sample_arrivals(rest_key, params, obs.time, config.horizon,
                                   slots)
    competing = jnp.exp(
        env_lib.competing_log_mean(obs.time, params) + params.competing_log_std
        * jax.random.normal(bid_key))
    current = env_lib.Arrivals(obs.time, obs.valid, obs.value,
                               jnp.where(obs.valid, competing, jnp.inf),
                               jnp.zeros(()))
    return jax.tree.map(lambda c, r: jnp.concatenate([c[None], r]), current, rest)

  return jax.vmap(one)(jax.random.split(key, config.num_rollouts))


def rollout_returns(futures: env_lib.Arrivals, context: env_lib.Context,
                    theta: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  """Utility of bidding ``theta * myopic`` on each future; ``theta`` is ``[m, s]``.

  ``[m, s]`` is the shape of ``futures.time`` (m rollouts of s slots).
  """
  if jnp.shape(theta) != futures.time.shape:
    raise ValueError(f"theta must have the shape of futures.time"
                     f" {futures.time.shape} (rollouts, slots); got"
                     f" {jnp.shape(theta)}.")
  def body(carry, slot):
    ctx, total = carry
    arrival, theta_now = slot
    nu = arrival.value * env_lib.kernel(ctx, arrival.time, params)
    bid = theta_now * myopic.myopic_bid(nu, arrival.time, params, fast=True)
    out = env_lib.resolve(ctx, arrival.time, arrival.value,
                          arrival.competing_bid, bid, arrival.valid, params)
    return (out.context, total + out.value - out.payment), None

  num = futures.time.shape[0]
  spec = tree.explicit_spec(futures.time)

  def per_rollout(x):
    # Explicit mesh axes select and carry only alike-sharded arrays: the
    # carry is sharded like the rollouts.
    x = jnp.broadcast_to(x, (num,))
    return x if spec is None else jax.sharding.reshard(x, jax.P(spec[0]))

  ctx = jax.tree.map(per_rollout, context)
  slots = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), (futures, theta))
  (_, total), _ = jax.lax.scan(body, (ctx, per_rollout(jnp.zeros(()))), slots)
  return total


def plan_grid(futures, context, params, config):
  r"""The grid planner: the shading :math:`\theta` of ``config.thetas`` with the best mean
  return over the sampled ``futures`` (common random numbers for every candidate);
  exact ties go to the candidate closest to myopic bidding (:math:`\theta = 1`)."""
  thetas = jnp.asarray(config.thetas, jnp.float32)
  shape = futures.time.shape
  means = jax.vmap(lambda t: jnp.mean(rollout_returns(
      futures, context, jnp.full(shape, t), params)))(thetas)
  best = jnp.max(means)
  # Exact ties (e.g. no competing bid between two candidates' bids) go to
  # the candidate closest to myopic bidding.
  closeness = jnp.where(means == best, -jnp.abs(thetas - 1.0), -jnp.inf)
  return tree.lookup(thetas, jnp.argmax(closeness))


def plan_cem(key, futures, context, params, config):
  """CEM over per-segment theta sequences; returns the first segment's theta."""
  low, high = min(config.thetas), max(config.thetas)
  segment = jnp.clip(
      ((futures.time - futures.time[:, :1]) / config.cem_segment).astype(jnp.int32),
      0, config.num_segments - 1)

  def score(sequence):
    return jnp.mean(rollout_returns(futures, context,
                                    tree.lookup(sequence, segment), params))

  def iteration(carry, k):
    mean, std = carry
    noise = jax.random.normal(k, (config.cem_samples, config.num_segments))
    samples = jnp.clip(mean[None] + std[None] * noise, low, high)
    scores = jax.vmap(score)(samples)
    elites = samples[jnp.argsort(-scores)[:config.cem_elites]]
    return (jnp.mean(elites, 0), jnp.std(elites, 0) + 1e-3), None

  init = (jnp.ones((config.num_segments,)),
          jnp.full((config.num_segments,), 0.5))
  (mean, _), _ = jax.lax.scan(iteration, init,
                              jax.random.split(key, config.cem_iterations))
  return mean[0]


def plan(key: jax.Array, obs: env_lib.Observation, params: env_lib.EnvParams,
         config: MPCConfig) -> jax.Array:
  r"""The shading multiplier to bid with from the current observation."""
  _check_arguments(params, config)
  future_key, cem_key = jax.random.split(key)
  futures = sample_futures(future_key, obs, params, config)
  if config.planner == "grid":
    return plan_grid(futures, obs.context, params, config)
  return plan_cem(cem_key, futures, obs.context, params, config)


class MPCEpisode(NamedTuple):
  """An episode under MPC: its return and the shading planned for each block of arrivals."""

  episode_return: jax.Array
  thetas: jax.Array  # [blocks] planned theta per block (0 past the end)


def run_mpc_from(state: env_lib.EnvState, obs: env_lib.Observation,
                 key: jax.Array, params: env_lib.EnvParams, config: MPCConfig
                 ) -> MPCEpisode:
  """MPC on an episode already reset: plan, bid ``replan_every`` times, repeat."""
  _check_arguments(params, config)
  slots = state.arrivals.time.shape[0]
  num_blocks = -(-slots // config.replan_every)

  def block(carry):
    b, obs, state, thetas = carry
    theta = plan(jax.random.fold_in(key, b), obs, params, config)

    def one(c, _):
      obs, state = c
      bid = theta * myopic.myopic_bid(myopic.myopic_valuation(obs, params),
                                      obs.time, params)
      obs, state, *_ = env_lib.step(key, state, bid, params)
      return (obs, state), None

    (obs, state), _ = jax.lax.scan(one, (obs, state), None,
                                   length=config.replan_every)
    return b + 1, obs, state, thetas.at[b].set(theta)

  def running(carry):
    b, _, state, _ = carry
    return (b < num_blocks) & (state.index < state.num_valid)

  # The block counter is a scalar constant (see tree.on_context_mesh).
  start = tree.on_context_mesh((jnp.int32(0), obs, state,
                                   jnp.zeros((num_blocks,))))
  _, _, state, thetas = jax.lax.while_loop(running, block, start)
  return MPCEpisode(state.utility, thetas)


def run_mpc_episode(key: jax.Array, params: env_lib.EnvParams,
                    config: MPCConfig) -> MPCEpisode:
  """One MPC episode on the draws of ``key`` (the same draws as
  :func:`jaxpapers.auctions.run_myopic_episode` with that key)."""
  _check_arguments(params, config)
  reset_key, plan_key = jax.random.split(key)
  obs, state = env_lib.reset(reset_key, params)
  return run_mpc_from(state, obs, plan_key, params, config)
