r"""Regridding in cell space: adapt a quadtree to its own (predicted) leaf values.

During a rollout the model only has leaf tokens, so WAMRViT adapts the mesh
from them (the authors' ``wamrvit/quad/adapt_wavelet.py`` and
``wamrvit/rollout/rollout_adaptive.py``), every ``regrid_interval`` steps:

1. **Refine.** A leaf of level ``l < L`` is refined when, in some channel,

   .. math::

      \max\bigl(\text{range of its patch},\ \text{boundary jump}\bigr)
      > \text{tol\_frac} \cdot \text{range}_c,

   ``range_c`` being the channel's range over all current leaves. Children
   start as the parent patch upsampled x2 (bilinear, half-pixel centres,
   clamped at the parent's edge) and quartered. The tree is balanced after
   every pass (balance-forced children are initialised the same way); at
   most ``max_passes`` passes, stopping early when nothing changes.
2. **Coarsen** (one pass, if ``allow_coarsening``). Four sibling leaves of
   level ``l >= 1`` merge into their parent when, in every channel, the range
   over the four is at most ``coarsen_ratio * tol_frac * range_c`` and every
   face neighbour of the parent has level ``<= l`` (so 2:1 still holds). The
   parent's patch is the 2x2 average pool of the four children.

Unlike the authors' host-side loop over leaf objects, this is array code: it
runs under ``jit`` and ``vmap`` (a batch of rollouts regrids in one call).
The state is a *complete pyramid*: a value for every cell of every level,
leaves holding their tokens, refined cells the average of their children,
and cells under a coarser leaf that leaf's bilinear upsampling. Refining then
exposes values that already exist, and coarsening exposes averages.

Reconstruction (label): the **boundary jump** of a level-``l`` leaf is the
largest difference between its centre value and the centre value of the
same-size block across each face, both read from the pyramid at level ``l``
(blocks outside the domain are skipped). The authors sample the neighbouring
leaf bilinearly at ``centre +/- h e``; when that point falls on a corner
shared by finer leaves, the block average used here avoids choosing which
of them to sample. The coarsening test uses ``<=`` (the authors': ``<``) so
that a constant field can coarsen. The authors' protection phase
(``adapt_nearby > 0``) is not implemented; we run without it (our choice,
``docs/wamrvit.md``).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.amr._quadtree import _check_budget_arg
from jaxpapers.amr._quadtree import _pool2
from jaxpapers.amr._quadtree import _upsample
from jaxpapers.amr._quadtree import _with_face_neighbours
from jaxpapers.amr._quadtree import balance
from jaxpapers.amr._quadtree import Geometry
from jaxpapers.amr._quadtree import leaves_from_refined
from jaxpapers.amr._quadtree import Quadtree
from jaxpapers.amr._quadtree import refined_from_tree
from jaxpapers.amr._tokens import average_pool2
from jaxpapers.amr._tokens import cells_to_image
from jaxpapers.amr._tokens import gather_cells
from jaxpapers.amr._tokens import image_to_cells
from jaxpapers.amr._tokens import scatter_cells
from jaxpapers.amr._tokens import upsample_cells


def _existing(refined, geometry: Geometry):
  """Per level ``0 .. L``, the cells that are leaves or refined."""
  exists = [jnp.ones(geometry.grid_shape(0), jnp.bool_)]
  exists += [_upsample(flags, 2) for flags in refined]
  return exists


def _leaves(refined, geometry: Geometry):
  exists = _existing(refined, geometry)
  refined_or_none = list(refined) + [jnp.zeros_like(exists[-1])]
  return [e & ~r for e, r in zip(exists, refined_or_none)]


def _cell_mask(flags):
  return flags[:, :, None, None, None]


def _children(cells, patch):
  """Each cell's bilinear x2 upsampling, quartered into its four children."""
  return image_to_cells(cells_to_image(upsample_cells(cells, 2, "bilinear")),
                        patch)


def _parents(cells, patch):
  return image_to_cells(average_pool2(cells_to_image(cells)), patch)


def complete_pyramid(values, refined, geometry: Geometry):
  """Fills every cell of every level from the values held at the leaves.

  Args:
    values: per level ``0 .. L``, ``(rows_l, cols_l, Ph, Pw, C)``; read only
      at that level's leaves.
    refined: per level ``0 .. L-1``, bool refined flags of a consistent tree.
    geometry: the tree's geometry.

  Returns:
    Per level, cell values: leaves keep theirs, refined cells average their
    children, cells under a coarser leaf hold its bilinear upsampling.
  """
  pooled = list(values)
  for level in range(geometry.max_level - 1, -1, -1):
    pooled[level] = jnp.where(
        _cell_mask(refined[level]),
        _parents(pooled[level + 1], geometry.patch), values[level])
  exists = _existing(refined, geometry)
  filled = [pooled[0]]
  for level in range(1, geometry.max_level + 1):
    filled.append(jnp.where(_cell_mask(exists[level]), pooled[level],
                            _children(filled[-1], geometry.patch)))
  return filled


def _centre(cells):
  """Bilinear value at the centre of each ``(ph, pw)`` patch: ``(rows, cols, C)``."""
  _, _, ph, pw, _ = cells.shape
  rows = slice((ph - 1) // 2, ph // 2 + 1)
  cols = slice((pw - 1) // 2, pw // 2 + 1)
  return jnp.mean(cells[:, :, rows, cols], axis=(2, 3))


def _refinement_error(cells):
  """Per cell and channel: max(patch range, boundary jump)."""
  patch_range = jnp.max(cells, axis=(2, 3)) - jnp.min(cells, axis=(2, 3))
  centre = _centre(cells)
  # Edge padding makes the jump across the domain boundary zero (skipped).
  padded = jnp.pad(centre, ((1, 1), (1, 1), (0, 0)), mode="edge")
  jump = jnp.maximum(
      jnp.maximum(jnp.abs(centre - padded[:-2, 1:-1]),
                  jnp.abs(centre - padded[2:, 1:-1])),
      jnp.maximum(jnp.abs(centre - padded[1:-1, :-2]),
                  jnp.abs(centre - padded[1:-1, 2:])))
  return jnp.maximum(patch_range, jump)


def _refine_pass(refined, pyramid, threshold_C, geometry):
  leaves = _leaves(refined, geometry)
  flagged = []
  for level in range(geometry.max_level):
    error = _refinement_error(pyramid[level])
    exceeds = jnp.any(error > threshold_C.reshape(1, 1, -1), axis=-1)
    flagged.append(refined[level] | (leaves[level] & exceeds))
  new_refined = balance(flagged)
  return new_refined, complete_pyramid(pyramid, new_refined, geometry)


def _coarsen_pass(refined, pyramid, limit_C, geometry):
  refined = list(refined)
  merged = []
  for parent_level in range(geometry.max_level):
    child_level = parent_level + 1
    cells = pyramid[child_level]
    high = _pool2(jnp.max(cells, axis=(2, 3)), jnp.max)
    low = _pool2(jnp.min(cells, axis=(2, 3)), jnp.min)
    flat = jnp.all(high - low <= limit_C.reshape(1, 1, -1), axis=-1)
    if child_level < geometry.max_level:
      # Refinement in a child or next to one: the children are not all
      # leaves, or merging would put the parent next to a leaf two levels
      # finer.
      blocked = _pool2(_with_face_neighbours(refined[child_level]), jnp.any)
      flat = flat & ~blocked
    merged.append(refined[parent_level] & flat)
  refined = tuple(r & ~m for r, m in zip(refined, merged))
  return refined, complete_pyramid(pyramid, refined, geometry)


@functools.partial(jax.jit, static_argnames=(
    "tol_frac", "coarsen_ratio", "max_passes", "allow_coarsening",
    "max_tokens"))
def regrid(tokens: jax.Array, tree: Quadtree, *, tol_frac: float,
           coarsen_ratio: float = 0.25, max_passes: int = 10,
           allow_coarsening: bool = True,
           max_tokens: int | None = None) -> tuple[jax.Array, Quadtree]:
  """Refines and coarsens ``tree`` from its uniform-mode leaf tokens.

  Args:
    tokens: ``(T, Ph, Pw, C)`` uniform tokens of ``tree`` (one tree; ``vmap``
      for a batch).
    tree: the current tree.
    tol_frac: refinement tolerance relative to each channel's leaf range.
    coarsen_ratio: coarsening tolerance as a fraction of ``tol_frac``.
    max_passes: refinement passes (0: no refinement).
    allow_coarsening: run the coarsening pass.
    max_tokens: budget of the new tree (default: the old one's ``T``).

  Returns:
    ``(new_tokens, new_tree)``; check ``new_tree.overflow``.

  Raises:
    ValueError: ``tree`` is a batch, ``tokens`` are not its uniform tokens,
      a tolerance or ``max_passes`` is negative, or ``max_tokens`` is below
      the number of root tiles.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import amr
    >>> field = jnp.zeros((16, 16))
    >>> tree = amr.build_quadtree(field, patch=4, tol_frac=0.1, max_level=2,
    ...                           max_tokens=16)
    >>> tokens = amr.tokenize(field, tree)
    >>> spiked = tokens.at[0, 0, 0].set(1.0)  # a feature appears in a corner
    >>> new_tokens, new_tree = amr.regrid(spiked, tree, tol_frac=0.1)
    >>> int(tree.num_leaves), int(new_tree.num_leaves)
    (1, 7)
    >>> new_tree.level[:7].tolist()
    [2, 2, 2, 2, 1, 1, 1]
  """
  if tree.level.ndim != 1:
    raise ValueError(
        f"regrid expects one tree (level of shape (T,)); got a batch of shape"
        f" {tree.level.shape}: vmap over the batch.")
  if tokens.ndim != 4 or tokens.shape[0] != tree.max_tokens:
    raise ValueError(
        f"tokens must be (T={tree.max_tokens}, Ph, Pw, C) for one tree; got"
        f" shape {tokens.shape}."
    )
  geometry = tree.geometry
  if tokens.shape[1:3] != geometry.patch:
    raise ValueError(
        f"tokens carry patches of {tokens.shape[1:3]}, the tree's patch is"
        f" {geometry.patch}."
    )
  if (not tol_frac >= 0 or not coarsen_ratio >= 0
      or not isinstance(max_passes, (int, np.integer))
      or isinstance(max_passes, bool) or max_passes < 0):
    raise ValueError(
        "tol_frac and coarsen_ratio must be >= 0 and max_passes an int >= 0;"
        " got"
        f" {tol_frac}, {coarsen_ratio}, {max_passes}."
    )
  max_tokens = tree.max_tokens if max_tokens is None else max_tokens
  _check_budget_arg(max_tokens, geometry)
  valid = tree.mask[:, None, None, None]
  high = jnp.max(jnp.where(valid, tokens, -jnp.inf), axis=(0, 1, 2))
  low = jnp.min(jnp.where(valid, tokens, jnp.inf), axis=(0, 1, 2))
  threshold_C = jnp.asarray(tol_frac, tokens.dtype) * (high - low)

  refined = refined_from_tree(tree)
  values = [scatter_cells(tokens, tree, level)[0]
            for level in range(geometry.max_level + 1)]
  pyramid = complete_pyramid(values, refined, geometry)

  def keep_refining(carry):
    passes, changed, _, _ = carry
    return changed & (passes < max_passes)

  def refine(carry):
    passes, _, refined, pyramid = carry
    new_refined, pyramid = _refine_pass(refined, pyramid, threshold_C, geometry)
    changed = jnp.any(jnp.asarray(
        [jnp.any(a != b) for a, b in zip(new_refined, refined)]))
    return passes + 1, changed, new_refined, pyramid

  if geometry.max_level > 0 and max_passes > 0:
    # The counters start from the tree's own values, so that inside
    # jax.shard_map they vary over the same mesh axes as the flags they
    # travel with (a loop's carry keeps its type).
    start = (jnp.zeros_like(tree.num_leaves), jnp.ones_like(tree.overflow))
    _, _, refined, pyramid = jax.lax.while_loop(
        keep_refining, refine, (*start, refined, pyramid))
  if allow_coarsening:
    refined, pyramid = _coarsen_pass(
        refined, pyramid, jnp.asarray(coarsen_ratio, tokens.dtype) * threshold_C,
        geometry)
  # Non-finite leaf values make every range comparison False: say so.
  nonfinite = tree.nonfinite | ~jnp.all(jnp.where(valid, jnp.isfinite(tokens),
                                                  True))
  new_tree = leaves_from_refined(refined, geometry, max_tokens, nonfinite)
  return gather_cells(pyramid, new_tree), new_tree
