"""jaxpapers.data: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import data

_DATA = {"x": jnp.ones((6, 2)), "y": jnp.zeros((6,), jnp.int32)}

MISUSE = [
    (lambda: data.sample_minibatches(jax.random.key(0), _DATA, 2, 0),
     ValueError, "num_batches must be >= 1"),
    (lambda: data.sample_minibatches(jax.random.key(0), _DATA, 7, 1),
     ValueError, r"batch_size=7 must lie in \[1, num_examples=6\]"),
    (lambda: data.sample_minibatches(
        jax.random.key(0), {"x": jnp.ones((6, 2)), "y": jnp.ones((5,))}, 2, 1),
     ValueError, "disagree on their leading"),
    # Float indices used to be truncated silently by jnp.take.
    (lambda: data.take(_DATA, jnp.array([0.0, 1.5])), TypeError,
     "indices must be integers"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=-1),
     ValueError, "num_steps must be >= 0"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1, size=0),
     ValueError, "size must be >= 1"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       background_modes=-1),
     ValueError, "background_modes must be >= 0"),
    (lambda: data.advection_dataset(0, 0, num_steps=1), ValueError,
     "num_trajectories must be >= 1"),
    (lambda: data.lorenz96(num_samples=4, dt=0.0), ValueError,
     "dt must be > 0"),
    (lambda: data.sliding_windows(np.ones(10), 2, 1), ValueError,
     r"values must be \(T, C\)"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_take_fills_out_of_range_indices_as_documented():
  taken = jax.jit(data.take)(_DATA, jnp.array([0, 6], jnp.int32))
  assert np.all(np.isnan(taken["x"][1])) and np.all(np.isfinite(taken["x"][0]))
  assert taken["y"][1] == np.iinfo(np.int32).min
