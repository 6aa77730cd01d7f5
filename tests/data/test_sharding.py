"""jaxpapers.data under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on inputs sharded along the batch ("data") and/or a
feature axis ("model") of a (2, 4) mesh (see ``check_sharded_call`` in
tests/conftest.py): keys of a batch of draws, or the data set sampled from.
The host-side (numpy) split and windowing take device arrays too; they are
checked on sharded arrays eagerly below.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import data

_rng = np.random.default_rng(0)
_KEYS = jax.random.split(jax.random.key(0), 8)
_DATA = {"x": jnp.asarray(_rng.normal(size=(16, 8)), jnp.float32),
         "y": jnp.asarray(_rng.integers(0, 10, 16), jnp.int32)}
_DATA_SPECS = {"x": jax.P("data", "model"), "y": jax.P("data")}

CASES = {
    "data.advection_trajectory": (
        jax.vmap(functools.partial(data.advection_trajectory, num_steps=2,
                                   size=8, radius_range=(1.0, 3.0))),
        (_KEYS,), (jax.P("data"),)),
    "data.minibatch_indices": (
        jax.vmap(lambda key: data.minibatch_indices(key, 16, 4)), (_KEYS,),
        (jax.P("data"),)),
    "data.take": (
        data.take, (_DATA, jnp.asarray([[3, 1, 4, 1], [5, 9, 2, 6]], jnp.int32)),
        (_DATA_SPECS, jax.P("data"))),
    "data.sample_minibatches": (
        lambda key, d: data.sample_minibatches(key, d, 4, 8),
        (jax.random.key(1), _DATA), (None, _DATA_SPECS)),
}

NOT_SHARDED = {
    "data.advection_dataset": "takes a Python seed and count, no arrays",
    "data.load_digits": "loads scikit-learn's bundled files into numpy; takes"
                        " no arrays",
    "data.load_series": "loads statsmodels' bundled files into numpy; takes no"
                        " arrays",
    "data.lorenz96": "generates a series from Python settings; takes no arrays",
    "data.chronological_split":
        "host-side numpy on concrete values (not jittable); checked on sharded"
        " device arrays by"
        " tests/data/test_sharding.py::test_host_functions_take_sharded_arrays",
    "data.sliding_windows":
        "host-side numpy on concrete values (not jittable); checked on sharded"
        " device arrays by"
        " tests/data/test_sharding.py::test_host_functions_take_sharded_arrays",
}


# The cases that took 2.5 s or more for both modes on 2 idle cores (nearly all
# of it compilation) run in the slow suite, `pytest -m slow`, which CI runs.
SLOW_CASES = {
    "data.advection_trajectory",
    "data.minibatch_indices",
    "data.sample_minibatches",
}


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sharded_inputs_give_the_unsharded_numbers(name, mode,
                                                   check_sharded_call):
  check_sharded_call(CASES[name], mode)


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_functions_take_sharded_arrays(mode):
  values = np.cumsum(_rng.normal(size=(40, 4)), axis=0).astype(np.float32)
  mesh = jax.make_mesh((2, 4), ("data", "model"),
                       axis_types=(getattr(jax.sharding.AxisType, mode),) * 2)
  with jax.set_mesh(mesh):
    sharded = jax.device_put(jnp.asarray(values), jax.P("data", "model"))
    split = data.chronological_split(sharded)
    windows = data.sliding_windows(sharded, 4, 2, stride=3)
  expected = data.chronological_split(values)
  for got, want in zip(split, expected):
    np.testing.assert_array_equal(got, want)
  for got, want in zip(windows, data.sliding_windows(values, 4, 2, stride=3)):
    np.testing.assert_array_equal(got, want)
