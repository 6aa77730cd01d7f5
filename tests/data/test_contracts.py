"""jaxpapers.data: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import data

_DATA = {"x": jnp.ones((6, 2)), "y": jnp.zeros((6,), jnp.int32)}

MISUSE = [
    (lambda: data.sample_minibatches(jax.random.key(0), _DATA, 2, 0),
     ValueError, "num_batches must be an int >= 1"),
    (lambda: data.sample_minibatches(jax.random.key(0), _DATA, 7, 1),
     ValueError, r"batch_size=7 must lie in \[1, num_examples=6\]"),
    (lambda: data.sample_minibatches(
        jax.random.key(0), {"x": jnp.ones((6, 2)), "y": jnp.ones((5,))}, 2, 1),
     ValueError, "disagree on their leading"),
    # Float indices used to be truncated silently by jnp.take.
    (lambda: data.take(_DATA, jnp.array([0.0, 1.5])), TypeError,
     "indices must be integers"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=-1),
     ValueError, "num_steps must be an int >= 0"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1, size=0),
     ValueError, "size must be an int >= 1"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       background_modes=-1),
     ValueError, "background_modes must be an int >= 0"),
    (lambda: data.advection_dataset(0, 0, num_steps=1), ValueError,
     "num_trajectories must be an int >= 1"),
    (lambda: data.lorenz96(num_samples=4, dt=0.0), ValueError,
     "dt must be > 0"),
    (lambda: data.sliding_windows(np.ones(10), 2, 1), ValueError,
     r"values must be \(T, C\)"),
    # Issue 35: a reversed range used to draw radii between its ends (traced
    # ranges give NaN frames, test_advection.py).
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       radius_range=(5.0, 2.0)),
     ValueError, r"radius_range must be finite \(low, high\) with 0 <= low"
     r" <= high; got \(5.0, 2.0\)"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       radius_range=(-1.0, 2.0)),
     ValueError, "radius_range must be finite"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       radius_range=(1.0, np.inf)),
     ValueError, "radius_range must be finite"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       radius_range=(1.0, 2.0, 3.0)),
     ValueError, "radius_range must be two numbers"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       edge_width=0.0),
     ValueError, "edge_width must be finite and > 0"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       velocity=(np.nan, 0.0)),
     ValueError, r"velocity must be finite; got \(nan, 0.0\)"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1,
                                       background_amplitude=np.nan),
     ValueError, "background_amplitude must be finite and >= 0"),
    (lambda: data.advection_trajectory(jax.random.key(0), num_steps=1.5),
     ValueError, "num_steps must be an int >= 0; got 1.5"),
    (lambda: data.advection_dataset(0, 2, num_steps=1, radius_range=(3.0, 1.0)),
     ValueError, "radius_range must be finite"),
    (lambda: data.minibatch_indices(jax.random.key(0), 6, 2.5), ValueError,
     "batch_size must be an int >= 1"),
    (lambda: data.sample_minibatches(jax.random.key(0), _DATA, 2, np.nan),
     ValueError, "num_batches must be an int >= 1"),
    (lambda: data.take(_DATA, jnp.array([0, 6])), ValueError,
     r"indices must lie in \[-6, 6\)"),
    (lambda: data.take({"a": jnp.ones(())}, jnp.array([0])), ValueError,
     "every leaf of data needs a leading axis"),
    (lambda: data.load_digits(num_examples=10.5), ValueError,
     "num_examples must lie in"),
    (lambda: data.load_digits(seed=-1), ValueError, "seed must be an int >= 0"),
    (lambda: data.split_digits({"x": np.ones((3, 64))}, seed=0), TypeError,
     "digits must be a Digits"),
    (lambda: data.split_digits(data.load_digits(num_examples=10), seed=0,
                               num_train=10), ValueError,
     r"num_train must be an int in \[1, 9\]"),
    (lambda: data.split_digits(data.load_digits(num_examples=10), seed=-2),
     ValueError, "seed must be an int >= 0"),
    (lambda: data.lorenz96(num_samples=4, noise=np.nan), ValueError,
     "noise must be >= 0 and finite"),
    (lambda: data.lorenz96(num_samples=4, dt=np.inf), ValueError,
     "dt must be > 0 and finite"),
    (lambda: data.lorenz96(num_samples=4, forcing=np.nan), ValueError,
     "forcing must be finite"),
    (lambda: data.lorenz96(num_samples=4, num_dims=4.5), ValueError,
     "num_dims must be an int >= 4"),
    # min() of a tuple holding NaN is order-dependent: NaN used to pass.
    (lambda: data.chronological_split(np.ones((100, 2)), (np.nan, 0.5, 0.5)),
     ValueError, "fractions must be three positive"),
    (lambda: data.sliding_windows(np.ones((10, 1)), 2.5, 1), ValueError,
     "lookback must be an int >= 1"),
    (lambda: data.chunk_texts(["abc"], np.random.default_rng(0),
                                          min_chars=1, max_chars=2,
                                          max_chunks_per_text=-1),
     ValueError, "max_chunks_per_text must be an int >= 1"),
    (lambda: data.arithmetic_document(np.random.default_rng(0), -1),
     ValueError, "num_chars must be an int >= 1"),
    # A negative count used to slice off the last documents silently.
    (lambda: data.load_multidomain(docs_per_domain=-1), ValueError,
     "docs_per_domain must be an int >= 1"),
    (lambda: data.consecutive_windows(np.arange(10), 0), ValueError,
     "length must be an int >= 1"),
    (lambda: data.split_documents(["a"], 0.5), ValueError,
     "docs must hold at least 2 documents"),
    (lambda: data.sample_windows(jax.random.key(0), jnp.arange(100), -1,
                                      4), ValueError,
     "batch_size must be an int >= 1"),
    (lambda: data.sample_windows(jax.random.key(0), jnp.ones((10, 10)), 2,
                                      4), ValueError, "tokens must be 1-D"),
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
