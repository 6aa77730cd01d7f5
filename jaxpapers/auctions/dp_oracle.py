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
from jaxpapers.auctions import environment as env_lib
from jaxpapers.auctions import myopic

QUADRATURE_NODES = 48


def check_setting(params: env_lib.EnvParams) -> None:
  """Raises ``ValueError`` unless ``params`` is the oracle's setting."""
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
  """Nodes and weights of :math:`E f(v)` for :math:`v \\sim LogNormal`."""
  z, w = np.polynomial.hermite_e.hermegauss(num_nodes)
  return np.exp(log_mean + log_std * z), w / math.sqrt(2 * math.pi)


def expected_surplus(w: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  """:math:`F(w) = E[(w - \\max(D, r))^+]`, lognormal :math:`D` (closed form)."""
  mu, sigma = params.competing_log_mean, params.competing_log_std

  def integral_of_cdf(x):  # int_0^x G = x G(x) - E[D; D <= x]
    safe = jnp.maximum(x, 1e-30)
    d = (jnp.log(safe) - mu) / sigma
    out = (x * jax.scipy.stats.norm.cdf(d)
           - math.exp(mu + sigma ** 2 / 2) * jax.scipy.stats.norm.cdf(d - sigma))
    return jnp.where(x > 0, out, 0.0)

  r = jnp.float32(params.reserve)
  return jnp.where(w > r, integral_of_cdf(w) - integral_of_cdf(r), 0.0)


def saturation(count: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  r"""Count-only saturation :math:`1 / (1 + \alpha n)` after n wins (1 with saturation off)."""
  return (1 / (1 + params.saturation_strength * count) if params.saturation
          else jnp.ones_like(count))


def value_table(params: env_lib.EnvParams, max_arrivals: int, *,
                value_nodes: np.ndarray | None = None,
                value_weights: np.ndarray | None = None) -> jax.Array:
  """``V[k, n]`` for ``k, n`` in ``0..max_arrivals`` (``[K+1, K+2]``).

  ``value_nodes``/``value_weights`` replace the lognormal quadrature (e.g. a
  discrete value law in tests). Column ``K+1`` is a never-reached pad.
  """
  check_setting(params)
  if max_arrivals < 0:
    raise ValueError(f"max_arrivals must be >= 0; got {max_arrivals}.")
  if value_nodes is None:
    value_nodes, value_weights = lognormal_quadrature(
        params.value_log_mean, params.value_log_std)
  nodes = jnp.asarray(value_nodes, jnp.float32)
  weights = jnp.asarray(value_weights, jnp.float32)
  g = saturation(jnp.arange(max_arrivals + 2, dtype=jnp.float32), params)

  def backup(previous, _):
    gain = previous[1:] - previous[:-1]  # V_{k-1}(n+1) - V_{k-1}(n)
    surplus = expected_surplus(nodes[:, None] * g[None, :-1] + gain[None, :],
                               params)
    # On Explicit mesh axes a sum over sharded quadrature nodes is reduced
    # across devices.
    current = jnp.matmul(weights, surplus,
                         out_sharding=tree.contraction_spec(weights))
    current = current + previous[:-1]
    current = jnp.concatenate([current, current[-1:]])
    return current, current

  zero = jnp.zeros((max_arrivals + 2,))
  _, rest = jax.lax.scan(backup, zero, None, length=max_arrivals)
  return jnp.concatenate([zero[None], rest])


def oracle_bid(values: jax.Array, value: jax.Array, count: jax.Array,
               remaining: jax.Array, params: env_lib.EnvParams) -> jax.Array:
  """:math:`b^* = v g(n) + V_{k-1}(n+1) - V_{k-1}(n)` with ``k = remaining``."""
  k = jnp.maximum(remaining - 1, 0)
  n = jnp.minimum(count.astype(jnp.int32), values.shape[1] - 2)
  k, n = jnp.broadcast_arrays(k, n)
  return (value * saturation(count, params) + tree.lookup(values, k, n + 1)
          - tree.lookup(values, k, n))


class OracleEpisode(NamedTuple):
  """An episode under the DP oracle: its return, its bids and the myopic valuations beside them."""

  episode_return: jax.Array
  bids: jax.Array  # [n]
  valuations: jax.Array  # [n] myopic valuations nu at the same steps


def run_oracle_from(state: env_lib.EnvState, obs: env_lib.Observation,
                    values: jax.Array, params: env_lib.EnvParams
                    ) -> OracleEpisode:
  """The oracle on an episode already reset (``values`` from :func:`value_table`)."""
  def body(carry, _):
    obs, state = carry
    bid = oracle_bid(values, obs.value, obs.context.count,
                     state.num_valid - state.index, params)
    bid = jnp.where(obs.valid, bid, 0.0)
    nu = myopic.myopic_valuation(obs, params)
    obs, state, *_ = env_lib.step(jax.random.key(0), state, bid, params)
    return (obs, state), (bid, nu)

  (_, state), (bids, nus) = jax.lax.scan(body, (obs, state), None,
                                         length=state.arrivals.time.shape[0])
  return OracleEpisode(state.utility, bids, nus)
