"""Near-optimal TSP tours from LKH-3 through ``elkai`` (optional: the labels of TSP20).

Each instance's distances are scaled by ``scale`` and rounded to integers
(LKH's explicit weights are integers), then solved by ``elkai`` with
``runs`` restarts; the tour is rotated to start at city 0. Lengths are not
returned: measure them on the real distances with
:func:`jaxpapers.routing.tour_length`.

``elkai`` ships wheels on PyPI (2.0.1, CPython 3.11 and 3.13, manylinux);
it is imported on first use, so the rest of :mod:`jaxpapers.routing` works
without it.

References:
  K. Helsgaun, `An extension of the Lin-Kernighan-Helsgaun TSP solver for
  constrained traveling salesman and vehicle routing problems
  <http://webhotel4.ruc.dk/~keld/research/LKH-3/LKH-3_REPORT.pdf>`_,
  Roskilde University, 2017. ``elkai``: https://github.com/fikisipi/elkai
"""


import numpy as np

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.routing import _tsp as tsp

# LKH-3 multiplies each integer weight by its PRECISION (100 by default) in C
# ints; past INT_MAX / 100 it overflows and an assertion aborts the whole
# process. Half that bound leaves room for the subgradient penalties it adds.
MAX_WEIGHT = (2 ** 31 - 1) // 200


def lkh_tours(coords_BxNx2: np.ndarray, *, runs: int = 1,
              scale: float = 1e6) -> np.ndarray:
  """LKH tours from city 0: ``[B, N]`` int32.

  Args:
    coords_BxNx2: the cities.
    runs: LKH restarts per instance (``elkai``'s ``runs``).
    scale: distances are multiplied by this before rounding to integers.

  Raises:
    ValueError: coordinates that are not a finite real ``[B, N, 2]`` array,
      ``runs`` not an int >= 1, ``scale`` not a finite number > 0, or a
      scaled distance above ``MAX_WEIGHT`` (LKH-3's int range: lower
      ``scale``).
    ImportError: when ``elkai`` is not installed (it comes with the experiments extra).
  """
  tsp.check_coords(coords_BxNx2)
  check_int("runs", runs, 1)
  check_real("scale", scale, low=0.0, low_open=True)
  weights_BxNxN = np.rint(tsp.distance_matrices(coords_BxNx2) * scale)
  if weights_BxNxN.size and weights_BxNxN.max() > MAX_WEIGHT:
    raise ValueError(
        f"scale={scale} makes a distance {weights_BxNxN.max():.4g} > MAX_WEIGHT"
        f" = {MAX_WEIGHT} (LKH-3 overflows its int weights): lower scale.")
  try:
    import elkai  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError("lkh_tours needs elkai (LKH-3 wheels on PyPI), which comes"
                      " with the experiments extra: pip install"
                      " 'jaxpapers[experiments]'") from e
  tours = []
  for weights in weights_BxNxN.astype(np.int64):
    cycle = elkai.DistanceMatrix(weights.tolist()).solve_tsp(
        runs=int(runs))[:-1]
    start = cycle.index(0)
    tours.append(cycle[start:] + cycle[:start])
  return np.asarray(tours, np.int32).reshape(weights_BxNxN.shape[:2])
