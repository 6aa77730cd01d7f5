r"""The clean sampler and the BitResEdit editor of a bitwise-residual VAR generator.

Generation runs coarse to fine. At scale :math:`k` the generator predicts
per-bit logits from the prompt and the running latent (the prefix), the
sampler draws the bits, and their codes join the latent through the sum of
scales. :func:`sample` is the clean CFG sampler. :func:`edit` is BitResEdit
(Zhang et al., 2026): at every scale the target, source and unconditional
passes are evaluated on the same **edited** prefix, BitEdit
(:mod:`jaxpapers.var._bitedit`) guides the bits, and ResEdit
(:mod:`jaxpapers.var._resedit`) writes their residual against the source's
codes back inside the mask, so the composed running sum through scale
:math:`k` is the prefix of scale :math:`k + 1`.

Source status (``docs/bitresedit.md``): coarse-to-fine sampling of bits
conditioned on the running latent and the sum of scales are Infinity's
(public code); running the two editors inside one loop, with the edited
composed latent as the shared prefix, follows the paper's abstract.
**Reconstruction** (ours): the loop below, the sampling noise (one uniform
per bit of every scale, drawn from the caller's key, the same for the clean
sampler and the editor), and
the non-finite-logits check. :func:`edit_scores` (ours) measures one edit:
in-mask alignment to a reference image and out-of-mask change.

A generator implements :class:`BitwiseGenerator`; :mod:`jaxpapers.var._toy`
is one. The editor does not depend on the toy.

References:
  Zhang, Liao, Tresp, Plank, Schuetze, "Edit the Bits, Diff the Codes:
  Bitwise Residual Editing for Visual Autoregressive Models", 2026,
  https://arxiv.org/abs/2606.13558 (abstract).
  Han et al., "Infinity", 2024, https://arxiv.org/abs/2412.04431.
"""

from typing import NamedTuple, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.var import _bitedit as bitedit
from jaxpapers.var import _resedit as resedit


class BitwiseGenerator(Protocol):
  """What the sampler and the editor need from a bitwise-residual VAR generator."""

  @property
  def scales(self) -> tuple[tuple[int, int], ...]:
    """``(h_k, w_k)`` of each scale, coarse to fine; the last is the latent grid."""

  @property
  def num_bits(self) -> int:
    """``d``, the bits per token."""

  @property
  def null_prompt(self) -> jax.Array:
    """The unconditional prompt of classifier-free guidance."""

  def bit_logits(self, prompt: jax.Array, prefix: jax.Array,
                 scale: int) -> jax.Array:
    """``(h_k, w_k, d, 2)`` logits of scale ``scale`` given the ``(H, W, d)`` prefix."""

  def codes(self, bits: jax.Array) -> jax.Array:
    """``(h_k, w_k, d)`` continuous codes of bits."""

  def upsample(self, code: jax.Array, scale: int) -> jax.Array:
    """Scale ``scale``'s codes on the final ``(H, W, d)`` grid."""

  def decode(self, latent: jax.Array) -> jax.Array:
    """The image of an ``(H, W, d)`` latent."""


class Sample(NamedTuple):
  """A generated image's bits and latent.

  Attributes:
    bits: per scale, ``(h_k, w_k, d)`` booleans.
    latent: ``(H, W, d)``, the sum of the upsampled code maps.
  """

  bits: tuple[jax.Array, ...]
  latent: jax.Array


class Edited(NamedTuple):
  """An edited image and what the trust region did, per scale.

  Attributes:
    bits: per scale, the edited ``(h_k, w_k, d)`` bits.
    latent: the composed ``(H, W, d)`` latent.
    kl: per scale, the realized per-bit KL to the clean sampler (nats).
    clipped: per scale, True where the trust region cut the tilt.
  """

  bits: tuple[jax.Array, ...]
  latent: jax.Array
  kl: tuple[jax.Array, ...]
  clipped: tuple[jax.Array, ...]


def _raise_unless_finite(finite) -> None:
  if not bool(finite):
    raise ValueError("NaN or inf log-odds: generator.bit_logits returned"
                     " them, or a traced cfg_scale or BitEdit hyperparameter"
                     " is NaN.")


def _check_finite(finite: jax.Array) -> None:
  """Raises (now, or when the compiled call runs) if any log-odds were not finite."""
  if isinstance(finite, jax.core.Tracer):
    jax.debug.callback(_raise_unless_finite, finite)
  else:
    _raise_unless_finite(finite)


def _finite_so_far(finite: jax.Array, *log_odds: jax.Array) -> jax.Array:
  """``finite`` and the finiteness of ``log_odds``; raises at once when concrete.

  Eagerly the check comes before the bits are drawn from these log-odds
  (so the error names the log-odds, not the sampler); traced, one host
  callback at the end of the loop checks them all (:func:`_check_finite`).
  """
  for x in log_odds:
    finite = finite & jnp.all(jnp.isfinite(x))
  if not isinstance(finite, jax.core.Tracer):
    _raise_unless_finite(finite)
  return finite


def _check_prompt(prompt: jax.Array, generator, name: str) -> None:
  expected = jnp.shape(generator.null_prompt)
  if jnp.shape(prompt) != expected:
    raise ValueError(f"{name} must have the shape of the generator's prompt"
                     f" embedding {expected}; got {jnp.shape(prompt)}.")


def _check_bits(bits: jax.Array, shape: tuple[int, ...], name: str) -> None:
  """Raises unless ``bits`` are ``shape`` booleans or (concretely) 0/1 ints."""
  if tuple(bits.shape) != shape:
    raise ValueError(f"{name} must have shape {shape} (h_k, w_k, d); got"
                     f" {tuple(bits.shape)}.")
  if not (bits.dtype == jnp.bool_ or jnp.issubdtype(bits.dtype, jnp.integer)):
    raise TypeError(f"{name} must be a bool (or 0/1 int) array; got"
                    f" {bits.dtype}.")
  if (bits.dtype != jnp.bool_ and not isinstance(bits, jax.core.Tracer)
      and not np.all((np.asarray(bits) == 0) | (np.asarray(bits) == 1))):
    raise ValueError(f"{name} must hold bits 0 or 1; got values"
                     f" {np.unique(np.asarray(bits))[:5].tolist()}.")


def _log_odds(generator, prompt, prefix, scale):
  return bitedit.log_odds(generator.bit_logits(prompt, prefix, scale))


def _uniforms(key, generator):
  """Per-scale uniform noise, from one draw (one threefry call to compile)."""
  d = generator.num_bits
  sizes = [h * w * d for h, w in generator.scales]
  flat = jax.random.uniform(key, (sum(sizes),))
  pieces = jnp.split(flat, np.cumsum(sizes)[:-1])
  return [u.reshape(h, w, d) for u, (h, w) in zip(pieces, generator.scales)]


def _clean(generator, prompt, prefix, scale):
  """(conditional, unconditional) log-odds of one scale: the one copy both loops use."""
  return (_log_odds(generator, prompt, prefix, scale),
          _log_odds(generator, generator.null_prompt, prefix, scale))


def sample(generator: BitwiseGenerator, key: jax.Array, prompt: jax.Array, *,
           cfg_scale: float | jax.Array) -> Sample:
  """The clean CFG sampler: bits ~ Bernoulli(σ(CFG(ℓ_prompt, ℓ_null))) scale by scale.

  Args:
    generator: a :class:`BitwiseGenerator`.
    key: PRNG key of the sampling noise (one uniform per bit of every scale).
    prompt: the prompt embedding, shaped like ``generator.null_prompt``.
    cfg_scale: classifier-free guidance scale, finite.

  Returns:
    A :class:`Sample`.

  Raises:
    ValueError: on a prompt of another shape, a concrete non-finite
      ``cfg_scale``, or if the guided log-odds are NaN or inf (the
      generator's, or a traced NaN ``cfg_scale``'s; under ``jit``, when the
      compiled call runs, wrapped in a ``JaxRuntimeError``).

  Batch it with ``jax.vmap``; over a batch sharded along an Explicit mesh
  axis use :func:`jaxpapers.tree.vmap_sharded` (the finiteness check's host
  callback slices a vmapped batch example by example, which such a batch
  refuses).

  Example:
    >>> from jaxpapers import var
    >>> gen = var.toy_generator(jax.random.key(0))
    >>> out = sample(gen, jax.random.key(1), jnp.ones(16), cfg_scale=3.0)
    >>> [b.shape for b in out.bits], out.latent.shape
    ([(1, 1, 8), (2, 2, 8), (4, 4, 8), (8, 8, 8)], (8, 8, 8))
  """
  _check_prompt(prompt, generator, "prompt")
  bitedit.check_finite_scale(cfg_scale, "cfg_scale")
  prefix = jnp.zeros((*generator.scales[-1], generator.num_bits))
  bits, finite = [], jnp.array(True)
  for k, uniform in enumerate(_uniforms(key, generator)):
    cond, uncond = _clean(generator, prompt, prefix, k)
    clean = bitedit.cfg(cond, uncond, cfg_scale)
    finite = _finite_so_far(finite, clean)
    bits.append(bitedit.sample_bits(uniform, clean))
    prefix = prefix + generator.upsample(generator.codes(bits[-1]), k)
  _check_finite(finite)
  return Sample(tuple(bits), prefix)


def edit(generator: BitwiseGenerator, key: jax.Array, source: Sample,
         source_prompt: jax.Array, target_prompt: jax.Array,
         config: bitedit.BitEdit, *, cfg_scale: float | jax.Array,
         mask: jax.Array | None = None,
         gates: Sequence[float] | jax.Array | None = None) -> Edited:
  r"""BitResEdit: BitEdit-guided bits, composed with the source by ResEdit, scale by scale.

  At scale :math:`k`, with prefix :math:`F_{<k}` the composed latent so far:
  the target, source and unconditional log-odds on :math:`F_{<k}`, BitEdit's
  guided bits (:func:`jaxpapers.var.guide`, drawn with the clean
  sampler's noise of that scale), then
  :math:`F_{\le k} = F_{<k} + \mathrm{up}_k(c^	ext{src}_k) + g_k\,M \odot
  \mathrm{up}_k(c^	ext{edit}_k - c^	ext{src}_k)`
  (:func:`jaxpapers.var.compose_scale`).

  Special cases: ``config.strength = 0`` and ``mask=None`` is the clean
  sampler of ``target_prompt`` with ``key``, bit for bit; a binary ``mask``
  leaves the latent equal to ``source.latent`` wherever it is 0.

  Args:
    generator: a :class:`BitwiseGenerator`.
    key: PRNG key (the clean target sampler's key).
    source: the source image's :class:`Sample`: per scale ``(h_k, w_k, d)``
      bits, bool (or 0/1 ints).
    source_prompt: the source prompt embedding (the negative of the tilt).
    target_prompt: the target prompt embedding.
    config: BitEdit's hyperparameters, from
      :func:`jaxpapers.var.bit_edit`.
    cfg_scale: classifier-free guidance scale, finite.
    mask: ``(H, W)`` localisation mask on the latent grid, float in [0, 1]
      or bool, or None (no ResEdit: the edited bits make the whole latent).
      A traced float mask outside [0, 1] makes the latent NaN there
      (:func:`jaxpapers.var.compose_scale`).
    gates: per-scale finite gates :math:`g_k` (default all 1).

  Returns:
    An :class:`Edited`.

  Raises:
    ValueError / TypeError: on a mask of the wrong shape or dtype or
      (concrete) values outside [0, 1], gates of the wrong length or
      (concrete) non-finite, a source with other scales, shapes or
      (concrete) bits outside {0, 1}, prompts of another shape, a concrete
      non-finite ``cfg_scale``, or NaN/inf log-odds: the generator's, or the
      guided ones of a traced NaN ``cfg_scale`` or hyperparameter (under
      ``jit``, when the compiled call runs).

  Batch it as :func:`sample`.

  Example:
    >>> from jaxpapers import var
    >>> gen = var.toy_generator(jax.random.key(0))
    >>> src_prompt, tgt_prompt = jnp.ones(16), -jnp.ones(16)
    >>> src = sample(gen, jax.random.key(1), src_prompt, cfg_scale=3.0)
    >>> mask = jnp.zeros((8, 8)).at[2:6, 2:6].set(1.0)
    >>> out = edit(gen, jax.random.key(2), src, src_prompt, tgt_prompt,
    ...            var.bit_edit(1.0, 0.1), cfg_scale=3.0, mask=mask)
    >>> bool(jnp.all((out.latent == src.latent)[mask == 0]))
    True
  """
  num_scales = len(generator.scales)
  if len(source.bits) != num_scales:
    raise ValueError(f"source must have the generator's {num_scales} scales;"
                     f" got {len(source.bits)}.")
  for k, ((h, w), bits_k) in enumerate(zip(generator.scales, source.bits)):
    _check_bits(bits_k, (h, w, generator.num_bits), f"source.bits[{k}]")
  _check_prompt(source_prompt, generator, "source_prompt")
  _check_prompt(target_prompt, generator, "target_prompt")
  if not isinstance(config, bitedit.BitEdit):
    raise TypeError(f"config must be a BitEdit (from bit_edit); got"
                    f" {type(config).__name__}.")
  bitedit.check_finite_scale(cfg_scale, "cfg_scale")
  if mask is not None:
    mask = resedit.check_mask(mask, generator.scales[-1])
  gates = resedit.check_gates(gates, num_scales)
  prefix = jnp.zeros((*generator.scales[-1], generator.num_bits))
  bits, kls, clipped, finite = [], [], [], jnp.array(True)
  for k, uniform in enumerate(_uniforms(key, generator)):
    cond, uncond = _clean(generator, target_prompt, prefix, k)
    cond_source = _log_odds(generator, source_prompt, prefix, k)
    guided = bitedit.guide(config, cond, cond_source, uncond, cfg_scale)
    # The guided log-odds too: a traced NaN cfg_scale, strength or epsilon
    # would otherwise draw every bit False, silently.
    finite = _finite_so_far(finite, cond, uncond, cond_source,
                            guided.log_odds)
    bits.append(bitedit.sample_bits(uniform, guided.log_odds))
    kls.append(guided.kl)
    clipped.append(guided.clipped)
    prefix = resedit.compose_scale(
        prefix, generator.codes(source.bits[k]), generator.codes(bits[-1]),
        mask, lambda code, k=k: generator.upsample(code, k), gates[k])
  _check_finite(finite)
  return Edited(tuple(bits), prefix, tuple(kls), tuple(clipped))


class EditScores(NamedTuple):
  """How well one edited image follows the edit and keeps the rest.

  Attributes:
    alignment: cosine between the edited image and the reference over the
      pixels inside the mask (mask-weighted).
    outside_max_error: largest absolute change from the source outside the
      mask.
    outside_rms_error: root mean square change from the source over the
      pixels outside the mask.
  """

  alignment: jax.Array
  outside_max_error: jax.Array
  outside_rms_error: jax.Array


def edit_scores(image: jax.Array, source_image: jax.Array,
                reference_image: jax.Array, mask: jax.Array) -> EditScores:
  r"""In-mask alignment to a reference and out-of-mask change of one edited image.

  The latent-grid mask ``M`` is repeated to pixels (``patch`` = image rows
  per mask row) as the weight ``w``; with the edited image ``x``, the
  source ``s`` and the reference ``r`` (e.g. the target prompt's expected
  decode):

  .. math::
    \mathrm{alignment} = \frac{\sum w\,x\,r}{\sqrt{\sum w\,x^2
    \sum w\,r^2}},\qquad
    e = |x - s|\,(1 - w),\quad \max e,\quad
    \sqrt{\textstyle\sum e^2 / \sum (1 - w)}.

  Source status: the paper (abstract) reports CLIP alignment on the edited
  region and background preservation; these pixel-space stand-ins are
  ours (``docs/bitresedit.md``).

  Args:
    image: the edited ``(H * patch, W * patch, C)`` image.
    source_image: the source image, same shape.
    reference_image: what the edit should look like inside the mask, same
      shape.
    mask: ``(H, W)`` mask on the latent grid, float in [0, 1] or bool.

  Returns:
    An :class:`EditScores` of scalars. The alignment is NaN for an empty
    mask (0 / 0), the RMS error for a mask of all ones.

  Raises:
    ValueError: when the images are not 3-D of one shape, the mask is not
      2-D, the image sides are not the same whole multiple of the mask's,
      or the mask's dtype or (concrete) values are outside [0, 1].

  Batch it with ``jax.vmap``.

  Example:
    >>> x = jnp.ones((4, 4, 3))
    >>> mask = jnp.zeros((2, 2)).at[0, 0].set(1.0)
    >>> s = edit_scores(x, x.at[0, 0].set(0.0), 2 * x, mask)
    >>> float(s.alignment), float(s.outside_max_error)
    (1.0, 0.0)
  """
  image_shape = tuple(jnp.shape(image))
  for name, x in (("source_image", source_image),
                  ("reference_image", reference_image)):
    if tuple(jnp.shape(x)) != image_shape:
      raise ValueError(f"{name} must have the edited image's shape"
                       f" {image_shape}; got {tuple(jnp.shape(x))}.")
  if len(image_shape) != 3 or jnp.ndim(mask) != 2:
    raise ValueError(f"image must be (H * patch, W * patch, C) and mask"
                     f" (H, W); got {image_shape} and {jnp.shape(mask)}.")
  rows, cols = jnp.shape(mask)
  patch = image_shape[0] // max(rows, 1)
  if patch < 1 or image_shape[:2] != (rows * patch, cols * patch):
    raise ValueError(f"image sides {image_shape[:2]} must be the same whole"
                     f" multiple (patch) of the mask's {(rows, cols)}.")
  inside = jnp.repeat(jnp.repeat(resedit.check_mask(mask, (rows, cols)),
                                 patch, 0), patch, 1)[..., None]
  outside_error = jnp.abs(image - source_image) * (1 - inside)
  alignment = jnp.sum(inside * image * reference_image) / jnp.sqrt(
      jnp.sum(inside * image * image)
      * jnp.sum(inside * reference_image * reference_image))
  return EditScores(alignment, outside_error.max(), jnp.sqrt(
      jnp.sum(outside_error**2) / jnp.sum((1 - inside) * jnp.ones_like(image))))
