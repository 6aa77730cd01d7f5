"""Dynamic W_p matching between two point sets under insertions and deletions.

:class:`ShiftedQuadtree` keeps a randomly shifted quadtree's per-cell counts,
its tree cost (an upper bound on the W_p^p cost) and a greedy matching, with
O(levels) work per update; :func:`optimal_matching` and :func:`pot_cost` are
the exact references (Hungarian-type and POT solvers) and
:func:`make_stream` builds the balanced update streams that exercise them.
"""

from jaxpapers import _deprecation
from jaxpapers.matching._exact import cost_matrix
from jaxpapers.matching._exact import optimal_matching
from jaxpapers.matching._exact import pot_cost
from jaxpapers.matching._quadtree import CapacityError
from jaxpapers.matching._quadtree import DELETE
from jaxpapers.matching._quadtree import INSERT
from jaxpapers.matching._quadtree import Matching
from jaxpapers.matching._quadtree import MissingPointError
from jaxpapers.matching._quadtree import Operations
from jaxpapers.matching._quadtree import PointError
from jaxpapers.matching._quadtree import QuadtreeState
from jaxpapers.matching._quadtree import raise_errors
from jaxpapers.matching._quadtree import ShiftedQuadtree
from jaxpapers.matching._quadtree import UnbalancedError
from jaxpapers.matching._streams import make_stream
from jaxpapers.matching._streams import ratios_to_opt
from jaxpapers.matching._streams import Replay
from jaxpapers.matching._streams import replay_stream
from jaxpapers.matching._streams import stream_capacity

__all__ = [
    "cost_matrix",
    "optimal_matching",
    "pot_cost",
    "CapacityError",
    "DELETE",
    "INSERT",
    "Matching",
    "MissingPointError",
    "Operations",
    "PointError",
    "QuadtreeState",
    "raise_errors",
    "ShiftedQuadtree",
    "UnbalancedError",
    "make_stream",
    "ratios_to_opt",
    "Replay",
    "replay_stream",
    "stream_capacity",
]

_deprecation.install(__name__)
