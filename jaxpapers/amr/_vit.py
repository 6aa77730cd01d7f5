r"""WAMRViT and the uniform-patch ViT baseline, sharing one nnx backbone.

Backbone (the authors' ``wamrvit/quadtree_transformer.py``, Flux-style single
stream): per block

.. code-block:: text

   h = LayerNorm(x)                          # no affine
   [qkv | a | b] = h @ W_in                  # 3D + 2 * mlp_ratio * D, no bias
   attn = Attention(RoPE(RMSNorm(q)), RoPE(RMSNorm(k)), v)   # padding masked
   x = x + [attn | a * SiLU(b)] @ W_out      # (D + mlp_ratio D) -> D

Tokens are flattened patches embedded by one linear map (the code's Conv3d
with kernel = stride = patch, one input frame), and decoded by a linear map
back to a patch; the decoder starts at zero, so an untrained model predicts
no change (``pred_mode="residual"``). There is no class token.

* :class:`WAMRViT` reads uniform-storage leaf tokens ``(B, T, Ph, Pw, C)`` of
  batched quadtrees with a 3-axis RoPE over ``(cx, cy, level)`` and masks
  padded slots out of attention.
* :class:`UniformViT` cuts the field into ``p x p`` patches, with a 2-axis
  RoPE over the patch centres (scales = patches per axis).

Reconstruction: the SwiGLU split (``a * SiLU(b)``, the code's gated MLP) and
the zero-initialised decoder are our choices.
"""

import dataclasses

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import models
from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers.amr._quadtree import leaf_coordinates
from jaxpapers.amr._quadtree import Quadtree
from jaxpapers.amr._rope import rope_3d
from jaxpapers.amr._tokens import cells_to_image
from jaxpapers.amr._tokens import image_to_cells
from jaxpapers.tree import merge_axes
from jaxpapers.tree import split_axis


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
  """Sizes of the token backbone (all static).

  ``rope_dims`` = ``(d_x, d_y, d_s)`` rotated widths per head (each even, sum
  at most ``d_model / num_heads``); ``rope_scales`` multiply the
  coordinates ``(cx, cy, s)``.
  """

  token_size: int  # flattened patch: Ph * Pw * C
  d_model: int = 64
  num_heads: int = 2
  num_layers: int = 4
  mlp_ratio: int = 4
  rope_dims: tuple[int, int, int] = (10, 10, 12)
  rope_scales: tuple[float, float, float] = (16.0, 16.0, 1.0)

  def __post_init__(self):
    for name in ("token_size", "d_model", "num_heads", "num_layers",
                 "mlp_ratio"):
      check_int(name, getattr(self, name), 1)
    if self.d_model % self.num_heads:
      raise ValueError(
          f"d_model={self.d_model} must be divisible by"
          f" num_heads={self.num_heads}.")
    if len(self.rope_dims) != 3 or len(self.rope_scales) != 3 or min(
        self.rope_dims) < 0 or not all(
            isinstance(d, (int, np.integer)) for d in self.rope_dims):
      raise ValueError(
          f"rope_dims and rope_scales need 3 entries (x, y, s), dims ints >= 0;"
          f" got {self.rope_dims}, {self.rope_scales}.")
    if not np.all(np.isfinite(np.asarray(self.rope_scales, np.float64))):
      raise ValueError(f"rope_scales must be finite; got {self.rope_scales}.")
    head_dim = self.d_model // self.num_heads
    if sum(self.rope_dims) > head_dim or any(d % 2 for d in self.rope_dims):
      raise ValueError(
          f"rope_dims={self.rope_dims} must be even and sum to at most the"
          f" head width {head_dim}.")


def _check_tokens(x, coords_BxNx3, mask_BxN, width: int, name: str) -> None:
  """Raises ``ValueError`` unless x is ``(B, N, width)`` with coordinates and mask."""
  if x.ndim != 3 or x.shape[-1] != width:
    raise ValueError(f"{name} must be (B, N, {width}); got {tuple(x.shape)}.")
  if tuple(coords_BxNx3.shape) != (*x.shape[:2], 3):
    raise ValueError(
        f"coords_BxNx3 must be {(*x.shape[:2], 3)}; got"
        f" {tuple(coords_BxNx3.shape)}.")
  if tuple(mask_BxN.shape) != x.shape[:2] or mask_BxN.dtype != jnp.bool_:
    raise ValueError(
        f"mask_BxN must be bool {x.shape[:2]}; got {mask_BxN.dtype}"
        f" {tuple(mask_BxN.shape)}.")


class ParallelBlock(nnx.Module):
  """One single-stream block: attention and gated MLP from one projection."""

  def __init__(self, config: BackboneConfig, *, rngs: nnx.Rngs):
    d, hidden = config.d_model, config.mlp_ratio * config.d_model
    self.config = config
    self.head_dim = d // config.num_heads
    self.norm = nnx.LayerNorm(d, use_scale=False, use_bias=False, rngs=rngs)
    self.w_in = nnx.Linear(d, 3 * d + 2 * hidden, use_bias=False, rngs=rngs)
    self.q_norm = nnx.RMSNorm(self.head_dim, rngs=rngs)
    self.k_norm = nnx.RMSNorm(self.head_dim, rngs=rngs)
    self.w_out = nnx.Linear(d + hidden, d, use_bias=False, rngs=rngs)

  @models.fsdp_gathered
  def __call__(self, x_BxNxD, coords_BxNx3, mask_BxN):
    config = self.config
    _check_tokens(x_BxNxD, coords_BxNx3, mask_BxN, config.d_model, "x_BxNxD")
    b, n, d = x_BxNxD.shape
    hidden = config.mlp_ratio * d
    projected = self.w_in(self.norm(x_BxNxD))
    qkv, gate_a, gate_b = jnp.split(projected, [3 * d, 3 * d + hidden], axis=-1)
    qkv = split_axis(split_axis(qkv, 2, (3, d)), 3,
                     (config.num_heads, self.head_dim))
    rope = dict(dims=config.rope_dims, scales=config.rope_scales)
    q_BxNxHxK = rope_3d(self.q_norm(qkv[:, :, 0]), coords_BxNx3, **rope)
    k_BxNxHxK = rope_3d(self.k_norm(qkv[:, :, 1]), coords_BxNx3, **rope)
    v_BxNxHxK = qkv[:, :, 2]
    key_spec = tree.explicit_spec(k_BxNxHxK)
    if key_spec is not None and key_spec[1] is not None:
      # Tokens sharded along a mesh axis (sequence parallelism) cannot shard
      # both token axes of the logits: the keys' token axis, and the key
      # mask's, are gathered.
      k_BxNxHxK = jax.sharding.reshard(
          k_BxNxHxK, jax.P(key_spec[0], None, *key_spec[2:]))
      mask_spec = tree.explicit_spec(mask_BxN)
      if mask_spec is not None:
        mask_BxN = jax.sharding.reshard(mask_BxN, jax.P(mask_spec[0], None))
    scale = jnp.asarray(self.head_dim ** -0.5, x_BxNxD.dtype)
    logits = jnp.einsum("bqhk,bshk->bhqs", q_BxNxHxK, k_BxNxHxK) * scale
    logits = jnp.where(mask_BxN[:, None, None, :], logits,
                       jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits, axis=-1)
    # The output is laid out as the queries are: the values' own sharding
    # (a tensor-parallel head width) may clash with the queries' tokens.
    attn_BxNxD = jnp.einsum(
        "bhqs,bshk->bqhk", weights, v_BxNxHxK,
        out_sharding=tree.explicit_spec(q_BxNxHxK)).reshape(b, n, d)
    mlp_BxNxF = gate_a * jax.nn.silu(gate_b)
    return x_BxNxD + self.w_out(jnp.concatenate([attn_BxNxD, mlp_BxNxF], -1))


class TokenBackbone(nnx.Module):
  """``(tokens_BxNxF, coords_BxNx3, mask_BxN) -> (B, N, F)``: embed, blocks, decode."""

  def __init__(self, config: BackboneConfig, *, rngs: nnx.Rngs):
    self.config = config
    self.embed = nnx.Linear(config.token_size, config.d_model, rngs=rngs)
    self.blocks = nnx.List([ParallelBlock(config, rngs=rngs)
                            for _ in range(config.num_layers)])
    self.final_norm = nnx.LayerNorm(config.d_model, use_scale=False,
                                    use_bias=False, rngs=rngs)
    self.decode = nnx.Linear(config.d_model, config.token_size,
                             kernel_init=nnx.initializers.zeros, rngs=rngs)

  def mix(self, x_BxNxD, coords_BxNx3, mask_BxN):
    """The blocks and final norm on embedded tokens (no embed, no decode)."""
    for block in self.blocks:
      x_BxNxD = block(x_BxNxD, coords_BxNx3, mask_BxN)
    return self.final_norm(x_BxNxD)

  @models.fsdp_gathered
  def __call__(self, tokens_BxNxF, coords_BxNx3, mask_BxN):
    _check_tokens(tokens_BxNxF, coords_BxNx3, mask_BxN, self.config.token_size,
                  "tokens_BxNxF")
    out = self.decode(self.mix(self.embed(tokens_BxNxF), coords_BxNx3,
                               mask_BxN))
    return jnp.where(mask_BxN[..., None], out, jnp.zeros((), out.dtype))


def wamrvit_config(patch: tuple[int, int], channels: int, max_level: int,
                   finest_grid: tuple[int, int], *, d_model: int = 64,
                   num_heads: int = 2, num_layers: int = 4,
                   mlp_ratio: int = 4) -> BackboneConfig:
  """The authors' recommended RoPE split and scales for a quadtree of depth ``L``.

  ``d_s = 4 (L + 1)``, ``d_x = d_y = (head_dim - d_s) / 2`` rounded down to
  even; ``scale_x``, ``scale_y`` = finest cells per axis, ``scale_s = 1``.
  """
  head_dim = d_model // num_heads
  d_s = 4 * (max_level + 1)
  d_xy = (head_dim - d_s) // 2 // 2 * 2
  if d_xy < 2:
    raise ValueError(
        f"head width {head_dim} leaves no room for x/y RoPE next to d_s={d_s};"
        " use wider heads.")
  rows, cols = finest_grid
  return BackboneConfig(
      token_size=patch[0] * patch[1] * channels, d_model=d_model,
      num_heads=num_heads, num_layers=num_layers, mlp_ratio=mlp_ratio,
      rope_dims=(d_xy, d_xy, d_s), rope_scales=(float(cols), float(rows), 1.0))


def uniform_vit_config(patch: int, channels: int, grid: tuple[int, int], *,
                       d_model: int = 64, num_heads: int = 2,
                       num_layers: int = 4, mlp_ratio: int = 4
                       ) -> BackboneConfig:
  """2-axis RoPE over patch centres, scales = patches per axis."""
  head_dim = d_model // num_heads
  d_xy = head_dim // 2 // 2 * 2
  return BackboneConfig(
      token_size=patch * patch * channels, d_model=d_model,
      num_heads=num_heads, num_layers=num_layers, mlp_ratio=mlp_ratio,
      rope_dims=(d_xy, d_xy, 0),
      rope_scales=(float(grid[1] // patch), float(grid[0] // patch), 1.0))


class WAMRViT(nnx.Module):
  """Quadtree ViT on uniform-storage leaf tokens: predicts per-leaf residuals.

  Call as ``model(tokens_BxTxPhxPwxC, trees) -> (B, T, Ph, Pw, C)`` with
  ``trees`` a batched :class:`Quadtree` (from ``vmap(build_quadtree)`` or
  :func:`jaxpapers.amr.regrid`). Padded slots return zeros.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers import amr
    >>> fields = jax.random.normal(jax.random.key(0), (2, 32, 32))
    >>> trees = jax.vmap(lambda f: amr.build_quadtree(
    ...     f, patch=4, tol_frac=0.5, max_level=2, max_tokens=64))(fields)
    >>> tokens = jax.vmap(amr.tokenize)(fields, trees)
    >>> config = amr.wamrvit_config((4, 4), 1, 2, (8, 8), d_model=32,
    ...                             num_heads=1, num_layers=1)
    >>> model = amr.WAMRViT(config, rngs=nnx.Rngs(0))
    >>> model(tokens, trees).shape
    (2, 64, 4, 4, 1)

  The nnx example trains towards the field shifted by one pixel;
  :class:`UniformViT` trains the same way, on fields without trees.

  Example (flax nnx training step):
    >>> import optax
    >>> from jaxpapers import optim
    >>> target = jax.vmap(amr.tokenize)(jnp.roll(fields, 1, axis=2), trees)
    >>> def loss(model):  # next state = tokens + model(tokens, trees)
    ...   next_tokens = amr.residual_step(model, tokens, trees)
    ...   return amr.relative_l2(next_tokens, target)
    >>> optimizer = nnx.Optimizer(
    ...     model, optim.ema_nesterov(optax.sgd(0.05, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(model)
    ...   optimizer.update(model, grads)
    ...   return value
    >>> losses = [train_step(model, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, config: BackboneConfig, *, rngs: nnx.Rngs):
    self.backbone = TokenBackbone(config, rngs=rngs)

  def __call__(self, tokens_BxTxPhxPwxC: jax.Array, trees: Quadtree) -> jax.Array:
    expected = (*trees.level.shape, *trees.geometry.patch)
    if trees.level.ndim != 2 or tokens_BxTxPhxPwxC.ndim != 5 or (
        tokens_BxTxPhxPwxC.shape[:4] != expected):
      raise ValueError(
          f"WAMRViT: tokens_BxTxPhxPwxC must be (B, T, Ph, Pw, C) ="
          f" {expected + ('C',)} for batched trees of level shape"
          f" {trees.level.shape}; got {tuple(tokens_BxTxPhxPwxC.shape)}.")
    ph, pw, channels = tokens_BxTxPhxPwxC.shape[2:]
    flat = merge_axes(merge_axes(tokens_BxTxPhxPwxC, 3), 2)
    out = self.backbone(flat, leaf_coordinates(trees), trees.mask)
    return split_axis(split_axis(out, 2, (ph, pw * channels)), 3,
                      (pw, channels))


def patchify(fields_BxHxWxC: jax.Array, patch: int) -> jax.Array:
  """``(B, H, W, C) -> (B, H/p, W/p, p, p, C)``.

  Raises:
    ValueError: ``fields_BxHxWxC`` is not 4-D, or ``patch`` is not an int
      >= 1 dividing ``H`` and ``W``.
  """
  if isinstance(patch, bool) or not isinstance(patch, int) or patch < 1:
    raise ValueError(f"patch must be an int >= 1; got {patch!r}.")
  if fields_BxHxWxC.ndim != 4 or (fields_BxHxWxC.shape[1] % patch
                                  or fields_BxHxWxC.shape[2] % patch):
    raise ValueError(
        f"fields_BxHxWxC must be (B, H, W, C) with H and W multiples of the"
        f" patch {patch}; got shape {tuple(fields_BxHxWxC.shape)}.")
  return jax.vmap(lambda f: image_to_cells(f, (patch, patch)))(fields_BxHxWxC)


def unpatchify(cells: jax.Array) -> jax.Array:
  """Inverse of :func:`patchify`.

  Raises:
    ValueError: ``cells`` is not ``(B, H/p, W/p, p, p, C)``.
  """
  if cells.ndim != 6:
    raise ValueError(
        "cells must be (B, H/p, W/p, p, p, C); got shape"
        f" {tuple(cells.shape)}.")
  return jax.vmap(cells_to_image)(cells)


class UniformViT(nnx.Module):
  """Uniform-patch ViT on fields: ``model(fields_BxHxWxC) -> residual (B, H, W, C)``."""

  def __init__(self, config: BackboneConfig, patch: int, *, rngs: nnx.Rngs):
    if isinstance(patch, bool) or not isinstance(patch, int) or patch < 1:
      raise ValueError(f"patch must be an int >= 1; got {patch!r}.")
    self.patch = patch
    self.backbone = TokenBackbone(config, rngs=rngs)

  def __call__(self, fields_BxHxWxC: jax.Array) -> jax.Array:
    cells = patchify(fields_BxHxWxC, self.patch)
    b, rows, cols = cells.shape[:3]
    cy, cx = jnp.meshgrid((jnp.arange(rows, dtype=jnp.float32) + 0.5) / rows,
                          (jnp.arange(cols, dtype=jnp.float32) + 0.5) / cols,
                          indexing="ij")
    coords = jnp.stack([cx.ravel(), cy.ravel(), jnp.zeros(rows * cols)], -1)
    coords = jnp.broadcast_to(coords[None], (b, rows * cols, 3))
    mask = jnp.ones((b, rows * cols), jnp.bool_)
    # (B, rows, cols, p, p, C) <-> (B, rows cols, p p C), one axis at a time.
    flat = merge_axes(merge_axes(merge_axes(cells, 4), 3), 1)
    out = self.backbone(flat, coords, mask)
    ph, pw, channels = cells.shape[3:]
    out = split_axis(split_axis(out, 2, (ph, pw * channels)), 3,
                     (pw, channels))
    return unpatchify(split_axis(out, 1, (rows, cols)))
