r"""Classical TSP heuristics in plain numpy, batched over instances: the baselines.

* :func:`nearest_neighbour`: from city 0, always move to the closest
  unvisited city (Rosenkrantz et al., 1977); about 11% above optimal on
  uniform TSP10 (measured here), about 25% on large instances.
* :func:`two_opt`: best-improvement 2-opt (Croes, 1958). A move removes the
  edges :math:`(a_i, a_{i+1})` and :math:`(a_j, a_{j+1})` and reconnects the
  tour by reversing :math:`a_{i+1..j}`, a change of
  :math:`d(a_i, a_j) + d(a_{i+1}, a_{j+1}) - d(a_i, a_{i+1}) - d(a_j, a_{j+1})`;
  each round applies, per instance, the most negative move, until no move
  shortens any tour (a 2-optimal tour) or ``max_rounds``.

References:
  D. J. Rosenkrantz, R. E. Stearns, P. M. Lewis, `An analysis of several
  heuristics for the traveling salesman problem
  <https://doi.org/10.1137/0206041>`_, SIAM J. Comput. 6(3), 1977.
  G. A. Croes, `A method for solving traveling-salesman problems
  <https://doi.org/10.1287/opre.6.6.791>`_, Operations Research 6(6), 1958.
"""

import numpy as np

from jaxpapers._checks import check_int
from jaxpapers.routing import _tsp as tsp

# A move must shorten the tour by more than this to count (float64 rounding).
_IMPROVEMENT = 1e-10


def nearest_neighbour(coords_BxNx2: np.ndarray) -> np.ndarray:
  """Nearest-neighbour tours from city 0: ``[B, N]`` int32.

  ``coords_BxNx2`` must be a finite real ``[B, N, 2]`` array, N >= 3
  (``ValueError``).

  Example:
    >>> line = np.array([[[0., 0.], [3., 0.], [1., 0.], [2., 0.]]])
    >>> nearest_neighbour(line).tolist()
    [[0, 2, 3, 1]]
  """
  distances_BxNxN = tsp.distance_matrices(coords_BxNx2)
  batch, n = distances_BxNxN.shape[:2]
  instances_B = np.arange(batch)
  tours_BxN = np.zeros((batch, n), np.int32)
  visited_BxN = np.zeros((batch, n), bool)
  visited_BxN[:, 0] = True
  city_B = np.zeros(batch, np.int64)
  for position in range(1, n):
    candidates_BxN = np.where(visited_BxN, np.inf,
                              distances_BxNxN[instances_B, city_B])
    city_B = candidates_BxN.argmin(axis=1)
    visited_BxN[instances_B, city_B] = True
    tours_BxN[:, position] = city_B
  return tours_BxN


def two_opt(coords_BxNx2: np.ndarray, tours_BxN: np.ndarray, *,
            max_rounds: int = 1000) -> np.ndarray:
  """``tours`` improved by best-improvement 2-opt: ``[B, N]`` int32.

  Args:
    coords_BxNx2: the cities.
    tours_BxN: starting tours (permutations), e.g. :func:`nearest_neighbour`.
    max_rounds: at most this many moves per instance.

  Returns:
    2-optimal tours (unless ``max_rounds`` ran out), never longer than the
    starting ones, with the same first city.

  Raises:
    ValueError: coordinates that are not a finite real ``[B, N, 2]`` array,
      or ``max_rounds`` not an int >= 0.
    TourError: ``tours_BxN`` not ``[B, N]`` permutations.

  Example:
    >>> square = np.array([[[0., 0.], [1., 1.], [1., 0.], [0., 1.]]])
    >>> two_opt(square, np.array([[0, 1, 2, 3]])).tolist()
    [[0, 2, 1, 3]]
  """
  distances_BxNxN = tsp.distance_matrices(coords_BxNx2)
  batch, n = distances_BxNxN.shape[:2]
  tsp.check_tours(tours_BxN, n, "tours", batch=batch)
  check_int("max_rounds", max_rounds, 0)
  if not batch:  # no instances (the moves below reshape per instance)
    return np.array(tours_BxN, np.int32)
  instances_B = np.arange(batch)[:, None, None]
  positions_N = np.arange(n)
  # Only j >= i + 2 changes the tour; (0, N-1) removes two adjacent edges.
  allowed_NxN = positions_N[None, :] >= positions_N[:, None] + 2
  allowed_NxN[0, n - 1] = False
  tours_BxN = np.array(tours_BxN, np.int32)
  for _ in range(max_rounds):
    a_BxN = tours_BxN
    b_BxN = np.roll(tours_BxN, -1, axis=1)  # the successor of each position
    edge_BxN = distances_BxNxN[instances_B[:, :, 0], a_BxN, b_BxN]
    gain_BxNxN = (distances_BxNxN[instances_B, a_BxN[:, :, None], a_BxN[:, None, :]]
                  + distances_BxNxN[instances_B, b_BxN[:, :, None], b_BxN[:, None, :]]
                  - edge_BxN[:, :, None] - edge_BxN[:, None, :])
    gain_BxNxN = np.where(allowed_NxN, gain_BxNxN, np.inf)
    best_B = gain_BxNxN.reshape(batch, -1).argmin(axis=1)
    improves_B = gain_BxNxN.reshape(batch, -1)[np.arange(batch), best_B] < (
        -_IMPROVEMENT)
    if not improves_B.any():
      break
    i_B, j_B = np.divmod(best_B, n)
    inside_BxN = ((positions_N > i_B[:, None]) & (positions_N <= j_B[:, None])
                  & improves_B[:, None])
    source_BxN = np.where(inside_BxN, (i_B + 1 + j_B)[:, None] - positions_N,
                          positions_N)
    tours_BxN = np.take_along_axis(tours_BxN, source_BxN, axis=1)
  return tours_BxN
