"""Near-optimal TSP tours from LKH-3 through ``elkai`` (optional: the labels of TSP20).

Each instance's distances are scaled by ``scale`` and rounded to integers
(LKH's explicit weights are integers), then solved by ``elkai`` with
``runs`` restarts; the tour is rotated to start at city 0. Lengths are not
returned: measure them on the real distances with
:func:`jaxpapers.routing.tsp.tour_length`.

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

from jaxpapers.routing import tsp


def lkh_tours(coords_BxNx2: np.ndarray, *, runs: int = 1,
              scale: float = 1e6) -> np.ndarray:
  """LKH tours from city 0: ``[B, N]`` int32.

  Args:
    coords_BxNx2: the cities.
    runs: LKH restarts per instance (``elkai``'s ``runs``).
    scale: distances are multiplied by this before rounding to integers.

  Raises:
    ImportError: when ``elkai`` is not installed (it comes with the experiments extra).
  """
  tsp.check_coords(coords_BxNx2)
  if runs < 1:
    raise ValueError(f"runs must be >= 1; got {runs}.")
  if scale <= 0:
    raise ValueError(f"scale must be > 0; got {scale}.")
  try:
    import elkai  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError("lkh_tours needs elkai (LKH-3 wheels on PyPI), which comes"
                      " with the experiments extra: pip install"
                      " 'jaxpapers[experiments]'") from e
  weights_BxNxN = np.rint(tsp.distance_matrices(coords_BxNx2) * scale)
  tours = []
  for weights in weights_BxNxN.astype(np.int64):
    cycle = elkai.DistanceMatrix(weights.tolist()).solve_tsp(runs=runs)[:-1]
    start = cycle.index(0)
    tours.append(cycle[start:] + cycle[:start])
  return np.asarray(tours, np.int32)
