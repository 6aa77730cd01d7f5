r"""Exact TSP tours by Held-Karp dynamic programming (numpy, batched over instances).

With city 0 as the start and :math:`S \subseteq \{1..N-1\}`,

.. math::

  C(S, j) = \min_{k \in S \setminus \{j\}} C(S \setminus \{j\}, k) + d_{kj},
  \qquad C(\{j\}, j) = d_{0j},

and the optimal length is :math:`\min_j C(\{1..N-1\}, j) + d_{j0}`; the tour
is read back through the argmins. Time :math:`O(2^N N^2)` and memory
:math:`O(2^N N)` per instance, so ``N <= MAX_CITIES``: the labels of TSP10
(about 0.2 ms per instance in batches, on a 2-core CPU) and the references of the tests.

References:
  M. Held, R. M. Karp, `A dynamic programming approach to sequencing
  problems <https://doi.org/10.1137/0110015>`_, J. SIAM 10(1), 1962.
  R. Bellman, `Dynamic programming treatment of the travelling salesman
  problem <https://doi.org/10.1145/321105.321111>`_, J. ACM 9(1), 1962.
"""

import functools
import itertools
import math

import numpy as np

from jaxpapers._checks import check_int
from jaxpapers.routing import _tsp as tsp

MAX_CITIES = 13
# Bytes of a chunk's dynamic-programming tables and largest temporary when
# ``chunk_size`` is not given: small enough for the CPU's caches to hold most
# of a subset size's working set, large enough that numpy's per-call cost is
# spread over many instances (see ``_auto_chunk_size``). Measured on 2 idle
# CPU cores (ms per instance at N = 8 / 10 / 12): 1 MiB 0.032 / 0.21 / 1.41,
# 4 MiB 0.055 / 0.29 / 2.45; 512 instances at a time (the old default) was
# 2.3x slower than 4 MiB at N = 10 and 2.9x at N = 12 (loaded cores).
CHUNK_BYTES = 2**20


def held_karp(coords_BxNx2: np.ndarray, *, chunk_size: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
  """Optimal tours (starting at city 0) and their lengths.

  Args:
    coords_BxNx2: the cities, ``3 <= N <= MAX_CITIES``.
    chunk_size: instances solved together. By default as many as keep a
      chunk's tables and temporaries (``[2^(N-1), N-1]`` costs and the
      ``[C(N-1, (N-1)/2), N-1, N-1]`` candidates, per instance) within
      ``CHUNK_BYTES``: 50 instances at N = 8, 8 at N = 10 and one at a time
      from N = 12, so a large batch is never slower per instance than one at
      a time.

  Returns:
    ``(tours_BxN int32, lengths_B float64)``; each tour starts at city 0 and
    is oriented so that ``tour[1] < tour[-1]``.

  Raises:
    ValueError: coordinates that are not a finite real ``[B, N, 2]`` array
      with ``3 <= N <= MAX_CITIES``, or a ``chunk_size`` that is not an int
      >= 1.

  Example:
    >>> square = np.array([[[0., 0.], [1., 1.], [1., 0.], [0., 1.]]])
    >>> tours, lengths = held_karp(square)
    >>> tours.tolist(), lengths.tolist()
    ([[0, 2, 1, 3]], [4.0])
  """
  tsp.check_coords(coords_BxNx2)
  num_cities = np.shape(coords_BxNx2)[1]
  if num_cities > MAX_CITIES:
    raise ValueError(f"held_karp takes at most {MAX_CITIES} cities (memory"
                     f" 2^N N per instance); got {num_cities}.")
  if chunk_size is None:
    chunk_size = _auto_chunk_size(num_cities)
  check_int("chunk_size", chunk_size, 1)
  distances_BxNxN = tsp.distance_matrices(coords_BxNx2)
  if not len(distances_BxNxN):  # no instances: nothing to concatenate
    return (np.zeros((0, num_cities), np.int32), np.zeros(0, np.float64))
  parts = [_solve(distances_BxNxN[i:i + chunk_size])
           for i in range(0, len(distances_BxNxN), chunk_size)]
  return (np.concatenate([p[0] for p in parts]),
          np.concatenate([p[1] for p in parts]))


def _auto_chunk_size(num_cities: int) -> int:
  m = num_cities - 1
  per_instance = 8 * (2**m * m + math.comb(m, m // 2) * m * m)
  return max(1, CHUNK_BYTES // per_instance)


@functools.lru_cache(maxsize=None)
def _subsets(m: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
  """Per subset size 2..m: the masks, each mask less bit j, and whether j is in it.

  Depends on ``m`` alone, so it is built once per number of cities.
  """
  bits_M = 1 << np.arange(m)
  masks = np.arange(1, 2**m)
  sizes = np.array([bin(mask).count("1") for mask in masks])
  tables = []
  for size in range(2, m + 1):
    masks_T = masks[sizes == size]
    tables.append((masks_T, masks_T[:, None] ^ bits_M[None, :],
                   (masks_T[:, None] & bits_M[None, :]) != 0))
  return tuple(tables)


def _solve(distances_BxNxN):
  batch, n = distances_BxNxN.shape[:2]
  m = n - 1  # cities 1..N-1 are bits 0..m-1 of a subset mask S
  # Instances last: every gather below then copies contiguous runs of B.
  step_JxKxB = np.moveaxis(distances_BxNxN[:, 1:, 1:], 0, -1).swapaxes(0, 1)
  cost_SxMxB = np.full((2 ** m, m, batch), np.inf)
  parent_SxMxB = np.zeros((2 ** m, m, batch), np.int8)
  cost_SxMxB[1 << np.arange(m), np.arange(m)] = distances_BxNxN[:, 0, 1:].T
  for masks_T, previous_TxJ, member_TxJ in _subsets(m):
    # [T, j, k, B]: cost of ending at k in mask - {j}, then stepping k -> j;
    # j outside the mask (previous = mask + {j}) is set to inf after the min.
    via_TxJxKxB = cost_SxMxB[previous_TxJ] + step_JxKxB[None]
    best_TxJx1xB = via_TxJxKxB.argmin(axis=2)[:, :, None]
    cost_TxJxB = np.take_along_axis(via_TxJxKxB, best_TxJx1xB, axis=2)[:, :, 0]
    cost_TxJxB[~member_TxJ] = np.inf
    cost_SxMxB[masks_T] = cost_TxJxB
    parent_SxMxB[masks_T] = best_TxJx1xB[:, :, 0]
  full = 2 ** m - 1
  closing_MxB = cost_SxMxB[full] + distances_BxNxN[:, 1:, 0].T
  instances_B = np.arange(batch)
  city_B = closing_MxB.argmin(axis=0)
  lengths_B = closing_MxB[city_B, instances_B]
  tours_BxN = np.zeros((batch, n), np.int32)
  mask_B = np.full(batch, full)
  for position in range(n - 1, 0, -1):
    tours_BxN[:, position] = city_B + 1
    previous_B = parent_SxMxB[mask_B, city_B, instances_B].astype(np.int64)
    mask_B = mask_B ^ (1 << city_B)
    city_B = previous_B
  # A tour and its reverse have one length, so which of the two the argmins
  # pick is decided by rounding (it differs across numpy builds): return the
  # orientation whose second city is the smaller of the start's two neighbours.
  flip_B = tours_BxN[:, 1] > tours_BxN[:, -1]
  tours_BxN[flip_B, 1:] = tours_BxN[flip_B, :0:-1]
  return tours_BxN, lengths_B


def brute_force(coords_Nx2: np.ndarray) -> float:
  """The optimal length of one small instance, by trying every tour (tests' reference).

  ``coords_Nx2`` must be one finite real ``[N, 2]`` instance, N >= 3
  (``ValueError``); the time grows as ``(N - 1)!``.
  """
  if np.ndim(coords_Nx2) != 2:
    raise ValueError(f"coords_Nx2 must be one instance, [num_cities, 2]; got"
                     f" shape {np.shape(coords_Nx2)}.")
  tsp.check_coords(np.asarray(coords_Nx2)[None], "coords_Nx2[None]")
  d = tsp.distance_matrices(np.asarray(coords_Nx2)[None])[0]
  n = len(d)
  best = np.inf
  for rest in itertools.permutations(range(1, n)):
    tour = (0, *rest)
    best = min(best, sum(d[tour[k], tour[(k + 1) % n]] for k in range(n)))
  return float(best)
