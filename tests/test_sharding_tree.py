"""jaxpapers.tree under Auto and Explicit meshes gives the unsharded numbers.

These helpers exist for Explicit sharding (every other area's fixes use
them), so each runs on leaves sharded along the batch and feature axes.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

_TREE = {"a": _f32(4, 8), "b": _f32(8)}
_SPECS = {"a": jax.P("data", "model"), "b": jax.P("model")}
_TABLE = _f32(5, 8)


def _checked_scale(tree):
  """The checks run on sharded tracers (shapes and dtypes only)."""
  tree_lib.check_like(tree, _TREE, "tree")
  tree_lib.check_real_floating(tree, "tree")
  size = tree_lib.leading_size(tree["a"], "tree['a']")
  return jax.tree.map(lambda x: x * len(tree_lib.shape_of(x)) + size, tree)


def _ravel_round_trip(tree):
  flat, unravel = tree_lib.ravel(tree)
  gathered, restore = tree_lib.gather_explicit(tree)
  return flat, unravel(2.0 * flat), restore(jax.tree.map(jnp.negative,
                                                         gathered))


def _flat_operator(tree):
  matvec, unravel, flat = tree_lib.flat_operator(
      lambda t: jax.tree.map(lambda x: 3.0 * x, t), tree)
  return matvec(flat), unravel(matvec(flat))


def _lookup(rows_BxF, ids_B):
  """Per example, a row of a constant table (why vmap_sharded exists)."""
  return tree_lib.vmap_sharded(lambda row, i: row * _TABLE[i])(rows_BxF, ids_B)


def _rows_and_projection(table_NxF, ids_B):
  """A gather at sharded ids and a contraction over a sharded width."""
  rows = table_NxF.at[ids_B].get(out_sharding=tree_lib.explicit_spec(ids_B))
  weights_FxD = jnp.ones((table_NxF.shape[1], 3))
  return rows, jnp.matmul(table_NxF, weights_FxD,
                          out_sharding=tree_lib.contraction_spec(table_NxF))


def _dense_layers(x_BxD, w1_DxF, w2_FxD, w3_DxF):
  """Dense layers whose kernels shard their rows, their columns, or "data"."""
  h_BxF = jnp.matmul(x_BxD, w1_DxF,
                     out_sharding=tree_lib.projection_spec(x_BxD, w1_DxF))
  y_BxD = jnp.matmul(h_BxF, w2_FxD,
                     out_sharding=tree_lib.projection_spec(h_BxF, w2_FxD))
  return h_BxF, y_BxD, jnp.matmul(
      y_BxD, w3_DxF, out_sharding=tree_lib.projection_spec(y_BxD, w3_DxF))


def _scan_from_a_constant(x_B):
  """A vmapped scan whose carry starts as a scalar constant."""
  def one(x):
    start = tree_lib.on_context_mesh(jnp.float32(0.0))
    return jax.lax.scan(lambda c, _: (c + x, None), start, None, length=3)[0]
  return jax.vmap(one)(x_B)


CASES = {
    # A table read at per-example (vmapped scalar) and at batched indices.
    "tree.lookup": (
        lambda table, rows, cols: (
            tree_lib.lookup(table, rows, cols),
            jax.vmap(jax.vmap(lambda r, c: tree_lib.lookup(table, r, c)))(
                rows, cols)),
        (_f32(6, 5), jnp.asarray(_rng.integers(0, 6, (4, 8)), jnp.int32),
         jnp.asarray(_rng.integers(0, 5, (4, 8)), jnp.int32)),
        (None, jax.P("data", "model"), jax.P("data", "model"))),
    "tree.on_context_mesh": (
        _scan_from_a_constant, (_f32(8),), (jax.P("data"),)),
    "tree.projection_spec": (
        _dense_layers, (_f32(4, 8), _f32(8, 16), _f32(16, 8), _f32(8, 4)),
        (jax.P("data"), jax.P(None, "model"), jax.P("model"),
         jax.P(None, "data"))),
    # FSDP: a weight sharded along the batch's own axis is gathered before the
    # product with the batch; its other sharding ("model") stays.
    "tree.gather_mesh_axes": (
        lambda x, w: x @ tree_lib.gather_mesh_axes(w, ("data",)),
        (_f32(4, 8), _f32(8, 8)), (jax.P("data"), jax.P("data", "model"))),
    "tree.vdot": (tree_lib.vdot, (_TREE, _TREE), (_SPECS, _SPECS)),
    ("tree.check_like+tree.check_real_floating+tree.leading_size"
     "+tree.shape_of"): (_checked_scale, (_TREE,), (_SPECS,)),
    "tree.ravel+tree.gather_explicit": (_ravel_round_trip, (_TREE,), (_SPECS,)),
    "tree.flat_operator": (_flat_operator, (_TREE,), (_SPECS,)),
    "tree.reshard_like": (
        lambda x, like: jnp.concatenate([tree_lib.reshard_like(x, like), like]),
        (_f32(4, 8), _f32(4, 8)), (jax.P(None, "model"), jax.P("data"))),
    # Axis 1 sharded over 4 devices splits into sizes they divide (4, 2) and
    # do not (2, 4); the merge of axes (0, 1) has a sharded minor axis.
    "tree.split_axis+tree.merge_axes": (
        lambda x: (
            tree_lib.merge_axes(2.0 * tree_lib.split_axis(x, 1, (2, 4)), 1),
            tree_lib.split_axis(x, 1, (4, 2)), tree_lib.merge_axes(x, 0)),
        (_f32(4, 8, 3),), (jax.P("data", "model"),)),
    "tree.vmap_sharded": (
        _lookup, (_f32(4, 8), jnp.asarray([0, 4, 2, 2], jnp.int32)),
        (jax.P("data"), jax.P("data"))),
    "tree.explicit_spec+tree.contraction_spec": (
        _rows_and_projection,
        (_f32(4, 8), jnp.asarray([3, 0, 0, 2], jnp.int32)),
        (jax.P(None, "model"), jax.P("data"))),
}
NOT_SHARDED = {
    "tree.spec_axes": "reads the mesh axis names of a PartitionSpec, no arrays",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "tree.vmap_sharded": ("Auto", "Explicit"),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
