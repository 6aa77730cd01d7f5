r"""The DP oracle: exact optimal bidding in the count-only second-price setting.

Setting: second price, saturation by the win count :math:`g(n) = 1/(1 +
\alpha n)`, no recency, stationary competition (so the kernel and the
competing-bid law do not depend on time); the oracle knows how many
arrivals the episode has (not their values). Value iteration over the
number ``k`` of remaining arrivals, with the item value observed before
bidding:

.. math::

  V_k(n) = E_v\big[F\big(v g(n) + V_{k-1}(n+1) - V_{k-1}(n)\big)\big]
           + V_{k-1}(n), \qquad V_0 = 0,

where :math:`F(w) = E[(w - \max(D, r))^+] = \int_r^{w} G(x)\,dx` (closed form
for a lognormal :math:`D`) and :math:`E_v` is Gauss-Hermite quadrature.
The optimal bid with ``k`` arrivals left (this one included) and ``n``
wins is

.. math:: b^* = v g(n) + V_{k-1}(n+1) - V_{k-1}(n) \le \nu = v g(n),

since a win never raises future value (:math:`V_{k-1}` is non-increasing in
``n``). With :math:`\alpha = 0` the oracle is truthful bidding.

**Reconstruction**: the DynamAuction abstract does not state an oracle; the
recursion is the standard one for second-price bidding with a state-
dependent continuation value (cf. arXiv 2308.01755, which solves the
time-since-last-purchase case by DP).

Example::

  params = environment.EnvParams(saturation_measure="count", recency=False,
                                 competing_log_amplitude=0.0)
  values = value_table(params, max_arrivals=50)

References:
  Bellman, *Dynamic Programming* (1957); https://arxiv.org/abs/2308.01755.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _myopic as myopic

QUADRATURE_NODES = 48


def check_setting(params: env_lib.EnvParams) -> None:
  """Raises ``ValueError`` unless ``params`` is the oracle's setting."""
  env_lib.check_params(params)
  problems = []
  if params.format != "second":
    problems.append(f"format='second' (got {params.format!r})")
  if params.recency:
    problems.append("recency=False")
  if params.saturation and params.saturation_measure != "count":
    problems.append("saturation_measure='count' (or saturation=False)")
  if params.competing_log_amplitude != 0:
    problems.append("competing_log_amplitude=0 (stationary competition)")
  if problems:
    raise ValueError("the DP oracle is defined only for count-only saturation"
                     " in a second-price auction; params needs "
                     + ", ".join(problems) + ".")


def lognormal_quadrature(log_mean: float, log_std: float,
                         num_nodes: int = QUADRATURE_NODES
                         ) -> tuple[np.ndarray, np.ndarray]:
  """Nodes and weights of :math:`E f(v)` for :math:`v \\sim LogNormal`.

  ``log_mean`` finite, ``log_std`` finite and > 0, ``num_nodes`` an int >= 1.
  """
  _checks.check_real("log_mean", log_mean)
  _checks.check_real("log_std", log_std, low=0, low_open=True)
  num_nodes = _checks.check_int("num_nodes", num_nodes, 1)
  z, w = np.polynomial.hermite_e.hermegauss(num_nodes)
  return np.exp(log_mean + log_std * z), w / math.sqrt(2 * math.pi)


def expected_surplus(w: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  """:math:`F(w) = E[(w - \\max(D, r))^+]`, lognormal :math:`D` (closed form).

  NaN at a NaN ``w`` (not 0, which would read as "nothing to gain").
  """
  env_lib.check_params(params)
  mu, sigma = params.competing_log_mean, params.competing_log_std

  def integral_of_cdf(x):  # int_0^x G = x G(x) - E[D; D <= x]
    safe = jnp.maximum(x, 1e-30)
    d = (jnp.log(safe) - mu) / sigma
    out = (x * jax.scipy.stats.norm.cdf(d)
           - math.exp(mu + sigma ** 2 / 2) * jax.scipy.stats.norm.cdf(d - sigma))
    # "x <= 0" rather than "x > 0": a NaN x stays NaN instead of 0.
    return jnp.where(x <= 0, 0.0, out)

  r = jnp.float32(params.reserve)
  return jnp.where(w <= r, 0.0, integral_of_cdf(w) - integral_of_cdf(r))


def saturation(count: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  r"""Count-only saturation :math:`1 / (1 + \alpha n)` after n wins (1 with saturation off)."""
  env_lib.check_params(params)
  return (1 / (1 + params.saturation_strength * count) if params.saturation
          else jnp.ones_like(count))


def value_table(params: env_lib.EnvParams, max_arrivals: int, *,
                value_nodes: np.ndarray | None = None,
                value_weights: np.ndarray | None = None) -> jax.Array:
  r"""``V[k, n]``, ``k = 0..K`` arrivals left and ``n = 0..K+1`` wins: ``[K+1, K+2]``.

  ``K = max_arrivals``. Every entry is the exact recursion (up to float32
  rounding and the value quadrature). :math:`V_k(n)` reads
  :math:`V_{k-j}(n+j)` for :math:`j \le k`, i.e. counts up to
  :math:`n + k \le 2K + 1`, so the recursion runs on ``2K + 2`` counts and
  the table keeps the first ``K + 2``; on ``K + 2`` counts alone the entries
  with ``k + n > K + 1`` would rest on a truncated column. That doubles the
  work of a table on ``K + 2`` counts: O(K^2) quadrature evaluations.

  Args:
    params: the oracle's setting (:func:`check_setting`).
    max_arrivals: ``K``, a non-negative int.
    value_nodes, value_weights: a discrete value law (both or neither):
      finite nodes >= 0 and finite weights >= 0 summing to 1, of one
      length; they replace the lognormal quadrature (e.g. in tests).
      Checked when concrete; traced ones are used as given.
  """
  check_setting(params)
  max_arrivals = _checks.check_int("max_arrivals", max_arrivals, 0)
  if (value_nodes is None) != (value_weights is None):
    raise ValueError("value_nodes and value_weights go together: pass both"
                     " (a discrete value law) or neither (the lognormal).")
  if value_nodes is None:
    value_nodes, value_weights = lognormal_quadrature(
        params.value_log_mean, params.value_log_std)
  else:
    _check_value_law(value_nodes, value_weights)
  nodes = jnp.asarray(value_nodes, jnp.float32)
  weights = jnp.asarray(value_weights, jnp.float32)
  width = 2 * max_arrivals + 2
  g = saturation(jnp.arange(width, dtype=jnp.float32), params)

  def backup(previous, _):
    gain = previous[1:] - previous[:-1]  # V_{k-1}(n+1) - V_{k-1}(n)
    surplus = expected_surplus(nodes[:, None] * g[None, :-1] + gain[None, :],
                               params)
    # On Explicit mesh axes a sum over sharded quadrature nodes is reduced
    # across devices.
    current = jnp.matmul(weights, surplus,
                         out_sharding=tree.contraction_spec(weights))
    current = current + previous[:-1]
    # The last count has no successor: after k backups the columns past
    # 2K + 1 - k rest on this pad, and the table keeps only n <= K + 1.
    current = jnp.concatenate([current, current[-1:]])
    return current, current[:max_arrivals + 2]

  zero = jnp.zeros((width,))
  _, rest = jax.lax.scan(backup, zero, None, length=max_arrivals)
  return jnp.concatenate([zero[None, :max_arrivals + 2], rest])


def _check_value_law(value_nodes, value_weights) -> None:
  """Named errors for a concrete discrete value law that is not one."""
  if any(isinstance(x, jax.core.Tracer) for x in (value_nodes, value_weights)):
    return
  nodes = np.asarray(value_nodes)
  weights = np.asarray(value_weights)
  for name, x in (("value_nodes", nodes), ("value_weights", weights)):
    if (x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.number)
        or np.iscomplexobj(x)):
      raise ValueError(f"{name} must be a non-empty 1-D real array; got"
                       f" {x.dtype}{list(x.shape)}.")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
      raise ValueError(f"{name} must be finite and >= 0; got {x}.")
  if nodes.shape != weights.shape:
    raise ValueError(f"value_nodes {nodes.shape} and value_weights"
                     f" {weights.shape} must have one length.")
  # A law's weights sum to 1; the tolerance covers float32 weights.
  if abs(float(np.sum(weights, dtype=np.float64)) - 1.0) > 1e-4:
    raise ValueError("value_weights must sum to 1 (a probability law); got"
                     f" {float(np.sum(weights, dtype=np.float64))}.")


def oracle_bid(values: jax.Array, value: jax.Array, count: jax.Array,
               remaining: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  """:math:`b^* = v g(n) + V_{k-1}(n+1) - V_{k-1}(n)` with ``k = remaining``.

  ``values`` is a :func:`value_table` ``[K+1, K+2]``. Where the table does
  not reach the state (``remaining - 1 > K`` or ``count > K``, i.e. it was
  built for fewer arrivals than the episode has) the bid is NaN rather than
  one read from a clamped index.
  """
  env_lib.check_params(params)
  _check_table(values)
  values = jnp.asarray(values)
  k = jnp.maximum(remaining - 1, 0)
  max_arrivals = values.shape[0] - 1
  covered = (k <= max_arrivals) & (count <= max_arrivals)
  k = jnp.minimum(k, max_arrivals)
  n = jnp.clip(count.astype(jnp.int32), 0, max_arrivals)
  k, n = jnp.broadcast_arrays(k, n)
  bid = (value * saturation(count, params) + tree.lookup(values, k, n + 1)
         - tree.lookup(values, k, n))
  return jnp.where(covered, bid, jnp.full_like(bid, jnp.nan))


def _check_table(values) -> None:
  shape = jnp.shape(values)
  if len(shape) != 2 or shape[1] != shape[0] + 1:
    raise ValueError("values must be a value_table of shape [K+1, K+2]; got"
                     f" {shape}.")


class OracleEpisode(NamedTuple):
  """An episode under the DP oracle: its return, its bids and the myopic valuations beside them."""

  episode_return: jax.Array  # NaN if a bid was NaN (e.g. a table too small)
  bids: jax.Array  # [n]
  valuations: jax.Array  # [n] myopic valuations nu at the same steps


def run_oracle_from(state: env_lib.EnvState, obs: env_lib.Observation,
                    values: jax.Array, params: env_lib.EnvParams
                    ) -> OracleEpisode:
  """The oracle on an episode already reset (``values`` from :func:`value_table`).

  ``values`` should cover the episode's slots (``value_table(params,
  num_slots(params))``); where a smaller table leaves a state uncovered the
  bid is NaN (:func:`oracle_bid`), and a NaN bid on a valid arrival makes
  ``episode_return`` NaN instead of a lost auction.
  """
  check_setting(params)
  _check_table(values)
  def body(carry, _):
    obs, state = carry
    bid = oracle_bid(values, obs.value, obs.context.count,
                     state.num_valid - state.index, params)
    bid = jnp.where(obs.valid, bid, jnp.zeros_like(bid))
    nu = myopic.myopic_valuation(obs, params)
    obs, state, *_ = env_lib.step(jax.random.key(0), state, bid, params)
    return (obs, state), (bid, nu)

  (_, state), (bids, nus) = env_lib.scan_episode(body, obs, state)
  episode_return = jnp.where(jnp.any(jnp.isnan(bids)),
                             jnp.full_like(state.utility, jnp.nan),
                             state.utility)
  return OracleEpisode(episode_return, bids, nus)
