r"""WAMRViT inference rollouts: the model and its mesh advance together.

At inference WAMRViT regrids in cell space from its own predictions, so the
mesh follows moving features over long autoregressive rollouts (WAMRViT,
abstract; the authors' ``wamrvit/rollout/rollout_adaptive.py`` in
``tonyzyl/wamrvit``). For a batch of ``B`` fields ``(B, H, W, C)`` on meshes
``M_k`` with patch ``(Ph, Pw)``, step ``k`` of a rollout is:

1. **Bucket.** The model reads the first ``T_k`` leaf slots of every mesh,
   ``T_k`` the smallest multiple of ``token_bucket`` that holds every tree
   (:func:`bucket_size`), so a rollout compiles once per bucket rather than
   once per leaf count (the authors pad to power-of-two buckets).
2. **Uniform storage** (:func:`quadtree_rollout`). The state is the leaf
   tokens ``x_k``, ``(B, T, Ph, Pw, C)``: ``x_{k+1} = advance(x_k, M_k)`` on
   the ``T_k`` slots, then ``(x_{k+1}, M_{k+1}) = regrid(x_{k+1}, M_k)``
   (:func:`jaxpapers.amr.regrid`), or ``M_{k+1} = M_k`` for a frozen mesh.
   The field is the tokens decoded to the finest grid (nearest upsampling).
3. **Native storage** (:func:`native_rollout`). Native storage is lossless,
   so the state is the finest field ``u_k`` itself:
   ``u_{k+1} = advance(u_k, M_k)``, and ``M_{k+1}`` comes from
   :func:`regrid_native`. A refined leaf's native children are the quarters
   of its footprint and merged siblings the concatenation of theirs (the
   authors' code), i.e. the new mesh's native tokens are gathered from
   ``u_{k+1}``; only the refine/coarsen decisions are needed.

Between steps trees and tokens keep the full budget ``T = H W / (Ph Pw)``
(a tree never overflows, and regridding compiles once). The loop runs on the
host, since the bucket is a static shape read from the leaf counts; every
stage is one jitted call made through ``call(stage, fn, *args)`` with
``stage`` ``"model"`` or ``"regrid"``, so a caller can time or profile the
two separately (this module does no timing).

:func:`uniform_rollout` is the uniform-patch baseline with the same steps
and hook; :func:`jaxpapers.amr.model_rollout` picks the rollout of a
residual model.

Our reconstruction (see ``docs/wamrvit.md``): regridding every step, and the
native regrid deciding from the leaves' area-averaged patches, the rule of
uniform storage (:func:`jaxpapers.amr.regrid` reads uniform tokens).
"""

import dataclasses
import functools
import math
from typing import Any, Callable, Iterator, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib
from jaxpapers.amr._quadtree import build_quadtree
from jaxpapers.amr._quadtree import make_geometry
from jaxpapers.amr._quadtree import Quadtree
from jaxpapers.amr._quadtree import truncate
from jaxpapers.amr._regrid import regrid
from jaxpapers.amr._tokens import detokenize
from jaxpapers.amr._tokens import tokenize

Advance = Callable[[Any, Quadtree], Any]
StageCall = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class MeshConfig:
  """Static settings of the meshes of a rollout (hashable: a ``jit`` static).

  Attributes:
    patch: base patch ``P`` or ``(Ph, Pw)``, the pixels of a finest cell.
    max_level: deepest level ``L >= 0``.
    tol_frac: refinement tolerance, a fraction of each channel's range
      (:func:`jaxpapers.amr.build_quadtree`, :func:`jaxpapers.amr.regrid`).
    coarsen_ratio: coarsening tolerance as a fraction of ``tol_frac`` (the
      authors' default 0.25).
    max_passes: refinement passes per regrid (the authors' default 10).
    token_bucket: leaf slots the model reads are padded up to a multiple of
      this (:func:`bucket_size`).
  """

  patch: int | tuple[int, int]
  max_level: int
  tol_frac: float
  coarsen_ratio: float = 0.25
  max_passes: int = 10
  token_bucket: int = 32

  def __post_init__(self):
    integer = lambda p: isinstance(p, (int, np.integer)) and not isinstance(
        p, bool)
    # int() would truncate a float patch silently: only ints are read.
    if not integer(self.patch) and (
        not isinstance(self.patch, (tuple, list))
        or not all(integer(p) for p in self.patch)):
      raise ValueError(
          f"patch must be a positive int or (Ph, Pw); got {self.patch}.")
    if not isinstance(self.patch, int):
      object.__setattr__(self, "patch", tuple(int(p) for p in self.patch))
    patch = (self.patch,) * 2 if isinstance(self.patch, int) else self.patch
    if len(patch) != 2 or min(patch) < 1:
      raise ValueError(
          f"patch must be a positive int or (Ph, Pw); got {self.patch}.")
    if isinstance(self.max_level, bool) or not isinstance(
        self.max_level, int) or self.max_level < 0:
      raise ValueError(
          f"max_level must be an int >= 0; got {self.max_level!r}.")
    if not self.tol_frac >= 0 or not self.coarsen_ratio >= 0:
      raise ValueError(
          "tol_frac and coarsen_ratio must be >= 0; got"
          f" {self.tol_frac}, {self.coarsen_ratio}.")
    if not isinstance(self.max_passes, int) or self.max_passes < 0:
      raise ValueError(
          f"max_passes must be an int >= 0; got {self.max_passes!r}.")
    if not isinstance(self.token_bucket, int) or self.token_bucket < 1:
      raise ValueError(
          f"token_bucket must be an int >= 1; got {self.token_bucket!r}.")


class RolloutStep(NamedTuple):
  """One step of a rollout, for a batch of ``B`` fields."""

  fields: jax.Array  # (B, H, W, C) after the step
  num_tokens: jax.Array  # int32 (B,): leaves the model read at this step
  trees: Quadtree | None  # batched, full budget: the meshes after the step
  # (None in a uniform rollout)


def bucket_size(num_leaves: Any, multiple: int, max_tokens: int) -> int:
  """Smallest multiple of ``multiple`` holding every tree, at most ``max_tokens``.

  A host-side integer (it becomes a static shape), so ``num_leaves`` must be
  concrete: ``(B,)`` leaf counts of a batch of trees.

  Raises:
    ValueError: ``multiple`` or ``max_tokens`` is not an int >= 1, or
      ``num_leaves`` is empty.

  Example:
    >>> import numpy as np
    >>> from jaxpapers import amr
    >>> amr.bucket_size(np.array([97, 12]), 32, 256)
    128
  """
  for name, value in (("multiple", multiple), ("max_tokens", max_tokens)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or (
        value < 1):
      raise ValueError(f"{name} must be an int >= 1; got {value!r}.")
  if np.size(num_leaves) == 0:
    raise ValueError("num_leaves is empty: a batch has at least one tree.")
  return min(max_tokens,
             int(math.ceil(int(np.max(num_leaves)) / multiple)) * multiple)


@functools.partial(jax.jit, static_argnames="mesh")
def build_meshes(fields_BxHxWxC: jax.Array, mesh: MeshConfig) -> Quadtree:
  """Balanced quadtrees of a batch of fields at the full budget ``H W / (Ph Pw)``.

  The budget holds every finest cell, so no tree overflows; see
  :func:`jaxpapers.amr.build_quadtree` for the refinement rule.

  Raises:
    ValueError: ``fields_BxHxWxC`` is not 4-D, or its grid does not fit
      ``mesh`` (:func:`jaxpapers.amr.make_geometry`).
  """
  if fields_BxHxWxC.ndim != 4:
    raise ValueError(
        f"fields must be (B, H, W, C); got shape {fields_BxHxWxC.shape}.")
  geometry = make_geometry(fields_BxHxWxC.shape[1:], mesh.patch,
                           mesh.max_level)
  return tree_lib.vmap_sharded(functools.partial(
      build_quadtree, patch=mesh.patch, tol_frac=mesh.tol_frac,
      max_level=mesh.max_level, max_tokens=geometry.num_finest_cells))(
          fields_BxHxWxC)


@functools.partial(jax.jit, static_argnames="mesh")
def _regrid_batch(tokens, trees, mesh: MeshConfig):
  return tree_lib.vmap_sharded(functools.partial(
      regrid, tol_frac=mesh.tol_frac, coarsen_ratio=mesh.coarsen_ratio,
      max_passes=mesh.max_passes))(tokens, trees)


@functools.partial(jax.jit, static_argnames="mesh")
def regrid_native(fields_BxHxWxC: jax.Array, trees: Quadtree,
                  mesh: MeshConfig) -> Quadtree:
  """New meshes of native-storage fields from their leaves' area-averaged patches.

  Args:
    fields_BxHxWxC: the finest fields (the native rollout's state).
    trees: their current batched meshes.
    mesh: the regrid settings.

  Returns:
    The regridded batched meshes, with the budget of ``trees``. Native tokens
    of a mesh are its field's footprints, so nothing else changes.

  Raises:
    ValueError: ``fields_BxHxWxC`` is not ``(B, H, W, C)`` of the trees'
      batch and grid.
  """
  if fields_BxHxWxC.ndim != 4 or trees.level.ndim != 2 or (
      fields_BxHxWxC.shape[0] != trees.level.shape[0]):
    raise ValueError(
        f"fields_BxHxWxC must be (B, H, W, C) for a batch of B trees; got"
        f" fields {tuple(fields_BxHxWxC.shape)}, trees' level"
        f" {trees.level.shape}.")
  uniform = tree_lib.vmap_sharded(tokenize)(fields_BxHxWxC, trees)
  return _regrid_batch(uniform, trees, mesh)[1]


_decode = jax.jit(tree_lib.vmap_sharded(detokenize))


def finest_pixels(tree: Quadtree) -> jax.Array:
  """Bool ``(H, W)``: the pixels under finest (level-``L``) leaves of one tree.

  Built from the true field's mesh, these are the region of interest of the
  rollout metrics (our definition: the pixels the mesh resolves finest).
  ``ValueError`` for a batch of trees (``vmap`` over it).
  """
  if tree.level.ndim != 1:
    raise ValueError(
        f"finest_pixels expects one tree (level of shape (T,)); got shape"
        f" {tree.level.shape}: vmap over the batch.")
  finest = (tree.level == tree.geometry.max_level) & tree.mask
  indicator = jnp.broadcast_to(
      finest[:, None, None, None].astype(jnp.float32),
      finest.shape + tree.geometry.patch + (1,))
  return detokenize(indicator, tree)[..., 0] > 0.5


def _call_directly(stage: str, fn: Callable[..., Any], *args: Any) -> Any:
  del stage  # the default runs every stage as it is
  return fn(*args)


def _checked(advance, fields, num_steps, mesh, call, patch=None) -> StageCall:
  """Argument errors of a rollout; ``mesh`` None (with ``patch``): uniform."""
  if not callable(advance):
    raise TypeError(f"advance must be callable; got {type(advance).__name__}.")
  if call is not None and not callable(call):
    raise TypeError(f"call must be callable or None; got {type(call).__name__}.")
  if mesh is not None and not isinstance(mesh, MeshConfig):
    raise TypeError(f"mesh must be a MeshConfig; got {type(mesh).__name__}.")
  if isinstance(num_steps, bool) or not isinstance(num_steps, int) or (
      num_steps < 1):
    raise ValueError(f"num_steps must be an int >= 1; got {num_steps!r}.")
  if fields.ndim != 4 or not jnp.issubdtype(fields.dtype, jnp.floating):
    raise ValueError(
        "fields must be floating (B, H, W, C); got shape"
        f" {tuple(fields.shape)} of {fields.dtype}.")
  if mesh is not None:
    make_geometry(fields.shape[1:], mesh.patch, mesh.max_level)
  elif fields.shape[1] % patch or fields.shape[2] % patch:
    raise ValueError(f"the grid {tuple(fields.shape[1:3])} is not a multiple of"
                     f" the patch {patch}.")
  return _call_directly if call is None else call


def quadtree_rollout(advance: Advance, fields_BxHxWxC: jax.Array,
                     num_steps: int, mesh: MeshConfig, *, frozen: bool = False,
                     call: StageCall | None = None) -> Iterator[RolloutStep]:
  r"""Free rollout of a uniform-storage WAMRViT, regridding every step or frozen.

  Args:
    advance: one model step on leaf tokens, ``advance(tokens_BxTkxPhxPwxC,
      trees) -> tokens`` of the same shape (e.g. ``tokens + model(tokens,
      trees)`` for a residual :class:`jaxpapers.amr.WAMRViT`), ``trees``
      truncated to the bucket ``T_k``. Jit it: it runs once per step.
    fields_BxHxWxC: the initial fields; their meshes come from
      :func:`build_meshes`.
    num_steps: rollout steps, ``>= 1``.
    mesh: mesh settings.
    frozen: keep the initial meshes (a frozen mesh) instead of regridding
      from the predicted tokens every step.
    call: ``call(stage, fn, *args)`` runs each jitted stage (``"model"``,
      ``"regrid"``) and returns ``fn(*args)``; default: run it directly.

  Returns:
    An iterator of ``num_steps`` :class:`RolloutStep`\ s, computed as they
    are consumed.

  Raises:
    TypeError: ``advance``, ``call`` or ``mesh`` is of the wrong kind.
    ValueError: ``num_steps < 1``, fields not floating ``(B, H, W, C)``, or a
      grid that does not fit ``mesh``.
  """
  call = _checked(advance, fields_BxHxWxC, num_steps, mesh, call)
  return _quadtree_steps(advance, fields_BxHxWxC, num_steps, mesh, frozen,
                         call)


def _quadtree_steps(advance, fields, num_steps, mesh, frozen, call):
  trees = build_meshes(fields, mesh)
  full = trees.max_tokens
  tokens = tree_lib.vmap_sharded(tokenize)(fields, trees)
  for _ in range(num_steps):
    size = bucket_size(trees.num_leaves, mesh.token_bucket, full)
    advanced = call("model", advance, tokens[:, :size], truncate(trees, size))
    tokens = tokens.at[:, :size].set(advanced)
    read = trees.num_leaves
    if not frozen:
      tokens, trees = call("regrid", functools.partial(_regrid_batch,
                                                       mesh=mesh),
                           tokens, trees)
    yield RolloutStep(_decode(tokens, trees), read, trees)


def native_rollout(advance: Advance, fields_BxHxWxC: jax.Array,
                   num_steps: int, mesh: MeshConfig, *,
                   call: StageCall | None = None) -> Iterator[RolloutStep]:
  r"""Free rollout of a native-storage WAMRViT on the finest field, regridding every step.

  Args:
    advance: one model step on the finest fields, ``advance(fields, trees)
      -> fields`` (e.g. ``fields + model(native_tokens(fields, trees),
      trees)`` for a residual :class:`jaxpapers.amr.NativeWAMRViT`, with
      ``native_tokens = vmap(partial(tokenize, mode="native"))``), ``trees``
      truncated to the bucket ``T_k``. Jit it: it runs once per step.
    fields_BxHxWxC: the initial fields; their meshes come from
      :func:`build_meshes`.
    num_steps: rollout steps, ``>= 1``.
    mesh: mesh settings.
    call: as in :func:`quadtree_rollout`.

  Returns:
    An iterator of ``num_steps`` :class:`RolloutStep`\ s; ``fields`` is the
    model's output, ``trees`` the mesh regridded from it.

  Raises:
    TypeError, ValueError: as :func:`quadtree_rollout`.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import amr
    >>> fields = jnp.zeros((1, 16, 16, 1)).at[0, 5, 5].set(1.0)  # a spike
    >>> mesh = amr.MeshConfig(patch=4, max_level=1, tol_frac=0.1)
    >>> move = lambda u, trees: jnp.roll(u, 8, axis=2)  # 8 px to the right
    >>> amr.build_meshes(fields, mesh).level[0, :7].tolist()
    [1, 1, 1, 1, 0, 0, 0]
    >>> steps = list(amr.native_rollout(move, fields, 2, mesh))
    >>> [s.trees.level[0, :7].tolist() for s in steps]  # the mesh follows
    [[0, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0, 0]]
  """
  call = _checked(advance, fields_BxHxWxC, num_steps, mesh, call)
  return _native_steps(advance, fields_BxHxWxC, num_steps, mesh, call)


def _native_steps(advance, fields, num_steps, mesh, call):
  trees = build_meshes(fields, mesh)
  full = trees.max_tokens
  for _ in range(num_steps):
    size = bucket_size(trees.num_leaves, mesh.token_bucket, full)
    fields = call("model", advance, fields, truncate(trees, size))
    read = trees.num_leaves
    trees = call("regrid", functools.partial(regrid_native, mesh=mesh),
                 fields, trees)
    yield RolloutStep(fields, read, trees)


def uniform_rollout(advance: Callable[[Any], Any], fields_BxHxWxC: jax.Array,
                    num_steps: int, patch: int, *,
                    call: StageCall | None = None) -> Iterator[RolloutStep]:
  r"""Free rollout of a uniform-patch ViT: no mesh, ``H W / P^2`` tokens a step.

  The baseline of the quadtree rollouts, with the same steps and stage hook:
  ``fields = call("model", advance, fields)`` every step, ``trees`` None.

  Args:
    advance: one model step on the fields, ``advance(fields) -> fields`` (e.g.
      ``fields + model(fields)`` for a :class:`jaxpapers.amr.UniformViT`).
    fields_BxHxWxC: the initial fields.
    num_steps: rollout steps, ``>= 1``.
    patch: the model's patch ``P`` (the token count).
    call: as in :func:`quadtree_rollout` (stage ``"model"`` only).

  Returns:
    An iterator of ``num_steps`` :class:`RolloutStep`\ s.

  Raises:
    TypeError: ``advance`` or ``call`` is not callable.
    ValueError: ``num_steps < 1``, fields not floating ``(B, H, W, C)``, or a
      grid that is not a multiple of ``patch``.
  """
  call = _checked(advance, fields_BxHxWxC, num_steps, None, call, patch)
  return _uniform_steps(advance, fields_BxHxWxC, num_steps, patch, call)


def _uniform_steps(advance, fields, num_steps, patch, call):
  tokens = np.full(fields.shape[0],
                   (fields.shape[1] // patch) * (fields.shape[2] // patch))
  for _ in range(num_steps):
    fields = call("model", advance, fields)
    yield RolloutStep(fields, tokens, None)

