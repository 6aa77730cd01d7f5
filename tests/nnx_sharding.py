"""Placing an nnx Module's parameters on a mesh by layer name (sharding tests)."""

from flax import nnx
import jax


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
