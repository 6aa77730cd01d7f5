r"""BitEdit: per-bit log-odds guidance inside a Bernoulli-KL trust region.

Bitwise-residual visual autoregressive (VAR) generators such as Infinity
(Han et al., 2024) predict every token of a scale as ``d`` independent bits,
two logits per bit. BitEdit (Zhang et al., 2026) edits an image at decision
time: it tilts the post-CFG per-bit log-odds along a source--target contrast
computed on the shared edited prefix, then projects the tilt into a
Bernoulli-KL trust region around the clean CFG sampler.

Source status (``docs/bitresedit.md``): the structure (a tilt of post-CFG
log-odds along a source--target contrast, projected into a closed-form
Bernoulli-KL trust region) is from the paper's abstract; two logits per bit
and CFG on logits, ``cfg * cond + (1 - cfg) * uncond``, are from Infinity's
public code. **Reconstruction** (ours, the paper's equations were not
available): the tilt :math:`\delta = \lambda \Delta`, the per-bit trust region
and both radii below, and the bit sampler.

With :math:`\ell = \text{logit}_1 - \text{logit}_0` the log-odds of one bit
(CFG is linear, so it applies to :math:`\ell` directly),
:math:`\ell_T = \text{CFG}(\ell^c_\text{tgt}, \ell^u)` the clean sampler and
:math:`\Delta = \ell^c_\text{tgt} - \ell^c_\text{src}` (``contrast="cond"``)
or :math:`\text{CFG}(\text{tgt}) - \text{CFG}(\text{src})` (``"post_cfg"``):

.. math::
  \delta = \lambda \Delta, \qquad
  \delta^* = \operatorname{sign}(\delta)\,\min(|\delta|, \delta_{\max}),
  \qquad \text{bits} \sim \text{Bernoulli}(\sigma(\ell_T + \delta^*)),

where :math:`\delta_{\max}` bounds
:math:`\mathrm{KL}(\delta) = \mathrm{KL}(\text{Bern}(\sigma(\ell_T + \delta))
\,\|\, \text{Bern}(\sigma(\ell_T))) \le \varepsilon` per bit: in closed form
from :math:`\mathrm{KL} \approx \tfrac12 p(1-p)\delta^2` (``"quadratic"``), or
as the exact root by bisection (``"exact"``), which guarantees the bound.

References:
  Zhang, Liao, Tresp, Plank, Schuetze, "Edit the Bits, Diff the Codes:
  Bitwise Residual Editing for Visual Autoregressive Models", 2026,
  https://arxiv.org/abs/2606.13558 (abstract).
  Han et al., "Infinity: Scaling Bitwise AutoRegressive Modeling for
  High-Resolution Image Synthesis", 2024, https://arxiv.org/abs/2412.04431,
  code https://github.com/FoundationVision/Infinity.
"""

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_int
from jaxpapers._checks import is_concrete

TRUST_MODES = ("quadratic", "exact")
CONTRASTS = ("cond", "post_cfg")
# Keeps the quadratic radius finite where p(1 - p) underflows.
QUADRATIC_FLOOR = 1e-6
# The exact search doubles its bracket from 1 at most this often: 2^100 nats
# of log-odds is far past where a float32 sigmoid saturates.
EXACT_DOUBLINGS = 100
# The exact search keeps KL + KL_ROUNDING * eps32 * (first-order terms + KL)
# <= epsilon: the float32 rounding of the KL, however another program fuses
# it, stays within a few units in the last place of the two first-order terms
# whose sum cancels to the second-order KL.
KL_ROUNDING = 16.0


class BitEdit(NamedTuple):
  """Hyperparameters of BitEdit; build them with :func:`bit_edit` (validated).

  Attributes:
    strength: the tilt :math:`\\lambda` (0 gives the clean sampler).
    epsilon: per-bit KL budget in nats (``inf``: no trust region).
    trust: ``"quadratic"`` (closed form) or ``"exact"`` (bisection root).
    contrast: ``"cond"`` (conditional logits) or ``"post_cfg"``.
    bisection_steps: steps of the exact root search.
  """

  strength: float | jax.Array
  epsilon: float | jax.Array
  trust: str
  contrast: str
  bisection_steps: int


class Guidance(NamedTuple):
  """Output of :func:`guide`, every field shaped like the log-odds.

  Attributes:
    log_odds: the guided log-odds :math:`\\ell_T + \\delta^*` to sample from.
    clean_log_odds: the clean sampler's :math:`\\ell_T`.
    shift: the projected tilt :math:`\\delta^*`.
    kl: the realized per-bit KL of the guided bit to the clean one (nats).
    clipped: True where the trust region cut the tilt.
  """

  log_odds: jax.Array
  clean_log_odds: jax.Array
  shift: jax.Array
  kl: jax.Array
  clipped: jax.Array


def check_finite_scale(value: float | jax.Array, name: str) -> None:
  """Raises ``ValueError`` for a concrete NaN or infinite guidance scale.

  A traced one is used as given: a NaN scale makes the log-odds NaN, which
  the generation loops of :mod:`jaxpapers.var._editing` refuse.
  """
  if is_concrete(value) and not np.all(np.isfinite(np.asarray(value))):
    raise ValueError(f"{name} (the CFG scale) must be finite; got {value}.")


def bit_edit(strength: float | jax.Array = 1.0,
             epsilon: float | jax.Array = 0.1, *,
             trust: Literal["quadratic", "exact"] = "quadratic",
             contrast: Literal["cond", "post_cfg"] = "cond",
             bisection_steps: int = 40) -> BitEdit:
  """BitEdit's hyperparameters, validated (traced values are taken as given).

  Args:
    strength: :math:`\\lambda \\ge 0`.
    epsilon: per-bit KL budget :math:`\\varepsilon > 0` (``inf`` allowed).
    trust: ``"quadratic"`` or ``"exact"``.
    contrast: ``"cond"`` or ``"post_cfg"``.
    bisection_steps: a positive Python int.

  Returns:
    A :class:`BitEdit`.

  Raises:
    ValueError: on a non-scalar ``epsilon``, ``epsilon <= 0`` or NaN,
      ``strength < 0``, NaN or inf, an unknown ``trust`` or ``contrast``, or
      ``bisection_steps`` that is not an int >= 1 (values checked when
      concrete).

  Example:
    >>> bit_edit(2.0, 0.01, trust="exact").trust
    'exact'
  """
  if jnp.ndim(epsilon) != 0:
    raise ValueError(f"epsilon must be a scalar budget; got shape"
                     f" {jnp.shape(epsilon)}.")
  if is_concrete(epsilon) and not np.all(np.asarray(epsilon) > 0):
    raise ValueError(f"epsilon (the per-bit KL budget) must be > 0 (inf for no"
                     f" trust region); got {epsilon}.")
  if is_concrete(strength) and not np.all(np.asarray(strength) >= 0):
    raise ValueError(f"strength (lambda) must be >= 0; got {strength}.")
  if is_concrete(strength) and not np.all(np.isfinite(np.asarray(strength))):
    raise ValueError(f"strength (lambda) must be finite; got {strength}.")
  if trust not in TRUST_MODES:
    raise ValueError(f"trust must be one of {TRUST_MODES}; got {trust!r}.")
  if contrast not in CONTRASTS:
    raise ValueError(f"contrast must be one of {CONTRASTS}; got {contrast!r}.")
  check_int("bisection_steps", bisection_steps, 1)
  return BitEdit(strength, epsilon, trust, contrast, bisection_steps)


def log_odds(logits: jax.Array) -> jax.Array:
  """Per-bit log-odds :math:`\\ell = \\text{logit}_1 - \\text{logit}_0` of ``(..., 2)`` logits.

  Example:
    >>> log_odds(jnp.array([[0.5, 2.0], [1.0, -1.0]])).tolist()
    [1.5, -2.0]
  """
  if logits.ndim < 1 or logits.shape[-1] != 2:
    raise ValueError(f"logits must end in an axis of 2 (logit of bit 0, of"
                     f" bit 1); got shape {logits.shape}.")
  return logits[..., 1] - logits[..., 0]


def cfg(cond: jax.Array, uncond: jax.Array,
        scale: float | jax.Array) -> jax.Array:
  """Classifier-free guidance on logits, :math:`s\\,\\ell^c + (1 - s)\\,\\ell^u` (Infinity's form).

  ``cond`` and ``uncond`` have one shape; a concrete ``scale`` must be
  finite (a traced NaN one gives NaN log-odds).

  Example:
    >>> float(cfg(jnp.array(2.0), jnp.array(1.0), 3.0))
    4.0
  """
  if jnp.shape(cond) != jnp.shape(uncond):
    raise ValueError(f"uncond must have the shape of cond {jnp.shape(cond)};"
                     f" got {jnp.shape(uncond)}.")
  check_finite_scale(scale, "scale")
  return scale * cond + (1 - scale) * uncond


def _kl_terms(clean_log_odds, shift):
  """``(q, 1 - q, A, B)`` with ``KL = q A + (1 - q) B`` (see bernoulli_kl)."""
  shifted = clean_log_odds + shift
  q, one_minus_q = jax.nn.sigmoid(shifted), jax.nn.sigmoid(-shifted)
  # A = log s(l + d) - log s(l) = log1p(expm1(d) (1 - q)) and
  # B = log s(-l - d) - log s(-l) = log1p(expm1(-d) q): no cancellation of
  # two log-sigmoids of size |l| at small |d|. Past |d| = 1 the differences
  # are at least of order |d| and the plain form is exact enough (and
  # expm1 would overflow).
  small = jnp.abs(shift) < 1
  small_shift = jnp.where(small, shift, jnp.zeros_like(shift))
  log_sigmoid = jax.nn.log_sigmoid
  a = jnp.where(small, jnp.log1p(jnp.expm1(small_shift) * one_minus_q),
                log_sigmoid(shifted) - log_sigmoid(clean_log_odds))
  b = jnp.where(small, jnp.log1p(jnp.expm1(-small_shift) * q),
                log_sigmoid(-shifted) - log_sigmoid(-clean_log_odds))
  return q, one_minus_q, a, b


def bernoulli_kl(clean_log_odds: jax.Array, shift: jax.Array) -> jax.Array:
  r"""Per-bit :math:`\mathrm{KL}(\text{Bern}(\sigma(\ell + \delta)) \,\|\, \text{Bern}(\sigma(\ell)))`.

  .. math::
    \mathrm{KL}(\delta) = q\,A + (1 - q)\,B, \quad
    A = \log\frac{q}{p} = \operatorname{log1p}\big((e^{\delta} - 1)(1 - q)\big),
    \quad
    B = \log\frac{1 - q}{1 - p} = \operatorname{log1p}\big((e^{-\delta} - 1)\,q\big),

  :math:`p = \sigma(\ell)`, :math:`q = \sigma(\ell + \delta)`: zero at
  :math:`\delta = 0`, increasing in :math:`|\delta|` towards
  :math:`\operatorname{softplus}(-\operatorname{sign}(\delta)\,\ell)`,
  with derivative :math:`q (1 - q)\,\delta`. The log1p/expm1 forms (for
  :math:`|\delta| < 1`) avoid the cancellation of two log-sigmoids of size
  :math:`|\ell|`, so the float32 error is a few units in the last place of
  the first-order terms :math:`q|A|` and :math:`(1-q)|B|` (whose sum cancels
  to the second-order KL), not of :math:`|\ell|`.

  Example:
    >>> float(bernoulli_kl(jnp.array(0.0), jnp.array(0.0)))
    0.0
  """
  q, one_minus_q, a, b = _kl_terms(clean_log_odds, shift)
  return q * a + one_minus_q * b


def trust_radius(clean_log_odds: jax.Array, direction: jax.Array,
                 epsilon: float | jax.Array, *,
                 trust: Literal["quadratic", "exact"] = "quadratic",
                 bisection_steps: int = 40) -> jax.Array:
  r"""Largest :math:`|\delta|` along ``sign(direction)`` within the KL budget.

  ``"quadratic"``: :math:`\delta_{\max} = \sqrt{2\varepsilon / (p(1-p) +
  10^{-6})}` from :math:`\mathrm{KL} \approx \frac12 p(1-p)\delta^2`,
  :math:`p = \sigma(\ell)`. ``"exact"``: the root of
  :math:`\mathrm{KL}(\operatorname{sign}(\delta)\,x) = \varepsilon`: a
  bracket doubled from :math:`[0, 1]` until it holds the root (at most
  ``EXACT_DOUBLINGS`` times), then ``bisection_steps`` halvings, returning the
  lower end of the bracket. Every accepted :math:`x` satisfies
  :math:`\mathrm{KL} + 16\,\epsilon_{32}(q|A| + (1-q)|B| + \mathrm{KL}) \le
  \varepsilon` (see :func:`bernoulli_kl`), so :math:`\mathrm{KL} \le
  \varepsilon` holds for every :math:`\varepsilon > 0` despite float32
  rounding, however the KL is evaluated; at budgets near the rounding (below
  about :math:`10^{-10}` for bits with :math:`p(1-p) \approx 1/4`) the radius
  is conservative. The KL along a direction is bounded by
  :math:`\operatorname{softplus}(-\operatorname{sign}(\delta)\,\ell)` (the
  surprise of the bit's other value), so a budget at or above that bound
  gives an infinite radius, as does ``epsilon = inf``.

  Args:
    clean_log_odds: :math:`\ell_T`, any shape.
    direction: the tilt (only its sign is used), broadcastable to it.
    epsilon: the budget, a scalar.
    trust: ``"quadratic"`` or ``"exact"``.
    bisection_steps: steps of the exact search.

  Returns:
    :math:`\delta_{\max}`, shaped like ``clean_log_odds``.

  Raises:
    ValueError / TypeError: for an unknown ``trust``, ``bisection_steps <
      1``, non-floating ``clean_log_odds``, a ``direction`` that does not
      broadcast to it, a non-scalar ``epsilon`` or a concrete one that is
      not > 0 (a traced ``epsilon <= 0`` gives a NaN or zero radius).

  Example:
    >>> r = trust_radius(jnp.array([0.0]), jnp.array([1.0]), 1e-3,
    ...                  trust="exact")
    >>> round(float(bernoulli_kl(jnp.array([0.0]), r)[0]), 5)
    0.001
  """
  if trust not in TRUST_MODES:
    raise ValueError(f"trust must be one of {TRUST_MODES}; got {trust!r}.")
  check_int("bisection_steps", bisection_steps, 1)
  if jnp.ndim(epsilon) != 0:
    raise ValueError(f"epsilon must be a scalar budget; got shape"
                     f" {jnp.shape(epsilon)}.")
  if not jnp.issubdtype(jnp.result_type(clean_log_odds), jnp.floating):
    raise TypeError(f"clean_log_odds must be floating point; got"
                    f" {jnp.result_type(clean_log_odds)}.")
  try:
    broadcast = jnp.broadcast_shapes(jnp.shape(direction),
                                     jnp.shape(clean_log_odds))
  except ValueError:
    broadcast = None
  if broadcast != jnp.shape(clean_log_odds):
    raise ValueError(f"direction must broadcast to the shape of"
                     f" clean_log_odds {jnp.shape(clean_log_odds)}; got"
                     f" {jnp.shape(direction)}.")
  if is_concrete(epsilon) and not np.asarray(epsilon) > 0:
    raise ValueError(f"epsilon (the per-bit KL budget) must be > 0 (inf for no"
                     f" trust region); got {epsilon}.")
  epsilon = jnp.asarray(epsilon, clean_log_odds.dtype)
  unbounded = jnp.isinf(epsilon)
  # A finite stand-in keeps the unused branch's gradient finite (no inf * 0).
  finite_epsilon = jnp.where(unbounded, 1.0, epsilon)
  if trust == "quadratic":
    p = jax.nn.sigmoid(clean_log_odds)
    radius = jnp.sqrt(2 * finite_epsilon / (p * (1 - p) + QUADRATIC_FLOOR))
    return jnp.where(unbounded, jnp.inf, radius)
  sign = jnp.where(direction < 0, -1.0, 1.0).astype(clean_log_odds.dtype)
  rounding = KL_ROUNDING * jnp.finfo(clean_log_odds.dtype).eps

  def inside(magnitude):
    q, one_minus_q, a, b = _kl_terms(clean_log_odds, sign * magnitude)
    kl = q * a + one_minus_q * b
    first_order = q * jnp.abs(a) + one_minus_q * jnp.abs(b)
    return kl + rounding * (first_order + kl) <= finite_epsilon

  def double(_, high):
    return jnp.where(inside(high), 2 * high, high)

  one = jnp.ones_like(clean_log_odds)
  high = jax.lax.fori_loop(0, EXACT_DOUBLINGS, double, one)
  # The last doubling was taken from an accepted magnitude (or none was).
  low = jnp.where(high > 1, 0.5 * high, jnp.zeros_like(high))

  def halve(_, bracket):
    low, high = bracket
    middle = 0.5 * (low + high)
    accepted = inside(middle)
    return jnp.where(accepted, middle, low), jnp.where(accepted, high, middle)

  low, _ = jax.lax.fori_loop(0, bisection_steps, halve, (low, high))
  # Where even the last doubling stayed inside, the root is past 2^100 nats.
  low = jnp.where(inside(high), high, low)
  unreachable = jax.nn.softplus(-sign * clean_log_odds) <= finite_epsilon
  return jnp.where(unbounded | unreachable, jnp.inf, low)


def project(clean_log_odds: jax.Array, shift: jax.Array,
            epsilon: float | jax.Array, *,
            trust: Literal["quadratic", "exact"] = "quadratic",
            bisection_steps: int = 40) -> tuple[jax.Array, jax.Array]:
  r"""The tilt projected into the trust region, :math:`\operatorname{sign}(\delta)\min(|\delta|, \delta_{\max})`.

  Returns:
    ``(projected_shift, clipped)``, both shaped like ``shift``.

  Example:
    >>> shift, clipped = project(jnp.zeros(2), jnp.array([0.01, -5.0]), 0.1)
    >>> [round(float(s), 3) for s in shift], clipped.tolist()
    ([0.01, -0.894], [False, True])
  """
  radius = trust_radius(clean_log_odds, shift, epsilon, trust=trust,
                        bisection_steps=bisection_steps)
  magnitude = jnp.abs(shift)
  return jnp.sign(shift) * jnp.minimum(magnitude, radius), magnitude > radius


def guide(config: BitEdit, cond_target: jax.Array, cond_source: jax.Array,
          uncond: jax.Array, cfg_scale: float | jax.Array) -> Guidance:
  r"""BitEdit on per-bit log-odds: clean CFG sampler, tilt, projection, realized KL.

  Both conditional log-odds must come from the same (edited) prefix.
  Concrete inputs are checked for NaN/inf here; the generation loops of
  :mod:`jaxpapers.var._editing` check traced ones.

  Args:
    config: from :func:`bit_edit`.
    cond_target: target-prompt conditional log-odds :math:`\ell^c_\text{tgt}`.
    cond_source: source-prompt conditional log-odds, same shape.
    uncond: unconditional log-odds, same shape.
    cfg_scale: the CFG scale :math:`s`.

  Returns:
    A :class:`Guidance`.

  Raises:
    ValueError / TypeError: on a ``config`` not from :func:`bit_edit`,
      mismatched shapes, (concrete) non-finite log-odds or a (concrete)
      non-finite ``cfg_scale``; traced, a NaN ``cfg_scale`` or
      hyperparameter gives NaN guided log-odds.

  Example:
    >>> out = guide(bit_edit(0.0), jnp.ones(3), jnp.zeros(3), jnp.zeros(3), 3.0)
    >>> out.log_odds.tolist(), float(out.kl.max())
    ([3.0, 3.0, 3.0], 0.0)
  """
  if not isinstance(config, BitEdit):
    raise TypeError(f"config must be a BitEdit (from bit_edit); got"
                    f" {type(config).__name__}.")
  check_finite_scale(cfg_scale, "cfg_scale")
  for name, x in (("cond_source", cond_source), ("uncond", uncond)):
    if x.shape != cond_target.shape:
      raise ValueError(f"{name} must have the shape of cond_target"
                       f" {cond_target.shape}; got {x.shape}.")
  for name, x in (("cond_target", cond_target), ("cond_source", cond_source),
                  ("uncond", uncond)):
    if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):
      raise ValueError(f"{name} (log-odds) contains NaN or inf.")
  clean = cfg(cond_target, uncond, cfg_scale)
  contrast = cond_target - cond_source
  if config.contrast == "post_cfg":
    contrast = clean - cfg(cond_source, uncond, cfg_scale)
  shift, clipped = project(clean, config.strength * contrast, config.epsilon,
                           trust=config.trust,
                           bisection_steps=config.bisection_steps)
  return Guidance(clean + shift, clean, shift, bernoulli_kl(clean, shift),
                  clipped)


def sample_bits(uniform: jax.Array, log_odds_: jax.Array) -> jax.Array:
  """Bernoulli(σ(ℓ)) bits as booleans from uniform noise: ``uniform < σ(ℓ)``.

  The noise is the sampler's randomness: the clean and the guided sampler
  given the same noise differ only where the guidance moved a bit's
  probability across its draw. Concrete ``uniform`` must lie in [0, 1] and
  concrete log-odds must not be NaN (``ValueError``); a traced NaN log-odds
  draws False, which is why the generation loops of
  :mod:`jaxpapers.var._editing` check their log-odds for NaN.

  Example:
    >>> sample_bits(jnp.array([0.5, 0.5]), jnp.array([-50.0, 50.0])).tolist()
    [False, True]
  """
  if uniform.shape != log_odds_.shape:
    raise ValueError(f"uniform must have the shape of the log-odds"
                     f" {log_odds_.shape}; got {uniform.shape}.")
  if is_concrete(uniform):
    values = np.asarray(uniform)
    if not np.all((values >= 0) & (values <= 1)):
      raise ValueError("uniform must be noise in [0, 1] (NaN is outside).")
  if is_concrete(log_odds_) and np.any(np.isnan(np.asarray(log_odds_))):
    raise ValueError("log_odds_ contains NaN: its bits cannot be drawn.")
  return uniform < jax.nn.sigmoid(log_odds_)


def quadratic_radius_error(clean_log_odds: jax.Array,
                           epsilon: float) -> jax.Array:
  """Relative gap ``|quadratic / exact - 1|`` of the two radii at ``clean_log_odds``.

  Taken in the worse of the two directions (the KL is asymmetric in δ);
  1 where the exact radius is infinite (a budget the bit cannot use up).
  ``epsilon`` must be finite and > 0: with no trust region there is no
  radius to compare (``ValueError``).

  Example:
    >>> float(quadratic_radius_error(jnp.array([0.0]), 1e-3)[0]) < 0.05
    True
  """
  if is_concrete(epsilon) and np.isinf(np.asarray(epsilon)).any():
    raise ValueError("epsilon must be finite: with no trust region (inf) the"
                     " two radii are both infinite.")
  quadratic = trust_radius(clean_log_odds, clean_log_odds, epsilon)
  gaps = [jnp.abs(quadratic / trust_radius(clean_log_odds, jnp.full_like(
      clean_log_odds, sign), epsilon, trust="exact") - 1) for sign in (-1, 1)]
  return jnp.maximum(*gaps)

