r"""Balanced quadtrees over a 2-D field, as padded arrays under ``jit``.

WAMRViT (code ``tonyzyl/wamrvit``; ``docs/wamrvit.md``) tokenizes a field as
the leaves of a quadtree.
The authors' code builds the tree from Python objects; here the whole build is
array code, so it compiles once per shape and runs under ``jit`` and ``vmap``.

**Geometry.** A field of ``H x W`` pixels is cut into root tiles (level-0
cells) of ``(Ph 2^L) x (Pw 2^L)`` pixels, where ``(Ph, Pw)`` is the base patch
and ``L = max_level``. A level-``l`` cell covers ``(Ph 2^(L-l)) x
(Pw 2^(L-l))`` pixels and is named by ``(level, i, j)``: row ``i`` and column
``j`` in the grid of level-``l`` cells. The level-``L`` cells are the *finest
cells*; the root grid has ``H / (Ph 2^L)`` rows and ``W / (Pw 2^L)`` columns.

**Refinement** (the authors' ``wamrvit/quad/adapt_wavelet.py``). A cell of
level ``l < L`` is refined iff, for some channel ``c``,

.. math::

   \max_{\text{cell}} u_c - \min_{\text{cell}} u_c
   > \text{tol\_frac} \, (\max u_c - \min u_c),

the range on the right being over the whole field. A cell's range bounds its
children's, so this rule is already a tree (a refined cell's parent is
refined), and its union over channels is too.

**2:1 balance.** Face-adjacent leaves differ by at most one level. The
smallest balanced tree containing the refined cells is the least fixed point
of one rule: if a level-``(l+1)`` cell is refined, so is every level-``l``
cell that contains it or one of its face neighbours. Each application only
adds refinement at the next coarser level, so one sweep from fine to coarse
reaches the fixed point; the Python reference (``reference.py``), which splits
offending leaves until nothing changes, gives the same leaves.

**Order and budget.** Leaves come in Morton (Z) order of their corner with
the smallest (row, column), in finest-cell units, with the row bit above the
column bit at every scale (this equals the authors' order of corners in
finest pixels when ``Ph = Pw`` is a power of two). They are padded to a static budget
``max_tokens``: entries past ``num_leaves`` have ``mask = False`` and
``level = i = j = 0``. When the tree has more leaves than the budget,
``overflow`` is set and only the first ``max_tokens`` leaves (in Morton order)
are kept, so a detokenized field has holes; :func:`check_budget` turns the
flag into an error outside ``jit``.

Reconstruction: the criteria and the balance rule are the authors'; the
array formulation (fixed-point sweep, Morton compaction) is ours.
"""

import dataclasses
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib

SCALE_AXES = ("level_idx", "area", "sqrt_area", "log_area")


@dataclasses.dataclass(frozen=True)
class Geometry:
  """Static shape of a quadtree: field size, base patch, deepest level."""

  height: int
  width: int
  patch: tuple[int, int]
  max_level: int

  @property
  def root_shape(self) -> tuple[int, int]:
    scale = 1 << self.max_level
    return (self.height // (self.patch[0] * scale),
            self.width // (self.patch[1] * scale))

  def grid_shape(self, level: int) -> tuple[int, int]:
    """Rows and columns of the grid of level-``level`` cells."""
    rows, cols = self.root_shape
    return rows << level, cols << level

  def cell_pixels(self, level: int) -> tuple[int, int]:
    """Pixels covered by a level-``level`` cell (its native footprint)."""
    scale = 1 << (self.max_level - level)
    return self.patch[0] * scale, self.patch[1] * scale

  @property
  def num_finest_cells(self) -> int:
    rows, cols = self.grid_shape(self.max_level)
    return rows * cols


def make_geometry(shape: Sequence[int], patch: int | Sequence[int],
                  max_level: int) -> Geometry:
  """Checks a field shape against ``patch`` and ``max_level``.

  Args:
    shape: ``(H, W)`` or ``(H, W, C)`` of the field.
    patch: base patch ``P`` or ``(Ph, Pw)`` (pixels of a finest cell).
    max_level: deepest level ``L >= 0``.

  Returns:
    The :class:`Geometry`.

  Raises:
    ValueError: naming the argument, when the field is not 2-D (+ channels),
      the patch or level is out of range, ``max_level`` is too deep for the
      field (a root tile would be larger than the field), or a side is not a
      multiple of the root tile.
  """
  if len(shape) not in (2, 3):
    raise ValueError(
        f"field must have shape (H, W) or (H, W, C); got shape {tuple(shape)}."
    )
  patch = (patch, patch) if isinstance(patch, (int, np.integer)) else tuple(
      patch)
  if len(patch) != 2 or not all(
      isinstance(p, (int, np.integer)) and not isinstance(p, bool)
      for p in patch) or min(patch) < 1:
    raise ValueError(f"patch must be a positive int or (Ph, Pw); got {patch}.")
  if (not isinstance(max_level, (int, np.integer))
      or isinstance(max_level, bool) or max_level < 0):
    raise ValueError(f"max_level must be an int >= 0; got {max_level!r}.")
  height, width = int(shape[0]), int(shape[1])
  tile = (patch[0] << max_level, patch[1] << max_level)
  for side, size, name in ((height, tile[0], "height"),
                           (width, tile[1], "width")):
    if size > side:
      raise ValueError(
          f"max_level={max_level} is too deep for the field: a root tile"
          f" (patch * 2**max_level) is {size} pixels, more than the field"
          f" {name} {side}."
      )
    if side % size:
      raise ValueError(
          f"field {name} {side} is not a multiple of the root tile size"
          f" patch * 2**max_level = {size} (patch={patch},"
          f" max_level={max_level})."
      )
  return Geometry(height, width, (int(patch[0]), int(patch[1])),
                  int(max_level))


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("level", "i", "j", "mask", "num_leaves", "overflow",
                 "nonfinite"),
    meta_fields=("geometry",),
)
@dataclasses.dataclass(frozen=True)
class Quadtree:
  """Leaves of a balanced quadtree, Morton-ordered and padded to a budget ``T``.

  Attributes:
    level: int32 ``(T,)``, leaf level (0 = root tile).
    i: int32 ``(T,)``, row of the leaf in its level's grid.
    j: int32 ``(T,)``, column of the leaf in its level's grid.
    mask: bool ``(T,)``, True for real leaves (a prefix).
    num_leaves: int32 ``()``, leaves of the full tree (may exceed ``T``).
    overflow: bool ``()``, ``num_leaves > T``: leaves were dropped.
    nonfinite: bool ``()``, the field held a NaN or an infinity, so its
      ranges (and the refinement) mean nothing; eager builds raise instead.
    geometry: static :class:`Geometry`.

  Batched trees (from ``vmap``) carry a leading batch axis on every array.
  """

  level: jax.Array
  i: jax.Array
  j: jax.Array
  mask: jax.Array
  num_leaves: jax.Array
  overflow: jax.Array
  nonfinite: jax.Array
  geometry: Geometry

  @property
  def max_tokens(self) -> int:
    return self.level.shape[-1]


def _pool2(x, reduce_fn):
  """2x2 block reduction over the two leading axes."""
  rows, cols = x.shape[:2]
  blocks = tree_lib.split_axis(tree_lib.split_axis(x, 1, (cols // 2, 2)), 0,
                               (rows // 2, 2))
  return reduce_fn(blocks, axis=(1, 3))


def _upsample(x, factor: int):
  """Nearest-neighbour upsampling of the two leading axes by ``factor``."""
  return jnp.repeat(jnp.repeat(x, factor, axis=0), factor, axis=1)


def _with_face_neighbours(flags):
  """``flags`` OR its four face-shifted copies (no wrap at the domain edge)."""
  # Explicit mesh axes cannot pad a sharded axis: shift a gathered copy.
  flags, restore = tree_lib.gather_explicit(flags)
  padded = jnp.pad(flags, 1)
  return restore(flags | padded[:-2, 1:-1] | padded[2:, 1:-1]
                 | padded[1:-1, :-2] | padded[1:-1, 2:])


def balance(refined: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
  """Smallest 2:1-balanced refinement containing ``refined``.

  Args:
    refined: bool arrays, one per level ``0 .. L-1``; ``refined[l]`` has the
      shape of the level-``l`` grid and marks refined cells.

  Returns:
    The closed flags: every refined cell's parent is refined, and a refined
    level-``(l+1)`` cell forces the level-``l`` cells holding its face
    neighbours to be refined.

  Raises:
    ValueError: a level's flags are not a bool 2-D grid twice the size of
      the previous level's in both directions.
  """
  for level, flags in enumerate(refined):
    shape = tree_lib.shape_of(flags)
    expected = (None if level == 0 else
                tuple(2 * n for n in tree_lib.shape_of(refined[level - 1])))
    if (len(shape) != 2 or jnp.result_type(flags) != jnp.bool_
        or expected not in (None, shape)):
      raise ValueError(
          f"refined[{level}] must be a bool 2-D grid"
          f"{'' if expected is None else f' of shape {expected}'} (each level"
          f" doubles the previous one); got {jnp.result_type(flags)}"
          f" {shape}.")
  closed = list(refined)
  for level in range(len(closed) - 2, -1, -1):
    forced = _pool2(_with_face_neighbours(closed[level + 1]), jnp.any)
    closed[level] = closed[level] | forced
  return tuple(closed)


def dilate(refined: Sequence[jax.Array], rings: int) -> tuple[jax.Array, ...]:
  """Adds ``rings`` rings of face neighbours around the refined cells of each level.

  The authors' ``adapt_nearby``. A cell within ``rings`` face steps of a
  refined level-``(l+1)`` cell has its parent within ``rings`` steps of the
  refined parent, so dilating every level keeps the flags a tree.
  """
  dilated = []
  for flags in refined:
    for _ in range(rings):
      flags = _with_face_neighbours(flags)
    dilated.append(flags)
  return tuple(dilated)


def refinement_criterion(field_HxWxC: jax.Array, geometry: Geometry,
                         tol_frac: float | jax.Array) -> tuple[jax.Array, ...]:
  """Cells whose per-channel range exceeds ``tol_frac`` times the field's range.

  Returns one bool array per level ``0 .. L-1`` (the level-``L`` cells are
  never refined).
  """
  rows, cols = geometry.grid_shape(geometry.max_level)
  ph, pw = geometry.patch
  channels = field_HxWxC.shape[-1]
  del channels  # one split per reshape (see jaxpapers.tree.split_axis)
  cells = tree_lib.split_axis(tree_lib.split_axis(field_HxWxC, 1, (cols, pw)),
                              0, (rows, ph))
  high, low = jnp.max(cells, axis=(1, 3)), jnp.min(cells, axis=(1, 3))
  tol = jnp.asarray(tol_frac, field_HxWxC.dtype)
  threshold_C = tol * (jnp.max(field_HxWxC, axis=(0, 1))
                       - jnp.min(field_HxWxC, axis=(0, 1)))
  refined = []
  for _ in range(geometry.max_level):
    high, low = _pool2(high, jnp.max), _pool2(low, jnp.min)
    refined.append(jnp.any(high - low > threshold_C.reshape(1, 1, -1), axis=-1))
  return tuple(reversed(refined))


@functools.lru_cache(maxsize=None)
def morton_order(rows: int, cols: int) -> np.ndarray:
  """Flat indices of a ``rows x cols`` grid sorted by Morton code (row bit high)."""
  y, x = np.meshgrid(np.arange(rows, dtype=np.int64),
                     np.arange(cols, dtype=np.int64), indexing="ij")
  code = np.zeros_like(y)
  for bit in range(max(rows, cols).bit_length()):
    code |= ((x >> bit) & 1) << (2 * bit)
    code |= ((y >> bit) & 1) << (2 * bit + 1)
  order = np.argsort(code.ravel(), kind="stable").astype(np.int32)
  order.flags.writeable = False
  return order


def leaf_level_map(refined: Sequence[jax.Array], geometry: Geometry) -> jax.Array:
  """Level of the leaf covering each finest cell (int32, finest grid shape)."""
  level_map = jnp.zeros(geometry.grid_shape(geometry.max_level), jnp.int32)
  for level, flags in enumerate(refined):
    level_map += _upsample(flags.astype(jnp.int32),
                           1 << (geometry.max_level - level))
  return level_map


def leaves_from_refined(refined: Sequence[jax.Array], geometry: Geometry,
                        max_tokens: int,
                        nonfinite: jax.Array | bool = False) -> Quadtree:
  """Morton-ordered, padded leaves of the (consistent) tree ``refined``.

  ``nonfinite`` is stored as the tree's flag (see :class:`Quadtree`).
  """
  top = geometry.max_level
  level_map = leaf_level_map(refined, geometry)
  rows, cols = level_map.shape
  size = jnp.left_shift(1, top - level_map) - 1
  y = jnp.arange(rows, dtype=jnp.int32).reshape(-1, 1)
  x = jnp.arange(cols, dtype=jnp.int32).reshape(1, -1)
  is_corner = ((y & size) == 0) & ((x & size) == 0)
  order = jnp.asarray(morton_order(rows, cols))
  corner_in_order = is_corner.reshape(-1).at[order].get(
      mode="promise_in_bounds")
  num_leaves = jnp.sum(corner_in_order, dtype=jnp.int32)
  picked = jnp.flatnonzero(corner_in_order, size=max_tokens, fill_value=0)
  # Every index below is in range by construction (padding picks slot 0).
  flat = order.at[picked].get(mode="promise_in_bounds")
  mask = jnp.arange(max_tokens, dtype=jnp.int32) < num_leaves
  level = jnp.where(
      mask, level_map.reshape(-1).at[flat].get(mode="promise_in_bounds"), 0)
  shift = top - level
  i = jnp.where(mask, jnp.right_shift(flat // cols, shift), 0)
  j = jnp.where(mask, jnp.right_shift(flat % cols, shift), 0)
  return Quadtree(level=level, i=i, j=j, mask=mask, num_leaves=num_leaves,
                  overflow=num_leaves > max_tokens,
                  nonfinite=jnp.asarray(nonfinite, jnp.bool_), geometry=geometry)


def leaf_flags(tree: Quadtree) -> tuple[jax.Array, ...]:
  """Per level ``0 .. L``, a bool grid marking that level's leaves."""
  geometry = tree.geometry
  flags = []
  for level in range(geometry.max_level + 1):
    rows, cols = geometry.grid_shape(level)
    here = tree.mask & (tree.level == level)
    index = jnp.where(here, tree.i * cols + tree.j, rows * cols)
    flags.append(jnp.zeros(rows * cols, jnp.bool_).at[index].set(
        True, mode="drop").reshape(rows, cols))
  return tuple(flags)


def refined_from_tree(tree: Quadtree) -> tuple[jax.Array, ...]:
  """Per level ``0 .. L-1``, the refined cells (those holding deeper leaves)."""
  leaves = leaf_flags(tree)
  deeper = leaves[-1]
  refined = []
  for level in range(tree.geometry.max_level - 1, -1, -1):
    deeper = _pool2(deeper, jnp.any)
    refined.append(deeper)
    deeper = deeper | leaves[level]
  return tuple(reversed(refined))


def _check_budget_arg(max_tokens: int, geometry: Geometry) -> None:
  rows, cols = geometry.root_shape
  if not isinstance(max_tokens, (int, np.integer)) or max_tokens < rows * cols:
    raise ValueError(
        f"max_tokens must be an int >= the number of root tiles"
        f" {rows}x{cols} = {rows * cols}; got {max_tokens!r}."
    )


def _as_hwc(field: jax.Array) -> jax.Array:
  field = jnp.asarray(field)
  if field.ndim == 2:
    return field[..., None]
  return field


@functools.partial(jax.jit,
                   static_argnames=("geometry", "max_tokens", "adapt_nearby"))
def _build(field_HxWxC, tol_frac, geometry: Geometry, max_tokens: int,
           adapt_nearby: int):
  refined = refinement_criterion(field_HxWxC, geometry, tol_frac)
  refined = balance(dilate(refined, adapt_nearby))
  nonfinite = ~jnp.all(jnp.isfinite(field_HxWxC))
  return leaves_from_refined(refined, geometry, max_tokens, nonfinite)


def build_quadtree(field: jax.Array, *, patch: int | tuple[int, int],
                   tol_frac: float | jax.Array, max_level: int,
                   max_tokens: int, adapt_nearby: int = 0) -> Quadtree:
  r"""Balanced quadtree of a dense field (WAMRViT's initial mesh), jit-compiled.

  Args:
    field: ``(H, W)`` or ``(H, W, C)`` floating array. ``vmap`` over a leading
      batch axis for a batch of fields; for a batch sharded over an Explicit
      mesh axis, ``vmap`` inside ``jax.shard_map`` (each device builds its
      own trees: JAX cannot infer the sharding of the tree's gathers from a
      plain ``vmap`` there).
    patch: base patch ``P`` or ``(Ph, Pw)``: the pixels of a finest cell
      (static).
    tol_frac: refine a cell of level ``< max_level`` when, in some channel,
      its range exceeds ``tol_frac`` times that channel's range over the
      field (``>= 0``; with 0 every non-constant cell is refined). May be
      traced: changing it does not recompile (a traced negative value is
      not caught and refines every cell down to ``max_level``).
    max_level: deepest level ``L`` (static).
    max_tokens: static token budget ``T`` (at least the number of root
      tiles; ``H W / (Ph Pw)`` can never overflow).
    adapt_nearby: rings of face neighbours refined around every refined
      cell, level by level, before the 2:1 balance (static; the authors'
      loader option of that name, whose default there is 1; ours is 0, the
      setting of our experiments).

  Returns:
    A :class:`Quadtree` with ``T`` Morton-ordered leaf slots. Its
    ``overflow`` flag is set when the tree has more than ``T`` leaves (then
    only the first ``T`` are kept); see :func:`check_budget`.

  Raises:
    ValueError: bad shapes or arguments (see :func:`make_geometry`), a
      non-floating field, a concrete field with a NaN or an infinity (traced,
      the tree's ``nonfinite`` flag is set instead), a negative concrete
      ``tol_frac``, a negative ``adapt_nearby`` or a ``max_tokens`` below
      the root tile count.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import amr
    >>> field = jnp.zeros((16, 16)).at[0, 0].set(1.0)
    >>> tree = amr.build_quadtree(field, patch=2, tol_frac=0.1, max_level=2,
    ...                           max_tokens=16)
    >>> int(tree.num_leaves), tree.level[:10].tolist()
    (10, [2, 2, 2, 2, 1, 1, 1, 0, 0, 0])

  References:
    WAMRViT (https://anonymous.4open.science/r/wamrvit-review-74E1) and
    the authors' code ``tonyzyl/wamrvit``, ``wamrvit/quad/adapt_wavelet.py``
    and ``wamrvit/quad/quadtree.py``.
  """
  field_HxWxC = _as_hwc(field)
  if not jnp.issubdtype(field_HxWxC.dtype, jnp.floating):
    raise ValueError(f"field must be floating point; got {field_HxWxC.dtype}.")
  geometry = make_geometry(field_HxWxC.shape, patch, max_level)
  if not isinstance(tol_frac, jax.core.Tracer) and not np.all(
      np.asarray(tol_frac) >= 0):
    raise ValueError(f"tol_frac must be >= 0; got {tol_frac}.")
  if not isinstance(adapt_nearby, (int, np.integer)) or adapt_nearby < 0:
    raise ValueError(f"adapt_nearby must be an int >= 0; got {adapt_nearby!r}.")
  if not isinstance(field_HxWxC, jax.core.Tracer) and not np.all(
      np.isfinite(np.asarray(field_HxWxC))):
    raise ValueError(
        "field holds NaN or infinite values: its ranges cannot drive the"
        " refinement (every comparison with NaN is False).")
  _check_budget_arg(max_tokens, geometry)
  return _build(field_HxWxC, tol_frac, geometry, int(max_tokens),
                int(adapt_nearby))


def check_budget(tree: Quadtree) -> None:
  """Raises ``ValueError`` (outside ``jit``) if any tree overflowed its budget."""
  overflow = np.asarray(tree.overflow)
  if overflow.any():
    needed = int(np.max(np.asarray(tree.num_leaves)))
    raise ValueError(
        f"the quadtree needs {needed} leaves but max_tokens={tree.max_tokens};"
        " raise max_tokens (or tol_frac)."
    )


def truncate(tree: Quadtree, max_tokens: int) -> Quadtree:
  """The same tree with a smaller budget: keeps the first ``max_tokens`` slots.

  Lets a batch share the smallest budget that holds all its trees (token
  buckets, :func:`jaxpapers.amr.bucket_size`) without rebuilding them;
  ``overflow`` is recomputed, so a budget below ``num_leaves`` is flagged as usual.
  """
  _check_budget_arg(max_tokens, tree.geometry)
  if max_tokens > tree.max_tokens:
    raise ValueError(
        f"max_tokens={max_tokens} exceeds the tree's budget {tree.max_tokens};"
        " truncate only shrinks.")
  return dataclasses.replace(
      tree, level=tree.level[..., :max_tokens], i=tree.i[..., :max_tokens],
      j=tree.j[..., :max_tokens], mask=tree.mask[..., :max_tokens],
      overflow=tree.num_leaves > max_tokens)


def leaf_coordinates(tree: Quadtree, scale_axis: str = "level_idx") -> jax.Array:
  """Per-leaf RoPE coordinates ``(cx, cy, s)``, float32 ``(..., T, 3)``.

  ``(cx, cy)`` is the leaf centre divided by the domain size (in ``[0, 1]``);
  ``s`` is the scale coordinate (the authors' options), in finest-cell units:
  ``level_idx``: the level; ``area``: ``4^(L-l)``; ``sqrt_area``:
  ``2^(L-l)``; ``log_area``: ``2 (L-l)``. Padded slots get zeros.
  """
  if scale_axis not in SCALE_AXES:
    raise ValueError(f"scale_axis must be one of {SCALE_AXES}; got {scale_axis!r}.")
  geometry = tree.geometry
  rows, cols = geometry.root_shape
  level = tree.level.astype(jnp.float32)
  cells = jnp.exp2(level)
  cx = (tree.j.astype(jnp.float32) + 0.5) / (cells * cols)
  cy = (tree.i.astype(jnp.float32) + 0.5) / (cells * rows)
  depth = geometry.max_level - level
  scale = {"level_idx": level, "area": jnp.exp2(2 * depth),
           "sqrt_area": jnp.exp2(depth), "log_area": 2 * depth}[scale_axis]
  coords = jnp.stack([cx, cy, scale], axis=-1)
  return jnp.where(tree.mask[..., None], coords, 0.0)
