r"""A small bitwise-residual VAR generator with fixed random weights, for CPU experiments.

It has the structure of Infinity (Han et al., 2024) at toy size, and
implements :class:`jaxpapers.var.editing.BitwiseGenerator`, the interface
the editor uses (a real generator would implement the same five members):

* scales :math:`1\times1, 2\times2, 4\times4, 8\times8`, ``d`` bits per token;
* scale :math:`k`'s per-bit logits ``(h_k, w_k, d, 2)`` are a fixed linear
  map of the prompt embedding and of the running code sum resized to the
  scale's grid, plus a fixed per-position term;
* codes :math:`(2b - 1)/\sqrt{d}`; the latent is the sum of the code maps
  upsampled bilinearly to the final grid;
* the image is a fixed linear decoder of each latent position into a
  ``patch x patch`` RGB patch (local, so a latent left unchanged decodes to
  unchanged pixels).

The unconditional prompt is the zero embedding. All weights are drawn once
from a key; this generator is ours (no weights of any real model).

Example:
  >>> gen = toy_generator(jax.random.key(0))
  >>> gen.scales, gen.num_bits, gen.decode(jnp.zeros((8, 8, 8))).shape
  (((1, 1), (2, 2), (4, 4), (8, 8)), 8, (32, 32, 3))
"""

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_int
from jaxpapers.var import resedit


class ToyGenerator(NamedTuple):
  """Weights of the toy generator (a pytree: pass it through ``jit`` and ``vmap``).

  Attributes:
    prompt_maps: per scale ``(P, d, 2)``: prompt embedding to bit logits.
    feature_maps: per scale ``(d, d, 2)``: running code sum to bit logits.
    positions: per scale ``(h_k, w_k, d, 2)``: a fixed per-position term.
    decoder: ``(d, patch, patch, 3)``: one latent position to an RGB patch.
    upsamplers: per scale ``(H, h_k)``: bilinear upsampling along one axis.
    downsamplers: per scale ``(h_k, H)``: antialiased linear downsampling.
  """

  prompt_maps: tuple[jax.Array, ...]
  feature_maps: tuple[jax.Array, ...]
  positions: tuple[jax.Array, ...]
  decoder: jax.Array
  upsamplers: tuple[jax.Array, ...]
  downsamplers: tuple[jax.Array, ...]

  @property
  def scales(self) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(p.shape[:2]) for p in self.positions)

  @property
  def num_bits(self) -> int:
    return self.decoder.shape[0]

  @property
  def prompt_dim(self) -> int:
    return self.prompt_maps[0].shape[0]

  @property
  def null_prompt(self) -> jax.Array:
    return jnp.zeros((self.prompt_dim,), self.decoder.dtype)

  def _check_scale(self, scale: int) -> None:
    if (not isinstance(scale, (int, np.integer)) or isinstance(scale, bool)
        or not 0 <= scale < len(self.positions)):
      raise ValueError(f"scale must be an int index in [0,"
                       f" {len(self.positions)}); got {scale!r}.")

  def _check_latent(self, latent: jax.Array, name: str) -> None:
    expected = (*self.scales[-1], self.num_bits)
    if tuple(latent.shape) != expected:
      raise ValueError(f"{name} must be the (H, W, d) latent {expected}; got"
                       f" {tuple(latent.shape)}.")

  def bit_logits(self, prompt: jax.Array, prefix: jax.Array,
                 scale: int) -> jax.Array:
    """Scale ``scale``'s ``(h, w, d, 2)`` logits given the ``(H, W, d)`` running code sum."""
    self._check_scale(scale)
    if tuple(prompt.shape) != (self.prompt_dim,):
      raise ValueError(f"prompt must be a ({self.prompt_dim},) embedding; got"
                       f" {tuple(prompt.shape)}.")
    self._check_latent(prefix, "prefix")
    rows = self.downsamplers[scale]
    features = jnp.einsum("hH,HWe,wW->hwe", rows, prefix, rows)
    prompt_term = jnp.einsum("p,pdc->dc", prompt, self.prompt_maps[scale])
    return (prompt_term[None, None]
            + jnp.einsum("hwe,edc->hwdc", features, self.feature_maps[scale])
            + self.positions[scale])

  def codes(self, bits: jax.Array) -> jax.Array:
    return resedit.codes_from_bits(bits)

  def upsample(self, code: jax.Array, scale: int) -> jax.Array:
    """Scale ``scale``'s ``(h, w, d)`` codes, bilinearly upsampled to the final grid."""
    self._check_scale(scale)
    expected = (*self.scales[scale], self.num_bits)
    if tuple(code.shape) != expected:
      raise ValueError(f"code must be scale {scale}'s {expected} codes; got"
                       f" {tuple(code.shape)}.")
    rows = self.upsamplers[scale]
    return jnp.einsum("Hh,hwd,Ww->HWd", rows, code, rows)

  def decode(self, latent: jax.Array) -> jax.Array:
    """The ``(H * patch, W * patch, 3)`` image of an ``(H, W, d)`` latent."""
    self._check_latent(latent, "latent")
    h, w, _ = latent.shape
    patches = jnp.einsum("hwd,dijc->hiwjc", latent, self.decoder)
    patch = self.decoder.shape[1]
    return patches.reshape(h * patch, w * patch, 3)


def toy_generator(key: jax.Array, *, scales: Sequence[int] = (1, 2, 4, 8),
                  num_bits: int = 8, prompt_dim: int = 16, patch: int = 4,
                  prompt_gain: float = 1.0, feature_gain: float = 1.0,
                  position_gain: float = 0.5) -> ToyGenerator:
  r"""Draws the toy generator's fixed weights from ``key``.

  Logit scale: a standard-normal prompt gives prompt terms of standard
  deviation ``prompt_gain``; the running sum (codes of norm 1 per scale)
  gives feature terms of about ``feature_gain``.

  Args:
    key: PRNG key.
    scales: side of each square scale, coarse to fine.
    num_bits: ``d``.
    prompt_dim: ``P``, the prompt embedding width.
    patch: pixels per latent position along each side.
    prompt_gain: scale of the prompt-to-logit map.
    feature_gain: scale of the prefix-to-logit map.
    position_gain: scale of the per-position term.

  Returns:
    A :class:`ToyGenerator`.

  Raises:
    ValueError: on scales that are not increasing positive ints,
      non-positive sizes, or non-finite gains.
  """
  is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)
  if (not scales or any(not is_int(s) or s < 1 for s in scales)
      or any(a >= b for a, b in zip(scales, scales[1:]))):
    raise ValueError(f"scales must be increasing positive ints; got {scales}.")
  for name, value in (("num_bits", num_bits), ("prompt_dim", prompt_dim),
                      ("patch", patch)):
    if not is_int(value) or value < 1:
      raise ValueError(f"{name} must be an int >= 1; got {value!r}.")
  for name, value in (("prompt_gain", prompt_gain),
                      ("feature_gain", feature_gain),
                      ("position_gain", position_gain)):
    if np.ndim(value) != 0 or not np.isfinite(value):
      raise ValueError(f"{name} must be a finite number; got {value!r}.")
  sizes = {"prompt": (prompt_dim, num_bits, 2),
           "feature": (num_bits, num_bits, 2),
           "decoder": (num_bits, patch, patch, 3)}
  shapes = ([sizes["prompt"]] * len(scales) + [sizes["feature"]] * len(scales)
            + [(s, s, num_bits, 2) for s in scales] + [sizes["decoder"]])
  # One draw, cut into the weights: a single eager op however many scales.
  flat = np.asarray(jax.random.normal(key, (sum(map(np.prod, shapes)),)))
  pieces = np.split(flat, np.cumsum([np.prod(x) for x in shapes])[:-1])
  normal = [jnp.asarray(p.reshape(x)) for p, x in zip(pieces, shapes)]
  k = len(scales)
  final = scales[-1]
  return ToyGenerator(
      prompt_maps=tuple(prompt_gain / np.sqrt(prompt_dim) * w
                        for w in normal[:k]),
      feature_maps=tuple(feature_gain * w for w in normal[k:2 * k]),
      positions=tuple(position_gain * w for w in normal[2 * k:3 * k]),
      decoder=normal[-1] / np.sqrt(num_bits),
      upsamplers=tuple(jnp.asarray(linear_resize_matrix(final, s))
                       for s in scales),
      downsamplers=tuple(jnp.asarray(linear_resize_matrix(s, final))
                         for s in scales))


def linear_resize_matrix(size_out: int, size_in: int) -> np.ndarray:
  """``(size_out, size_in)`` weights of 1-D linear resizing, as ``jax.image.resize``.

  Half-pixel centres and a triangle kernel, widened by the downsampling
  factor (antialiasing) and normalised per output, so the edges clamp:
  ``"bilinear"`` upsampling, ``"linear"`` antialiased downsampling.

  Example:
    >>> linear_resize_matrix(4, 2).tolist()
    [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
  """
  for name, value in (("size_out", size_out), ("size_in", size_in)):
    check_int(name, value, 1)
  scale = size_out / size_in
  width = max(1.0, 1.0 / scale)
  centres = (np.arange(size_out) + 0.5) / scale - 0.5
  weights = np.maximum(
      0.0, 1.0 - np.abs(np.arange(size_in)[None] - centres[:, None]) / width)
  return (weights / weights.sum(1, keepdims=True)).astype(np.float32)
