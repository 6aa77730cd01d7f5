r"""Exact W_p^p matchings between equal-size point sets: the references for tests.

:math:`\mathrm{OPT} = \min_\pi \sum_i \|a_i - b_{\pi(i)}\|_p^p` over
permutations, computed on the host by the Hungarian-type solver
``scipy.optimize.linear_sum_assignment`` (Crouse, 2016) on the
:math:`n \times n` cost matrix, or by POT's network simplex (``ot.emd2``)
with uniform weights, as a second, independent solver. Both are
:math:`O(n^3)`-ish full recomputations: the baseline a dynamic update is
compared with.

References:
  D. F. Crouse, `On implementing 2D rectangular assignment algorithms
  <https://doi.org/10.1109/TAES.2016.140952>`_, IEEE TAES, 2016.
  R. Flamary et al., `POT: Python Optimal Transport
  <https://jmlr.org/papers/v22/20-451.html>`_, JMLR, 2021.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from jaxpapers import tree
from jaxpapers.matching import quadtree


def cost_matrix(points_a: jax.Array, points_b: jax.Array, p: float
                ) -> jax.Array:
  r"""``C[i, j] = \|a_i - b_j\|_p^p`` for ``[n, d]`` and ``[m, d]`` points.

  Raises ``ValueError`` for points that are not float ``[n, d]`` / ``[m, d]``
  arrays of one ``d``, or ``p <= 0``.

  Example:
    >>> import jax.numpy as jnp
    >>> cost_matrix(jnp.zeros((1, 2)), jnp.array([[3.0, 4.0]]), p=2).tolist()
    [[25.0]]
  """
  for name, points in (("points_a", points_a), ("points_b", points_b)):
    if points.ndim != 2 or not jnp.issubdtype(points.dtype, jnp.floating):
      raise ValueError(f"{name} must be a float [num_points, d] array; got"
                       f" {points.dtype}{list(points.shape)}.")
  if points_a.shape[1] != points_b.shape[1]:
    raise ValueError("points_a and points_b must have the same dimension d;"
                     f" got {points_a.shape[1]} and {points_b.shape[1]}.")
  if not p > 0:
    raise ValueError(f"p must be > 0; got {p!r}.")
  # Explicit axes cannot shard both axes of the (N, M) matrix along one mesh
  # axis: b's points are gathered along a's mesh axes.
  points_b = tree.gather_mesh_axes(
      points_b, tree.spec_axes(tree.explicit_spec(points_a)))
  diff = points_a[:, None, :] - points_b[None, :, :]
  return jnp.sum(jnp.abs(diff) ** p, axis=-1)


def _check_balanced(points_a, points_b) -> None:
  if np.shape(points_a)[0] != np.shape(points_b)[0]:
    raise quadtree.UnbalancedError(
        f"a perfect matching needs as many points_a as points_b; got"
        f" {np.shape(points_a)[0]} and {np.shape(points_b)[0]}.")


def optimal_matching(points_a, points_b, p: float) -> tuple[np.ndarray, float]:
  """The optimal assignment ``(partner_of_a, cost)`` by ``linear_sum_assignment``.

  Raises:
    UnbalancedError: for unequal numbers of points.

  Example:
    >>> import numpy as np
    >>> a, b = np.array([[0.0], [1.0]]), np.array([[0.9], [0.1]])
    >>> partner, cost = optimal_matching(a, b, p=1)
    >>> partner.tolist(), round(cost, 4)
    ([1, 0], 0.2)
  """
  _check_balanced(points_a, points_b)
  costs = np.asarray(cost_matrix(jnp.asarray(points_a), jnp.asarray(points_b),
                                 p), np.float64)
  rows, cols = scipy.optimize.linear_sum_assignment(costs)
  partner = np.empty(len(rows), np.int64)
  partner[rows] = cols
  return partner, float(costs[rows, cols].sum())


def pot_cost(points_a, points_b, p: float) -> float:
  """OPT by POT's exact solver ``ot.emd2`` (uniform weights, times ``n``).

  Raises:
    UnbalancedError: for unequal numbers of points.
    ImportError: when POT is not installed.
  """
  import ot  # pylint: disable=g-import-not-at-top  (an optional reference)
  _check_balanced(points_a, points_b)
  n = np.shape(points_a)[0]
  costs = np.asarray(cost_matrix(jnp.asarray(points_a), jnp.asarray(points_b),
                                 p), np.float64)
  weights = np.full(n, 1.0 / n)
  return float(ot.emd2(weights, weights, costs)) * n
