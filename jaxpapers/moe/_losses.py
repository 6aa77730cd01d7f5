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

:func:`training_loss` is the whole pretraining objective of the authors' code
(OLMo-core): next-token cross-entropy, an LM z-loss on the vocabulary logits,
and both router losses averaged over the MoE layers.

References:
  Fedus et al., "Switch Transformers", JMLR 2022; Muennighoff et al.,
  "OLMoE", 2024; Zoph et al., "ST-MoE", 2022 (z-loss); Wang et al., "EMO",
  arXiv:2605.06663, 2026.
"""

import math
from typing import Mapping

import jax
import jax.numpy as jnp

from jaxpapers import tree
from jaxpapers.models._transformer import next_token_loss
from jaxpapers.moe._dispatch import check_expert_ids


def load_balance_loss(probs_BxLxE: jax.Array, experts_BxLxK: jax.Array, *,
                      data_axis: str | None = None) -> jax.Array:
  """``(E/k) * sum_i f_i * mean_t p_{t,i}``, with counts global over ``data_axis``.

  Args:
    probs_BxLxE: routing probabilities (gradients flow through these).
    experts_BxLxK: chosen experts (counted without gradient).
    data_axis: inside ``shard_map`` over data, the mesh axis to sum the
      counts and token numbers over (global balancing); None on one shard.

  Returns:
    The scalar loss of this shard (1 for a perfectly balanced router). An
    expert id outside ``[0, E)`` is a ``ValueError`` when the ids are
    concrete; traced, it makes the loss NaN rather than be dropped.

  Example:
    >>> import jax.numpy as jnp
    >>> probs = jnp.full((1, 4, 4), 0.25)
    >>> experts = jnp.array([[[0, 1], [2, 3], [0, 1], [2, 3]]])
    >>> float(load_balance_loss(probs, experts))
    1.0
  """
  if probs_BxLxE.ndim != 3:
    raise ValueError(
        f"probs_BxLxE must have shape (B, L, E), got {probs_BxLxE.shape}.")
  batch, length, num_experts = probs_BxLxE.shape
  # (B, L) without the k axis would pass a prefix check with k read as L.
  if experts_BxLxK.ndim != 3 or experts_BxLxK.shape[:2] != (batch, length):
    raise ValueError(
        f"experts_BxLxK must have shape (B, L, k) with (B, L) ="
        f" {(batch, length)}, got {experts_BxLxK.shape}."
    )
  check_expert_ids(experts_BxLxK, num_experts, "experts_BxLxK")
  k = experts_BxLxK.shape[-1]
  ids = experts_BxLxK.reshape(-1)
  in_range = jnp.all((ids >= 0) & (ids < num_experts))
  # A one-hot sum rather than a scatter: its reduction over a sharded token
  # axis is defined on Explicit meshes (out-of-range ids are caught above).
  counts_E = jnp.sum(jax.nn.one_hot(ids, num_experts, dtype=jnp.float32),
                     axis=0)
  num_tokens = jnp.float32(batch * length)
  if data_axis is not None:
    counts_E = jax.lax.psum(counts_E, data_axis)
    num_tokens = jax.lax.psum(num_tokens, data_axis)
  fraction_E = jax.lax.stop_gradient(counts_E / num_tokens)
  mean_probs_E = jnp.mean(probs_BxLxE.astype(jnp.float32), axis=(0, 1))
  loss = (num_experts / k) * jnp.sum(fraction_E * mean_probs_E)
  return jnp.where(in_range, loss, jnp.nan)


def router_z_loss(logits_BxLxE: jax.Array) -> jax.Array:
  """``mean_t logsumexp(logits_t)^2`` (``-inf`` entries are masked experts).

  ``logits_BxLxE`` must be real floating ``(B, L, E)`` (``ValueError`` /
  ``TypeError`` otherwise); a token whose every expert is ``-inf`` gives an
  infinite loss.

  Example:
    >>> import jax.numpy as jnp
    >>> float(router_z_loss(jnp.zeros((1, 2, 4))))  # (log 4)^2
    1.921...
  """
  if jnp.ndim(logits_BxLxE) != 3:
    raise ValueError(
        f"logits_BxLxE must have shape (B, L, E), got {jnp.shape(logits_BxLxE)}.")
  tree.check_real_floating(logits_BxLxE, "logits_BxLxE")
  lse = jax.nn.logsumexp(logits_BxLxE.astype(jnp.float32), axis=-1)
  return jnp.mean(lse ** 2)


def training_loss(logits_BxLxV: jax.Array, targets_BxL: jax.Array,
                  aux: Mapping[str, jax.Array], *, num_layers: int,
                  lm_z_weight: float = 1e-5, load_balance_weight: float = 0.1,
                  router_z_weight: float = 0.001
                  ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """The pretraining objective of EMO / OLMoE-style MoE language models.

  ``CE + lm_z_weight * mean_t logsumexp(logits_t)^2 + (load_balance_weight /
  layers) * sum_l L_lb + (router_z_weight / layers) * sum_l L_z``; the
  default weights are those of the authors' code.

  Args:
    logits_BxLxV: the language model's next-token logits.
    targets_BxL: the next tokens.
    aux: ``load_balance`` and ``router_z`` summed over the MoE layers (as
      :class:`jaxpapers.models.Transformer` returns them).
    num_layers: the number of MoE layers the router losses are summed over.
    lm_z_weight: weight of the LM z-loss.
    load_balance_weight: weight of the layer-averaged load-balancing loss.
    router_z_weight: weight of the layer-averaged router z-loss.

  Raises:
    ValueError: for ``num_layers < 1``, a negative weight, ``aux`` without
      both router losses, or logits and targets of unlike ``(B, L)``.

  Returns:
    ``(total, parts)``: the scalar loss, and ``ce`` (nats per token) with the
    layer-averaged ``load_balance`` and ``router_z``.
  """
  if isinstance(num_layers, bool) or not isinstance(num_layers, int) or (
      num_layers < 1):
    raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}.")
  for name, weight in (("lm_z_weight", lm_z_weight),
                       ("load_balance_weight", load_balance_weight),
                       ("router_z_weight", router_z_weight)):
    # "not >= 0" refuses NaN too; inf would turn a zero loss into NaN.
    if not (weight >= 0 and math.isfinite(weight)):
      raise ValueError(f"{name} must be >= 0 and finite, got {weight}.")
  missing = sorted({"load_balance", "router_z"} - set(aux))
  if missing:
    raise ValueError(
        f"aux must hold 'load_balance' and 'router_z' (the MoE layers' sums);"
        f" missing {missing}.")
  ce = next_token_loss(logits_BxLxV, targets_BxL)
  lm_z = jnp.mean(
      jax.nn.logsumexp(logits_BxLxV.astype(jnp.float32), axis=-1) ** 2)
  total = (ce + lm_z_weight * lm_z
           + load_balance_weight / num_layers * aux["load_balance"]
           + router_z_weight / num_layers * aux["router_z"])
  return total, {"ce": ce, "load_balance": aux["load_balance"] / num_layers,
                 "router_z": aux["router_z"] / num_layers}
