"""Dynamic W_p matching between two point sets under insertions and deletions.

:class:`ShiftedQuadtree` keeps a randomly shifted quadtree's per-cell counts,
its tree cost (an upper bound on the W_p^p cost) and a greedy matching, with
O(levels) work per update; :mod:`jaxpapers.matching.exact` holds the exact
references (Hungarian-type and POT solvers) and
:mod:`jaxpapers.matching.streams` the balanced update streams that exercise
them (:func:`make_stream`).
"""

from jaxpapers.matching.exact import cost_matrix
from jaxpapers.matching.exact import optimal_matching
from jaxpapers.matching.exact import pot_cost
from jaxpapers.matching.quadtree import CapacityError
from jaxpapers.matching.quadtree import DELETE
from jaxpapers.matching.quadtree import INSERT
from jaxpapers.matching.quadtree import Matching
from jaxpapers.matching.quadtree import MissingPointError
from jaxpapers.matching.quadtree import Operations
from jaxpapers.matching.quadtree import PointError
from jaxpapers.matching.quadtree import QuadtreeState
from jaxpapers.matching.quadtree import raise_errors
from jaxpapers.matching.quadtree import ShiftedQuadtree
from jaxpapers.matching.quadtree import UnbalancedError
from jaxpapers.matching.streams import make_stream
from jaxpapers.matching.streams import ratios_to_opt
from jaxpapers.matching.streams import Replay
from jaxpapers.matching.streams import replay_stream
from jaxpapers.matching.streams import stream_capacity
