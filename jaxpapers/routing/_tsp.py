r"""Euclidean TSP instances, tours and their lengths; the named input errors.

An instance is ``coords_BxNx2`` (N cities in the unit square), a tour
``tour_BxN`` a permutation of ``0..N-1`` per instance, read as a cycle:

.. math:: \ell(\pi) = \sum_{k=0}^{N-1} \|x_{\pi_k} - x_{\pi_{(k+1) \bmod N}}\|_2,

which is invariant under rotating the tour (another start) and reversing it.
Shapes follow nanodo's suffix convention: B instances, N cities.

Input checks (every public function of :mod:`jaxpapers.routing`): shapes,
ranks and dtypes always; values when they are concrete. Coordinates must be
real and finite, tours permutations. Under ``jit`` the values are traced
and not checked: non-finite coordinates then give NaN tour lengths (a
decoder still returns a permutation, whose length is NaN), and a row of
``tour`` that is not a permutation gives a NaN length in
:func:`tour_length`, never a shorter one.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int

MIN_CITIES = 3


class TourError(ValueError):
  """A tour that is not a permutation of the instance's cities."""


def random_instances(seed: int, num_instances: int, num_cities: int
                     ) -> np.ndarray:
  """``[num_instances, num_cities, 2]`` float32 cities, uniform in the unit square.

  ``seed`` must be an int >= 0, ``num_instances`` an int >= 1 and
  ``num_cities`` an int >= 3 (``ValueError``).

  Example:
    >>> random_instances(0, 4, 10).shape
    (4, 10, 2)
  """
  check_int("seed", seed, 0)
  check_num_cities(num_cities)
  check_int("num_instances", num_instances, 1)
  rng = np.random.default_rng(seed)
  return rng.random((num_instances, num_cities, 2), dtype=np.float32)


def check_num_cities(num_cities: int, name: str = "num_cities") -> None:
  """Raises ``ValueError`` unless an instance has at least 3 cities (an int)."""
  check_int(name, num_cities, 0)
  if num_cities < MIN_CITIES:
    raise ValueError(f"{name} must be >= {MIN_CITIES} (a tour needs three"
                     f" cities); got {num_cities}.")


def check_coords(coords_BxNx2, name: str = "coords") -> None:
  """Raises ``ValueError`` unless ``coords`` is a real ``[B, N, 2]`` array with N >= 3.

  Concrete coordinates must be finite too; traced ones are not checked (see
  the module docstring).
  """
  shape = np.shape(coords_BxNx2)
  if len(shape) != 3 or shape[-1] != 2:
    raise ValueError(f"{name} must have shape [batch, num_cities, 2]; got"
                     f" {shape}.")
  check_num_cities(shape[1], f"{name}.shape[1] (the number of cities)")
  dtype = jnp.result_type(coords_BxNx2)
  if not (jnp.issubdtype(dtype, jnp.floating)
          or jnp.issubdtype(dtype, jnp.integer)):
    raise ValueError(f"{name} must hold real (float or int) coordinates; got"
                     f" dtype {dtype}.")
  if isinstance(coords_BxNx2, jax.core.Tracer):
    return
  finite = np.isfinite(np.asarray(coords_BxNx2)).all(axis=(1, 2))
  if not finite.all():
    bad = np.flatnonzero(~finite)
    raise ValueError(f"{name}[{bad[0]}] holds a non-finite coordinate"
                     f" ({bad.size} such instances): every city must have"
                     " finite coordinates.")


def check_tours(tour_BxN, num_cities: int, name: str = "tour",
                batch: int | None = None) -> None:
  """Raises :class:`TourError` unless every row is a permutation of ``0..N-1``.

  The shape (``[batch, num_cities]``; any batch when ``batch`` is None) is
  always checked; the values only when ``tour`` is concrete (under ``jit``
  they are not known at trace time).
  """
  shape = np.shape(tour_BxN)
  if (len(shape) != 2 or shape[1] != num_cities
      or batch is not None and shape[0] != batch):
    rows = "" if batch is None else f", batch = {batch} instances"
    raise TourError(f"{name} must have shape [batch, {num_cities}] (one city"
                    f" index per position{rows}); got {shape}.")
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
    ``[B]`` tour lengths (the dtype of ``coords``). Traced, a row that is
    not a permutation has length NaN, and so has an instance with a
    non-finite coordinate.

  Raises:
    ValueError: for a shape other than ``[B, N, 2]``, N < 3, or (concrete)
      a non-finite coordinate.
    TourError: for tours not ``[B, N]`` integers, or (concrete) a row that
      is not a permutation.

  Example:
    >>> import jax.numpy as jnp
    >>> square = jnp.array([[[0., 0.], [1., 0.], [1., 1.], [0., 1.]]])
    >>> tour_length(square, jnp.array([[0, 1, 2, 3]])).tolist()
    [4.0]
  """
  check_coords(coords_BxNx2)
  check_tours(tour_BxN, np.shape(coords_BxNx2)[1],
              batch=np.shape(coords_BxNx2)[0])
  spec = tree.explicit_spec(tour_BxN)
  if spec is not None:
    # Explicit axes read rows at positions sharded only along the batch: the
    # rows keep the tours' batch sharding, their cities are gathered.
    coords_BxNx2 = jax.sharding.reshard(coords_BxNx2,
                                        jax.P(spec[0], None, None))
    tour_BxN = jax.sharding.reshard(tour_BxN, jax.P(spec[0], None))
  ordered_BxNx2 = jnp.take_along_axis(coords_BxNx2, tour_BxN[..., None], axis=1)
  step_BxNx2 = jnp.roll(ordered_BxNx2, -1, axis=1) - ordered_BxNx2
  lengths_B = jnp.sum(jnp.linalg.norm(step_BxNx2, axis=-1), axis=-1)
  # A repeated city (or -1, read as the last one) would give a shorter
  # length: traced rows that are not permutations give NaN instead.
  is_tour_B = jnp.all(jnp.sort(tour_BxN, axis=1)
                      == jnp.arange(tour_BxN.shape[1])[None, :], axis=1)
  return jnp.where(is_tour_B, lengths_B, jnp.nan)


def distance_matrices(coords_BxNx2: np.ndarray) -> np.ndarray:
  """``[B, N, N]`` Euclidean distances (numpy, float64), for the host solvers."""
  check_coords(coords_BxNx2)
  coords = np.asarray(coords_BxNx2, np.float64)
  return np.linalg.norm(coords[:, :, None] - coords[:, None, :], axis=-1)
