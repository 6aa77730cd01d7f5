"""jaxpapers.profiling on arguments sharded under Auto and Explicit meshes.

Profiling calls are host-side: they compile, time and read the memory
analysis of jitted calls, so none runs under ``jit`` itself. Their contract
is that sharded arguments compile and run, and that a cached compile gives
the numbers of the unsharded call: see
:func:`test_profiling_runs_on_sharded_arguments`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import profiling

CASES = {}

_REFERENCE = ("tests/test_sharding_profiling.py::"
              "test_profiling_runs_on_sharded_arguments")
NOT_SHARDED = {
    "profiling.CompiledCache": (
        f"host-side ahead-of-time compiles, not jittable; run on sharded"
        f" arguments in {_REFERENCE}"),
    "profiling.compiled_footprint": (
        f"reads a compiled executable, no arrays; run on a sharded compile in"
        f" {_REFERENCE}"),
    "profiling.time_jitted": (
        f"host-side wall time of a call, not jittable; run on sharded"
        f" arguments in {_REFERENCE}"),
    "profiling.alternating_seconds": (
        f"host-side wall time of calls, not jittable; run on sharded"
        f" arguments in {_REFERENCE}"),
    "profiling.call_seconds": (
        f"host-side wall time of one call, not jittable; run on sharded"
        f" arguments in {_REFERENCE}"),
    "profiling.paired_ratio": (
        "a summary of host-side timings (Python floats), no arrays"),
}


def _scale(x, w):
  return jnp.tanh(x * w[None])


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_profiling_runs_on_sharded_arguments(mode, contract_mesh):
  x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 8)), jnp.float32)
  w = jnp.linspace(0.5, 1.5, 8)
  expected = _scale(x, w)
  mesh = contract_mesh(mode)
  cache = profiling.CompiledCache()
  with jax.set_mesh(mesh):
    args = (jax.device_put(x, jax.P("data", "model")),
            jax.device_put(w, jax.P("model")))
    compiled, footprint = cache(_scale, *args)
    got = compiled(*args)
    seconds = profiling.time_jitted(jax.jit(_scale), *args, repeats=2)
    rounds = profiling.alternating_seconds(
        {"sharded": (jax.jit(_scale), args),
         "plain": (jax.jit(_scale), (x, w))}, rounds=2, repeats=1)
    once, once_seconds = profiling.call_seconds(jax.jit(_scale), *args)
  np.testing.assert_allclose(got, expected, rtol=1e-6)
  assert got.sharding.spec == jax.P("data", "model")
  assert footprint == profiling.compiled_footprint(compiled)
  assert footprint["peak_bytes"] != 0
  assert seconds > 0
  assert [len(s) for s in rounds.values()] == [2, 2]
  np.testing.assert_allclose(once, expected, rtol=1e-6)
  assert once.sharding.spec == jax.P("data", "model") and once_seconds > 0
