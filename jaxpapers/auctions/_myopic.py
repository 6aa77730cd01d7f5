r"""Myopic-optimal valuation and bids for DynamAuction, and fixed-shading policies.

The *myopic-optimal valuation* of the current item is its value if no
further opportunity followed: :math:`\nu_t = v_t K(c_{t^-}, t)` (or
:math:`E[v] K` when the value is not observed). In a second-price auction
the myopic bid is :math:`\nu_t` (truthful bidding is dominant for one
auction); in a first-price auction it maximises the expected utility
:math:`(\nu_t - b) G_t(b)` over a 256-point grid on :math:`[0, \nu_t]`.
A *shading* policy bids :math:`\theta` times the myopic bid.

**Reconstruction** (see :mod:`jaxpapers.auctions._environment`): the valuation
follows the DynamAuction abstract; the grid and the shading family are ours.
Masked bids are ``zeros_like`` the bid, as in the environment's step (which
says why).

Example::

  params = environment.EnvParams(format="first")
  ret = run_episode(jax.random.key(0), params, fixed_shading(1.0, params))

References:
  DynamAuction (abstract only); Krishna, *Auction Theory* (2009), ch. 2
  (one-shot first- and second-price bidding).
"""

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.auctions import _environment as env_lib

FIRST_PRICE_GRID = 256
# The table behind :func:`first_price_bid_fast`: scale-free values
# y = nu / exp(mu_t) on a log grid wide enough for any kernel in [0, 1].
_TABLE_LOG_RANGE = (-12.0, 6.0)
_TABLE_SIZE = 2048
# Grid points :func:`first_price_bid` evaluates around the tabulated optimum.
_WINDOW = 9

Policy = Callable[[env_lib.Observation], jax.Array]


def myopic_valuation(obs: env_lib.Observation, params: env_lib.EnvParams, *,
                     value_observed: bool = True) -> jax.Array:
  """:math:`\\nu_t = v_t K(c_{t^-}, t)`, or :math:`E[v] K` if ``value_observed`` is False."""
  env_lib.check_params(params)
  if value_observed:
    value = obs.value
  else:
    value = jnp.float32(math.exp(params.value_log_mean
                                 + params.value_log_std ** 2 / 2))
  valuation = value * obs.kernel
  return jnp.where(obs.valid, valuation, jnp.zeros_like(valuation))


def first_price_bid(valuation: jax.Array, time: jax.Array,
                    params: env_lib.EnvParams, grid_size: int = FIRST_PRICE_GRID
                    ) -> jax.Array:
  """:math:`\\arg\\max_b (\\nu - b) G_t(b)` over ``grid_size`` points of :math:`[0, \\nu]`.

  ``time`` broadcasts to the shape of ``valuation``; ``grid_size`` is an
  int >= 1 (1 is the grid {0}). The first maximum wins a tie, as in
  ``jnp.argmax`` over the grid.

  On the default grid only the 9 points around the optimum are evaluated,
  with the same result: the objective is log-concave in ``b`` (a product of
  :math:`\\nu - b` and a log-normal CDF, each log-concave), so it rises to
  its maximum and falls after it, and a table of the grid's optimum at
  closely spaced scales (:func:`_grid_optimum_table`), raised to the first
  point at or above the reserve, places that maximum within one grid point
  of the window's centre (tests compare with the full grid over scales,
  reserves and competition spreads; the window has four on each side).
  Where the utility underflows to 0 at every point of the window it is 0 on
  the whole grid, whose first point (bid 0) wins.
  """
  env_lib.check_params(params)
  grid_size = _checks.check_int("grid_size", grid_size, 1)
  valuation = jnp.asarray(valuation)
  try:
    shape = jnp.broadcast_shapes(jnp.shape(time), valuation.shape)
  except ValueError:
    shape = None
  if shape != valuation.shape:
    raise ValueError(f"time {jnp.shape(time)} must broadcast to the shape of"
                     f" valuation {valuation.shape}.")
  fractions = jnp.linspace(0.0, 1.0, grid_size)
  if grid_size == FIRST_PRICE_GRID:
    log_y_start, log_y_step, best_index = _grid_optimum_table(
        params.competing_log_std)
    # Scale-free: y = nu / exp(mu_t); the smallest normal float keeps the
    # log finite for a zero or negative valuation.
    log_y = (jnp.log(jnp.maximum(valuation, np.finfo(np.float32).tiny))
             - env_lib.competing_log_mean(time, params))
    node = jnp.clip(jnp.round((log_y - log_y_start) / log_y_step),
                    0, best_index.shape[0] - 1)
    # Below the reserve nothing wins: the optimum is no lower than the first
    # grid point at or above it (the log-concave objective falls on both
    # sides of the unconstrained optimum).
    first_above_reserve = jnp.clip(jnp.ceil(
        params.reserve / jnp.maximum(valuation, np.finfo(np.float32).tiny)
        * (grid_size - 1)), 0, grid_size - 1)
    # A NaN valuation reads the first node; its bids stay NaN.
    node, first_above_reserve = (
        jnp.where(jnp.isnan(x), 0.0, x).astype(jnp.int32)
        for x in (node, first_above_reserve))
    centre = jnp.maximum(tree.lookup(jnp.asarray(best_index), node),
                         first_above_reserve)
    start = jnp.clip(centre - _WINDOW // 2, 0, grid_size - _WINDOW)
    offsets = jnp.arange(_WINDOW).reshape((1,) * start.ndim + (-1,))
    # Computed, not read: a gather per point costs more than its CDF.
    fractions = _grid_fractions(start[..., None] + offsets, grid_size)
  else:
    fractions = fractions.reshape((1,) * valuation.ndim + (-1,))
  bids = valuation[..., None] * fractions
  time = jnp.broadcast_to(time, valuation.shape)[..., None]
  utility = (valuation[..., None] - bids) * env_lib.win_probability(
      bids, time, params)
  best = _first_argmax(utility)
  if grid_size == FIRST_PRICE_GRID:
    bid = valuation * _grid_fractions(start + best, grid_size)
  else:
    bid = jnp.take_along_axis(bids, best[..., None], -1)[..., 0]
  # No point of the window can win: bid the full grid's first point, 0.
  return jnp.where(jnp.max(utility, -1) == 0, valuation * 0.0, bid)


def _first_argmax(x: jax.Array) -> jax.Array:
  """``jnp.argmax(x, -1)`` (the first maximum; the first NaN if any) by two plain reductions.

  XLA:CPU runs argmax as one reduction over (value, index) pairs, which it
  does not vectorise: over a few points per row it costs several times the
  row's CDFs.
  """
  top = jnp.max(x, -1, keepdims=True)
  hit = (x == top) | jnp.isnan(x)
  iota = jnp.arange(x.shape[-1]).reshape((1,) * (x.ndim - 1) + (-1,))
  return jnp.min(jnp.where(hit, iota, x.shape[-1]), -1)


def _grid_fractions(points: jax.Array, grid_size: int) -> jax.Array:
  """``jnp.linspace(0, 1, grid_size)[points]``, bit for bit, without a gather.

  ``jnp.linspace`` makes point k as ``(1 / (grid_size - 1)) * k`` in
  float32 and the last point exactly 1; the test of :func:`first_price_bid`
  against the full grid checks that this stays so.
  """
  step = np.float32(1.0) / np.float32(grid_size - 1)
  return jnp.where(points == grid_size - 1, jnp.float32(1.0),
                   points.astype(jnp.float32) * step)


@functools.lru_cache(maxsize=None)
def _grid_optimum_table(competing_log_std: float
                        ) -> tuple[float, float, np.ndarray]:
  """The grid index of argmax_x (y - x) Phi(log(x) / sigma) at log-spaced scales y.

  ``(log_y_start, log_y_step, index)``: ``index[i]`` is the first price
  grid's optimum at ``log y = log_y_start + i * log_y_step``, in float64.
  The scales span every y at which a float32 utility can be positive
  (Phi underflows below z = -14.5, so log y >= -14.5 sigma) up to where the
  grid's first positive point wins for sure (Phi = 1 in float32 at
  z >= 5.5 past log 255), and their step is fine enough (0.01, or sigma / 8)
  that the optimum moves by at most a grid point between nodes. Built once
  per sigma in numpy, a compile-time constant.
  """
  sigma = competing_log_std
  start = -14.5 * sigma - 1.0
  stop = math.log(FIRST_PRICE_GRID - 1) + 6.0 * sigma + 1.0
  step = min(0.01, sigma / 8)
  log_y = np.arange(start, stop + step, step)
  return float(start), float(step), _grid_optima(log_y, sigma).astype(np.int32)


@functools.lru_cache(maxsize=None)
def _first_price_table(competing_log_std: float) -> tuple[np.ndarray, np.ndarray]:
  """x*(y) = argmax_x (y - x) Phi(log(x) / sigma) on the 256-point grid.

  Without a reserve the optimum scales: b*(nu, t) = e^{mu_t} x*(nu e^{-mu_t}).
  Built once in numpy, so it is a compile-time constant, not a per-call cost.
  """
  log_y = np.linspace(*_TABLE_LOG_RANGE, _TABLE_SIZE)
  fractions = np.linspace(0.0, 1.0, FIRST_PRICE_GRID)
  x_star = np.exp(log_y) * fractions[_grid_optima(log_y, competing_log_std)]
  return log_y.astype(np.float32), x_star.astype(np.float32)


def _grid_optima(log_y: np.ndarray, sigma: float) -> np.ndarray:
  """Index of argmax_x (y - x) Phi(log(x) / sigma) on the first-price grid, per scale (float64, numpy).

  ``x`` runs over ``y`` times the grid's fractions; rows of 512 scales at a
  time bound the temporaries.
  """
  fractions = np.linspace(0.0, 1.0, FIRST_PRICE_GRID)
  index = np.empty(log_y.shape[0], np.int64)
  for rows in np.array_split(np.arange(log_y.shape[0]),
                             -(-log_y.shape[0] // 512)):
    y = np.exp(log_y[rows])[:, None]
    bids = y * fractions
    with np.errstate(divide="ignore"):
      win = special.ndtr(np.log(bids) / sigma)
    index[rows] = np.argmax((y - bids) * win, 1)
  return index


def first_price_bid_fast(valuation: jax.Array, time: jax.Array,
                         params: env_lib.EnvParams) -> jax.Array:
  """:func:`first_price_bid` by interpolation in a scale-free table (for rollouts).

  The objective is log-concave in ``b``, so with a reserve the optimum on
  :math:`[r, \\nu]` is the unconstrained one clipped to it.
  """
  env_lib.check_params(params)
  log_y, x_star = _first_price_table(params.competing_log_std)
  x_star = jnp.asarray(x_star)
  scale = jnp.exp(env_lib.competing_log_mean(time, params))
  y = jnp.maximum(valuation, 1e-30) / scale
  # The grid is uniform in log y: index it directly (no search).
  position = jnp.clip((jnp.log(y) - log_y[0]) / (log_y[1] - log_y[0]),
                      0.0, _TABLE_SIZE - 1.0)
  lower = jnp.minimum(position.astype(jnp.int32), _TABLE_SIZE - 2)
  weight = position - lower.astype(jnp.float32)
  bid = scale * ((1 - weight) * tree.lookup(x_star, lower)
                 + weight * tree.lookup(x_star, lower + 1))
  bid = jnp.clip(bid, params.reserve, valuation)
  # Written as "below the reserve" so that a NaN valuation stays NaN.
  return jnp.where(valuation < params.reserve, jnp.zeros_like(bid), bid)


def myopic_bid(valuation: jax.Array, time: jax.Array,
               params: env_lib.EnvParams, *, fast: bool = False) -> jax.Array:
  """The myopic-optimal bid: :math:`\\nu` (second price) or the grid argmax (first)."""
  env_lib.check_params(params)
  if params.format == "second":
    return valuation
  if fast:
    return first_price_bid_fast(valuation, time, params)
  return first_price_bid(valuation, time, params)


def fixed_shading(theta: float | jax.Array, params: env_lib.EnvParams, *,
                  value_observed: bool = True) -> Policy:
  """The policy bidding ``theta`` times the myopic bid (``theta = 1``: myopic).

  A concrete ``theta`` must be finite and >= 0; a traced one is used as
  given (a NaN one makes NaN bids, which :func:`run_episode` flags).
  """
  env_lib.check_params(params)
  _checks.check_real_array("theta", theta, low=0)
  def policy(obs):
    nu = myopic_valuation(obs, params, value_observed=value_observed)
    return theta * myopic_bid(nu, obs.time, params)
  return policy


class MyopicEpisode(NamedTuple):
  """An episode under a fixed policy: return, revealed step rewards, wins and contexts."""

  episode_return: jax.Array  # realised utility; NaN if a valid bid was NaN
  revealed_rewards: jax.Array  # [n] step rewards, what the buyer saw
  won: jax.Array  # [n]
  contexts: env_lib.Context  # [n] context before each slot
  final_state: env_lib.EnvState


def run_episode(key: jax.Array, params: env_lib.EnvParams, policy: Policy
                ) -> MyopicEpisode:
  """One episode of ``policy`` (a function of the observation), by ``lax.scan``.

  A NaN bid on a valid arrival makes ``episode_return`` NaN (see
  :func:`run_from`).
  """
  _check_policy(params, policy)
  reset_key, step_key = jax.random.split(key)
  obs, state = env_lib.reset(reset_key, params)
  return run_from(state, obs, step_key, params, policy)


def _check_policy(params, policy) -> None:
  env_lib.check_params(params)
  if not callable(policy):
    raise TypeError("policy must be a function of the observation (e.g."
                    f" fixed_shading(theta, params)); got {policy!r}.")


def run_from(state: env_lib.EnvState, obs: env_lib.Observation,
             key: jax.Array, params: env_lib.EnvParams, policy: Policy
             ) -> MyopicEpisode:
  """:func:`run_episode` from a reset state (e.g. one replayed episode).

  The environment treats a NaN bid as one that loses; here a NaN bid on a
  valid arrival makes ``episode_return`` NaN, so that a broken policy does
  not pass for one that merely bid low.
  """
  _check_policy(params, policy)

  def body(carry, step_key):
    obs, state = carry
    bid = policy(obs)
    nan_bid = obs.valid & jnp.isnan(bid)
    new_obs, state, reward, _, info = env_lib.step(step_key, state, bid, params)
    return (new_obs, state), (reward, info["won"], obs.context, nan_bid)

  keys = jax.random.split(key, state.arrivals.time.shape[0])
  (_, state), (rewards, won, contexts, nan_bids) = env_lib.scan_episode(
      body, obs, state, keys)
  return _episode(rewards, won, contexts, nan_bids, state)


def _episode(rewards: jax.Array, won: jax.Array, contexts: env_lib.Context,
             nan_bids: jax.Array, state: env_lib.EnvState) -> MyopicEpisode:
  """One episode's result from its per-slot outputs and final state."""
  # Past the valid arrivals the context stays the final one (those steps are
  # no-ops, and most of them are not run).
  past_end = jnp.arange(won.shape[0]) >= state.num_valid
  contexts = jax.tree.map(lambda c, final: jnp.where(past_end, final, c),
                          contexts, state.context)
  episode_return = jnp.where(jnp.any(nan_bids),
                             jnp.full_like(state.utility, jnp.nan),
                             state.utility)
  return MyopicEpisode(episode_return, rewards, won, contexts, state)


# Steps per chunk of :func:`run_batch`. Each chunk's outputs are stacked in
# ``[chunk, batch]`` buffers that XLA:CPU copies on every step of the
# chunk's loop, so a small chunk keeps that O(chunk) per step; a larger one
# would save loop bookkeeping that costs less.
_BATCH_CHUNK = 16


def run_batch(states: env_lib.EnvState, params: env_lib.EnvParams,
              policy: Policy) -> MyopicEpisode:
  """``vmap(run_from)`` over a batch of reset episodes, with the batch stepped together.

  ``jax.vmap(run_from)`` batches each episode's loop, so its slot index
  becomes one per episode, the reads of the arrivals gathers and the loop's
  end a per-episode condition. Here one loop advances every episode by one
  arrival: the slot index is shared, the arrivals are read a block of
  16 slots at a time, and the loop ends after the batch's
  last valid arrival. The numbers of ``jax.vmap(run_from)`` (its step keys
  are unused: :func:`environment.step` draws nothing), several times faster
  on CPU (``benchmarks/auctions.py``).

  Args:
    states: a batch of episodes at their first step, as
      ``jax.vmap(reset)`` returns them (leading axis: episodes).
    params: the environment they were reset with.
    policy: a function of one episode's observation (vmapped here).

  Returns:
    A :class:`MyopicEpisode` of ``[episodes, ...]`` arrays. An episode whose
    state was past its first step (``index != 0``, which a concrete batch
    refuses with ``ValueError``) has a NaN ``episode_return``, as has one
    with a NaN bid on a valid arrival. The utilities (``episode_return``,
    ``final_state.utility``) match ``vmap(run_from)``'s to float32 rounding,
    everything else exactly.

  References: the environment is our reconstruction of DynamAuction
  (abstract only; see :mod:`jaxpapers.auctions._environment`); the policy's
  one-shot bids follow Krishna, *Auction Theory* (2009), ch. 2.
  """
  _check_policy(params, policy)
  if not isinstance(states, env_lib.EnvState):
    raise TypeError("states must be an EnvState batch (jax.vmap(reset));"
                    f" got {type(states).__name__}.")
  slots = env_lib.num_slots(params)
  time_shape = jnp.shape(states.arrivals.time)
  if len(time_shape) != 2 or time_shape[1] != slots:
    raise ValueError(f"states must be a batch of episodes of {slots} slots"
                     f" (jax.vmap(reset) with these params); its arrival"
                     f" times have shape {time_shape}.")
  if jnp.shape(states.index) != time_shape[:1]:
    raise ValueError(f"states.index must have shape {time_shape[:1]}, one"
                     f" step per episode; got {jnp.shape(states.index)}.")
  if _checks.is_concrete(states.index) and np.any(np.asarray(states.index)):
    raise ValueError("run_batch starts episodes at their first step; some"
                     " states are past it (index != 0): continue those with"
                     " jax.vmap(run_from).")
  chunk = _BATCH_CHUNK
  num_chunks = -(-slots // chunk)
  padded = num_chunks * chunk
  a = states.arrivals
  # Padding slots are invalid arrivals past the end of every episode.
  columns = [jnp.pad(x, ((0, 0), (0, padded - slots)), constant_values=fill)
             for x, fill in ((a.time, 0.0), (a.value, 0.0),
                             (a.competing_bid, jnp.inf), (a.valid, False),
                             (states.reveal_step, slots))]
  num_valid = states.num_valid
  book = jax.vmap(env_lib._book, in_axes=(0, 0, 0, None, 0, 0))

  def body(carry, row):
    context, books, slot = carry
    time, value, competing, valid, reveal_step = row
    active = slot < num_valid
    obs = env_lib._observation(time, value, valid & active, context, books,
                               params)
    bid = jax.vmap(policy)(obs)
    if jnp.shape(bid) != jnp.shape(time):
      raise ValueError("policy must return one bid per observation; got"
                       f" shape {jnp.shape(bid)[1:]} per episode.")
    nan_bid = obs.valid & jnp.isnan(bid)
    out = env_lib.resolve(context, time, value, competing,
                          jnp.asarray(bid, jnp.float32), obs.valid, params)
    index = jnp.minimum(slot + 1, slots)
    books, reward, _ = book(books, out, reveal_step, index, num_valid, active)
    return (out.context, books, slot + 1), (reward, out.won, context, nan_bid)

  def one_chunk(carry):
    c, inner, ys = carry
    start = c * chunk
    rows = [jax.lax.dynamic_slice_in_dim(x, start, chunk, 1).T
            for x in columns]
    inner, y = jax.lax.scan(body, inner, rows)
    ys = jax.tree.map(lambda b, u: jax.lax.dynamic_update_slice_in_dim(
        b, u.T, start, 1), ys, y)
    return c + 1, inner, ys

  last = jnp.max(num_valid)
  inner = (states.context, env_lib._Books(*states[5:]), jnp.int32(0))
  y_shapes = jax.eval_shape(lambda c: body(c, [x[:, 0] for x in columns])[1],
                            inner)
  # Shaped (and sharded) like the padded columns: [episodes, padded].
  ys = jax.tree.map(lambda s: jnp.zeros_like(columns[0], dtype=s.dtype),
                    y_shapes)
  init = tree.on_context_mesh((jnp.int32(0), inner, ys))
  _, (context, books, _), ys = jax.lax.while_loop(
      lambda carry: (carry[0] < num_chunks) & (carry[0] * chunk < last),
      one_chunk, init)
  rewards, won, contexts, nan_bids = jax.tree.map(lambda y: y[:, :slots], ys)
  # As jax.vmap(run_from) leaves it: each episode's loop runs whole chunks
  # of scan_episode up to its last valid arrival.
  episode_chunk = env_lib.EPISODE_CHUNK
  index = jnp.minimum(-(-num_valid // episode_chunk) * episode_chunk, slots)
  final = env_lib.EnvState(index.astype(states.index.dtype), a, num_valid,
                           context, states.reveal_step, *books)
  episodes = jax.vmap(_episode)(rewards, won, contexts, nan_bids, final)
  resumed = states.index != 0
  return episodes._replace(episode_return=jnp.where(
      resumed, jnp.full_like(episodes.episode_return, jnp.nan),
      episodes.episode_return))


def best_fixed_shading(key: jax.Array, params: env_lib.EnvParams,
                       thetas: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The best fixed ``theta`` in hindsight on the episode of ``key``.

  ``thetas`` is a non-empty 1-D array (or sequence) of shadings, finite
  and >= 0 when concrete.

  Returns:
    ``(best_return, returns)``: the best return and ``[len(thetas)]``
    returns of every fixed shading on the same draws.
  """
  env_lib.check_params(params)
  if isinstance(thetas, (list, tuple)):
    try:
      thetas = np.asarray(thetas)
    except ValueError:  # a ragged nesting
      thetas = np.empty((0, 0))
  if jnp.ndim(thetas) != 1 or jnp.shape(thetas)[0] == 0:
    raise ValueError("thetas must be a non-empty 1-D array of shadings; got"
                     f" shape {jnp.shape(thetas)}.")
  _checks.check_real_array("thetas", thetas, low=0)
  thetas = jnp.asarray(thetas, jnp.float32)
  returns = jax.vmap(
      lambda t: run_episode(key, params, fixed_shading(t, params)).episode_return
  )(thetas)
  return jnp.max(returns), returns
