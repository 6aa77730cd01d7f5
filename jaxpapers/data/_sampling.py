"""Mini-batches as pure functions of a key.

Every batch is determined by ``(key, step)``, so a resumed run draws exactly
the batches an uninterrupted one would, and no loader state needs saving.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib
from jaxpapers._checks import check_int


def minibatch_indices(
    key: jax.Array, num_examples: int, batch_size: int
) -> jax.Array:
  """``batch_size`` distinct indices in ``[0, num_examples)``, uniformly at random.

  Args:
    key: PRNG key; the same key gives the same indices.
    num_examples: size of the data set.
    batch_size: number of indices, ``1 <= batch_size <= num_examples``.

  Returns:
    int32 array of shape ``(batch_size,)``, without repeats.
  """
  check_int("num_examples", num_examples, 1)
  check_int("batch_size", batch_size, 1)
  if not 1 <= batch_size <= num_examples:
    raise ValueError(
        f"batch_size={batch_size} must lie in [1, num_examples={num_examples}]."
    )
  if batch_size == num_examples:
    return jnp.arange(num_examples, dtype=jnp.int32)
  return jax.random.permutation(key, num_examples)[:batch_size].astype(jnp.int32)


def take(data: Any, indices: jax.Array) -> Any:
  """Gathers ``indices`` along the leading axis of every leaf of ``data``.

  Leaves become ``indices.shape + leaf.shape[1:]``. As ``jnp.take``, an
  index outside ``[-n, n)`` (not checkable when traced) reads a fill value:
  NaN for floating leaves, the dtype's minimum for integer ones. On Explicit
  mesh axes the result keeps the sharding of ``indices`` and of the leaves'
  other axes.

  Raises:
    TypeError: for non-integer ``indices``.
    ValueError: a leaf without a leading axis, leaves that disagree on its
      size n, or concrete ``indices`` outside ``[-n, n)``.
  """
  dtype = jnp.result_type(indices)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"indices must be integers, got dtype {dtype}.")
  if jax.tree.leaves(data):
    size = tree_lib.leading_size(data, "data")
    if not isinstance(indices, jax.core.Tracer):
      values = np.asarray(indices)
      if values.size and (values.min() < -size or values.max() >= size):
        raise ValueError(
            f"indices must lie in [-{size}, {size}) (the leading size of"
            f" data); got range [{values.min()}, {values.max()}].")
  index_spec = tree_lib.explicit_spec(indices)
  index_axes = set(tree_lib.spec_axes(index_spec))

  def take_leaf(x):
    spec = tree_lib.explicit_spec(x)
    # A leaf axis sharded along a mesh axis of the indices is gathered: one
    # mesh axis shards at most one axis of the result.
    out = (None if spec is None or index_spec is None
           else jax.P(*index_spec, *[
               None if index_axes & set(tree_lib.spec_axes(entry)) else entry
               for entry in spec[1:]]))
    return jnp.asarray(x).at[indices].get(mode="fill", out_sharding=out)

  return jax.tree.map(take_leaf, data)


def sample_minibatches(
    key: jax.Array, data: Any, batch_size: int, num_batches: int
) -> Any:
  """Stacks ``num_batches`` independent mini-batches drawn from ``data``.

  Each draw takes ``batch_size`` distinct examples; draws are independent of
  each other (an example can appear in several draws).

  Args:
    key: PRNG key.
    data: pytree whose leaves share a leading example axis of size n.
    batch_size: examples per draw.
    num_batches: number of draws K.

  Returns:
    A pytree like ``data`` with leaves of shape ``(K, batch_size, ...)``.

  Raises:
    ValueError: for leaves without a common leading size n >= 1, ``num_batches
      < 1`` or ``batch_size`` outside ``[1, n]``.
  """
  num_examples = tree_lib.leading_size(data, "data")
  check_int("num_batches", num_batches, 1)
  keys = jax.random.split(key, num_batches)
  indices = jax.vmap(
      lambda k: minibatch_indices(k, num_examples, batch_size)
  )(keys)
  return take(data, indices)
