r"""Native-resolution ("multi-scale") WAMRViT: every leaf at its source resolution.

In native storage (the abstract's multi-scale variant) a level-``l`` leaf
keeps its full ``(Ph 2^d, Pw 2^d)`` footprint, ``d = L - l``, so nothing is
interpolated going in or out; the model absorbs the per-level resolution
difference.

**Encoder** (the authors' ``wamrvit/quadtree_transformer.py``). A level-``l``
leaf passes ``d`` :class:`ShrinkBlock`\ s, each a 2x2 stride-2 convolution
from ``c`` to ``2 m c`` channels followed by SwiGLU (first half times SiLU of
the second half), leaving ``m c`` channels at half the resolution
(``m = 2``). After ``d`` blocks the leaf is a ``(Ph, Pw, C m^d)`` patch,
which a per-level linear map embeds to ``D``.

**Backbone.** The shared :class:`jaxpapers.amr.TokenBackbone` with the
3-axis RoPE; the scale coordinate is the level index (our default,
``docs/wamrvit.md``). Finest leaves (``d = 0``) use the backbone's own embed
and decode maps, so a tree whose leaves are all at level ``L`` gives exactly the
uniform-storage :class:`jaxpapers.amr.WAMRViT` with the same weights.

**Decoder** (the same file, native mode). A per-level linear map to a
``(Ph, Pw, C m^d)`` patch, then ``d`` :class:`ExpandBlock`\ s, each a 3x3
convolution then PixelShuffle(2); every block but the last ends in SwiGLU and
its convolution has ``8 c_out`` channels (``4 c_out`` in the last block), so
channels go ``C m^d -> C m^(d-1) -> ... -> C`` while the resolution doubles.
Each token's residual is thus predicted at its native footprint and placed on
the finest grid by the native :func:`jaxpapers.amr.detokenize`.

**Static shapes.** The native tokens are a tuple over levels of
``(B, T, Ph 2^d, Pw 2^d, C)`` slot arrays; each level's path runs on all
``T`` slots of its array and the result is kept only where the slot holds a
real leaf of that level (``jnp.where``), so padded and other-level slots never
reach a real output and the model is ``jit``- and ``vmap``-able.

Reconstruction (label): the exact channel splits of the SwiGLU blocks (the
authors' gate "first half times SiLU(second half)" applied after the stride-2
convolution and after the pixel shuffle), the mirrored decoder channel ladder
``C m^d -> ... -> C``, one Shrink/Expand stack per level (no sharing between
levels), reuse of the backbone's maps for finest leaves, and zero-initialised
last decoder layers (an untrained model predicts no change).
"""

from typing import Sequence

from flax import nnx
import jax
import jax.numpy as jnp

from jaxpapers import models
from jaxpapers import tree as tree_lib
from jaxpapers.amr._quadtree import leaf_coordinates
from jaxpapers.amr._quadtree import Quadtree
from jaxpapers.amr._tokens import detokenize
from jaxpapers.amr._vit import BackboneConfig
from jaxpapers.amr._vit import TokenBackbone


def swiglu(x_NxC: jax.Array) -> jax.Array:
  """SwiGLU gate ``a * SiLU(b)`` with ``[a | b]`` the channel halves: ``(..., 2c) -> (..., c)``.

  Raises:
    ValueError: the last axis is missing or of odd size.
  """
  if x_NxC.ndim < 1 or x_NxC.shape[-1] % 2:
    raise ValueError(
        f"swiglu: x_NxC needs an even last (channel) axis; got shape"
        f" {tuple(x_NxC.shape)}.")
  first, second = jnp.split(x_NxC, 2, axis=-1)
  return first * jax.nn.silu(second)


def pixel_shuffle(x_NxHxWxC: jax.Array, factor: int = 2) -> jax.Array:
  """PyTorch's ``PixelShuffle`` in NHWC: ``(N, H, W, C r^2) -> (N, H r, W r, C)``.

  Output channel ``c`` at ``(h r + a, w r + b)`` is input channel
  ``c r^2 + a r + b`` at ``(h, w)``.

  Raises:
    ValueError: ``x_NxHxWxC`` is not 4-D, ``factor`` is not an int >= 1, or
      the channels are not a multiple of ``factor ** 2``.
  """
  if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
    raise ValueError(
        f"pixel_shuffle: factor must be an int >= 1; got {factor!r}.")
  if x_NxHxWxC.ndim != 4 or x_NxHxWxC.shape[-1] % (factor * factor):
    raise ValueError(
        f"pixel_shuffle: x_NxHxWxC must be (N, H, W, C r^2) with r = {factor};"
        f" got shape {tuple(x_NxHxWxC.shape)}.")
  out_channels = x_NxHxWxC.shape[-1] // (factor * factor)
  # One split or merge per reshape (see jaxpapers.tree.split_axis).
  x = tree_lib.split_axis(tree_lib.split_axis(
      x_NxHxWxC, 3, (out_channels, factor * factor)), 4, (factor, factor))
  x = x.transpose(0, 1, 4, 2, 5, 3)
  return tree_lib.merge_axes(tree_lib.merge_axes(x, 3), 1)


def _flat_tokens(x_NxHxWxC: jax.Array, batch: int) -> jax.Array:
  """``(B T, H, W, C) -> (B, T, H W C)``, one split or merge per reshape."""
  flat = tree_lib.merge_axes(tree_lib.merge_axes(x_NxHxWxC, 2), 1)
  return tree_lib.split_axis(flat, 0, (batch, flat.shape[0] // batch))


def _unflat_tokens(x_BxTxF: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  """``(B, T, H W C) -> (B, T, H, W, C)`` (inverse of :func:`_flat_tokens`)."""
  height, width, channels = shape
  return tree_lib.split_axis(tree_lib.split_axis(
      x_BxTxF, 2, (height, width * channels)), 3, (width, channels))


class ShrinkBlock(nnx.Module):
  """2x2 stride-2 conv ``c -> 2 m c`` then SwiGLU: ``(N, H, W, c) -> (N, H/2, W/2, m c)``.

  The convolution (kernel ``(2, 2, c, 2 m c)``, as ``nnx.Conv`` stores it, and
  a bias) is computed as a matmul of each 2x2 block: with kernel = stride the
  blocks do not overlap, and on CPU this halved the whole model's training
  step against ``nnx.Conv`` at our experiment's sizes. One input frame: the
  authors' Conv3d with kernel and stride ``(1, 2, 2)``.
  """

  def __init__(self, channels: int, multiplier: int = 2, *, rngs: nnx.Rngs):
    if channels < 1 or multiplier < 1:
      raise ValueError(
          f"ShrinkBlock: channels and multiplier must be >= 1; got {channels},"
          f" {multiplier}.")
    out = 2 * multiplier * channels
    self.kernel = nnx.Param(nnx.initializers.lecun_normal()(
        rngs.params(), (2, 2, channels, out)))
    self.bias = nnx.Param(jnp.zeros((out,)))

  @models.fsdp_gathered
  def __call__(self, x_NxHxWxC: jax.Array) -> jax.Array:
    channels = self.kernel.shape[2]
    if x_NxHxWxC.ndim != 4 or x_NxHxWxC.shape[3] != channels or (
        x_NxHxWxC.shape[1] % 2 or x_NxHxWxC.shape[2] % 2):
      raise ValueError(
          f"ShrinkBlock: x_NxHxWxC must be (N, H, W, {channels}) with even H"
          f" and W; got shape {tuple(x_NxHxWxC.shape)}.")
    _, h, w, c = x_NxHxWxC.shape
    blocks = tree_lib.split_axis(tree_lib.split_axis(
        x_NxHxWxC, 2, (w // 2, 2)), 1, (h // 2, 2)).transpose(0, 1, 3, 2, 4, 5)
    blocks = tree_lib.merge_axes(tree_lib.merge_axes(blocks, 3), 3)
    kernel = self.kernel[...].reshape(4 * c, -1)
    return swiglu(blocks @ kernel + self.bias[...].reshape(1, 1, 1, -1))


class ExpandBlock(nnx.Module):
  """3x3 conv, PixelShuffle(2), SwiGLU if ``gated``: ``(N, H, W, c_in) -> (N, 2H, 2W, c_out)``."""

  def __init__(self, in_channels: int, out_channels: int, gated: bool, *,
               rngs: nnx.Rngs, kernel_init=nnx.initializers.lecun_normal()):
    if in_channels < 1 or out_channels < 1:
      raise ValueError(
          f"ExpandBlock: in_channels and out_channels must be >= 1; got"
          f" {in_channels}, {out_channels}.")
    self.gated = gated
    width = (8 if gated else 4) * out_channels
    self.conv = nnx.Conv(in_channels, width, kernel_size=(3, 3),
                         padding="SAME", kernel_init=kernel_init, rngs=rngs)

  @models.fsdp_gathered
  def __call__(self, x_NxHxWxC: jax.Array) -> jax.Array:
    # Channels sharded along a mesh axis are summed over: the output keeps
    # the sharding of x's other axes.
    out = pixel_shuffle(self.conv(
        x_NxHxWxC, out_sharding=tree_lib.contraction_spec(x_NxHxWxC)))
    return swiglu(out) if self.gated else out


class NativeWAMRViT(nnx.Module):
  """WAMRViT on native-storage leaf tokens: predicts the residual on the finest grid.

  Call as ``model(tokens, trees) -> (B, H, W, C)`` with ``tokens`` the tuple
  of ``jax.vmap(partial(tokenize, mode="native"))`` (per level ``l``,
  ``(B, T, Ph 2^(L-l), Pw 2^(L-l), C)``) and ``trees`` the batched
  :class:`Quadtree`; :meth:`leaf_outputs` gives the per-leaf predictions in
  the same native layout.

  Args:
    config: backbone sizes; ``config.token_size`` must be ``Ph * Pw * C``
      (e.g. :func:`jaxpapers.amr.wamrvit_config`).
    patch: base patch ``(Ph, Pw)``.
    channels: field channels ``C``.
    max_level: deepest level ``L``.
    multiplier: channel growth ``m`` per Shrink/Expand block.
    rngs: parameter initialisation.

  Example:
    >>> import functools, jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers import amr
    >>> fields = jax.random.normal(jax.random.key(0), (2, 32, 32))
    >>> trees = jax.vmap(lambda f: amr.build_quadtree(
    ...     f, patch=4, tol_frac=0.5, max_level=2, max_tokens=64))(fields)
    >>> tokens = jax.vmap(functools.partial(amr.tokenize, mode="native"))(
    ...     fields, trees)
    >>> [t.shape[2:4] for t in tokens]
    [(16, 16), (8, 8), (4, 4)]
    >>> config = amr.wamrvit_config((4, 4), 1, 2, (8, 8), d_model=32,
    ...                             num_heads=1, num_layers=1)
    >>> model = amr.NativeWAMRViT(config, (4, 4), 1, 2, rngs=nnx.Rngs(0))
    >>> model(tokens, trees).shape
    (2, 32, 32, 1)
  """

  def __init__(self, config: BackboneConfig, patch: tuple[int, int],
               channels: int, max_level: int, multiplier: int = 2, *,
               rngs: nnx.Rngs):
    ph, pw = patch
    if config.token_size != ph * pw * channels:
      raise ValueError(
          f"config.token_size={config.token_size} must be Ph * Pw * C ="
          f" {ph * pw * channels} for patch {tuple(patch)} and {channels}"
          " channels.")
    if max_level < 0 or multiplier < 1:
      raise ValueError(
          f"max_level must be >= 0 and multiplier >= 1; got {max_level},"
          f" {multiplier}.")
    self.patch = (ph, pw)
    self.channels = channels
    self.max_level = max_level
    self.multiplier = multiplier
    self.backbone = TokenBackbone(config, rngs=rngs)
    d_model = config.d_model
    shrink, expand, embed, decode = [], [], [], []
    for level in range(max_level):
      depth = max_level - level
      width = ph * pw * channels * multiplier ** depth
      shrink.append(nnx.List([
          ShrinkBlock(channels * multiplier ** k, multiplier, rngs=rngs)
          for k in range(depth)]))
      embed.append(nnx.Linear(width, d_model, rngs=rngs))
      decode.append(nnx.Linear(d_model, width, rngs=rngs))
      expand.append(nnx.List([
          ExpandBlock(channels * multiplier ** (depth - k),
                      channels * multiplier ** (depth - k - 1),
                      gated=k < depth - 1, rngs=rngs,
                      kernel_init=(nnx.initializers.zeros if k == depth - 1
                                   else nnx.initializers.lecun_normal()))
          for k in range(depth)]))
    # Levels 0 .. L-1; finest leaves use the backbone's embed and decode.
    self.shrink = nnx.List(shrink)
    self.embed = nnx.List(embed)
    self.decode = nnx.List(decode)
    self.expand = nnx.List(expand)

  def _check(self, tokens, trees: Quadtree) -> tuple[int, int]:
    if not isinstance(tokens, (tuple, list)) or len(tokens) != self.max_level + 1:
      raise ValueError(
          "tokens must be a tuple of one native array per level (max_level + 1"
          f" = {self.max_level + 1}); got"
          f" {len(tokens) if isinstance(tokens, (tuple, list)) else type(tokens)}.")
    if trees.level.ndim != 2:
      raise ValueError(
          f"trees must be a batch of trees (level of shape (B, T)); got shape"
          f" {trees.level.shape}.")
    if trees.geometry.patch != self.patch or (
        trees.geometry.max_level != self.max_level):
      raise ValueError(
          f"trees have patch {trees.geometry.patch} and max_level"
          f" {trees.geometry.max_level}; the model expects {self.patch} and"
          f" {self.max_level}.")
    b, t = trees.level.shape
    for level, array in enumerate(tokens):
      expected = (b, t, *trees.geometry.cell_pixels(level), self.channels)
      if tuple(array.shape) != expected:
        raise ValueError(
            f"tokens[{level}] must have shape {expected} (batch, slots, native"
            f" footprint of level {level}, channels); got {tuple(array.shape)}.")
    return b, t

  @models.fsdp_gathered
  def leaf_outputs(self, tokens: Sequence[jax.Array], trees: Quadtree
                   ) -> tuple[jax.Array, ...]:
    """Per-leaf predictions in the native layout of ``tokens`` (zero elsewhere)."""
    b, t = self._check(tokens, trees)
    here_per_level = [trees.mask & (trees.level == level)
                      for level in range(self.max_level + 1)]
    x_BxTxD = None
    for level, (array, here_BxT) in enumerate(zip(tokens, here_per_level)):
      h = tree_lib.merge_axes(array, 0)
      if level < self.max_level:
        for block in self.shrink[level]:
          h = block(h)
        embedded = self.embed[level](_flat_tokens(h, b))
      else:
        embedded = self.backbone.embed(_flat_tokens(h, b))
      embedded = jnp.where(here_BxT[..., None], embedded,
                           jnp.zeros((), embedded.dtype))
      x_BxTxD = embedded if x_BxTxD is None else x_BxTxD + embedded
    hidden_BxTxD = self.backbone.mix(x_BxTxD, leaf_coordinates(trees),
                                     trees.mask)
    ph, pw = self.patch
    outputs = []
    for level, here_BxT in enumerate(here_per_level):
      if level < self.max_level:
        h = tree_lib.merge_axes(self.decode[level](hidden_BxTxD), 0)
        h = tree_lib.split_axis(h, 1, (ph, h.shape[1] // ph))
        h = tree_lib.split_axis(h, 2, (pw, h.shape[2] // pw))
        for block in self.expand[level]:
          h = block(h)
        out = tree_lib.split_axis(h, 0, (b, t))
      else:
        out = _unflat_tokens(self.backbone.decode(hidden_BxTxD),
                             tokens[level].shape[2:])
      outputs.append(jnp.where(here_BxT.reshape(b, t, 1, 1, 1), out,
                               jnp.zeros((), out.dtype)))
    return tuple(outputs)

  def __call__(self, tokens: Sequence[jax.Array], trees: Quadtree) -> jax.Array:
    # Trees sharded unlike the outputs are mapped alike (tree.vmap_sharded).
    return tree_lib.vmap_sharded(detokenize)(self.leaf_outputs(tokens, trees),
                                             trees)
