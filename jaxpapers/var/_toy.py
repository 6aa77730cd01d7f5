r"""A small bitwise-residual VAR generator with fixed random weights, for CPU experiments.

It has the structure of Infinity (Han et al., 2024) at toy size, and
implements :class:`jaxpapers.var.BitwiseGenerator`, the interface
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

:func:`edit_batch` draws a batch of editing tasks for it (prompt pairs,
rectangle masks, sources and the target prompts' expected decodes);
:func:`score_edits` runs BitResEdit on every task and scores the edits.
"""

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_flag
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.var import _bitedit as bitedit
from jaxpapers.var import _editing as editing
from jaxpapers.var import _resedit as resedit


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


class EditBatch(NamedTuple):
  """A batch of ``n`` toy editing tasks (:func:`edit_batch`).

  Attributes:
    source_prompts: ``(n, P)`` prompt embeddings of the sources.
    target_prompts: ``(n, P)`` prompt embeddings of the edits.
    masks: ``(n, H, W)`` float32 rectangle masks (1 inside) on the latent grid.
    edit_keys: ``(n,)`` PRNG keys for the editor's sampling noise.
    sources: the source :class:`jaxpapers.var.Sample` s, batched.
    source_images: ``(n, H * patch, W * patch, 3)`` decoded sources.
    reference_images: the target prompts' expected decodes (the mean latent
      of ``reference_samples`` clean target samples, decoded; the mean decode,
      since the toy decoder is linear).
  """

  source_prompts: jax.Array
  target_prompts: jax.Array
  masks: jax.Array
  edit_keys: jax.Array
  sources: editing.Sample
  source_images: jax.Array
  reference_images: jax.Array


@jax.jit
def _sample_batch(generator, keys, prompts, cfg_scale):
  sample = lambda k, p: editing.sample(generator, k, p, cfg_scale=cfg_scale)
  return jax.vmap(sample)(keys, prompts)


def _rectangle_masks(rng, num_images, grid, sides):
  masks = np.zeros((num_images, *grid), np.float32)
  for mask in masks:
    h, w = rng.integers(sides[0], sides[1] + 1, 2)
    top = rng.integers(0, grid[0] - h + 1)
    left = rng.integers(0, grid[1] - w + 1)
    mask[top:top + h, left:left + w] = 1.0
  return masks


def edit_batch(generator: ToyGenerator, key: jax.Array, num_images: int, *,
               cfg_scale: float, mask_seed: int, edit_scale: float = 1.0,
               mask_sides: Sequence[int] = (3, 5),
               reference_samples: int = 128) -> EditBatch:
  """Draws ``num_images`` editing tasks for a toy generator.

  Source prompts are standard normal; each target prompt is its source plus
  ``edit_scale`` times a standard-normal direction. Each task has one
  rectangle mask (sides uniform in ``mask_sides``, position uniform on the
  latent grid, drawn with numpy from ``mask_seed``), a source sampled with
  the clean CFG sampler, and a reference: the decoded mean latent of
  ``reference_samples`` clean samples of the target prompt.

  Source status: ours (a CPU-scale stand-in for PIE-Bench's image, prompt
  pair and mask triples; ``docs/bitresedit.md``).

  Args:
    generator: a :class:`ToyGenerator`.
    key: PRNG key of the prompts, sampling noise and edit keys.
    num_images: ``n >= 1``.
    cfg_scale: classifier-free guidance scale of the sources and
      references, finite.
    mask_seed: numpy seed of the masks, an int >= 0.
    edit_scale: size of the target prompts' offset, finite and >= 0.
    mask_sides: ``(low, high)`` ints, ``1 <= low <= high <=`` the latent
      grid's smaller side.
    reference_samples: clean target samples per reference, >= 1.

  Returns:
    An :class:`EditBatch`.

  Raises:
    ValueError / TypeError: on a count that is not an int >= 1, a bad
      ``mask_seed``, ``mask_sides`` or ``edit_scale``, or a non-finite
      ``cfg_scale``.

  Example:
    >>> gen = toy_generator(jax.random.key(0))
    >>> batch = edit_batch(gen, jax.random.key(1), 2, cfg_scale=3.0,
    ...                    mask_seed=0, reference_samples=4)
    >>> batch.masks.shape, batch.reference_images.shape
    ((2, 8, 8), (2, 32, 32, 3))
  """
  n = check_int("num_images", num_images, 1)
  check_int("reference_samples", reference_samples, 1)
  check_int("mask_seed", mask_seed, 0)
  check_real("edit_scale", edit_scale, low=0.0)
  bitedit.check_finite_scale(cfg_scale, "cfg_scale")
  grid = generator.scales[-1]
  if (len(mask_sides) != 2
      or check_int("mask_sides[0]", mask_sides[0], 1) > check_int(
          "mask_sides[1]", mask_sides[1], 1, min(grid))):
    raise ValueError(f"mask_sides must be (low, high) with 1 <= low <= high"
                     f" <= {min(grid)} (the latent grid); got {mask_sides}.")
  keys = jax.random.split(key, 5)
  source_prompts = jax.random.normal(keys[0], (n, generator.prompt_dim))
  target_prompts = source_prompts + edit_scale * jax.random.normal(
      keys[1], (n, generator.prompt_dim))
  masks = _rectangle_masks(np.random.default_rng(mask_seed), n, grid,
                           mask_sides)
  sources = _sample_batch(generator, jax.random.split(keys[2], n),
                          source_prompts, cfg_scale)

  def expected_decode(args):
    sample_keys, prompt = args
    latents = jax.vmap(lambda k: editing.sample(
        generator, k, prompt, cfg_scale=cfg_scale).latent)(sample_keys)
    return generator.decode(latents.mean(0))  # the decoder is linear

  # lax.map over images: a nested vmap compiles several times slower.
  reference_keys = jax.random.split(keys[3], (n, reference_samples))
  references = jax.jit(lambda a: jax.lax.map(expected_decode, a))(
      (reference_keys, target_prompts))
  return EditBatch(source_prompts, target_prompts, jnp.asarray(masks),
                   jax.random.split(keys[4], n), sources,
                   jax.vmap(generator.decode)(sources.latent), references)


class ScoredEdits(NamedTuple):
  """BitResEdit on each task of an :class:`EditBatch` (:func:`score_edits`).

  Attributes:
    alignment: ``(n,)`` in-mask cosine to the reference image.
    outside_max_error: ``(n,)`` largest change from the source outside the
      mask.
    outside_rms_error: ``(n,)`` RMS change from the source outside the mask.
    kl_max: ``(n,)`` largest realized per-bit KL to the clean sampler, over
      every bit of every scale (nats).
    kl_mean: ``(n,)`` mean realized per-bit KL.
    clipped: ``(n,)`` share of bits whose tilt the trust region cut.
    images: ``(n, H * patch, W * patch, 3)`` decoded edits.
    bits: per scale, the ``(n, h_k, w_k, d)`` edited bits.
  """

  alignment: jax.Array
  outside_max_error: jax.Array
  outside_rms_error: jax.Array
  kl_max: jax.Array
  kl_mean: jax.Array
  clipped: jax.Array
  images: jax.Array
  bits: tuple[jax.Array, ...]


def score_edits(generator: ToyGenerator, batch: EditBatch,
                config: bitedit.BitEdit, *, cfg_scale: float | jax.Array,
                masked: bool = True) -> ScoredEdits:
  """Edits every task of ``batch`` with BitResEdit and scores each edit.

  Task ``i``'s edit is :func:`jaxpapers.var.edit` of its source
  from its source prompt to its target prompt with its edit key, inside its
  mask (ResEdit) when ``masked``, else over the whole latent (BitEdit
  alone); its scores are :func:`jaxpapers.var.edit_scores` against
  the source image and the reference, on the task's mask either way.

  Source status: ours (the CPU-scale protocol of ``docs/bitresedit.md``).

  Args:
    generator: the :class:`ToyGenerator` the batch was drawn for.
    batch: an :class:`EditBatch`.
    config: BitEdit's hyperparameters (:func:`jaxpapers.var.bit_edit`).
    cfg_scale: classifier-free guidance scale, finite.
    masked: apply the task masks (ResEdit); a Python bool.

  Returns:
    A :class:`ScoredEdits`.

  Raises:
    TypeError: when ``batch`` is not an :class:`EditBatch` or ``masked``
      not a bool; and whatever :func:`jaxpapers.var.edit` raises.

  Jit it with ``masked`` static; with :func:`jaxpapers.var.bit_edit`
  called inside, strength and epsilon can be traced.

  Example:
    >>> gen = toy_generator(jax.random.key(0), scales=(1, 2), num_bits=4,
    ...                     prompt_dim=4, patch=2)
    >>> batch = edit_batch(gen, jax.random.key(1), 2, cfg_scale=3.0,
    ...                    mask_seed=0, mask_sides=(1, 2), reference_samples=2)
    >>> out = score_edits(gen, batch, bitedit.bit_edit(1.0, 0.1), cfg_scale=3.0)
    >>> out.alignment.shape, [float(e) for e in out.outside_max_error]
    ((2,), [0.0, 0.0])
  """
  if not isinstance(batch, EditBatch):
    raise TypeError(f"batch must be an EditBatch (from edit_batch); got"
                    f" {type(batch).__name__}.")
  check_flag("masked", masked)

  def one(source_prompt, target_prompt, mask, key, source, source_image,
          reference):
    out = editing.edit(generator, key, source, source_prompt, target_prompt,
                       config, cfg_scale=cfg_scale,
                       mask=mask if masked else None)
    image = generator.decode(out.latent)
    kl = jnp.concatenate([k.ravel() for k in out.kl])
    clipped = jnp.concatenate([c.ravel() for c in out.clipped])
    return ScoredEdits(*editing.edit_scores(image, source_image, reference,
                                            mask), kl.max(), kl.mean(),
                       clipped.mean(), image, out.bits)

  return jax.vmap(one)(*batch)
