"""DynamAuction speed: the compiled episodes against the same dynamics batched in numpy.

The myopic bidder (theta = 1, both auction formats, 24 h episodes) three
ways, on the same reset episodes:

* ``auctions.run_myopic_batch``: one compiled loop steps every episode of
  the batch together (the library's batched runner);
* ``jit(vmap(auctions.run_myopic_from))``: each episode's loop, vmapped;
* a numpy version of the same dynamics written for this benchmark and
  vectorised over the episodes the same way as the batched runner: one
  numpy step advances every episode by one arrival, with the same O(1)
  bookkeeping of delayed rewards (a per-step pending sum) and, in first
  price, the same bid rule: the argmax of a 256-point grid, evaluated on the
  9 points around a tabulated optimum (``scipy.special.ndtr`` for the
  competition CDF).

All three replay the same draws (the numpy side reads the arrivals that
``environment.reset`` drew) and return the same outputs (returns, step
rewards, wins, contexts); their returns are compared. Rates count real
arrivals (valid slots), not padded ones. Rounds alternate the three
(``profiling.alternating_seconds``, one timed call each), and each ratio is
the median over rounds with its 10-90% range (``profiling.paired_ratio``). Goal (issue 41): the batched runner >= 3x
numpy at 256 and more episodes.

Run: ``python -m benchmarks.auctions`` (``--tiny``: 2 h episodes, 8 of
them, one round).
"""

from typing import NamedTuple

import jax
import numpy as np
from scipy import special

import benchmarks
from jaxpapers import profiling
from jaxpapers import auctions
from jaxpapers.auctions import _myopic as myopic


class Sizes(NamedTuple):
  formats: tuple[str, ...]
  horizon: float  # hours per episode
  episodes: tuple[int, ...]  # batch sizes
  rounds: int


FULL = Sizes(formats=("second", "first"), horizon=24.0, episodes=(256, 1024),
             rounds=5)
TINY = Sizes(formats=("second", "first"), horizon=2.0, episodes=(8,), rounds=1)


def numpy_episodes(state: auctions.EnvState, params: auctions.EnvParams,
                   theta: float = 1.0) -> dict[str, np.ndarray]:
  """The myopic bidder's episodes in numpy, batched over the leading axis of ``state``.

  ``state`` is a batch of reset states (``vmap(reset)``, fetched to numpy).
  The same dynamics as ``environment.step`` and ``auctions.fixed_shading``:
  kernel, bid, win, payment, context, delayed reveals (the default effects:
  exposure saturation, recency and delay on). First-price bids evaluate the
  library's window of the grid (``auctions.first_price_bid``), which reads
  the library's table of grid optima as a constant.
  """
  if not (params.saturation and params.recency and params.delay
          and params.saturation_measure == "exposure"):
    raise ValueError("numpy_episodes follows the default kernel only.")
  a = state.arrivals
  time_, value, competing, valid = a.time, a.value, a.competing_bid, a.valid
  num_valid, reveal_step = state.num_valid, state.reveal_step
  batch, slots = time_.shape
  rows = np.arange(batch)
  f32 = np.float32
  count = np.zeros(batch, f32)
  log_exposure = np.full(batch, -np.inf, f32)
  last_win = np.full(batch, -np.inf, f32)
  pending = np.zeros((batch, slots + 1), f32)
  revealed = np.zeros(batch, f32)
  won_value = np.zeros(batch, f32)
  utility = np.zeros(batch, f32)
  rewards = np.zeros((slots, batch), f32)
  wins = np.zeros((slots, batch), bool)
  contexts = np.zeros((3, slots, batch), f32)
  grid, window = auctions.FIRST_PRICE_GRID, myopic._WINDOW  # pylint: disable=protected-access
  fractions = np.linspace(0.0, 1.0, grid, dtype=f32)
  offsets = np.arange(window)[None, :]
  tiny = np.finfo(f32).tiny
  # A constant of the library's bid rule: the grid's optimum at log scales.
  log_y_start, log_y_step, best_index = myopic._grid_optimum_table(  # pylint: disable=protected-access
      params.competing_log_std)
  decay, alpha = f32(params.exposure_decay), f32(params.saturation_strength)
  for i in range(int(num_valid.max())):
    contexts[:, i] = count, log_exposure, last_win
    active = i < num_valid
    t = time_[:, i]
    kernel = 1 / (1 + alpha * np.exp(log_exposure - decay * t))
    kernel = kernel * -np.expm1(-(t - last_win) / f32(params.recency_time))
    nu = np.where(valid[:, i] & active, value[:, i] * kernel, f32(0))
    if params.format == "second":
      bid = theta * nu
    else:
      # The library's window of the grid around the tabulated optimum.
      mean = (params.competing_log_mean + params.competing_log_amplitude
              * np.sin(f32(2 * np.pi / params.period) * t)).astype(f32)
      safe_nu = np.maximum(nu, tiny)
      node = np.clip(np.round((np.log(safe_nu) - mean - log_y_start)
                              / log_y_step), 0, best_index.size - 1)
      first_above_reserve = np.clip(np.ceil(
          f32(params.reserve) / safe_nu * f32(grid - 1)), 0, grid - 1)
      centre = np.maximum(best_index[node.astype(np.int32)],
                          first_above_reserve.astype(np.int32))
      start = np.clip(centre - window // 2, 0, grid - window)
      bids = nu[:, None] * fractions[start[:, None] + offsets]
      with np.errstate(divide="ignore"):
        z = (np.log(bids) - mean[:, None]) / f32(params.competing_log_std)
      win = np.where((bids > 0) & (bids >= params.reserve), special.ndtr(z), f32(0))
      utility_grid = (nu[:, None] - bids) * win
      best = bids[rows, np.argmax(utility_grid, 1)]
      bid = theta * np.where(utility_grid.max(1) == 0, f32(0), best)
    price = np.maximum(competing[:, i], f32(params.reserve))
    won = valid[:, i] & active & (bid >= price) & (bid > 0)
    paid = np.where(won, bid if params.format == "first" else price, f32(0))
    realised = np.where(won, value[:, i] * kernel, f32(0))
    count = count + won
    log_exposure = np.where(won, np.logaddexp(log_exposure, decay * t),
                            log_exposure)
    last_win = np.where(won, np.maximum(last_win, t), last_win)
    index = np.where(active, i + 1, i)
    pending[rows, np.maximum(reveal_step[:, i], index)] += realised
    won_value += realised
    done = index >= num_valid
    new = np.where(done, won_value,
                   revealed + np.where(active, pending[rows, index], f32(0)))
    rewards[i] = np.where(active, new - revealed - paid, f32(0))
    revealed = new
    wins[i] = won
    utility += realised - paid
  return {"episode_return": utility, "revealed_rewards": rewards.T,
          "won": wins.T, "contexts": contexts.transpose(0, 2, 1)}


def compare(fmt: str, num_episodes: int, sizes: Sizes) -> str:
  params = auctions.EnvParams(format=fmt, horizon=sizes.horizon)
  keys = jax.random.split(jax.random.key(0), num_episodes)
  reset_keys, step_keys = jax.vmap(jax.random.split, out_axes=1)(keys)
  policy = auctions.fixed_shading(1.0, params)
  obs, states = jax.jit(jax.vmap(lambda k: auctions.reset(k, params)))(reset_keys)
  batch = jax.jit(lambda s: auctions.run_myopic_batch(s, params, policy))
  vmapped = jax.jit(jax.vmap(
      lambda s, o, k: auctions.run_myopic_from(s, o, k, params, policy)))
  numpy_states = jax.device_get(states)
  episode = batch(states)
  reference = numpy_episodes(numpy_states, params)
  arrivals = int(numpy_states.num_valid.sum())
  seconds = profiling.alternating_seconds({
      "batch": (batch, (states,)),
      "vmap": (vmapped, (states, obs, step_keys)),
      "numpy": (numpy_episodes, (numpy_states, params)),
  }, rounds=sizes.rounds, repeats=1)
  gap = np.max(np.abs(np.asarray(episode.episode_return)
                      - reference["episode_return"]))
  rate = lambda name: f"{arrivals / min(seconds[name]):,.0f}"
  ratio = lambda name: profiling.paired_ratio(seconds["numpy"], seconds[name])
  batch_ratio, vmap_ratio = ratio("batch"), ratio("vmap")
  return (f"{fmt} price, {num_episodes} episodes of {sizes.horizon:g} h"
          f" ({arrivals / num_episodes:.0f} arrivals each), arrivals/s:"
          f" {rate('batch')} run_myopic_batch, {rate('vmap')} vmap(run_from),"
          f" {rate('numpy')} numpy-batched. Against numpy:"
          f" run_myopic_batch {batch_ratio['ratio']:.2f}x"
          f" (10-90%: {batch_ratio['low']:.2f}-{batch_ratio['high']:.2f}x;"
          f" goal >= 3x), vmap(run_from) {vmap_ratio['ratio']:.2f}x"
          f" ({vmap_ratio['low']:.2f}-{vmap_ratio['high']:.2f}x);"
          f" {batch_ratio['rounds']} rounds; returns agree to {gap:.1e}")


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  for fmt in sizes.formats:
    for num_episodes in sizes.episodes:
      print(compare(fmt, num_episodes, sizes), flush=True)


if __name__ == "__main__":
  benchmarks.cli(main)
