r"""ResEdit: masked per-scale code residuals, re-injected through the sum of scales.

A bitwise-residual VAR generator (Infinity, Han et al., 2024) writes scale
:math:`k` as continuous codes :math:`c_k = (2b - 1)/\sqrt{d}` on an
:math:`h_k \times w_k` grid and forms its latent as the sum of the per-scale
code maps upsampled to the final grid, :math:`F = \sum_k \mathrm{up}_k(c_k)`.
ResEdit (Zhang et al., 2026) turns the edited bits into per-scale residuals
against the source codes, gates them with a localisation mask and adds them
back through that same sum:

.. math::
  r_k = c_k^\text{edit} - c_k^\text{src}, \qquad
  F = \sum_k \mathrm{up}_k(c_k^\text{src})
      + \sum_k g_k\, (M \odot \mathrm{up}_k(r_k)),

with :math:`M \in [0, 1]` on the final grid and per-scale gates :math:`g_k`.
The gate acts after :math:`\mathrm{up}_k`, i.e. the mask is resized to each
scale's upsampled residual: gating :math:`r_k` on its own coarse grid would
let bilinear upsampling leak the edit outside :math:`M`. Where :math:`M = 0`
the composed latent is the source's, bit for bit.

Source status (``docs/bitresedit.md``): the bit-to-code map and the sum of
upsampled scales are Infinity's (public code); the residual, the mask and
the gates follow the paper's abstract. **Reconstruction** (ours): the exact
composition formula above, running the composition scale by scale
(:func:`compose_scale`), and the default gates (all 1).

References:
  Zhang, Liao, Tresp, Plank, Schuetze, "Edit the Bits, Diff the Codes:
  Bitwise Residual Editing for Visual Autoregressive Models", 2026,
  https://arxiv.org/abs/2606.13558 (abstract).
  Han et al., "Infinity", 2024, https://arxiv.org/abs/2412.04431.
"""

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

Upsample = Callable[[jax.Array], jax.Array]


def codes_from_bits(bits: jax.Array) -> jax.Array:
  r"""Continuous codes :math:`(2b - 1)/\sqrt{d}` of ``(..., d)`` bits (Infinity's map).

  ``bits`` are booleans (or 0/1 ints); a float array raises ``TypeError``,
  concrete ints other than 0 and 1 ``ValueError``, and traced ones give NaN
  codes (not the codes of bits of another size).

  Example:
    >>> codes_from_bits(jnp.array([True, False, True, True])).tolist()
    [0.5, -0.5, 0.5, 0.5]
  """
  if bits.ndim < 1 or not (bits.dtype == jnp.bool_
                           or jnp.issubdtype(bits.dtype, jnp.integer)):
    raise TypeError(f"bits must be a bool (or 0/1 int) array of shape (..., d);"
                    f" got {bits.dtype}{list(bits.shape)}.")
  num_bits = bits.shape[-1]
  if bits.dtype != jnp.bool_ and not isinstance(bits, jax.core.Tracer):
    values = np.asarray(bits)
    if not np.all((values == 0) | (values == 1)):
      raise ValueError(f"bits must hold 0 or 1; got values"
                       f" {np.unique(values)[:5].tolist()}.")
  codes = (2 * bits.astype(jnp.float32) - 1) / jnp.sqrt(jnp.float32(num_bits))
  if bits.dtype == jnp.bool_:
    return codes
  return jnp.where((bits == 0) | (bits == 1), codes, jnp.nan)


def check_mask(mask: jax.Array, grid: tuple[int, int]) -> jax.Array:
  """The ``(H, W)`` mask on the final grid as a float array in [0, 1].

  A float mask is returned as it is, a bool one as 0/1 float32.

  Raises:
    ValueError: for another shape, an integer or complex dtype (a 0..255
      image mask must be scaled to [0, 1] first), or concrete values outside
      [0, 1] (NaN included). A traced float mask is not checked here;
      :func:`compose_scale` makes the latent NaN where it is outside [0, 1].
  """
  if tuple(mask.shape) != tuple(grid):
    raise ValueError(f"mask must have the final latent grid's shape {grid}"
                     f" (H, W); got {tuple(mask.shape)}.")
  if mask.dtype == jnp.bool_:
    return mask.astype(jnp.float32)
  if not jnp.issubdtype(mask.dtype, jnp.floating):
    raise ValueError(f"mask must be a float array in [0, 1] or a bool array;"
                     f" got dtype {mask.dtype} (scale a 0..255 mask to"
                     " [0, 1]).")
  if not isinstance(mask, jax.core.Tracer):
    values = np.asarray(mask)
    outside = ~((values >= 0) & (values <= 1))
    if outside.any():
      raise ValueError(f"mask must lie in [0, 1]; got {outside.sum()} values"
                       f" outside (NaN included), e.g. {values[outside][0]}"
                       " (scale a 0..255 mask to [0, 1]).")
  return mask


def check_gates(gates: Sequence[float] | jax.Array | None,
                num_scales: int) -> jax.Array:
  """The ``(num_scales,)`` gates (default all 1); concrete ones must be finite."""
  gates = jnp.ones(num_scales) if gates is None else jnp.asarray(gates)
  if gates.shape != (num_scales,):
    raise ValueError(f"gates must hold one gate per scale ({num_scales},);"
                     f" got shape {gates.shape}.")
  if not (jnp.issubdtype(gates.dtype, jnp.floating)
          or jnp.issubdtype(gates.dtype, jnp.integer)):
    raise TypeError(f"gates must be real numbers; got {gates.dtype}.")
  if (not isinstance(gates, jax.core.Tracer)
      and not np.all(np.isfinite(np.asarray(gates)))):
    raise ValueError(f"gates must be finite; got {np.asarray(gates).tolist()}.")
  return gates


def compose_scale(prefix: jax.Array, source_code: jax.Array,
                  edited_code: jax.Array, mask: jax.Array | None,
                  upsample: Upsample,
                  gate: float | jax.Array = 1.0) -> jax.Array:
  r"""One scale of the composition: ``prefix + up(c_src) + g * M * up(c_edit - c_src)``.

  With ``mask=None`` (no ResEdit) the edited code is added directly,
  ``prefix + up(c_edit)``.

  Args:
    prefix: ``(H, W, d)`` running sum of the earlier scales.
    source_code: ``(h, w, d)`` source codes of this scale.
    edited_code: ``(h, w, d)`` edited codes of this scale.
    mask: ``(H, W)`` gate in [0, 1] (float, or bool), or None
      (:func:`check_mask`).
    upsample: the generator's ``(h, w, d) -> (H, W, d)`` upsampling.
    gate: this scale's gate :math:`g_k`, finite.

  Returns:
    The ``(H, W, d)`` running sum through this scale; NaN where a traced
    mask lies outside [0, 1] (an out-of-range mask extrapolates the edit:
    it is flagged, not used).

  Raises:
    ValueError: for mismatched code shapes, a prefix that is not 3-D, a bad
      mask (:func:`check_mask`) or a concrete non-finite gate.
  """
  if source_code.shape != edited_code.shape:
    raise ValueError(f"edited_code must have the shape of source_code"
                     f" {source_code.shape}; got {edited_code.shape}.")
  if prefix.ndim != 3:
    raise ValueError(f"prefix must be the (H, W, d) running sum; got shape"
                     f" {prefix.shape}.")
  if jnp.ndim(gate) != 0:
    raise ValueError(f"gate must be a scalar; got shape {jnp.shape(gate)}.")
  if (not isinstance(gate, jax.core.Tracer)
      and not np.isfinite(np.asarray(gate))):
    raise ValueError(f"gate must be finite; got {gate}.")
  if mask is None:
    return prefix + upsample(edited_code)
  mask = check_mask(mask, prefix.shape[:2])
  mask = jnp.where((mask >= 0) & (mask <= 1), mask, jnp.nan)
  # Adding the source first keeps F bit-identical to the source where M = 0.
  residual = upsample(edited_code - source_code)
  return (prefix + upsample(source_code)) + gate * mask[..., None] * residual


def compose(source_codes: Sequence[jax.Array],
            edited_codes: Sequence[jax.Array], mask: jax.Array | None,
            upsample: Sequence[Upsample],
            gates: Sequence[float] | jax.Array | None = None) -> jax.Array:
  r"""The composed latent :math:`F` from every scale's source and edited codes.

  Args:
    source_codes: per-scale ``(h_k, w_k, d)`` source codes, coarse to fine.
    edited_codes: per-scale edited codes, same shapes.
    mask: ``(H, W)`` in [0, 1] (float, or bool) on the final grid, or None
      (no ResEdit).
    upsample: per-scale upsampling ``(h_k, w_k, d) -> (H, W, d)``.
    gates: per-scale finite :math:`g_k` (default all 1).

  Returns:
    The ``(H, W, d)`` latent (NaN where a traced mask lies outside [0, 1]).

  Raises:
    ValueError / TypeError: on a mismatched number of scales or gates,
      (concrete) non-finite gates, or a bad mask (:func:`check_mask`).

  Example:
    >>> up = lambda c: jnp.broadcast_to(c, (2, 2, 1))
    >>> src, edit = [jnp.zeros((1, 1, 1))], [jnp.ones((1, 1, 1))]
    >>> mask = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    >>> compose(src, edit, mask, [up])[..., 0].tolist()
    [[1.0, 0.0], [0.0, 0.0]]
  """
  num_scales = len(source_codes)
  if not num_scales:
    raise ValueError("source_codes must list at least one scale.")
  if len(edited_codes) != num_scales or len(upsample) != num_scales:
    raise ValueError(f"source_codes, edited_codes and upsample must list the"
                     f" same scales; got {num_scales}, {len(edited_codes)},"
                     f" {len(upsample)}.")
  gates = check_gates(gates, num_scales)
  final = upsample[-1](source_codes[-1])
  latent = jnp.zeros_like(final)
  for k in range(num_scales):
    latent = compose_scale(latent, source_codes[k], edited_codes[k], mask,
                           upsample[k], gates[k])
  return latent


def sum_of_scales(codes: Sequence[jax.Array],
                  upsample: Sequence[Upsample]) -> jax.Array:
  r"""The generator's latent :math:`\sum_k \mathrm{up}_k(c_k)`, accumulated coarse to fine.

  Example:
    >>> up = lambda c: jnp.broadcast_to(c, (2, 2, 1))
    >>> sum_of_scales([jnp.ones((1, 1, 1)), jnp.ones((1, 1, 1))],
    ...               [up, up])[0, 0].tolist()
    [2.0]
  """
  if not codes or len(codes) != len(upsample):
    raise ValueError(f"codes and upsample must list the same, non-empty"
                     f" scales; got {len(codes)} and {len(upsample)}.")
  latent = jnp.zeros_like(upsample[-1](codes[-1]))
  for code, up in zip(codes, upsample, strict=True):
    latent = latent + up(code)
  return latent
