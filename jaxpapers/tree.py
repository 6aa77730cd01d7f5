"""Tree math and pytree checks shared across jaxpapers.

``optax.tree`` already covers arithmetic (``vdot``, ``norm``, ``add_scale``);
this module holds what it lacks: validation with named errors, and
flattening to one vector for dense linear algebra (eigen-solvers).
"""

from typing import Any, Callable

import jax
import numpy as np
from jax.flatten_util import ravel_pytree


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


def check_like(tree: Any, reference: Any, name: str) -> None:
  """Raises ``ValueError`` unless ``tree`` matches ``reference`` in structure and leaf shapes."""
  if jax.tree.structure(tree) != jax.tree.structure(reference):
    raise ValueError(
        f"{name} must have the pytree structure of params:"
        f" {jax.tree.structure(tree)} vs {jax.tree.structure(reference)}."
    )
  for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(reference)):
    if shape_of(a) != shape_of(b):
      raise ValueError(
          f"{name} must have the leaf shapes of params: {shape_of(a)} vs"
          f" {shape_of(b)}."
      )


def flat_operator(
    linear_fn: Callable[[Any], Any], template: Any
) -> tuple[Callable[[jax.Array], jax.Array], Callable[[jax.Array], Any], jax.Array]:
  """Views a linear map on pytrees as a map on flat vectors.

  Returns ``(matvec, unravel, flat_template)`` where ``matvec(x)`` ravels
  ``linear_fn(unravel(x))``.
  """
  flat_template, unravel = ravel_pytree(template)

  def matvec(x):
    return ravel_pytree(linear_fn(unravel(x)))[0]

  return matvec, unravel, flat_template
