"""Compiled calls: the cache of ahead-of-time compiles and their footprints.

Then a table of misuse of the profiling calls, each a named error.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


_double = jax.jit(lambda x: 2 * x)

MISUSE = [
    (lambda: profiling.time_jitted(_double, jnp.ones(2), repeats=0),
     ValueError, r"repeats must be an int >= 1; got 0"),
    (lambda: profiling.time_jitted(_double, jnp.ones(2), number=1.5),
     ValueError, r"number must be an int >= 1; got 1.5"),
    (lambda: profiling.time_jitted(jnp.ones(2)),
     TypeError, "fn must be callable"),
    (lambda: profiling.paired_ratio([1.0, 2.0], [1.0]),
     ValueError, "one time per round each, at least one; got 2 and 1"),
    (lambda: profiling.paired_ratio([], []),
     ValueError, "at least one; got 0 and 0"),
    (lambda: profiling.call_seconds(jnp.ones(2)),
     TypeError, "fn must be callable"),
    (lambda: profiling.alternating_seconds({"a": (_double, (jnp.ones(2),))},
                                           rounds=0),
     ValueError, r"rounds must be an int >= 1; got 0"),
    (lambda: profiling.alternating_seconds({"a": _double}, rounds=1),
     TypeError, r"calls\['a'\] must be \(fn, args\)"),
    (lambda: profiling.compiled_footprint(_double),
     TypeError, r"compiled must be jax.jit\(f\).lower\(\*args\).compile\(\)"),
    (lambda: profiling.compiled_footprint(_double.lower(jnp.ones(2))),
     TypeError, "got Lowered"),
    (lambda: profiling.CompiledCache()(lambda x: x, 1.0),
     TypeError, "every leaf of args must be an array"),
]


def test_call_seconds_returns_the_ready_result_and_a_nonnegative_time():
  out, seconds = profiling.call_seconds(_double, jnp.arange(3.0))
  np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
  assert seconds >= 0.0


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
