"""Compiled calls: the cache of ahead-of-time compiles and their footprints."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import profiling


def test_compiled_cache_compiles_once_per_function_and_signature():
  cache = profiling.CompiledCache()

  def scale(x, factor):
    return x * factor

  compiled, footprint = cache(scale, jnp.ones((4,)), jnp.float32(2.0))
  np.testing.assert_array_equal(compiled(jnp.arange(4.0), jnp.float32(3.0)),
                                [0.0, 3.0, 6.0, 9.0])
  expected = profiling.compiled_footprint(
      jax.jit(scale).lower(jnp.ones((4,)), jnp.float32(2.0)).compile())
  assert footprint == expected
  # Same function and signature: the same compile; new values do not matter.
  assert cache(scale, jnp.zeros((4,)), jnp.float32(5.0))[0] is compiled
  assert len(cache) == 1
  # A new shape, dtype or function is compiled anew.
  cache(scale, jnp.ones((5,)), jnp.float32(2.0))
  cache(scale, jnp.ones((4,), jnp.int32), jnp.int32(2))
  cache(lambda x, factor: x / factor, jnp.ones((4,)), jnp.float32(2.0))
  assert len(cache) == 4
