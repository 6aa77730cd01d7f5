"""Slow, straightforward Python reference of the quadtree and its tokens.

This is the yardstick for :mod:`jaxpapers.amr` (tests compare against it and
``benchmarks/amr.py`` times it): leaves are Python tuples ``(level, i, j)``,
refinement splits one leaf at a time, balance repeats "split any leaf with a
face neighbour two or more levels finer" until nothing changes, and Morton
keys are interleaved bit by bit. It follows the authors' loop
(``wamrvit/quad/adapt_wavelet.py``: refinement passes, then balance after
every pass) and shares
nothing with the array code except the shape checks of
:func:`jaxpapers.amr.make_geometry`. Do not use it for real work.
"""

import numpy as np

from jaxpapers.amr._quadtree import Geometry
from jaxpapers.amr._quadtree import make_geometry

Leaf = tuple[int, int, int]  # (level, i, j)


def morton_key(row: int, col: int) -> int:
  """Interleaves bits: column bit ``b`` at ``2b``, row bit ``b`` at ``2b + 1``."""
  key, bit = 0, 0
  while (row >> bit) or (col >> bit):
    key |= ((col >> bit) & 1) << (2 * bit)
    key |= ((row >> bit) & 1) << (2 * bit + 1)
    bit += 1
  return key


def footprint(leaf: Leaf, geometry: Geometry) -> tuple[slice, slice]:
  """Pixel rows and columns covered by ``leaf``."""
  level, i, j = leaf
  ph, pw = geometry.cell_pixels(level)
  return slice(i * ph, (i + 1) * ph), slice(j * pw, (j + 1) * pw)


def _children(leaf: Leaf) -> list[Leaf]:
  level, i, j = leaf
  return [(level + 1, 2 * i + a, 2 * j + b) for a in (0, 1) for b in (0, 1)]


def _finest_level_map(leaves, geometry: Geometry) -> np.ndarray:
  """Level of the leaf over each finest cell (-1 where no leaf is)."""
  top = geometry.max_level
  level_map = np.full(geometry.grid_shape(top), -1, dtype=np.int64)
  for level, i, j in leaves:
    size = 1 << (top - level)
    level_map[i * size:(i + 1) * size, j * size:(j + 1) * size] = level
  return level_map


def _finest_face_neighbour_levels(leaf: Leaf, level_map: np.ndarray,
                                  geometry: Geometry) -> list[int]:
  level, i, j = leaf
  size = 1 << (geometry.max_level - level)
  top, left = i * size, j * size
  rows, cols = level_map.shape
  levels = []
  if top > 0:
    levels += level_map[top - 1, left:left + size].tolist()
  if top + size < rows:
    levels += level_map[top + size, left:left + size].tolist()
  if left > 0:
    levels += level_map[top:top + size, left - 1].tolist()
  if left + size < cols:
    levels += level_map[top:top + size, left + size].tolist()
  return levels


def unbalanced_leaves(leaves, geometry: Geometry) -> list[Leaf]:
  """Leaves with a face neighbour two or more levels finer."""
  level_map = _finest_level_map(leaves, geometry)
  return [leaf for leaf in leaves
          if max(_finest_face_neighbour_levels(leaf, level_map, geometry),
                 default=-1) > leaf[0] + 1]


def balance_reference(leaves, geometry: Geometry) -> list[Leaf]:
  """Splits unbalanced leaves until none is left."""
  leaves = set(leaves)
  while True:
    offenders = unbalanced_leaves(leaves, geometry)
    if not offenders:
      return sorted(leaves)
    for leaf in offenders:
      leaves.remove(leaf)
      leaves.update(_children(leaf))


def is_valid_balanced_tree(leaves, geometry: Geometry) -> bool:
  """True iff ``leaves`` tile the domain exactly once and are 2:1 balanced."""
  coverage = np.zeros(geometry.grid_shape(geometry.max_level), dtype=np.int64)
  top = geometry.max_level
  for level, i, j in leaves:
    if not 0 <= level <= top:
      return False
    size = 1 << (top - level)
    coverage[i * size:(i + 1) * size, j * size:(j + 1) * size] += 1
  if not np.all(coverage == 1):
    return False
  return not unbalanced_leaves(leaves, geometry)


def morton_sorted(leaves, geometry: Geometry) -> list[Leaf]:
  """Leaves sorted by the Morton key of their first finest cell."""
  top = geometry.max_level
  return sorted(leaves, key=lambda leaf: morton_key(
      leaf[1] << (top - leaf[0]), leaf[2] << (top - leaf[0])))


def build_quadtree_reference(field: np.ndarray, *, patch, tol_frac: float,
                             max_level: int, adapt_nearby: int = 0
                             ) -> list[Leaf]:
  """The Morton-ordered leaves of WAMRViT's initial mesh, one leaf at a time.

  Every cell of every level is tested on its own footprint, the flags are
  grown by ``adapt_nearby`` rings of face neighbours (Python sets), and
  leaves are split and rebalanced pass by pass. Arithmetic stays in the
  field's dtype (as in the jitted code), so ties such as a range exactly at
  the threshold resolve the same way.
  """
  field = np.asarray(field)
  field = field[..., None] if field.ndim == 2 else field
  geometry = make_geometry(field.shape, patch, max_level)
  threshold = field.dtype.type(tol_frac) * (
      field.max(axis=(0, 1)) - field.min(axis=(0, 1)))
  flagged = []
  for level in range(max_level):
    rows, cols = geometry.grid_shape(level)
    cells = set()
    for i in range(rows):
      for j in range(cols):
        block = field[footprint((level, i, j), geometry)]
        if np.any(block.max(axis=(0, 1)) - block.min(axis=(0, 1)) > threshold):
          cells.add((i, j))
    for _ in range(adapt_nearby):
      cells |= {(i + di, j + dj) for i, j in cells
                for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1))
                if 0 <= i + di < rows and 0 <= j + dj < cols}
    flagged.append(cells)
  rows, cols = geometry.root_shape
  leaves = [(0, i, j) for i in range(rows) for j in range(cols)]
  for _ in range(max_level):
    next_leaves = []
    for leaf in leaves:
      if leaf[0] < max_level and leaf[1:] in flagged[leaf[0]]:
        next_leaves.extend(_children(leaf))
      else:
        next_leaves.append(leaf)
    leaves = balance_reference(next_leaves, geometry)
  return morton_sorted(leaves, geometry)


def tree_leaves(tree) -> list[Leaf]:
  """The real leaves of one :class:`jaxpapers.amr.Quadtree`, as tuples."""
  mask = np.asarray(tree.mask)
  return list(zip(np.asarray(tree.level)[mask].tolist(),
                  np.asarray(tree.i)[mask].tolist(),
                  np.asarray(tree.j)[mask].tolist()))


def tokenize_reference(field: np.ndarray, leaves, geometry: Geometry,
                       mode: str = "uniform") -> list[np.ndarray]:
  """Per leaf: its area-averaged ``(Ph, Pw, C)`` patch, or its native footprint."""
  field = np.asarray(field, dtype=np.float64)
  field = field[..., None] if field.ndim == 2 else field
  ph, pw = geometry.patch
  tokens = []
  for leaf in leaves:
    ys, xs = footprint(leaf, geometry)
    block = field[ys, xs]
    if mode == "native":
      tokens.append(block)
      continue
    s = 1 << (geometry.max_level - leaf[0])
    tokens.append(block.reshape(ph, s, pw, s, -1).mean(axis=(1, 3)))
  return tokens


def detokenize_reference(tokens, leaves, geometry: Geometry) -> np.ndarray:
  """Places each leaf's token on the finest grid.

  Uniform patches are nearest-neighbour upsampled; native footprints (tokens
  already of the footprint's size) are placed as they are.
  """
  channels = tokens[0].shape[-1]
  field = np.zeros((geometry.height, geometry.width, channels))
  for token, leaf in zip(tokens, leaves):
    ys, xs = footprint(leaf, geometry)
    s = (ys.stop - ys.start) // token.shape[0]
    field[ys, xs] = np.repeat(np.repeat(token, s, axis=0), s, axis=1)
  return field
