"""Advection trajectories: exact transport, determinism, the protocol's shape."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import data as data_lib


def test_frames_are_exact_periodic_shifts():
  u = data_lib.advection_trajectory(jax.random.key(3), num_steps=4, size=32)
  # a = (1.0, 0.5) px/step: after 2 steps, 2 columns and 1 row.
  np.testing.assert_allclose(u[2], jnp.roll(u[0], (1, 2), axis=(0, 1)),
                             atol=1e-5)
  np.testing.assert_allclose(u[4], jnp.roll(u[0], (2, 4), axis=(0, 1)),
                             atol=1e-5)


def test_fields_have_sharp_discs_on_a_faint_background():
  key = jax.random.key(0)
  background = np.asarray(data_lib.advection_trajectory(
      key, num_steps=0, size=64, min_discs=0, max_discs=0))[0]
  # Mode amplitudes sum to background_amplitude = 0.01.
  assert 0.0 < np.abs(background).max() <= 0.01 + 1e-6
  u = np.asarray(data_lib.advection_trajectory(
      key, num_steps=0, size=64, min_discs=1, max_discs=1))[0]
  disc = u - background
  assert 0.5 <= disc.max() <= 1.0
  assert np.mean(disc > 0.25) < 0.25  # one disc of radius <= 10 px
  # The edge is sharp: some pixel-to-pixel jump exceeds a quarter of the disc.
  assert np.abs(np.diff(u, axis=1)).max() > 0.25 * disc.max()


def test_dataset_is_deterministic_and_stacks_fold_in_keys():
  a = data_lib.advection_dataset(7, 3, num_steps=2, size=32)
  assert a.shape == (3, 3, 32, 32)
  np.testing.assert_array_equal(a, data_lib.advection_dataset(7, 3, num_steps=2,
                                                              size=32))
  one = data_lib.advection_trajectory(jax.random.fold_in(jax.random.key(7), 1),
                                      num_steps=2, size=32)
  np.testing.assert_allclose(a[1], one, atol=1e-6)
  assert not np.allclose(a[0], a[1])


@pytest.mark.slow  # a compile with traced ranges
def test_traced_out_of_range_radii_or_width_make_every_frame_nan():
  # Concrete ones are refused (test_contracts.py); traced, a reversed range
  # used to draw radii between its ends.
  trajectory = jax.jit(lambda radii, width: data_lib.advection_trajectory(
      jax.random.key(0), num_steps=1, size=8, min_discs=1, max_discs=1,
      radius_range=radii, edge_width=width))
  for radii, width in (((3.0, 1.0), 1.5), ((-1.0, 2.0), 1.5),
                       ((1.0, 3.0), -1.0)):
    assert np.isnan(trajectory(jnp.array(radii), width)).all()
  assert np.isfinite(trajectory(jnp.array([1.0, 3.0]), 1.5)).all()
