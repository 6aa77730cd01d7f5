r"""Leaf tokens of a quadtree: gather from a field, scatter back to the grid.

Two storage modes (the authors' ``wamrvit/quad/quadtree.py``):

* ``uniform``: every leaf stores a ``(Ph, Pw, C)`` patch; a coarse leaf holds
  the area average of its footprint (the field average-pooled by
  ``2^(L-l)``). Tokens: ``(T, Ph, Pw, C)``.
* ``native``: a level-``l`` leaf stores its full-resolution footprint
  ``(Ph 2^(L-l), Pw 2^(L-l), C)``. Shapes differ per level, so the tokens are
  a tuple over levels ``0 .. L`` of ``(T, Ph 2^(L-l), Pw 2^(L-l), C)`` arrays,
  row ``t`` of entry ``l`` holding leaf ``t`` if it has level ``l`` and zeros
  otherwise. This is lossless: ``detokenize(tokenize(f, tree, "native"),
  tree)`` is ``f`` for every tree that did not overflow.

Decoding to the finest grid upsamples uniform leaves by ``2^(L-l)`` inside
their own footprint: nearest (our default; the authors' choice is
unconfirmed) or bilinear with half-pixel centres and edges clamped at the
leaf boundary.

Uniform tokens are gathered straight from the average-pooled images; the
other paths hold each level as a grid of cells ``(rows_l, cols_l, *feat)``
("cell maps", used by :mod:`jaxpapers.amr.regrid`) and gather or scatter by
``(level, i, j)``.
"""

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib
from jaxpapers.amr._quadtree import Geometry
from jaxpapers.amr._quadtree import Quadtree

MODES = ("uniform", "native")
UPSAMPLING = ("nearest", "bilinear")


def image_to_cells(image_HxWxC: jax.Array, cell_shape: tuple[int, int]
                   ) -> jax.Array:
  """``(H, W, C) -> (H/ph, W/pw, ph, pw, C)``: tiles as a grid of cells."""
  height, width, _ = image_HxWxC.shape
  ph, pw = cell_shape
  tiles = tree_lib.split_axis(tree_lib.split_axis(image_HxWxC, 1,
                                                  (width // pw, pw)),
                              0, (height // ph, ph))
  return tiles.transpose(0, 2, 1, 3, 4)


def cells_to_image(cells: jax.Array) -> jax.Array:
  """Inverse of :func:`image_to_cells`."""
  return tree_lib.merge_axes(tree_lib.merge_axes(
      cells.transpose(0, 2, 1, 3, 4), 2), 0)


def average_pool2(image_HxWxC: jax.Array) -> jax.Array:
  """2x2 mean pooling of the two leading axes.

  A sum of the four strided slices: XLA on CPU runs it several times faster
  than a mean over interleaved reshaped axes.
  """
  height, width = image_HxWxC.shape[:2]
  blocks = tree_lib.split_axis(tree_lib.split_axis(image_HxWxC, 1,
                                                   (width // 2, 2)),
                               0, (height // 2, 2))
  return 0.25 * ((blocks[:, 0, :, 0] + blocks[:, 0, :, 1])
                 + (blocks[:, 1, :, 0] + blocks[:, 1, :, 1]))


def pooled_images(field_HxWxC: jax.Array, geometry: Geometry
                  ) -> tuple[jax.Array, ...]:
  """Per level ``0 .. L``, the field average-pooled by ``2^(L-l)``."""
  images = [field_HxWxC]
  for _ in range(geometry.max_level):
    images.append(average_pool2(images[-1]))
  return tuple(reversed(images))


def gather_patches(images: Sequence[jax.Array], tree: Quadtree) -> jax.Array:
  """Every leaf's ``(Ph, Pw)`` patch of its level's image: ``(T, Ph, Pw, C)``.

  Each image is viewed, without a copy, as rows of ``Pw``-pixel segments; a
  patch is ``Ph`` such segments, gathered at once. Unlike
  :func:`gather_cells` this needs no transposed copy of the images.
  """
  ph, pw = tree.geometry.patch
  channels = images[0].shape[-1]
  # (H, W, C) -> (H, W/pw, pw, C) -> (H * W/pw, pw * C), one axis at a time.
  as_segments = lambda im: tree_lib.merge_axes(tree_lib.merge_axes(
      tree_lib.split_axis(im, 1, (im.shape[1] // pw, pw)), 2), 0)
  table = jnp.concatenate([as_segments(im) for im in images])
  sizes = [im.shape[0] * im.shape[1] // pw for im in images]
  offsets = jnp.asarray(np.cumsum([0] + sizes[:-1]), jnp.int32)
  segments = jnp.asarray([im.shape[1] // pw for im in images], jnp.int32)
  rows = (tree.i * ph).reshape(-1, 1) + jnp.arange(ph).reshape(1, -1)
  index = (offsets[tree.level].reshape(-1, 1)
           + rows * segments[tree.level].reshape(-1, 1) + tree.j.reshape(-1, 1))
  patches = table.at[index].get(mode="promise_in_bounds")
  return _zero_where_not(tree.mask, patches.reshape(-1, ph, pw, channels))


def native_cell_maps(field_HxWxC: jax.Array, geometry: Geometry
                     ) -> tuple[jax.Array, ...]:
  """Per level, the ``(rows_l, cols_l, Ph 2^(L-l), Pw 2^(L-l), C)`` footprints."""
  return tuple(image_to_cells(field_HxWxC, geometry.cell_pixels(level))
               for level in range(geometry.max_level + 1))


def _flat_index(tree: Quadtree, level: int) -> tuple[jax.Array, jax.Array]:
  """Leaves of ``level`` and their flat index in that level's grid (0 elsewhere)."""
  _, cols = tree.geometry.grid_shape(level)
  here = tree.mask & (tree.level == level)
  return here, jnp.where(here, tree.i * cols + tree.j, 0)


def _zero_where_not(keep_T: jax.Array, values_Tx: jax.Array) -> jax.Array:
  keep = keep_T.reshape(keep_T.shape + (1,) * (values_Tx.ndim - 1))
  return jnp.where(keep, values_Tx, jnp.zeros((), values_Tx.dtype))


def gather_cells(cell_maps: Sequence[jax.Array], tree: Quadtree) -> jax.Array:
  """Features of every leaf from per-level cell maps of equal feature shape.

  Args:
    cell_maps: per level ``0 .. L``, ``(rows_l, cols_l, *feat)``.
    tree: a single (unbatched) tree with ``T`` slots.

  Returns:
    ``(T, *feat)``; padded slots are zero.
  """
  table = jnp.concatenate(
      [m.reshape(-1, *m.shape[2:]) for m in cell_maps], axis=0)
  offsets, total = [], 0
  for m in cell_maps:
    offsets.append(total)
    total += m.shape[0] * m.shape[1]
  cols = jnp.asarray([m.shape[1] for m in cell_maps], jnp.int32)
  index = (jnp.asarray(offsets, jnp.int32)[tree.level]
           + tree.i * cols[tree.level] + tree.j)
  return _zero_where_not(tree.mask,
                         table.at[index].get(mode="promise_in_bounds"))


def scatter_cells(values_Tx: jax.Array, tree: Quadtree, level: int
                  ) -> tuple[jax.Array, jax.Array]:
  """Places the leaves of ``level`` in their level's grid.

  Returns ``(cells, present)``: ``(rows_l, cols_l, *feat)`` values (zero where
  no leaf of that level is) and the bool ``(rows_l, cols_l)`` leaf mask.
  """
  rows, cols = tree.geometry.grid_shape(level)
  here, index = _flat_index(tree, level)
  index = jnp.where(here, index, rows * cols)  # out of range: dropped
  cells = jnp.zeros((rows * cols, *values_Tx.shape[1:]), values_Tx.dtype)
  cells = cells.at[index].set(values_Tx, mode="drop")
  present = jnp.zeros(rows * cols, jnp.bool_).at[index].set(True, mode="drop")
  return (cells.reshape(rows, cols, *values_Tx.shape[1:]),
          present.reshape(rows, cols))


def _check_tree(tree: Quadtree, field_shape, name: str) -> None:
  geometry = tree.geometry
  if tree.level.ndim != 1:
    raise ValueError(
        f"{name} expects one tree (level of shape (T,)); got a batch of shape"
        f" {tree.level.shape}: vmap over the batch."
    )
  if field_shape is not None and tuple(field_shape[:2]) != (
      geometry.height, geometry.width):
    raise ValueError(
        f"field of shape {tuple(field_shape)} does not match the tree's"
        f" {geometry.height}x{geometry.width} grid."
    )


@functools.partial(jax.jit, static_argnames="mode")
def tokenize(field: jax.Array, tree: Quadtree, mode: str = "uniform"
             ) -> jax.Array | tuple[jax.Array, ...]:
  """One token per leaf of ``tree``.

  Args:
    field: ``(H, W)`` or ``(H, W, C)``, the grid of ``tree``.
    tree: a single tree (``vmap`` both arguments for a batch).
    mode: ``"uniform"`` (area-averaged ``(Ph, Pw)`` patches) or ``"native"``
      (full-resolution footprints, one array per level).

  Returns:
    ``uniform``: ``(T, Ph, Pw, C)``. ``native``: a tuple over levels of
    ``(T, Ph 2^(L-l), Pw 2^(L-l), C)``. Padded slots (and, in native mode,
    slots of other levels) are zero.

  Raises:
    ValueError: an unknown ``mode``, a field that is not floating
      ``(H, W[, C])`` or not on the tree's grid, or a batched tree.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import amr
    >>> field = jnp.arange(64.0).reshape(8, 8)
    >>> tree = amr.build_quadtree(field, patch=2, tol_frac=2.0, max_level=1,
    ...                           max_tokens=4)
    >>> tokens = amr.tokenize(field, tree)
    >>> tokens.shape, float(tokens[0, 0, 0, 0])  # mean of field[0:2, 0:2] pooled
    ((4, 2, 2, 1), 4.5)
  """
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
  if field.ndim not in (2, 3) or not jnp.issubdtype(field.dtype, jnp.floating):
    raise ValueError(
        "tokenize: field must be a floating (H, W) or (H, W, C) array; got"
        f" {field.dtype} {tuple(field.shape)} (vmap over a batch).")
  field_HxWxC = field[..., None] if field.ndim == 2 else field
  _check_tree(tree, field_HxWxC.shape, "tokenize")
  if mode == "uniform":
    return gather_patches(pooled_images(field_HxWxC, tree.geometry), tree)
  tokens = []
  for level, cells in enumerate(native_cell_maps(field_HxWxC, tree.geometry)):
    here, index = _flat_index(tree, level)
    flat = cells.reshape(-1, *cells.shape[2:])
    tokens.append(_zero_where_not(
        here, flat.at[index].get(mode="promise_in_bounds")))
  return tuple(tokens)


def upsample_cells(cells: jax.Array, factor: int, method: str) -> jax.Array:
  """Upsamples each cell's ``(ph, pw)`` patch by ``factor`` inside the cell.

  ``cells``: ``(rows, cols, ph, pw, C)``; ``bilinear`` uses half-pixel centres
  and clamps at the cell edge (PyTorch's ``align_corners=False``).
  """
  if factor == 1:
    return cells
  if method == "nearest":
    return jnp.repeat(jnp.repeat(cells, factor, axis=2), factor, axis=3)
  rows, cols, ph, pw, channels = cells.shape
  return jax.image.resize(cells, (rows, cols, ph * factor, pw * factor,
                                  channels), method="linear", antialias=False)


@functools.partial(jax.jit, static_argnames="upsample")
def detokenize(tokens: jax.Array | Sequence[jax.Array], tree: Quadtree,
               upsample: str = "nearest") -> jax.Array:
  """Decodes leaf tokens to the finest grid ``(H, W, C)``.

  Args:
    tokens: uniform ``(T, Ph, Pw, C)`` or the native tuple of
      :func:`tokenize`.
    tree: the tree the tokens belong to (a single tree).
    upsample: ``"nearest"`` or ``"bilinear"``, for uniform tokens of leaves
      above the finest level (each leaf is upsampled inside its footprint).

  Returns:
    ``(H, W, C)``; pixels of leaves dropped by an overflow are zero.

  Raises:
    ValueError: ``upsample`` is unknown, ``tree`` is a batch, or the tokens'
      shapes are not those :func:`tokenize` gives for ``tree``.
  """
  if upsample not in UPSAMPLING:
    raise ValueError(f"upsample must be one of {UPSAMPLING}; got {upsample!r}.")
  _check_tree(tree, None, "detokenize")
  geometry = tree.geometry
  native = isinstance(tokens, (tuple, list))
  if native and len(tokens) != geometry.max_level + 1:
    raise ValueError(
        f"native tokens need one array per level (max_level + 1 ="
        f" {geometry.max_level + 1}); got {len(tokens)}."
    )
  arrays = tokens if native else [tokens] * (geometry.max_level + 1)
  for level, array in enumerate(arrays):
    cell = geometry.cell_pixels(level) if native else geometry.patch
    shape = tuple(array.shape)
    if len(shape) != 4 or shape[:3] != (tree.max_tokens, *cell):
      raise ValueError(
          f"detokenize: tokens{f'[{level}]' if native else ''} must have"
          f" shape ({tree.max_tokens}, {cell[0]}, {cell[1]}, C) for this tree;"
          f" got {shape}.")
  field = None
  for level in range(geometry.max_level + 1):
    values = tokens[level] if native else tokens
    cells, _ = scatter_cells(values, tree, level)
    if not native:
      cells = upsample_cells(cells, 1 << (geometry.max_level - level), upsample)
    image = cells_to_image(cells)
    field = image if field is None else field + image
  return field
