r"""Auxiliary router losses of EMO / OLMoE: load balancing and z-loss.

Load balancing (Switch / OLMoE form), for E routed experts and k per token:

.. math::

   L_{lb} = \frac{E}{k} \sum_i f_i \bar P_i, \qquad
   f_i = \frac{c_i}{N}, \qquad \bar P_i = \mathrm{mean}_t\, p_{t,i}

with ``c_i`` the number of top-k selections of expert i (no gradient) and
``p`` the routing probabilities (pool-renormalised under EMO). A perfectly
balanced router gives ``L_lb = 1``. As in the authors' code, ``c`` and ``N``
are summed over the data-parallel axis (balancing is *global*), while
``P̄`` stays local; averaging the per-shard losses over the data axis then
gives exactly the unsharded loss.

Router z-loss: ``L_z = mean_t logsumexp(z'_t)^2`` of the (pool-masked) routed
logits.

References:
  Fedus et al., "Switch Transformers", JMLR 2022; Muennighoff et al.,
  "OLMoE", 2024; Zoph et al., "ST-MoE", 2022 (z-loss); Wang et al., "EMO",
  arXiv:2605.06663, 2026.
"""

import jax
import jax.numpy as jnp


def load_balance_loss(probs_BxLxE: jax.Array, experts_BxLxK: jax.Array, *,
                      data_axis: str | None = None) -> jax.Array:
  """``(E/k) * sum_i f_i * mean_t p_{t,i}``, with counts global over ``data_axis``.

  Args:
    probs_BxLxE: routing probabilities (gradients flow through these).
    experts_BxLxK: chosen experts (counted without gradient).
    data_axis: inside ``shard_map`` over data, the mesh axis to sum the
      counts and token numbers over (global balancing); None on one shard.

  Returns:
    The scalar loss of this shard (1 for a perfectly balanced router).

  Example:
    >>> import jax.numpy as jnp
    >>> probs = jnp.full((1, 4, 4), 0.25)
    >>> experts = jnp.array([[[0, 1], [2, 3], [0, 1], [2, 3]]])
    >>> float(load_balance_loss(probs, experts))
    1.0
  """
  batch, length, num_experts = probs_BxLxE.shape
  if experts_BxLxK.shape[:2] != (batch, length):
    raise ValueError(
        f"experts must have shape (B, L, k) with (B, L) = {(batch, length)},"
        f" got {experts_BxLxK.shape}."
    )
  k = experts_BxLxK.shape[-1]
  counts_E = jnp.zeros((num_experts,), jnp.float32).at[
      experts_BxLxK.reshape(-1)].add(1.0)
  num_tokens = jnp.float32(batch * length)
  if data_axis is not None:
    counts_E = jax.lax.psum(counts_E, data_axis)
    num_tokens = jax.lax.psum(num_tokens, data_axis)
  fraction_E = jax.lax.stop_gradient(counts_E / num_tokens)
  mean_probs_E = jnp.mean(probs_BxLxE.astype(jnp.float32), axis=(0, 1))
  return (num_experts / k) * jnp.sum(fraction_E * mean_probs_E)


def router_z_loss(logits_BxLxE: jax.Array) -> jax.Array:
  """``mean_t logsumexp(logits_t)^2`` (``-inf`` entries are masked experts).

  Example:
    >>> import jax.numpy as jnp
    >>> float(router_z_loss(jnp.zeros((1, 2, 4))))  # (log 4)^2
    1.921...
  """
  lse = jax.nn.logsumexp(logits_BxLxE.astype(jnp.float32), axis=-1)
  return jnp.mean(lse ** 2)
