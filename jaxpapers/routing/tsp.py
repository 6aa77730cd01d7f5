r"""Euclidean TSP instances, tours and their lengths; the named input errors.

An instance is ``coords_BxNx2`` (N cities in the unit square), a tour
``tour_BxN`` a permutation of ``0..N-1`` per instance, read as a cycle:

.. math:: \ell(\pi) = \sum_{k=0}^{N-1} \|x_{\pi_k} - x_{\pi_{(k+1) \bmod N}}\|_2,

which is invariant under rotating the tour (another start) and reversing it.
Shapes follow nanodo's suffix convention: B instances, N cities.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree

MIN_CITIES = 3


class TourError(ValueError):
  """A tour that is not a permutation of the instance's cities."""


def random_instances(seed: int, num_instances: int, num_cities: int
                     ) -> np.ndarray:
  """``[num_instances, num_cities, 2]`` float32 cities, uniform in the unit square.

  Example:
    >>> random_instances(0, 4, 10).shape
    (4, 10, 2)
  """
  check_num_cities(num_cities)
  if num_instances < 1:
    raise ValueError(f"num_instances must be >= 1; got {num_instances}.")
  rng = np.random.default_rng(seed)
  return rng.random((num_instances, num_cities, 2), dtype=np.float32)


def check_num_cities(num_cities: int, name: str = "num_cities") -> None:
  """Raises ``ValueError`` unless an instance has at least 3 cities."""
  if num_cities < MIN_CITIES:
    raise ValueError(f"{name} must be >= {MIN_CITIES} (a tour needs three"
                     f" cities); got {num_cities}.")


def check_coords(coords_BxNx2, name: str = "coords") -> None:
  """Raises ``ValueError`` unless ``coords`` is ``[B, N, 2]`` with N >= 3."""
  shape = np.shape(coords_BxNx2)
  if len(shape) != 3 or shape[-1] != 2:
    raise ValueError(f"{name} must have shape [batch, num_cities, 2]; got"
                     f" {shape}.")
  check_num_cities(shape[1], f"{name}.shape[1] (the number of cities)")


def check_tours(tour_BxN, num_cities: int, name: str = "tour") -> None:
  """Raises :class:`TourError` unless every row is a permutation of ``0..N-1``.

  The shape is always checked; the values only when ``tour`` is concrete
  (under ``jit`` they are not known at trace time).
  """
  shape = np.shape(tour_BxN)
  if len(shape) != 2 or shape[1] != num_cities:
    raise TourError(f"{name} must have shape [batch, {num_cities}] (one city"
                    f" index per position); got {shape}.")
  if not jnp.issubdtype(jnp.result_type(tour_BxN), jnp.integer):
    raise TourError(f"{name} must hold integer city indices; got dtype"
                    f" {jnp.result_type(tour_BxN)}.")
  if isinstance(tour_BxN, jax.core.Tracer):
    return
  rows = np.sort(np.asarray(tour_BxN), axis=1)
  bad = np.flatnonzero(np.any(rows != np.arange(num_cities), axis=1))
  if bad.size:
    raise TourError(f"{name}[{bad[0]}] = {np.asarray(tour_BxN)[bad[0]].tolist()}"
                    f" is not a permutation of 0..{num_cities - 1}"
                    f" ({bad.size} such rows).")


def tour_length(coords_BxNx2: jax.Array, tour_BxN: jax.Array) -> jax.Array:
  r"""Length of each closed tour, :math:`\ell(\pi)` of the module docstring.

  Args:
    coords_BxNx2: the cities.
    tour_BxN: integer city indices, a permutation per row.

  Returns:
    ``[B]`` tour lengths (the dtype of ``coords``).

  Raises:
    ValueError: for a shape other than ``[B, N, 2]`` or N < 3.
    TourError: for a row that is not a permutation (checked when concrete).

  Example:
    >>> import jax.numpy as jnp
    >>> square = jnp.array([[[0., 0.], [1., 0.], [1., 1.], [0., 1.]]])
    >>> tour_length(square, jnp.array([[0, 1, 2, 3]])).tolist()
    [4.0]
  """
  check_coords(coords_BxNx2)
  check_tours(tour_BxN, np.shape(coords_BxNx2)[1])
  spec = tree.explicit_spec(tour_BxN)
  if spec is not None:
    # Explicit axes read rows at positions sharded only along the batch: the
    # rows keep the tours' batch sharding, their cities are gathered.
    coords_BxNx2 = jax.sharding.reshard(coords_BxNx2,
                                        jax.P(spec[0], None, None))
    tour_BxN = jax.sharding.reshard(tour_BxN, jax.P(spec[0], None))
  ordered_BxNx2 = jnp.take_along_axis(coords_BxNx2, tour_BxN[..., None], axis=1)
  step_BxNx2 = jnp.roll(ordered_BxNx2, -1, axis=1) - ordered_BxNx2
  return jnp.sum(jnp.linalg.norm(step_BxNx2, axis=-1), axis=-1)


def distance_matrices(coords_BxNx2: np.ndarray) -> np.ndarray:
  """``[B, N, N]`` Euclidean distances (numpy, float64), for the host solvers."""
  check_coords(coords_BxNx2)
  coords = np.asarray(coords_BxNx2, np.float64)
  return np.linalg.norm(coords[:, :, None] - coords[:, None, :], axis=-1)
