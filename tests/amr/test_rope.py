"""3-axis RoPE: closed form, relative-position property, pass-through dims."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr

DIMS = (4, 4, 2)
SCALES = (16.0, 16.0, 1.0)


def _rope_numpy(x, coords, dims, scales, base=10000.0):
  out = np.array(x, dtype=np.float64)
  start = 0
  for axis, (dim, scale) in enumerate(zip(dims, scales)):
    for k in range(dim // 2):
      angle = scale * coords[..., axis] * base ** (-2 * k / dim)
      a, b = out[..., start + 2 * k].copy(), out[..., start + 2 * k + 1].copy()
      c, s = np.cos(angle), np.sin(angle)
      out[..., start + 2 * k] = a * c - b * s
      out[..., start + 2 * k + 1] = a * s + b * c
    start += dim
  return out


def test_matches_the_closed_form_and_leaves_extra_dims_alone():
  x = jax.random.normal(jax.random.key(0), (2, 5, 3, 12))
  coords = jax.random.uniform(jax.random.key(1), (2, 5, 3))
  out = amr.rope_3d(x, coords, dims=DIMS, scales=SCALES)
  expected = _rope_numpy(x, np.asarray(coords)[:, :, None, :], DIMS, SCALES)
  np.testing.assert_allclose(out, expected, atol=1e-5)
  np.testing.assert_array_equal(out[..., 10:], x[..., 10:])
  np.testing.assert_allclose(jnp.linalg.norm(out, axis=-1),
                             jnp.linalg.norm(x, axis=-1), rtol=1e-5)


@jax.jit
def _score(q, k, cq, ck):
  q = amr.rope_3d(q[None, None], cq[None], dims=DIMS, scales=SCALES)
  k = amr.rope_3d(k[None, None], ck[None], dims=DIMS, scales=SCALES)
  return jnp.sum(q * k)


@settings(max_examples=25, deadline=None)
@given(shift=st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(-3, 3)),
       seed=st.integers(0, 1000))
def test_scores_depend_only_on_coordinate_differences(shift, seed):
  keys = jax.random.split(jax.random.key(seed), 4)
  q, k = (jax.random.normal(key, (10,)) for key in keys[:2])
  cq, ck = (jax.random.uniform(key, (3,)) for key in keys[2:])
  delta = jnp.asarray(shift, jnp.float32)
  np.testing.assert_allclose(_score(q, k, cq, ck),
                             _score(q, k, cq + delta, ck + delta),
                             rtol=1e-4, atol=1e-4)


def test_scale_axis_separates_levels_at_the_same_centre():
  q = jnp.ones((2, 1, 10))
  coords = jnp.array([[0.5, 0.5, 0.0], [0.5, 0.5, 1.0]])
  out = amr.rope_3d(q, coords, dims=DIMS, scales=SCALES)
  np.testing.assert_array_equal(out[0, :, :8], out[1, :, :8])
  assert not np.allclose(out[0, :, 8:], out[1, :, 8:])


@pytest.mark.parametrize("dims,match", [
    ((3, 4, 2), "even size"),
    ((8, 8, 4), "exceeds the head width"),
    ((4, 4), "one entry per coordinate axis"),
])
def test_bad_dims_are_named_errors(dims, match):
  with pytest.raises(ValueError, match=match):
    amr.rope_3d(jnp.ones((2, 1, 12)), jnp.zeros((2, 3)), dims=dims,
                scales=(1.0,) * len(dims))
