"""jaxpapers.matching: a table of misuse, each a named error, and traced bad sides."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import matching

_TREE = matching.ShiftedQuadtree(dim=2, capacity=2, resolution=0.5)
_STATE = _TREE.init(jax.random.key(0))
_POINT = jnp.full(2, 0.5)


def _ops(**fields):
  ops = matching.Operations(jnp.zeros(1, jnp.int32), jnp.zeros(1, jnp.int32),
                            jnp.zeros(1, jnp.int32), jnp.full((1, 2), 0.5))
  return ops._replace(**fields)


MISUSE = [
    (lambda: matching.cost_matrix(jnp.zeros((2, 2)), jnp.zeros((2, 3)), p=1),
     ValueError, "points_a and points_b must have the same dimension d"),
    (lambda: matching.cost_matrix(jnp.zeros(2), jnp.zeros((2, 2)), p=1),
     ValueError, r"points_a must be a float \[num_points, d\] array"),
    (lambda: matching.cost_matrix(jnp.zeros((2, 2)), jnp.zeros((2, 2)), p=0),
     ValueError, "p must be > 0"),
    (lambda: matching.optimal_matching(np.zeros((2, 2)), np.zeros((3, 2)), 1),
     matching.UnbalancedError, "as many points_a as points_b"),
    # A side of 2 used to read side 1's stack and drop its writes silently.
    (lambda: _TREE.insert(_STATE, 2, _POINT), ValueError,
     "side must be 0 .A. or 1 .B."),
    (lambda: _TREE.delete(_STATE, -1, 0), ValueError, "side must be 0"),
    (lambda: _TREE.apply(_STATE, _ops(kind=jnp.full(1, 7, jnp.int32))),
     ValueError, "kind INSERT .0. or DELETE .1."),
    (lambda: _TREE.apply(_STATE, _ops(side=jnp.zeros(2, jnp.int32))),
     ValueError, r"ops.side must be an int array of shape \[1\]"),
    (lambda: _TREE.apply(_STATE, _ops(slot=jnp.zeros(1))), ValueError,
     r"ops.slot must be an int array"),
    (lambda: _TREE.build(jax.random.key(0), jnp.zeros((2, 3)),
                         jnp.zeros((2, 2))), ValueError,
     r"points_a must be a float array of shape \[B, 2\]"),
    (lambda: _TREE.build(jax.random.key(0), jnp.zeros((3, 2)),
                         jnp.zeros((3, 2))), matching.CapacityError,
     "the side is full"),
    (lambda: _TREE.greedy_matching(_TREE.insert(_STATE, 0, _POINT)[0]),
     matching.UnbalancedError, r"\|A\| = 1, \|B\| = 0"),
    (lambda: matching.ShiftedQuadtree(dim=2, capacity=0), ValueError,
     "capacity must be a positive int"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_a_traced_bad_side_is_skipped_and_recorded():
  state, _ = jax.jit(_TREE.insert)(_STATE, 2, _POINT)
  for got, before in zip(state[:-1], _STATE[:-1]):
    np.testing.assert_array_equal(got, before)
  with pytest.raises(ValueError, match="side must be 0"):
    matching.raise_errors(state)
