r"""DynamAuction: a jit-compiled single-buyer repeated-auction environment.

A buyer bids on items that arrive by a non-homogeneous Poisson process over
a horizon of ``T`` hours. What it has won so far (its *carry-over context*)
scales what the next item is worth through a reward kernel, so bidding is a
planning problem, not a sequence of independent auctions.

**Source status.** The DynamAuction paper (single-buyer environment, reward
kernel on a carry-over context folded with a commutative monoid, first- and
second-price formats, non-homogeneous Poisson arrivals, delayed feedback,
saturation and recency) was located only as an abstract. **Every concrete
choice below is our reconstruction**, not the paper's: the kernel, the
distributions, the defaults. See ``docs/dynamauction.md``.

Model (time in hours):

* arrivals: intensity :math:`\lambda(t) = \lambda_0 (1 + a \sin(2\pi t/24))`,
  sampled by thinning (Lewis & Shedler, 1979) a rate
  :math:`\lambda_{max} = \lambda_0 (1 + a)` process over a fixed array of
  :math:`\lceil 1.3 \lambda_{max} T\rceil` candidates with a validity mask,
  so every shape is static;
* context: the product monoid of the win count :math:`(\mathbb N, +, 0)`,
  the time-anchored exposure :math:`S = \sum_i e^{\kappa t_i}` (kept as
  :math:`\log S`, combined by ``logaddexp``) and the last win time
  :math:`(\mathbb R \cup \{-\infty\}, \max, -\infty)`; its prefix over a
  win sequence is a ``lax.associative_scan`` (:func:`context_prefix`);
* kernel :math:`K(c, t) = g(E) h(\Delta)` with current exposure
  :math:`E = e^{-\kappa t} S` (or the win count, ``saturation_measure=
  "count"``), :math:`g(E) = 1/(1 + \alpha E)` and
  :math:`h(\Delta) = 1 - e^{-\Delta/\tau_r}`, :math:`\Delta = t - t_{last}`
  (:math:`h = 1` before the first win); ``saturation`` / ``recency`` off
  set the factor to 1;
* item value :math:`v \sim \mathrm{LogNormal}(\mu_v, \sigma_v)` (observed by
  the buyer), highest competing bid
  :math:`D_t \sim \mathrm{LogNormal}(\log 0.8 + 0.2 \sin(2\pi t/24), 0.5)`;
* the buyer wins iff :math:`b \ge \max(D, r)` (``reserve`` :math:`r`) and
  pays :math:`b` (first price) or :math:`\max(D, r)` (second price); the
  realised value :math:`v K(c_{t^-}, t)` is revealed after an
  :math:`\mathrm{Exp}` delay (``delay``), the payment at once. Wins update
  the context at once.

The interface follows gymnax (``reset(key, params) -> (obs, state)``,
``step(key, state, action, params) -> (obs, state, reward, done, info)``),
pure and ``jit``/``vmap``-able over episodes. One step is one candidate
arrival; the valid arrivals come first (in time order), so an episode is
``num_slots(params)`` steps and ``done`` is set after the last valid one.
All randomness of an episode is drawn at ``reset`` (that is what lets a
planner and a hindsight baseline replay it); ``step``'s key is accepted for
interface compatibility. The step reward is what the buyer *sees*: values
revealed since the previous step minus the payment; the remainder is
revealed at ``done``, so the step rewards sum to the return.

Masked values in the step are filled with ``zeros_like`` of the value they
replace, not a Python scalar: under two nested ``vmap``s whose batches lie on
different Explicit mesh axes (seeds over "data" around policies over
"model"), jax's ``select`` batching rule broadcasts a scalar case to an
array without a mesh and then refuses the mix (jax 0.10.2 and 0.12).

Example::

  params = EnvParams(format="second")
  obs, state = reset(jax.random.key(0), params)
  obs, state, reward, done, info = step(
      jax.random.key(1), state, obs.value * obs.kernel, params)

References:
  DynamAuction (abstract only). Closest published settings: value that
  depends on the time since the last purchase, solved by dynamic
  programming, https://arxiv.org/abs/2308.01755; delayed Poisson rewards in
  bidding, https://arxiv.org/abs/2510.20055.
"""

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib
from jaxpapers import _checks

_FORMATS = ("first", "second")
_SATURATION_MEASURES = ("exposure", "count")
# Headroom of the candidate array over the mean candidate count lambda_max*T:
# at the default (1440 candidates, s.d. 38) it is exceeded with probability
# far below 1e-20, so thinning never runs out of slots in practice.
SLOT_HEADROOM = 1.3
# A reserve above this quantile of the value distribution makes every item
# unprofitable to win: an input error, not an environment.
_VALUE_QUANTILE_Z = 6.0
_LOG_FLOAT32_MAX = math.log(float(np.finfo(np.float32).max))


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class EnvParams:
  """Static parameters of the environment; validated at construction.

  Every number must be a finite real (NaN and infinities are refused), the
  flags bools, and the 1 - 1e-9 quantiles of the item value and of the
  competing bid float32 numbers.

  Attributes:
    format: ``"first"`` (pay the bid) or ``"second"`` (pay ``max(D, r)``).
    horizon: episode length ``T`` in hours (> 0).
    base_intensity: :math:`\\lambda_0`, arrivals per hour (> 0).
    intensity_amplitude: ``a`` in :math:`\\lambda(t)` (in [0, 1], so
      :math:`\\lambda(t) \\ge 0`); 0 gives stationary arrivals.
    value_log_mean, value_log_std: :math:`\\mu_v, \\sigma_v` of the item value.
    competing_log_mean, competing_log_amplitude, competing_log_std: the
      highest competing bid's log-mean :math:`\\mu + A\\sin(2\\pi t/24)` and
      log-s.d.
    reserve: reserve price ``r`` (>= 0, below the 1 - 1e-9 value quantile).
    saturation, recency, delay: each effect on or off.
    saturation_measure: ``"exposure"`` (decaying, rate ``exposure_decay``)
      or ``"count"`` (the win count, the DP oracle's setting).
    saturation_strength: :math:`\\alpha \\ge 0`.
    exposure_decay: :math:`\\kappa \\ge 0` per hour.
    recency_time: :math:`\\tau_r > 0` hours.
    mean_delay: mean reward-revelation delay (hours, > 0) when ``delay``.
    period: the daily cycle of both sinusoids (hours, > 0).
  """

  format: str = "second"
  horizon: float = 24.0
  base_intensity: float = 40.0
  intensity_amplitude: float = 0.5
  value_log_mean: float = 0.0
  value_log_std: float = 0.5
  competing_log_mean: float = math.log(0.8)
  competing_log_amplitude: float = 0.2
  competing_log_std: float = 0.5
  reserve: float = 0.0
  saturation: bool = True
  recency: bool = True
  delay: bool = True
  saturation_measure: str = "exposure"
  saturation_strength: float = 0.5
  exposure_decay: float = 0.5
  recency_time: float = 0.25
  mean_delay: float = 1.0
  period: float = 24.0

  def __post_init__(self):
    if self.format not in _FORMATS:
      raise ValueError(f"format must be one of {_FORMATS}; got {self.format!r}.")
    if self.saturation_measure not in _SATURATION_MEASURES:
      raise ValueError(f"saturation_measure must be one of"
                       f" {_SATURATION_MEASURES}; got {self.saturation_measure!r}.")
    # Checked values are stored as Python bools and floats: the params are
    # a static (hashed) argument, which a numpy or JAX scalar would break.
    set_field = lambda name, value: object.__setattr__(self, name, value)
    for name in ("saturation", "recency", "delay"):
      _checks.check_flag(name, getattr(self, name))
      set_field(name, bool(getattr(self, name)))
    positive = ("horizon", "base_intensity", "value_log_std",
                "competing_log_std", "recency_time", "mean_delay", "period")
    for name in positive:
      set_field(name, _checks.check_real(name, getattr(self, name), low=0,
                                         low_open=True))
    for name in ("value_log_mean", "competing_log_mean",
                 "competing_log_amplitude"):
      set_field(name, _checks.check_real(name, getattr(self, name)))
    set_field("intensity_amplitude", _checks.check_real(
        "intensity_amplitude", self.intensity_amplitude, low=0, high=1,
        why=" (so that the intensity lambda(t) is never negative)"))
    for name in ("saturation_strength", "exposure_decay"):
      set_field(name, _checks.check_real(name, getattr(self, name), low=0))
    # The 1 - 1e-9 quantiles of the item value and of the competing bid must
    # be float32 numbers, or sampled draws overflow to inf.
    log_top_value = self.value_log_mean + _VALUE_QUANTILE_Z * self.value_log_std
    log_top_competing = (self.competing_log_mean
                         + abs(self.competing_log_amplitude)
                         + _VALUE_QUANTILE_Z * self.competing_log_std)
    for what, log_top in (("item value", log_top_value),
                          ("competing bid", log_top_competing)):
      if log_top >= _LOG_FLOAT32_MAX:
        raise ValueError(
            f"the {what}'s 1 - 1e-9 quantile, exp({log_top:.4g}), overflows"
            " float32: lower its log-mean or log-s.d.")
    top_value = math.exp(log_top_value)
    set_field("reserve", _checks.check_real("reserve", self.reserve, low=0))
    if not self.reserve <= top_value:
      raise ValueError(
          f"reserve must be in [0, {top_value:.4g}] (the 1 - 1e-9 quantile of"
          f" the item value): a reserve above all values leaves nothing to"
          f" win; got {self.reserve}.")
    # Slots are indexed with int32.
    if SLOT_HEADROOM * self.peak_intensity * self.horizon >= 2**31 - 1:
      raise ValueError(
          f"horizon={self.horizon} and base_intensity={self.base_intensity}"
          " make more than 2**31 candidate arrivals per episode.")

  @property
  def peak_intensity(self) -> float:
    """:math:`\\lambda_{max}`, the thinning envelope."""
    return self.base_intensity * (1 + self.intensity_amplitude)


def num_slots(params: EnvParams, duration: float | None = None) -> int:
  """The static candidate count :math:`\\lceil 1.3 \\lambda_{max} d\\rceil`.

  ``duration`` (hours, finite and > 0) defaults to the horizon.
  """
  check_params(params)
  if duration is None:
    duration = params.horizon
  duration = _checks.check_real("duration", duration, low=0, low_open=True)
  slots = SLOT_HEADROOM * params.peak_intensity * duration
  if slots >= 2**31 - 1:
    raise ValueError(f"duration={duration} makes more than 2**31 candidate"
                     " arrivals.")
  return max(1, math.ceil(slots))


def check_params(params) -> None:
  """Raises ``TypeError`` unless ``params`` is an :class:`EnvParams`."""
  if not isinstance(params, EnvParams):
    raise TypeError(f"params must be an EnvParams; got {type(params).__name__}.")


def intensity(time: jax.Array, params: EnvParams) -> jax.Array:
  """:math:`\\lambda(t)`, arrivals per hour."""
  check_params(params)
  phase = 2 * jnp.pi * time / params.period
  return params.base_intensity * (1 + params.intensity_amplitude * jnp.sin(phase))


def integrated_intensity(start: float, end: float, params: EnvParams) -> float:
  """:math:`\\int_s^e \\lambda(t)\\,dt`, the expected arrival count (closed form)."""
  check_params(params)
  w = 2 * math.pi / params.period
  return params.base_intensity * (
      (end - start) + params.intensity_amplitude
      * (math.cos(w * start) - math.cos(w * end)) / w)


def competing_log_mean(time: jax.Array, params: EnvParams) -> jax.Array:
  r""":math:`\mu_D(t) = \mu_D + a_D \sin(2\pi t / P)`, log-mean of the competing bid (any shape of t)."""
  check_params(params)
  phase = 2 * jnp.pi * time / params.period
  return params.competing_log_mean + params.competing_log_amplitude * jnp.sin(phase)


def win_probability(bid: jax.Array, time: jax.Array, params: EnvParams
                    ) -> jax.Array:
  """:math:`G_t(b) = P(\\max(D_t, r) \\le b)`, the known competition CDF.

  A NaN bid never wins (0), as in :func:`step`.
  """
  check_params(params)
  safe_bid = jnp.maximum(bid, 1e-30)
  z = (jnp.log(safe_bid) - competing_log_mean(time, params)) / params.competing_log_std
  cdf = jax.scipy.stats.norm.cdf(z)
  return jnp.where((bid > 0) & (bid >= params.reserve), cdf, jnp.zeros_like(cdf))


# ----------------------------------------------------------------- context --


class Context(NamedTuple):
  """A carry-over context: an element of the product monoid.

  Attributes:
    count: number of wins (float, exact for counts below 2**24).
    log_exposure: :math:`\\log \\sum_i e^{\\kappa t_i}` (``-inf``: no win).
    last_win: time of the last win (``-inf``: no win).
  """

  count: jax.Array
  log_exposure: jax.Array
  last_win: jax.Array


def identity_context(shape: tuple[int, ...] = ()) -> Context:
  """The monoid's identity (no wins), of batch ``shape``."""
  return Context(jnp.zeros(shape), jnp.full(shape, -jnp.inf),
                 jnp.full(shape, -jnp.inf))


def win_context(time: jax.Array, params: EnvParams) -> Context:
  """The monoid element of one win at ``time``."""
  check_params(params)
  time = jnp.asarray(time, jnp.float32)
  return Context(jnp.ones_like(time), params.exposure_decay * time, time)


def combine(a: Context, b: Context) -> Context:
  """The monoid operation (commutative and associative), elementwise."""
  return Context(a.count + b.count, jnp.logaddexp(a.log_exposure, b.log_exposure),
                 jnp.maximum(a.last_win, b.last_win))


def context_prefix(win_times: jax.Array, won: jax.Array, params: EnvParams
                   ) -> Context:
  """Inclusive prefix contexts of a win sequence, by ``lax.associative_scan``.

  Args:
    win_times: ``[n]`` event times.
    won: ``[n]`` booleans; events with False contribute the identity.
    params: the environment (for :math:`\\kappa`).

  Returns:
    ``Context`` of ``[n]`` arrays: entry ``i`` folds events ``0..i``.
  """
  check_params(params)
  times_shape, won_shape = jnp.shape(win_times), jnp.shape(won)
  if len(times_shape) != 1 or times_shape != won_shape:
    raise ValueError("win_times and won must be 1-D of one length (vmap over"
                     f" episodes); got {times_shape} and {won_shape}.")
  if jnp.result_type(won) != jnp.bool_:
    raise TypeError(f"won must be booleans; got {jnp.result_type(won)}.")
  if not jnp.issubdtype(jnp.result_type(win_times), jnp.floating):
    raise TypeError(f"win_times must be floating; got {jnp.result_type(win_times)}.")
  # The scan slices its axis with strides, which Explicit mesh axes refuse
  # on a sharded axis: it runs on gathered copies, and the prefixes get the
  # sharding of ``win_times`` back.
  (times, mask), _ = tree_lib.gather_explicit((win_times, won))
  elements = win_context(times, params)
  # The scalar identity broadcasts to the mask's sharding, which a selection
  # needs on Explicit mesh axes.
  elements = jax.tree.map(lambda w, e: jnp.where(mask, w, e), elements,
                          identity_context())
  prefix = jax.lax.associative_scan(combine, elements)
  return jax.tree.map(lambda x: tree_lib.reshard_like(x, win_times), prefix)


def exposure(context: Context, time: jax.Array, params: EnvParams) -> jax.Array:
  """Current saturation measure: :math:`e^{-\\kappa t} S`, or the win count."""
  check_params(params)
  if params.saturation_measure == "count":
    return context.count
  return jnp.exp(context.log_exposure - params.exposure_decay * time)


def kernel(context: Context, time: jax.Array, params: EnvParams) -> jax.Array:
  """:math:`K(c, t) = g(E) h(\\Delta)`, with each factor 1 when its effect is off."""
  check_params(params)
  out = jnp.ones_like(jnp.asarray(time, jnp.float32))
  if params.saturation:
    out = out / (1 + params.saturation_strength * exposure(context, time, params))
  if params.recency:
    since = time - context.last_win  # +inf before the first win: h = 1
    out = out * -jnp.expm1(-since / params.recency_time)
  return out


# ---------------------------------------------------------------- arrivals --


class Arrivals(NamedTuple):
  """Candidate arrivals, valid ones first in time order (shape ``[n]`` each).

  Invalid slots have value 0 and an infinite competing bid: nothing to win.
  """

  time: jax.Array
  valid: jax.Array
  value: jax.Array
  competing_bid: jax.Array
  delay: jax.Array


def sample_arrivals(key: jax.Array, params: EnvParams, start: jax.Array,
                    duration: float, slots: int) -> Arrivals:
  """Arrivals in ``[start, start + duration)`` by thinning, with their draws.

  Candidates are a rate-:math:`\\lambda_{max}` Poisson process (cumulated
  exponential gaps); candidate ``t`` is kept with probability
  :math:`\\lambda(t)/\\lambda_{max}`. ``slots`` is a static int >= 1 and
  ``duration`` a finite number of hours > 0 (checked when concrete).
  """
  check_params(params)
  slots = _checks.check_int("slots", slots, 1)
  if _checks.is_concrete(duration):
    duration = _checks.check_real("duration", duration, low=0, low_open=True)
  gap_key, keep_key, value_key, bid_key, delay_key = jax.random.split(key, 5)
  times = start + jnp.cumsum(
      jax.random.exponential(gap_key, (slots,)) / params.peak_intensity)
  keep = (jax.random.uniform(keep_key, (slots,)) * params.peak_intensity
          < intensity(times, params))
  valid = keep & (times < start + duration)
  order = jnp.argsort(jnp.where(valid, times, jnp.inf), stable=True)
  times, valid = times[order], valid[order]
  value = jnp.exp(params.value_log_mean + params.value_log_std
                  * jax.random.normal(value_key, (slots,)))
  competing = jnp.exp(competing_log_mean(times, params) + params.competing_log_std
                      * jax.random.normal(bid_key, (slots,)))
  delay = (params.mean_delay * jax.random.exponential(delay_key, (slots,))
           if params.delay else jnp.zeros((slots,)))
  end = start + duration
  return Arrivals(jnp.where(valid, times, end), valid,
                  jnp.where(valid, value, 0.0),
                  jnp.where(valid, competing, jnp.inf), delay)


class Outcome(NamedTuple):
  """What one auction did: whether the buyer won, the realised value, the payment, the new context."""

  won: jax.Array
  value: jax.Array  # realised value v K(c, t) (0 if lost)
  payment: jax.Array
  context: Context  # after this arrival


def resolve(context: Context, time: jax.Array, value: jax.Array,
            competing_bid: jax.Array, bid: jax.Array, valid: jax.Array,
            params: EnvParams) -> Outcome:
  """One auction: win iff ``bid >= max(D, r)``; pay; update the context."""
  check_params(params)
  price = jnp.maximum(competing_bid, params.reserve)
  won = valid & (bid >= price) & (bid > 0)
  paid = bid if params.format == "first" else price
  realised = value * kernel(context, time, params)
  realised = jnp.where(won, realised, jnp.zeros_like(realised))
  new = combine(context, win_context(time, params))
  new = jax.tree.map(lambda n, o: jnp.where(won, n, o), new, context)
  return Outcome(won, realised, jnp.where(won, paid, jnp.zeros_like(paid)), new)


# ---------------------------------------------------------- gymnax-like API --


class Observation(NamedTuple):
  """What the buyer sees before bidding on the current arrival.

  ``kernel`` is :math:`K(c_{t^-}, t)`, a function of the buyer's own wins;
  ``revealed_utility`` counts only rewards already revealed.
  """

  time: jax.Array
  value: jax.Array
  valid: jax.Array
  context: Context
  kernel: jax.Array
  revealed_utility: jax.Array


class EnvState(NamedTuple):
  """The environment between steps: the episode's pre-drawn arrivals (``[n]`` padded slots), the
  carry-over context and the delayed-reward bookkeeping.

  A won value is revealed at the first step whose arrival time is at or
  after its reveal time. That step is known at reset for every slot
  (``reveal_step``, a search of the sorted arrival times), so a win adds its
  value to ``pending`` at that step and each step reads one entry: O(1) per
  step, where summing the revealed slots would be O(n).
  """

  index: jax.Array  # the current candidate slot: the steps taken (at most n)
  arrivals: Arrivals
  num_valid: jax.Array
  context: Context
  reveal_step: jax.Array  # [n] int32: the step that reveals each slot's value
  pending: jax.Array  # [n + 1] won value awaiting each step (n: after the last)
  revealed_value: jax.Array  # sum of values revealed so far
  won_value: jax.Array  # sum of realised values won so far (revealed or not)
  payments: jax.Array
  utility: jax.Array  # realised utility so far (revealed or not): the return


class _Books(NamedTuple):
  """An episode's delayed-reward bookkeeping: the last five fields of :class:`EnvState`."""

  pending: jax.Array
  revealed_value: jax.Array
  won_value: jax.Array
  payments: jax.Array
  utility: jax.Array


def _observation(time: jax.Array, value: jax.Array, valid: jax.Array,
                 context: Context, books: _Books, params: EnvParams
                 ) -> Observation:
  """What the buyer sees of an arrival (its ``time``, ``value``, ``valid``) given the episode so far."""
  return Observation(time, value, valid, context, kernel(context, time, params),
                     books.revealed_value - books.payments)


def _book(books: _Books, outcome: Outcome, reveal_step: jax.Array,
          index: jax.Array, num_valid: jax.Array, active: jax.Array
          ) -> tuple[_Books, jax.Array, jax.Array]:
  """Records one arrival's outcome; returns the books, the step reward and ``done``.

  The won value goes to the step that reveals it (no earlier than
  ``index``, the step after this one: a zero delay reveals it at once); the
  step reward is what that reveals minus the payment, and everything left
  is revealed at ``done``. An inactive step adds 0 and reads nothing.
  """
  pending = books.pending.at[jnp.maximum(reveal_step, index)].add(outcome.value)
  won_value = books.won_value + outcome.value
  done = index >= num_valid
  newly_revealed = jnp.where(active, pending[index],
                             jnp.zeros_like(outcome.value))
  revealed = jnp.where(done, won_value, books.revealed_value + newly_revealed)
  reward = revealed - books.revealed_value - outcome.payment
  reward = jnp.where(active, reward, jnp.zeros_like(reward))
  utility = outcome.value - outcome.payment
  return _Books(pending, revealed, won_value, books.payments + outcome.payment,
                books.utility + utility), reward, done


def _observe(state: EnvState, params: EnvParams) -> Observation:
  i = jnp.minimum(state.index, state.arrivals.time.shape[0] - 1)
  valid = state.arrivals.valid[i] & (state.index < state.num_valid)
  return _observation(state.arrivals.time[i], state.arrivals.value[i], valid,
                      state.context, _Books(*state[5:]), params)


def _count_below(sorted_values: jax.Array, queries: jax.Array) -> jax.Array:
  """``searchsorted(sorted_values, queries, side="left")``: how many values are below each query.

  A branch-free binary search unrolled at trace time. ``jnp.searchsorted``
  loops with a ``lax.scan`` whose constant start, under ``vmap`` over an
  Explicit mesh axis, jax 0.10 refuses ("not found in mesh").
  """
  n = sorted_values.shape[0]
  count = jnp.zeros_like(queries, dtype=jnp.int32)
  step = 1 << (n.bit_length() - 1)
  while step:
    candidate = count + step
    below = sorted_values[jnp.minimum(candidate, n) - 1] < queries
    count = jnp.where((candidate <= n) & below, candidate, count)
    step //= 2
  return count


def reset(key: jax.Array, params: EnvParams) -> tuple[Observation, EnvState]:
  """Draws an episode; returns the first observation and the state."""
  check_params(params)
  slots = num_slots(params)
  arrivals = sample_arrivals(key, params, jnp.float32(0.0), params.horizon, slots)
  zero = jnp.float32(0.0)
  reveal_step = _count_below(arrivals.time, arrivals.time + arrivals.delay)
  state = EnvState(jnp.int32(0), arrivals, jnp.sum(arrivals.valid, dtype=jnp.int32),
                   identity_context(), reveal_step, jnp.zeros((slots + 1,)),
                   zero, zero, zero, zero)
  # Episode loops carry the state (see tree.on_context_mesh).
  state = tree_lib.on_context_mesh(state)
  return _observe(state, params), state


def step(key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
         ) -> tuple[Observation, EnvState, jax.Array, jax.Array, dict[str, Any]]:
  """Bids ``action`` on the current arrival; a no-op once the episode is done.

  ``action`` is one real bid (a scalar); a bid below the competing bid and
  the reserve (a negative or NaN one included) loses.

  Returns:
    ``(obs, state, reward, done, info)``: ``reward`` is the revealed value
    since the last step minus this payment (all the rest at ``done``);
    ``info`` has ``won``, ``payment`` and ``utility`` (this arrival's
    realised value minus payment, revealed or not).
  """
  del key  # the episode's randomness was drawn at reset
  check_params(params)
  bid = jnp.asarray(action)
  if bid.shape != () or not jnp.issubdtype(bid.dtype, jnp.number) or (
      jnp.issubdtype(bid.dtype, jnp.complexfloating)):
    raise ValueError("action must be one real bid (a scalar; vmap over"
                     f" episodes for a batch); got {bid.dtype}{list(bid.shape)}.")
  if state.arrivals.time.ndim != 1:
    raise ValueError(f"state is a batch of episodes (arrival slots of shape"
                     f" {state.arrivals.time.shape}): vmap step over episodes.")
  if state.arrivals.time.shape != (num_slots(params),):
    raise ValueError(f"state holds {state.arrivals.time.shape[0]} arrival"
                     f" slots but params make {num_slots(params)}: pass the"
                     " params the state was reset with.")
  a = state.arrivals
  slots = a.time.shape[0]
  i = jnp.minimum(state.index, slots - 1)
  active = state.index < state.num_valid
  out = resolve(state.context, a.time[i], a.value[i], a.competing_bid[i],
                jnp.asarray(action, jnp.float32), a.valid[i] & active, params)
  # The index advances on every step, past the valid arrivals too (those
  # steps are no-ops), so it does not depend on the episode: under ``vmap``
  # of a plain ``lax.scan`` it stays one number and the reads of the
  # arrivals are slices. (Under ``scan_episode``'s while loop, whose end
  # depends on the episode, vmap batches it again and the reads are gathers.)
  index = jnp.minimum(state.index + 1, slots)
  books, reward, done = _book(_Books(*state[5:]), out, state.reveal_step[i],
                              index, state.num_valid, active)
  state = EnvState(index, a, state.num_valid, out.context, state.reveal_step,
                   *books)
  return _observe(state, params), state, reward, done, {
      "won": out.won, "payment": out.payment,
      "utility": out.value - out.payment}


# Steps per chunk of :func:`scan_episode`: at most this many steps past the
# last valid arrival run, and the chunk loop's bookkeeping (under ``vmap``, a
# selection over its carry) is paid once per chunk.
EPISODE_CHUNK = 64


def scan_episode(body: Callable[[tuple[Observation, EnvState], Any],
                                tuple[tuple[Observation, EnvState], Any]],
                 obs: Observation, state: EnvState, xs: Any = None, *,
                 chunk: int = EPISODE_CHUNK
                 ) -> tuple[tuple[Observation, EnvState], Any]:
  """``lax.scan(body, (obs, state), xs)`` over the slots, stopping after the valid arrivals.

  An episode has ``n = num_slots(params)`` slots, of which ``num_valid``
  (about 1/1.3 of ``n`` by the thinning's headroom) are arrivals; a step
  past them is a no-op. This runs the scan in chunks of ``chunk`` steps in
  a ``lax.while_loop`` that ends after the chunk holding the last valid
  arrival (under ``vmap``, the last of the batch), so the padding costs at
  most ``chunk - 1`` steps instead of ``n - num_valid``. The episode's
  arrivals stay out of the loop's carry: they are read-only.

  Args:
    body: ``((obs, state), x) -> ((obs, state), y)``, one step of the
      episode (it calls :func:`step`).
    obs, state: the episode before its first step (from :func:`reset`).
    xs: per-slot inputs with leading axis ``n`` (e.g. step keys), or None.
    chunk: steps per chunk (a static int >= 1).

  Returns:
    ``((obs, state), ys)`` as ``lax.scan`` returns them, except that the
    entries of ``ys`` past the steps run are zeros.

  Reference: the thinning that pads the slots is Lewis & Shedler (1979),
  "Simulation of nonhomogeneous Poisson processes by thinning", Naval
  Research Logistics Quarterly 26(3); the environment is our reconstruction
  of DynamAuction (see this module's docstring).
  """
  chunk = _checks.check_int("chunk", chunk, 1)
  slots = state.arrivals.time.shape[0]
  num_chunks = -(-slots // chunk)
  padded = num_chunks * chunk
  # Padded steps take the first slot's inputs; they run past the arrivals.
  xs = jax.tree.map(lambda x: jnp.concatenate(
      [x, jnp.repeat(x[:1], padded - slots, axis=0)]), xs)
  read_only = (state.arrivals, state.reveal_step)
  strip = lambda s: s._replace(arrivals=None, reveal_step=None)
  fill = lambda s: s._replace(arrivals=read_only[0], reveal_step=read_only[1])
  x0 = None if xs is None else jax.tree.map(lambda x: x[0], xs)
  y_shapes = jax.eval_shape(lambda c, x: body(c, x)[1], (obs, state), x0)
  ys = jax.tree.map(lambda s: jnp.zeros((padded,) + s.shape, s.dtype), y_shapes)

  def running(carry):
    c, _, _, _ = carry
    return (c < num_chunks) & (c * chunk < state.num_valid)

  def one_chunk(carry):
    c, obs, stripped, ys = carry
    start = c * chunk
    x = jax.tree.map(
        lambda a: jax.lax.dynamic_slice_in_dim(a, start, chunk), xs)
    (obs, full), y = jax.lax.scan(body, (obs, fill(stripped)), x, length=chunk)
    ys = jax.tree.map(
        lambda b, u: jax.lax.dynamic_update_slice_in_dim(b, u, start, 0), ys, y)
    return c + 1, obs, strip(full), ys

  # The chunk counter is a scalar constant (see tree.on_context_mesh).
  init = tree_lib.on_context_mesh((jnp.int32(0), obs, strip(state), ys))
  _, obs, stripped, ys = jax.lax.while_loop(running, one_chunk, init)
  return (obs, fill(stripped)), jax.tree.map(lambda b: b[:slots], ys)
