"""jaxpapers.matching under Auto and Explicit meshes gives the unsharded numbers.

The cost matrix is sharded along both point axes; independent quadtrees (one
per random shift, the structure's documented batching) are vmapped over a
batch of point sets sharded along the mesh's data axis.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import matching
from jaxpapers import tree
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.uniform(size=shape), jnp.float32)
_QUADTREE = matching.ShiftedQuadtree(dim=2, capacity=2, p=1.0, resolution=0.5)


def _one_structure(key, points_a, points_b):
  state = _QUADTREE.build(key, points_a, points_b)
  greedy = _QUADTREE.greedy_matching(state)
  return (_QUADTREE.tree_cost(state), greedy,
          _QUADTREE.matching_cost(state, greedy), state.error)


CASES = {
    "matching.cost_matrix": (functools.partial(matching.cost_matrix, p=2.0),
                             (_f32(8, 3), _f32(12, 3)),
                             (jax.P("data"), jax.P("model"))),
    # Both point sets sharded along one mesh axis.
    "matching.cost_matrix+matching.ShiftedQuadtree": (
        functools.partial(matching.cost_matrix, p=2.0),
        (_f32(8, 3), _f32(12, 3)), (jax.P("data"), jax.P("data"))),
    # Per-structure hash-table reads and writes: mapped per device.
    "matching.ShiftedQuadtree": (
        tree.vmap_sharded(_one_structure),
        (jax.random.split(jax.random.key(0), 2), _f32(2, 2, 2), _f32(2, 2, 2)),
        (jax.P("data"),) * 3),
}

NOT_SHARDED = {
    "matching.optimal_matching": "host-side scipy linear_sum_assignment on a"
                                 " numpy cost matrix",
    "matching.pot_cost": "host-side POT network simplex on a numpy cost"
                         " matrix",
    "matching.raise_errors": "host-side: reads state.error into a Python int"
                             " to raise a named error",
    "matching.make_stream": "host-side numpy generator of points and"
                            " operations; takes no device arrays",
    "matching.stream_capacity": "a Python int from two Python ints",
    "matching.replay_stream": "host-side: eager, timed calls per structure and"
                              " scipy's OPT on numpy points; the structure"
                              " itself is the matching.ShiftedQuadtree case",
    "matching.ratios_to_opt": "host-side numpy summary of a replay's costs",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "matching.ShiftedQuadtree": ("Explicit",),
    "matching.cost_matrix": ("Auto",),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "matching.ShiftedQuadtree",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))
