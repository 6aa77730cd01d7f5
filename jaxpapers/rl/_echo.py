r"""ECHO: GRPO's policy loss plus a cross-entropy on environment tokens, one forward pass.

ECHO (Shrivastava et al., 2026) trains an agent policy to predict the
observation tokens of its own rollouts (command output, errors, exit codes)
alongside the policy gradient:

.. math::
  L = L_{\text{PPO-clip}}(\text{action tokens})
      + \lambda\, \frac{1}{B}\sum_i \frac{\sum_t m_{i,t}\,\mathrm{CE}_{i,t}}
      {N_{obs,i} + 10^{-3}},
  \qquad \mathrm{CE}_{i,t} = -\log\pi_\theta(x_{i,t} \mid x_{i,<t}),

where the log-probabilities are the ones the policy loss uses (logits
divided by the sampling temperature, :func:`token_log_probs`), ``m`` is the
world-loss target mask and :math:`N_{obs,i}` counts **all** observation-body
tokens of trajectory ``i`` (warnings included), whatever the mask mode. A
trajectory with no observation tokens contributes 0 (documented value,
never NaN). Every rollout gets the environment loss, failed ones included.

Masks come from token spans (:class:`jaxpapers.rl.Spans`, built as
each observation is appended): an observation body is ``[warning prefix] +
separator + environment text``; the target is one of

* ``env_only`` (default): the environment text;
* ``warning_only``: the warning prefix;
* ``warning_plus_env``: both;
* ``full_observation``: the whole body (the separator too).

Scaffolding (role headers, end-of-turn, padding) lies in no span, so it is
never a target. :func:`world_model_only` zeroes the action mask of chosen
rows: their loss is the environment term alone (no verifier needed).
The coefficient follows an optax schedule (:func:`lambda_schedule`).

**Source status**: the objective, normalisation, mask modes and defaults
follow the paper and the authors' code (``microsoft/echo-rl``, as
described publicly); the separator's place in ``full_observation`` vs
``warning_plus_env`` is our reading; the shell and transcripts are ours
(``docs/echo.md``).

Example::

  log_probs = token_log_probs(logits_BxLxV, targets_BxL, temperature=0.8)
  masks = echo_masks(spans, length=L, mode="env_only")
  loss, aux = echo_loss(log_probs, old_log_probs, advantages, masks, lam=0.05)

References:
  Shrivastava, Kauffmann, Awadallah, Papailiopoulos, *ECHO: Environment
  Cross-entropy Hybrid Objective* (2026), https://arxiv.org/abs/2605.24517,
  code https://github.com/microsoft/echo-rl.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.models._transformer import check_token_ids
from jaxpapers.rl import _grpo as grpo
from jaxpapers.rl import _shell as shell

N_OBS_EPSILON = 1e-3
MASK_MODES = ("env_only", "full_observation", "warning_only",
              "warning_plus_env")
SCHEDULES = ("constant", "linear_decay", "step_decay")


class EchoMasks(NamedTuple):
  """Per-token masks ``[B, L]`` of one batch of transcripts.

  Attributes:
    action: the policy's tokens (the PPO term's targets).
    env_target: the world-loss targets (per the mask mode).
    body: every observation-body token (counted as :math:`N_{obs}`).
  """

  action: jax.Array
  env_target: jax.Array
  body: jax.Array


def span_mask(starts_BxT: jax.Array, ends_BxT: jax.Array,
              length: int) -> jax.Array:
  """``[B, L]`` bool: positions inside any span ``[start, end)`` of its row.

  A span with ``end <= start`` is empty. Raises unless ``length`` is an
  int >= 1.
  """
  _checks.check_int("length", length, 1)
  grpo.check_same_shape(starts_BxT=starts_BxT, ends_BxT=ends_BxT)
  position = jnp.arange(length)[None, None, :]
  inside = (position >= starts_BxT[..., None]) & (position < ends_BxT[..., None])
  return jnp.any(inside, axis=-2)


def echo_masks(spans: shell.Spans, *, length: int,
               mode: str = "env_only") -> EchoMasks:
  """The action, world-loss target and body masks of ``spans`` (see module doc).

  Raises ``ValueError`` for an unknown ``mode``, ``length < 1`` or span
  arrays of unlike shapes.
  """
  _checks.check_int("length", length, 1)
  if mode not in MASK_MODES:
    raise ValueError(f"mode must be one of {MASK_MODES}; got {mode!r}.")
  warning = span_mask(spans.warning_start, spans.warning_end, length)
  env = span_mask(spans.env_start, spans.env_end, length)
  body = span_mask(spans.body_start, spans.body_end, length)
  target = {"env_only": env, "warning_only": warning,
            "warning_plus_env": warning | env, "full_observation": body}[mode]
  return EchoMasks(span_mask(spans.action_start, spans.action_end, length),
                   target, body)


def shift_for_next_token(masks: EchoMasks) -> EchoMasks:
  """Masks over targets ``tokens[:, 1:]`` (what ``model(tokens[:, :-1])`` predicts)."""
  return EchoMasks(*(m[:, 1:] for m in masks))


def world_model_only(masks: EchoMasks, rows_B: jax.Array) -> EchoMasks:
  """Zeroes the action mask of the rows where ``rows_B`` is True (per row).

  Raises ``ValueError`` unless ``rows_B`` is ``[B]``, ``TypeError`` unless
  it is boolean (``~`` of an integer flag is not its negation).
  """
  if rows_B.shape != masks.action.shape[:1]:
    raise ValueError(f"rows_B must be [{masks.action.shape[0]}]; got"
                     f" {rows_B.shape}.")
  if rows_B.dtype != jnp.bool_:
    raise TypeError(f"rows_B must be boolean; got {rows_B.dtype}.")
  return masks._replace(action=masks.action & ~rows_B[:, None])


def token_log_probs(logits_BxLxV: jax.Array, targets_BxL: jax.Array, *,
                    temperature: float | jax.Array = 1.0) -> jax.Array:
  """``log softmax(logits / temperature)`` at the targets: ``[B, L]`` float32.

  Raises:
    ValueError: for shapes other than ``[B, L, V]`` and ``[B, L]``, a
      concrete ``temperature`` that is not finite and > 0 (``inf`` would
      flatten every distribution to uniform), or concrete targets outside
      ``[0, V)``.
    TypeError: for non-integer targets or a non-real ``temperature``.

  A traced target outside ``[0, V)`` gives NaN (no log-probability is read);
  a traced ``temperature <= 0`` or NaN gives non-finite values, a traced
  ``inf`` the uniform ``-log V``.
  """
  _checks.check_real("temperature", temperature,
                     low=0.0, low_open=True, allow_traced=True)
  if jnp.ndim(logits_BxLxV) != 3 or logits_BxLxV.shape[:-1] != targets_BxL.shape:
    raise ValueError(f"logits_BxLxV {logits_BxLxV.shape} does not match"
                     f" targets_BxL {targets_BxL.shape} (need [B, L, V] and"
                     " [B, L]).")
  dtype = jnp.result_type(targets_BxL)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"targets_BxL must hold integer token ids; got {dtype}.")
  check_token_ids(targets_BxL, logits_BxLxV.shape[-1], "targets_BxL")
  log_probs = jax.nn.log_softmax(
      logits_BxLxV.astype(jnp.float32) / temperature, axis=-1)
  return _pick(log_probs, targets_BxL)


def _pick(log_probs_BxLxV, targets_BxL):
  """The targets' entries; a vocabulary sharded on Explicit axes is gathered first.

  (A gather along a sharded axis has no output sharding there.)
  """
  rows = tree.contraction_spec(log_probs_BxLxV)
  if rows is not None:
    log_probs_BxLxV = jax.sharding.reshard(log_probs_BxLxV, rows)
  return jnp.take_along_axis(log_probs_BxLxV, targets_BxL[..., None],
                             axis=-1, wrap_negative_indices=False)[..., 0]


def env_loss(log_probs_BxL: jax.Array, masks: EchoMasks) -> jax.Array:
  r"""Mean over trajectories of :math:`\sum_t m_t \mathrm{CE}_t / (N_{obs} + 10^{-3})`."""
  grpo.check_same_shape(log_probs_BxL=log_probs_BxL,
                     env_target=masks.env_target, body=masks.body)
  if jnp.ndim(log_probs_BxL) != 2:
    raise ValueError(f"log_probs_BxL must be [B, L]; got shape"
                     f" {jnp.shape(log_probs_BxL)}.")
  target, body = masks.env_target, masks.body
  spec = tree.explicit_spec(log_probs_BxL)
  if spec is not None:
    # Explicit axes combine the tokens' arrays only sharded alike (the
    # masks' rows may lie on the log-probs' sequence axis).
    target, body = (jax.sharding.reshard(m, spec) for m in (target, body))
  target = target.astype(jnp.float32)
  n_obs_B = jnp.sum(body.astype(jnp.float32), axis=-1)
  per_row_B = -jnp.sum(log_probs_BxL * target, axis=-1) / (
      n_obs_B + N_OBS_EPSILON)
  return jnp.mean(per_row_B)


def echo_loss(log_probs_BxL: jax.Array, old_log_probs_BxL: jax.Array,
              advantages_B: jax.Array, masks: EchoMasks, *,
              lam: float | jax.Array, clip_low: float = 0.2,
              clip_high: float = 0.2) -> tuple[jax.Array, dict[str, jax.Array]]:
  """``policy + lam * env`` from one forward pass's token log-probs.

  Args:
    log_probs_BxL: :func:`token_log_probs` of the transcripts.
    old_log_probs_BxL: the sampling policy's (``stop_gradient`` of the same
      values when on-policy).
    advantages_B: :func:`jaxpapers.rl.grpo_advantages`.
    masks: :func:`echo_masks` (shifted to the targets), perhaps through
      :func:`world_model_only`.
    lam: the environment-loss weight (>= 0; a schedule's value may be
      traced).
    clip_low, clip_high: PPO's clip range.

  Returns:
    ``(loss, aux)`` with ``aux["policy"]``, ``aux["env"]`` and
    ``aux["clip_fraction"]``.

  Raises:
    ValueError: masks whose shapes differ from the log-probs, or a
      concrete ``lam`` that is not finite and >= 0 (a traced NaN ``lam``
      makes the loss NaN).
    TypeError: a non-real ``lam``.
  """
  _checks.check_real("lam", lam, low=0.0, allow_traced=True)
  grpo.check_same_shape(log_probs_BxL=log_probs_BxL, action=masks.action,
                     env_target=masks.env_target, body=masks.body)
  policy, aux = grpo.ppo_clip_loss(
      log_probs_BxL, old_log_probs_BxL, advantages_B, masks.action,
      clip_low=clip_low, clip_high=clip_high)
  env = env_loss(log_probs_BxL, masks)
  return policy + lam * env, {"policy": policy, "env": env, **aux}


def lambda_schedule(kind: str = "constant", value: float = 0.05, *,
                    decay_steps: int | None = None,
                    decay_rate: float = 0.5) -> optax.Schedule:
  """The coefficient ``lam(step)`` as an optax schedule.

  Args:
    kind: ``constant`` (the paper's default), ``linear_decay`` (to 0 over
      ``decay_steps``, then 0) or ``step_decay`` (times ``decay_rate``
      every ``decay_steps``).
    value: the initial coefficient (finite, >= 0).
    decay_steps: required for the decays (an int >= 1).
    decay_rate: ``step_decay``'s factor, in (0, 1].

  Example:
    >>> schedule = lambda_schedule("step_decay", 0.05, decay_steps=10)
    >>> [round(float(schedule(s)), 4) for s in (0, 9, 10, 25)]
    [0.05, 0.05, 0.025, 0.0125]
  """
  if kind not in SCHEDULES:
    raise ValueError(f"kind must be one of {SCHEDULES}; got {kind!r}.")
  _checks.check_real("value", value, low=0.0, allow_traced=True)
  if kind == "constant":
    return optax.constant_schedule(value)
  if decay_steps is None:
    raise ValueError(f"{kind} needs decay_steps >= 1; got None.")
  _checks.check_int("decay_steps", decay_steps, 1)
  if kind == "linear_decay":
    return optax.linear_schedule(value, 0.0, decay_steps)
  _checks.check_real("decay_rate", decay_rate, low=0.0, allow_traced=True)
  if not 0 < decay_rate <= 1:
    raise ValueError(f"decay_rate must lie in (0, 1]; got {decay_rate}.")
  return optax.exponential_decay(value, decay_steps, decay_rate,
                                 staircase=True)
