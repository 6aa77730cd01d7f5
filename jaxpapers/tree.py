"""Tree math and pytree checks shared across jaxpapers.

``optax.tree`` already covers most arithmetic (``norm``, ``add_scale``);
this module holds what it lacks: an inner product that holds under Explicit
sharding, validation with named errors, and flattening to one vector for
dense linear algebra (eigen-solvers).
"""

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree


def vdot(a: Any, b: Any) -> jax.Array:
  """Real inner product of two pytrees of the same structure.

  Unlike ``optax.tree.vdot`` (one ``dot_general`` per leaf), each leaf is
  multiplied elementwise and then summed: a reduction over axes that are
  sharded on an Explicit mesh has a defined (replicated) result, while a
  dot product over sharded contracting dimensions is refused there.

  Raises:
    ValueError: ``a`` and ``b`` differ in structure or in a leaf's shape
      (elementwise products would broadcast silently).
  """
  check_like(b, a, "b", reference_name="a")
  products = [jnp.sum(x * y) for x, y in zip(jax.tree.leaves(a),
                                             jax.tree.leaves(b))]
  return functools.reduce(jnp.add, products) if products else jnp.zeros(())


def check_real_floating(tree: Any, name: str) -> None:
  """Raises ``TypeError`` unless every leaf of ``tree`` has a real floating dtype.

  Curvature and optimiser math assumes real parameters: complex leaves would
  give conjugated products and integer leaves have no gradient.
  """
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    dtype = jnp.result_type(leaf)
    if not jnp.issubdtype(dtype, jnp.floating):
      where = jax.tree_util.keystr(path) or "(the array itself)"
      raise TypeError(
          f"{name} must hold real floating-point arrays; leaf {where} has"
          f" dtype {dtype}."
      )


def shape_of(x: Any) -> tuple[int, ...]:
  """Shape of an array, ``jax.ShapeDtypeStruct`` or Python scalar."""
  return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def leading_size(tree: Any, name: str) -> int:
  """Common leading-axis size of all leaves of ``tree``.

  Raises ``ValueError`` naming ``name`` if the tree has no leaves, a scalar
  leaf, leaves that disagree on the leading size, or a leading size of 0.
  """
  leaves = jax.tree.leaves(tree)
  if not leaves:
    raise ValueError(f"{name} is empty: it has no array leaves.")
  shapes = [shape_of(x) for x in leaves]
  sizes = {shape[0] if shape else None for shape in shapes}
  if None in sizes:
    raise ValueError(
        f"every leaf of {name} needs a leading axis; found a scalar."
    )
  if len(sizes) != 1:
    raise ValueError(
        f"the leaves of {name} disagree on their leading (batch) size:"
        f" {sorted(sizes)}."
    )
  (size,) = sizes
  if size == 0:
    raise ValueError(f"{name} is empty: its leading (batch) axis has size 0.")
  return size


def check_like(tree: Any, reference: Any, name: str, *,
               reference_name: str = "params") -> None:
  """Raises ``ValueError`` unless ``tree`` matches ``reference`` in structure and leaf shapes.

  The message names ``tree`` as ``name`` and ``reference`` as
  ``reference_name``.
  """
  if jax.tree.structure(tree) != jax.tree.structure(reference):
    raise ValueError(
        f"{name} must have the pytree structure of {reference_name}:"
        f" {jax.tree.structure(tree)} vs {jax.tree.structure(reference)}."
    )
  for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(reference)):
    if shape_of(a) != shape_of(b):
      raise ValueError(
          f"{name} must have the leaf shapes of {reference_name}:"
          f" {shape_of(a)} vs {shape_of(b)}."
      )


def gather_explicit(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
  """Replicates the leaves sharded along Explicit mesh axes; returns them and an undo.

  Explicit axes refuse ops whose output sharding is ambiguous (a reshape
  merging a sharded axis, a contraction over one); work on such leaves runs
  on gathered copies and ``restore`` gives each leaf its sharding back. Other
  leaves (unsharded, Auto axes, no mesh) pass through untouched, inside or
  outside ``jax.set_mesh``.
  """
  shardings = [_explicit_sharding(x) for x in jax.tree.leaves(tree)]
  treedef = jax.tree.structure(tree)
  if all(s is None for s in shardings):
    return tree, lambda xs: xs

  def reshard_each(leaves, targets):
    return [x if t is None else jax.sharding.reshard(x, t)
            for x, t in zip(leaves, targets)]

  replicated = [None if s is None else jax.NamedSharding(s.mesh, jax.P())
                for s in shardings]
  gathered = treedef.unflatten(reshard_each(jax.tree.leaves(tree), replicated))
  restore = lambda xs: treedef.unflatten(
      reshard_each(treedef.flatten_up_to(xs), shardings))
  return gathered, restore


def _explicit_sharding(x: Any) -> jax.sharding.NamedSharding | None:
  """The sharding of ``x`` if it shards along an Explicit mesh axis, else None."""
  sharding = getattr(jax.typeof(x), "sharding", None)
  mesh = getattr(sharding, "mesh", None)
  if mesh is None or mesh.empty:
    return None
  explicit = {name for name, kind in zip(mesh.axis_names, mesh.axis_types)
              if kind == jax.sharding.AxisType.Explicit}
  used = set()
  for entry in sharding.spec:
    used.update(entry if isinstance(entry, tuple) else (entry,))
  return sharding if used & explicit else None


def reshard_like(x: jax.Array, like: jax.Array) -> jax.Array:
  """``x`` with ``like``'s sharding where Explicit axes make them differ, else ``x``.

  Explicit meshes combine (concatenate, select) only alike-sharded arrays:
  a forecaster's output sharded like its parameters meets an input state
  sharded like the data.
  """
  target, current = _explicit_sharding(like), _explicit_sharding(x)
  if target is None and current is None:
    return x
  spec = (target.spec if target is not None
          else jax.P(*([None] * jnp.ndim(x))))
  mesh = (target if target is not None else current).mesh
  if (current.spec if current is not None else None) == spec:
    return x
  return jax.sharding.reshard(x, jax.NamedSharding(mesh, spec))


def split_axis(x: jax.Array, axis: int, sizes: tuple[int, int]) -> jax.Array:
  """Splits ``x``'s ``axis`` into two axes of ``sizes``: one reshape, one axis.

  Explicit sharding accepts a reshape that splits or merges one axis but
  refuses several at once, even of unsharded axes (under ``vmap`` over a
  sharded batch axis, for one); reshapes written as single steps hold in
  every mode. A sharded ``axis`` keeps its sharding on the first new axis
  when its devices divide ``sizes[0]``, and is gathered otherwise.

  Raises:
    ValueError: ``axis`` is not an axis of ``x``, or ``sizes`` are not two
      sizes whose product is that axis's size.
  """
  axis = _axis_index(x, axis, "split_axis", 0)
  if len(sizes) != 2 or sizes[0] * sizes[1] != x.shape[axis]:
    raise ValueError(
        f"split_axis: sizes must be two sizes whose product is axis {axis}'s"
        f" size {x.shape[axis]}; got {tuple(sizes)}.")
  shape = (*x.shape[:axis], *sizes, *x.shape[axis + 1:])
  spec = explicit_spec(x)
  if spec is None or spec[axis] is None:
    return x.reshape(shape)
  # A sharded axis splits in place when its devices divide the first new
  # axis; otherwise the new axes are gathered.
  mesh = jax.sharding.get_abstract_mesh()
  shards = int(np.prod([mesh.shape[name] for name in spec_axes(spec[axis])]))
  entries = (spec[axis], None) if sizes[0] % shards == 0 else (None, None)
  return jax.lax.reshape(x, shape, out_sharding=jax.P(
      *spec[:axis], *entries, *spec[axis + 1:]))


def merge_axes(x: jax.Array, axis: int) -> jax.Array:
  """Merges ``axis`` and ``axis + 1`` of ``x`` (see :func:`split_axis`).

  The merged axis keeps ``axis``'s sharding; a sharded ``axis + 1`` is
  gathered first.

  Raises:
    ValueError: ``axis`` is not an axis of ``x`` followed by another one.
  """
  axis = _axis_index(x, axis, "merge_axes", 1)
  shape = (*x.shape[:axis], x.shape[axis] * x.shape[axis + 1],
           *x.shape[axis + 2:])
  spec = explicit_spec(x)
  if spec is None or spec[axis + 1] is None:
    return x.reshape(shape)
  # A sharded minor axis does not stay in contiguous blocks: gather it.
  return jax.lax.reshape(x, shape, out_sharding=jax.P(
      *spec[:axis], None, *spec[axis + 2:]))


def _axis_index(x: jax.Array, axis: int, caller: str, after: int) -> int:
  """``axis`` of ``x`` as a non-negative index with ``after`` axes behind it."""
  if not -x.ndim <= axis < x.ndim or axis % x.ndim >= x.ndim - after:
    raise ValueError(
        f"{caller}: axis {axis} must be an axis of the rank-{x.ndim} array"
        f"{' followed by another axis' if after else ''}.")
  return axis % x.ndim


def ravel(tree: Any) -> tuple[jax.Array, Callable[[jax.Array], Any]]:
  """``jax.flatten_util.ravel_pytree`` that also holds under Explicit sharding.

  Leaves sharded along Explicit axes are gathered before flattening
  (:func:`gather_explicit`) and ``unravel`` gives them their sharding back.
  """
  gathered, restore = gather_explicit(tree)
  flat, unravel_gathered = ravel_pytree(gathered)
  return flat, lambda x: restore(unravel_gathered(x))


def flat_operator(
    linear_fn: Callable[[Any], Any], template: Any
) -> tuple[Callable[[jax.Array], jax.Array], Callable[[jax.Array], Any], jax.Array]:
  """Views a linear map on pytrees as a map on flat vectors.

  Returns ``(matvec, unravel, flat_template)`` where ``matvec(x)`` ravels
  ``linear_fn(unravel(x))``; see :func:`ravel` for sharded leaves.

  Raises:
    ValueError (when ``matvec`` is traced): ``linear_fn``'s output differs
      from ``template`` in structure or leaf shapes, so it is no map of the
      template's space to itself.
  """
  flat_template, unravel = ravel(template)

  def matvec(x):
    out = linear_fn(unravel(x))
    check_like(out, template, "linear_fn's output", reference_name="template")
    return ravel(out)[0]

  return matvec, unravel, flat_template


def vmap_sharded(fn: Callable[..., Any]) -> Callable[..., Any]:
  """``jax.vmap(fn)`` over leading axes that may be sharded along Explicit mesh axes.

  Under ``vmap`` a gather whose table is unbatched and whose indices are
  batched (a constant lookup table read at per-example indices) has no
  output sharding JAX can infer when the batch axis is sharded along an
  Explicit axis. Such a batch is mapped per device inside ``jax.shard_map``:
  every device maps its own slice, which is data parallelism and gives the
  same numbers. The mesh axes are those sharding the first leaf's leading
  axis that is sharded along an Explicit axis; every argument is resharded
  to them. Without such a leaf this is plain ``jax.vmap(fn)``; leaves
  sharded along Explicit axes elsewhere are gathered first
  (:func:`gather_explicit`).
  """
  mapped = jax.vmap(fn)

  def call(*args):
    shardings = [_explicit_sharding(x) for x in jax.tree.leaves(args)]
    batched = [s for s in shardings if s is not None and s.spec
               and s.spec[0] is not None]
    if not batched:
      return mapped(*gather_explicit(args)[0])
    sharding = jax.NamedSharding(batched[0].mesh, jax.P(batched[0].spec[0]))
    args = jax.tree.map(lambda x: jax.sharding.reshard(x, sharding), args)
    return jax.shard_map(mapped, mesh=sharding.mesh, in_specs=sharding.spec,
                         out_specs=sharding.spec)(*args)

  return call


def explicit_spec(x: Any) -> jax.P | None:
  """``x``'s full PartitionSpec when its mesh has Explicit axes, else None.

  A gather at sharded indices or a contraction over a sharded dimension has
  no output sharding that Explicit axes can infer; callers pass one built
  from this spec as ``out_sharding``. None (no mesh, Auto axes only) leaves
  the choice to the compiler, as ``out_sharding=None`` does.
  """
  sharding = getattr(jax.typeof(x), "sharding", None)
  mesh = getattr(sharding, "mesh", None)
  if (mesh is None or mesh.empty
      or jax.sharding.AxisType.Explicit not in mesh.axis_types):
    return None
  spec = tuple(sharding.spec)
  return jax.P(*spec, *([None] * (jnp.ndim(x) - len(spec))))


def projection_spec(x: Any, kernel: Any) -> jax.P | None:
  """``out_sharding`` for ``x @ kernel`` (a dense layer): tensor parallelism under Explicit axes.

  The output keeps the sharding of ``x``'s leading axes and takes the
  kernel's column sharding (a sharded input width is summed over devices);
  columns sharded along a mesh axis that already shards ``x``'s leading axes
  are gathered. None without Explicit mesh axes on either (see
  :func:`explicit_spec`).
  """
  x_spec, kernel_spec = explicit_spec(x), explicit_spec(kernel)
  if x_spec is None and kernel_spec is None:
    return None
  leading = (tuple(x_spec[:-1]) if x_spec is not None
             else (None,) * (jnp.ndim(x) - 1))
  columns = kernel_spec[-1] if kernel_spec is not None else None
  if set(spec_axes(columns)) & set(spec_axes(jax.P(*leading))):
    columns = None
  return jax.P(*leading, columns)


def spec_axes(spec: Any) -> tuple[str, ...]:
  """The mesh axis names a PartitionSpec, or one of its entries, shards along."""
  entries = spec if isinstance(spec, jax.P) else (spec,)
  names = []
  for entry in entries:
    if entry is not None:
      names += list(entry) if isinstance(entry, tuple) else [entry]
  return tuple(names)


def gather_mesh_axes(tree: Any, axes: Any) -> Any:
  """``tree`` with every leaf's sharding along the mesh ``axes`` gathered.

  Fully sharded data parallelism (FSDP) shards parameters along the batch's
  own mesh axes and gathers them where they are used: on Explicit axes an
  elementwise op or a contraction between an activation and a parameter
  sharded along the same mesh axis has no consistent sharding. Sharding along
  other axes (tensor parallelism) is kept. Leaves without Explicit axes, or
  not sharded along ``axes``, are returned as they are.
  """
  axes = set(axes)

  def gather(x):
    spec = explicit_spec(x)
    if spec is None or not axes & set(spec_axes(spec)):
      return x
    kept = [tuple(name for name in spec_axes(entry) if name not in axes)
            for entry in spec]
    return jax.sharding.reshard(
        x, jax.P(*[entry if len(entry) > 1 else (entry[0] if entry else None)
                   for entry in kept]))
  return jax.tree.map(gather, tree)


def contraction_spec(x: Any) -> jax.P | None:
  """``out_sharding`` for contracting ``x``'s last axis: its other axes keep their sharding.

  The new last axis is replicated (a sum over a sharded width is reduced
  across devices). None without Explicit mesh axes (see :func:`explicit_spec`).
  """
  spec = explicit_spec(x)
  return None if spec is None else jax.P(*spec[:-1], None)


def lookup(table: jax.Array, *indices: jax.Array) -> jax.Array:
  """``table[indices]``: one index array per table axis, all of one shape.

  The result has the indices' shape and sharding. On Explicit mesh axes a
  table read at sharded indices needs that output sharding spelled out, and
  scalar indices (one episode, vmapped over a sharded batch) would lower to
  a dynamic slice whose batching has none: a trailing index axis makes the
  read a gather in every case.
  """
  spec = explicit_spec(indices[0])
  out = None if spec is None else jax.P(*spec, None)
  return table.at[tuple(i[..., None] for i in indices)].get(
      out_sharding=out)[..., 0]


def on_context_mesh(tree: Any) -> Any:
  """``tree`` with its mesh-less leaves replicated on an Explicit context mesh.

  JAX types scalar constants (``jnp.float32(0)``, ``jnp.zeros(())``) with
  no mesh. A ``lax.scan`` or ``lax.while_loop`` vmapped over a batch sharded
  along an Explicit mesh axis, whose carry starts as such an unbatched
  constant and turns batched, then fails ("Resource axis: data ... is not
  found in mesh: ()"); replicated on the context mesh the carry batches.
  Without an Explicit context mesh ``tree`` is returned as it is.
  """
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or jax.sharding.AxisType.Explicit not in mesh.axis_types:
    return tree

  def place(x):
    if not jax.typeof(x).sharding.mesh.empty:
      return x
    return jax.sharding.reshard(x, jax.P(*[None] * jnp.ndim(x)))

  return jax.tree.map(place, tree)
