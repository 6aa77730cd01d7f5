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
from jaxpapers.matching import _quadtree as quadtree


def _check_points(points_a, points_b) -> None:
  for name, points in (("points_a", points_a), ("points_b", points_b)):
    dtype = jnp.result_type(points)
    if np.ndim(points) != 2 or not jnp.issubdtype(dtype, jnp.floating):
      raise ValueError(f"{name} must be a float [num_points, d] array; got"
                       f" {dtype}{list(np.shape(points))}.")
  if np.shape(points_a)[1] != np.shape(points_b)[1]:
    raise ValueError("points_a and points_b must have the same dimension d;"
                     f" got {np.shape(points_a)[1]} and"
                     f" {np.shape(points_b)[1]}.")


def _check_exponent(p) -> bool:
  """Raises for a concrete ``p`` that is not a finite number > 0; True if ``p`` is traced."""
  if isinstance(p, jax.core.Tracer):
    return True
  dtype = np.asarray(p).dtype
  if np.ndim(p) != 0 or not (np.issubdtype(dtype, np.integer)
                             or np.issubdtype(dtype, np.floating)):
    raise ValueError(f"p must be a real number > 0; got {p!r}.")
  if not 0 < float(p) < np.inf:
    raise ValueError(f"p must be > 0 and finite; got {p!r}.")
  return False


def cost_matrix(points_a: jax.Array, points_b: jax.Array, p: float
                ) -> jax.Array:
  r"""``C[i, j] = \|a_i - b_j\|_p^p`` for ``[n, d]`` and ``[m, d]`` points.

  Raises ``ValueError`` for points that are not float ``[n, d]`` / ``[m, d]``
  arrays of one ``d``, or a concrete ``p`` that is not a finite number > 0;
  a traced such ``p`` gives a NaN matrix. Non-finite points give non-finite
  entries (NaN in, NaN out).

  Example:
    >>> import jax.numpy as jnp
    >>> cost_matrix(jnp.zeros((1, 2)), jnp.array([[3.0, 4.0]]), p=2).tolist()
    [[25.0]]
  """
  _check_points(points_a, points_b)
  traced_p = _check_exponent(p)
  points_a, points_b = jnp.asarray(points_a), jnp.asarray(points_b)
  # Explicit axes cannot shard both axes of the (N, M) matrix along one mesh
  # axis: b's points are gathered along a's mesh axes.
  points_b = tree.gather_mesh_axes(
      points_b, tree.spec_axes(tree.explicit_spec(points_a)))
  diff = points_a[:, None, :] - points_b[None, :, :]
  costs = jnp.sum(jnp.abs(diff) ** p, axis=-1)
  if traced_p:
    return jnp.where((p > 0) & (p < jnp.inf), costs, jnp.nan)
  return costs


def _check_balanced(points_a, points_b, p) -> None:
  """The host solvers' checks: float ``[n, d]`` points, finite, as many of each, a valid ``p``."""
  _check_points(points_a, points_b)
  _check_exponent(p)
  for name, points in (("points_a", points_a), ("points_b", points_b)):
    if not np.all(np.isfinite(np.asarray(points))):
      raise ValueError(f"{name} must be finite; got"
                       f" {int(np.sum(~np.isfinite(np.asarray(points))))}"
                       " non-finite coordinates.")
  if np.shape(points_a)[0] != np.shape(points_b)[0]:
    raise quadtree.UnbalancedError(
        f"a perfect matching needs as many points_a as points_b; got"
        f" {np.shape(points_a)[0]} and {np.shape(points_b)[0]}.")


def optimal_matching(points_a, points_b, p: float) -> tuple[np.ndarray, float]:
  """The optimal assignment ``(partner_of_a, cost)`` by ``linear_sum_assignment``.

  Host-side (numpy and scipy): the points must be concrete. No points give
  ``([], 0.0)``.

  Raises:
    ValueError: points that are not finite float ``[n, d]`` arrays of one
      ``d``, or ``p`` not a finite number > 0.
    UnbalancedError: for unequal numbers of points.

  Example:
    >>> import numpy as np
    >>> a, b = np.array([[0.0], [1.0]]), np.array([[0.9], [0.1]])
    >>> partner, cost = optimal_matching(a, b, p=1)
    >>> partner.tolist(), round(cost, 4)
    ([1, 0], 0.2)
  """
  _check_balanced(points_a, points_b, p)
  costs = np.asarray(cost_matrix(jnp.asarray(points_a), jnp.asarray(points_b),
                                 p), np.float64)
  rows, cols = scipy.optimize.linear_sum_assignment(costs)
  partner = np.empty(len(rows), np.int64)
  partner[rows] = cols
  return partner, float(costs[rows, cols].sum())


def pot_cost(points_a, points_b, p: float) -> float:
  """OPT by POT's exact solver ``ot.emd2`` (uniform weights, times ``n``).

  Host-side like :func:`optimal_matching`; no points give 0.

  Raises:
    ValueError: points that are not finite float ``[n, d]`` arrays of one
      ``d``, or ``p`` not a finite number > 0.
    UnbalancedError: for unequal numbers of points.
    ImportError: when POT is not installed.
  """
  _check_balanced(points_a, points_b, p)
  n = np.shape(points_a)[0]
  if n == 0:
    return 0.0  # the empty matching; the weights below would divide by 0
  import ot  # pylint: disable=g-import-not-at-top  (an optional reference)
  costs = np.asarray(cost_matrix(jnp.asarray(points_a), jnp.asarray(points_b),
                                 p), np.float64)
  weights = np.full(n, 1.0 / n)
  return float(ot.emd2(weights, weights, costs)) * n
