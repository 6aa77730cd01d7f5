"""Placing parameters on a mesh in the sharding tests: by layer name, or FSDP."""

from flax import nnx
import jax
import jax.numpy as jnp


def split(module, shard):
  """``(graphdef, state, specs)`` of ``module``.

  ``shard`` maps a layer's name (a path entry such as "up" or "qkv") to its
  leaves' specs (``{"kernel": P(...), "bias": P(...)}``); every other leaf is
  replicated (spec None).
  """
  graphdef, state = nnx.split(module)

  def spec(path, _):
    names = [str(getattr(p, "key", p)) for p in path]
    for name, specs in shard.items():
      if name in names:
        return specs.get(names[names.index(name) + 1])
    return None
  return graphdef, state, jax.tree_util.tree_map_with_path(spec, state)


def fsdp_specs(tree):
  """FSDP specs: every float leaf's first even axis along "data", the batch's axis.

  Other leaves (integer, odd-sized) are replicated (spec None).
  """
  def spec(leaf):
    if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
      return None
    axes = [axis for axis, size in enumerate(jnp.shape(leaf)) if size % 2 == 0]
    return jax.P(*([None] * axes[0]), "data") if axes else None
  return jax.tree.map(spec, tree)
