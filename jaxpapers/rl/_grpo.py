r"""GRPO group-relative advantages and the PPO-clip policy loss over action tokens.

GRPO (Shao et al., 2024) replaces PPO's value baseline with the other samples
of the same task: for rewards :math:`R_i` in group :math:`g(i)`,

.. math::
  A_i = \frac{R_i - \operatorname{mean}_{g(i)} R}{\operatorname{std}_{g(i)} R
  + 10^{-6}}

(``std_normalize=True``; without it, :math:`A_i = R_i - \operatorname{mean}`).
The standard deviation is Bessel-corrected (``ddof=1``, PyTorch's
``torch.std`` default, which the GRPO implementations in verl and SkyRL
call); there is no batch-level normalisation. A group of size one has no
baseline: its advantage is **0** (documented value, never NaN), so it adds
no policy gradient.

The policy term of ECHO (Shrivastava et al., 2026) is PPO-clip (Schulman et
al., 2017) with :math:`\epsilon_{low} = \epsilon_{high} = 0.2` and the
``sequence_mean`` reduction: per trajectory, the mean of the per-token loss
over its action tokens; then the mean over trajectories (a trajectory with
no action tokens contributes 0).

References:
  Shao et al., *DeepSeekMath* (2024), https://arxiv.org/abs/2402.03300;
  Schulman et al., *Proximal Policy Optimization Algorithms* (2017),
  https://arxiv.org/abs/1707.06347; Shrivastava et al., *ECHO* (2026),
  https://arxiv.org/abs/2605.24517; SkyRL, https://github.com/NovaSky-AI/SkyRL.
"""

import jax
import jax.numpy as jnp

from jaxpapers import tree
from jaxpapers import _checks

STD_EPSILON = 1e-6


def check_same_shape(**arrays: jax.Array) -> None:
  """Raises ``ValueError`` naming the first argument whose shape differs."""
  (first, reference), *rest = arrays.items()
  for name, array in rest:
    if array.shape != reference.shape:
      raise ValueError(f"{name} has shape {array.shape} but {first} has"
                       f" {reference.shape}; they must match.")


def grpo_advantages(rewards: jax.Array, group_ids: jax.Array, *,
                    std_normalize: bool = True) -> jax.Array:
  """Group-relative advantages of ``rewards`` ``[N]`` within ``group_ids`` ``[N]``.

  Args:
    rewards: float rewards, one per trajectory.
    group_ids: integer group of each trajectory (any values; equal ids form
      a group, e.g. the task index).
    std_normalize: divide by the group's standard deviation (+ 1e-6).

  Returns:
    float32 advantages ``[N]``; 0 for groups of size one. The variance is
    two-pass (deviations from the group mean), so a common offset of the
    rewards does not cancel it; a NaN reward makes its own group's advantages
    NaN and no other group's.

  Example:
    >>> import jax.numpy as jnp
    >>> grpo_advantages(jnp.array([1., 0., 0., 0.]), jnp.array([0, 0, 1, 1]),
    ...                 std_normalize=False).tolist()
    [0.5, -0.5, 0.0, 0.0]
  """
  if rewards.ndim != 1:
    raise ValueError(f"rewards must be [N]; got shape {rewards.shape}.")
  check_same_shape(rewards=rewards, group_ids=group_ids)
  if not jnp.issubdtype(group_ids.dtype, jnp.integer):
    raise TypeError(f"group_ids must be integers; got {group_ids.dtype}.")
  # The [N, N] same-group matrix has no sharding of its own under Explicit
  # mesh axes: work on replicated copies, then give back the rewards' sharding.
  (rewards, group_ids), restore = tree.gather_explicit((rewards, group_ids))
  rewards = rewards.astype(jnp.float32)
  same_NxN = group_ids[:, None] == group_ids[None, :]

  def group_sum(values_NxN):
    # A select, not a product with a 0/1 matrix: another group's NaN (NaN *
    # 0 is NaN) stays out of this one.
    return jnp.sum(jnp.where(same_NxN, values_NxN, 0.0), axis=1)

  size_N = jnp.sum(same_NxN, axis=1).astype(jnp.float32)
  mean_N = group_sum(jnp.broadcast_to(rewards[None, :], same_NxN.shape)) / size_N
  centred_N = rewards - mean_N
  if std_normalize:
    # Two passes: squared deviations from the group's mean (E[R^2] - mean^2
    # cancels in float32 for rewards with a common offset).
    deviations_NxN = rewards[None, :] - mean_N[:, None]
    variance_N = group_sum(deviations_NxN ** 2) / jnp.maximum(size_N - 1.0, 1.0)
    centred_N = centred_N / (jnp.sqrt(variance_N) + STD_EPSILON)
  advantages_N = jnp.where(size_N > 1, centred_N, 0.0)
  return restore((advantages_N, group_ids))[0]


def sequence_mean(per_token_BxL: jax.Array, mask_BxL: jax.Array) -> jax.Array:
  """Mean over a row's masked tokens, then over rows (an empty row counts 0)."""
  check_same_shape(per_token_BxL=per_token_BxL, mask_BxL=mask_BxL)
  weights = mask_BxL.astype(per_token_BxL.dtype)
  count_B = jnp.sum(weights, axis=-1)
  per_row_B = jnp.sum(per_token_BxL * weights, axis=-1) / jnp.maximum(
      count_B, 1.0)
  return jnp.mean(per_row_B)


def ppo_clip_loss(log_probs_BxL: jax.Array, old_log_probs_BxL: jax.Array,
                  advantages_B: jax.Array, action_mask_BxL: jax.Array, *,
                  clip_low: float = 0.2, clip_high: float = 0.2
                  ) -> tuple[jax.Array, dict[str, jax.Array]]:
  r"""The clipped surrogate over action tokens, ``sequence_mean`` reduction.

  .. math::
    \ell_{i,t} = -\min\big(\rho_{i,t} A_i,\ \operatorname{clip}(\rho_{i,t},
    1 - \epsilon_{low}, 1 + \epsilon_{high}) A_i\big), \qquad
    \rho_{i,t} = e^{\log\pi_\theta - \log\pi_{old}}.

  At :math:`\rho = 1` (on-policy, one update per batch) its gradient is the
  policy gradient :math:`-\frac{1}{B}\sum_i \frac{A_i}{n_i}\sum_t
  \nabla\log\pi_\theta(a_{i,t})`.

  Args:
    log_probs_BxL: log-probabilities of the taken tokens under the policy.
    old_log_probs_BxL: the same under the sampling policy (no gradient).
    advantages_B: one advantage per trajectory.
    action_mask_BxL: which positions are action tokens.
    clip_low, clip_high: the clip range (> 0; ``inf`` is no clipping on
      that side; NaN is refused).

  Returns:
    ``(loss, {"clip_fraction": ...})``: the fraction of action tokens whose
    ratio lies outside the clip range.
  """
  _checks.check_real("clip_low", clip_low,
                     low=0.0, low_open=True, finite=False, allow_traced=True)
  _checks.check_real("clip_high", clip_high,
                     low=0.0, low_open=True, finite=False, allow_traced=True)
  check_same_shape(log_probs_BxL=log_probs_BxL,
                old_log_probs_BxL=old_log_probs_BxL,
                action_mask_BxL=action_mask_BxL)
  if advantages_B.shape != log_probs_BxL.shape[:1]:
    raise ValueError(f"advantages_B must be [{log_probs_BxL.shape[0]}]; got"
                     f" {advantages_B.shape}.")
  spec = tree.explicit_spec(log_probs_BxL)
  if spec is not None:
    # Explicit axes combine the tokens' arrays only sharded alike, and
    # broadcast the advantages only sharded like the batch.
    old_log_probs_BxL, action_mask_BxL = (
        jax.sharding.reshard(x, spec)
        for x in (old_log_probs_BxL, action_mask_BxL))
    advantages_B = jax.sharding.reshard(advantages_B, jax.P(spec[0]))
  ratio = jnp.exp(log_probs_BxL - jax.lax.stop_gradient(old_log_probs_BxL))
  advantage = advantages_B[:, None].astype(log_probs_BxL.dtype)
  surrogate = jnp.minimum(
      ratio * advantage,
      jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantage)
  is_action = action_mask_BxL.astype(jnp.bool_)
  clipped = ((ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)) & is_action
  count = jnp.maximum(jnp.sum(is_action), 1)
  return sequence_mean(-surrogate, action_mask_BxL), {
      "clip_fraction": jnp.sum(clipped) / count}
