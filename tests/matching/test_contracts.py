"""jaxpapers.matching: a table of misuse, each a named error, and traced bad values flagged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import matching

_TREE = matching.ShiftedQuadtree(dim=2, capacity=2, resolution=0.5)
_STATE = _TREE.init(jax.random.key(0))
_POINT = jnp.full(2, 0.5)
_NAN = jnp.array([jnp.nan, 0.5])
_OTHER_STATE = matching.ShiftedQuadtree(dim=2, capacity=3, resolution=0.5).init(
    jax.random.key(0))
# One compiled insertion and one matching cost for every traced case below.
_JIT_INSERT = jax.jit(_TREE.insert)
_JIT_COST = jax.jit(_TREE.matching_cost)
_NO_PAIRS = matching.Matching(*(jnp.full(2, -1, jnp.int32),) * 2)
# A stream of one point per side (capacity 2 = stream_capacity(1, 4)).
_STREAM = matching.make_stream(0, "uniform", 2, 1, num_ops=4, block=4)
_KEYS = jax.random.split(jax.random.key(0), 1)


def _ops(**fields):
  ops = matching.Operations(jnp.zeros(1, jnp.int32), jnp.zeros(1, jnp.int32),
                            jnp.zeros(1, jnp.int32), jnp.full((1, 2), 0.5))
  return ops._replace(**fields)


def _quadtree(**kwargs):
  return lambda: matching.ShiftedQuadtree(**{"dim": 2, "capacity": 2,
                                             **kwargs})


MISUSE = [
    (lambda: matching.cost_matrix(jnp.zeros((2, 2)), jnp.zeros((2, 3)), p=1),
     ValueError, "points_a and points_b must have the same dimension d"),
    (lambda: matching.cost_matrix(jnp.zeros(2), jnp.zeros((2, 2)), p=1),
     ValueError, r"points_a must be a float \[num_points, d\] array"),
    (lambda: matching.cost_matrix(jnp.zeros((2, 2)), jnp.zeros((2, 2)), p=0),
     ValueError, "p must be > 0"),
    (lambda: matching.cost_matrix(jnp.zeros((2, 2)), jnp.zeros((2, 2)),
                                  p=np.inf), ValueError,
     "p must be > 0 and finite"),
    (lambda: matching.cost_matrix(jnp.zeros((2, 2)), jnp.zeros((2, 2)), p="1"),
     ValueError, "p must be a real number"),
    (lambda: matching.optimal_matching(np.zeros((2, 2)), np.zeros((3, 2)), 1),
     matching.UnbalancedError, "as many points_a as points_b"),
    # scipy used to answer with its own "invalid numeric entries".
    (lambda: matching.optimal_matching(np.full((2, 2), np.nan),
                                       np.zeros((2, 2)), 1),
     ValueError, "points_a must be finite"),
    (lambda: matching.optimal_matching(np.zeros(2), np.zeros(2), 1),
     ValueError, r"points_a must be a float \[num_points, d\]"),
    (lambda: matching.pot_cost(np.zeros((2, 2)), np.full((2, 2), np.inf), 1),
     ValueError, "points_b must be finite"),
    (lambda: matching.optimal_matching(np.zeros((2, 2)), np.zeros((2, 2)),
                                       np.nan), ValueError, "p must be > 0"),
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
    (lambda: _TREE.apply(_STATE, tuple(_ops())), TypeError,
     "ops must be Operations"),
    (lambda: _TREE.build(jax.random.key(0), jnp.zeros((2, 3)),
                         jnp.zeros((2, 2))), ValueError,
     r"points_a must be a float array of shape \[B, 2\]"),
    (lambda: _TREE.build(jax.random.key(0), jnp.zeros((3, 2)),
                         jnp.zeros((3, 2))), matching.CapacityError,
     "the side is full"),
    (lambda: _TREE.greedy_matching(_TREE.insert(_STATE, 0, _POINT)[0]),
     matching.UnbalancedError, r"\|A\| = 1, \|B\| = 0"),
    # A NaN point, or one outside [0, R]^d, used to be clipped into the grid
    # (W_T then fell below OPT): refused before any work.
    (lambda: _TREE.insert(_STATE, 0, _NAN), matching.PointError,
     r"point = \[nan, 0.5\] must be finite and lie in \[0, 1.0\]\^2"),
    (lambda: _TREE.insert(_STATE, 1, jnp.array([1.5, 0.5])),
     matching.PointError, "must be finite and lie in"),
    (lambda: _TREE.insert(_STATE, 0, jnp.array([0.5, -1e-3])),
     matching.PointError, "must be finite and lie in"),
    (lambda: _TREE.build(jax.random.key(0), jnp.full((1, 2), 0.5),
                         jnp.array([[0.5, 0.5], [0.5, jnp.inf]])),
     matching.PointError, r"points_b\[1\] = "),
    (lambda: _TREE.apply(_STATE, _ops(point=_NAN[None])), matching.PointError,
     r"ops.point\[0\] = "),
    # A deletion ignores its point: a NaN there is no PointError (the slot
    # is empty, hence the MissingPointError).
    (lambda: _TREE.apply(_STATE, _ops(kind=jnp.ones(1, jnp.int32),
                                      point=_NAN[None])),
     matching.MissingPointError, "holds no live point"),
    (lambda: _TREE.cell_coords(_STATE.shift, jnp.array([0.5, 2.0])),
     matching.PointError, "must be finite and lie in"),
    (lambda: _TREE.cell_coords(_STATE.shift, jnp.zeros(3)), ValueError,
     r"point must be a float array of shape \[2\]"),
    (lambda: _TREE.insert(_STATE, 0.0, _POINT), ValueError,
     "side must be an integer scalar"),
    (lambda: _TREE.insert(_STATE, jnp.zeros(2, jnp.int32), _POINT), ValueError,
     "side must be an integer scalar"),
    (lambda: _TREE.delete(_STATE, 0, 1.0), ValueError,
     "slot must be an integer scalar"),
    (lambda: _TREE.insert(_STATE, 0, jnp.zeros(2, jnp.int32)), ValueError,
     r"point must be a float array of shape \[2\]"),
    # A state of another structure used to be read with this one's shapes.
    (lambda: _TREE.insert(_OTHER_STATE, 0, _POINT), ValueError,
     r"state.points_sd has shape \[2, 3, 2\], not this structure's"),
    (lambda: _TREE.tree_cost(tuple(_STATE)), TypeError,
     "state must be a QuadtreeState"),
    (lambda: _TREE.greedy_matching(_STATE._replace(error=jnp.zeros(2))),
     ValueError, r"state.error has shape \[2\]"),
    (lambda: matching.raise_errors(tuple(_STATE)), TypeError,
     "state must be a QuadtreeState"),
    (lambda: _TREE.init(0), TypeError, "key must be one PRNG key"),
    (lambda: _TREE.init(jax.random.split(jax.random.key(0), 2)), TypeError,
     "key must be one PRNG key"),
    (lambda: _TREE.matching_cost(_STATE, matching.Matching(
        jnp.array([0, -1]), jnp.array([0, -1]))), ValueError,
     r"partner_of_a\[0\] = 0 does not join a live A slot to a live B slot"),
    (lambda: _TREE.matching_cost(_STATE, matching.Matching(
        jnp.array([-1, 9]), jnp.array([-1, -1]))), ValueError,
     r"partner_of_a\[1\] = 9"),
    (lambda: _TREE.matching_cost(_STATE, matching.Matching(
        jnp.zeros(3, jnp.int32), jnp.zeros(2, jnp.int32))), ValueError,
     r"matching.partner_of_a must be an int array of shape \[2\]"),
    (lambda: _TREE.matching_cost(_STATE, (jnp.zeros(2, jnp.int32),) * 2),
     TypeError, "matching must be a Matching"),
    (_quadtree(capacity=0), ValueError, "capacity must be an int >= 1"),
    (_quadtree(dim=True), ValueError, "dim must be an int >= 1"),
    (_quadtree(p=np.inf), ValueError, "p must be finite"),
    (_quadtree(p=np.nan), ValueError, "p must be finite"),
    (_quadtree(p="2"), ValueError, "p must be a real number"),
    (_quadtree(domain=np.inf), ValueError, "domain must be finite"),
    (_quadtree(resolution=np.nan), ValueError, "resolution must be finite"),
    (lambda: matching.make_stream(0, "gaussian", 2, 4, num_ops=8, block=4),
     ValueError, "distribution must be one of"),
    (lambda: matching.make_stream(0, "uniform", 2, 4, num_ops=12, block=6),
     ValueError, "block must be a multiple of 4"),
    (lambda: matching.make_stream(0, "uniform", 2, 4, num_ops=10, block=4),
     ValueError, "num_ops must be a multiple of block = 4"),
    (lambda: matching.make_stream(0, "uniform", 2, 0, num_ops=8, block=4),
     ValueError, "n must be an int >= 1"),
    (lambda: matching.make_stream(0, "uniform", 2.0, 4, num_ops=8, block=4),
     TypeError, "dim must be an int >= 1"),
    (lambda: matching.make_stream(0, "clustered", 2, 4, num_ops=8, block=4,
                                  cluster_scale=-0.1),
     ValueError, "cluster_scale must be >= 0"),
    (lambda: matching.stream_capacity(4, 2), ValueError,
     "block must be an int >= 4"),
    (lambda: matching.replay_stream(_TREE, _KEYS, *_STREAM, ps=(1, 1)),
     ValueError, "ps must be distinct"),
    (lambda: matching.replay_stream(_TREE, _KEYS, *_STREAM, ps=()),
     ValueError, "ps must be a non-empty sequence"),
    (lambda: matching.replay_stream(_TREE, _KEYS, *_STREAM, ps=(0,)),
     ValueError, r"ps\[i\] must be > 0"),
    (lambda: matching.replay_stream(_TREE, jax.random.key(0), *_STREAM,
                                    ps=(1,)),
     TypeError, "keys must be a 1-D batch of PRNG keys"),
    (lambda: matching.replay_stream(_TREE, _KEYS, *_STREAM[:2],
                                    tuple(_STREAM[2]), ps=(1,)),
     TypeError, "ops must be Operations"),
    (lambda: matching.replay_stream(_TREE, _KEYS, *_STREAM[:2], _ops(),
                                    ps=(1,)),
     ValueError, r"ops must hold \[num_blocks, block\] operations"),
    (lambda: matching.replay_stream(None, _KEYS, *_STREAM, ps=(1,)),
     TypeError, "tree must be a ShiftedQuadtree"),
    (lambda: matching.ratios_to_opt([1.0], [1.0], [1.0]), ValueError,
     r"greedy and tree \[checkpoints, shifts\]"),
    (lambda: matching.ratios_to_opt([1.0], [[1.0]], [[1.0]], rtol=-1.0),
     ValueError, "rtol must be >= 0"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_a_traced_bad_side_is_skipped_and_recorded():
  state, _ = _JIT_INSERT(_STATE, 2, _POINT)
  for got, before in zip(state[:-1], _STATE[:-1]):
    np.testing.assert_array_equal(got, before)
  with pytest.raises(ValueError, match="side must be 0"):
    matching.raise_errors(state)


@pytest.mark.parametrize("point", [[np.nan, 0.5], [10.0, 0.5], [-0.25, 0.5]])
def test_a_traced_bad_point_is_skipped_flagged_and_costs_nan(point):
  """Under jit a bad point cannot be refused: the insertion is skipped, bit 16 set.

  Before, it was clipped into the grid and counted: built from A = (10, 0.5)
  and B = (1, 0.5) this structure reported W_T = 1.0 against OPT = 9 (the
  documented upper bound 9x too low), and A = (NaN, 0.5) gave W_T = 7.0.
  """
  state, _ = _JIT_INSERT(_STATE, 0, jnp.asarray(point, jnp.float32))
  for got, before in zip(state[:-1], _STATE[:-1]):
    np.testing.assert_array_equal(got, before)
  assert int(state.error) == 16
  with pytest.raises(matching.PointError, match="not finite or lay outside"):
    matching.raise_errors(state)
  assert np.isnan(_TREE.tree_cost(state))
  assert _TREE.tree_cost(_STATE) == 0  # the clean state's W_T is a number
  assert np.isnan(_JIT_COST(state, _NO_PAIRS))
  assert _JIT_COST(_STATE, _NO_PAIRS) == 0


def test_a_traced_pair_of_dead_or_unknown_slots_costs_nan():
  state, _ = _JIT_INSERT(_STATE, 0, jnp.full(2, 0.25))
  state, _ = _JIT_INSERT(state, 1, jnp.full(2, 0.75))
  good = matching.Matching(jnp.array([0, -1]), jnp.array([0, -1]))
  np.testing.assert_allclose(_JIT_COST(state, good), 1.0, rtol=1e-6)
  # A dead A slot, a dead B slot, ids past the capacity and below -1 (which
  # used to read the last slot's stale point).
  for partner in ([-1, 0], [1, -1], [2, -1], [-2, -1]):
    assert np.isnan(_JIT_COST(state, good._replace(
        partner_of_a=jnp.array(partner)))), partner


def test_vmapped_bad_points_flag_their_own_member_only():
  points = jnp.array([[0.25, 0.25], [0.25, np.nan]])
  states, _ = jax.vmap(_TREE.insert, in_axes=(None, None, 0))(_STATE, 0,
                                                               points)
  np.testing.assert_array_equal(states.error, [0, 16])
  np.testing.assert_array_equal(jax.vmap(_TREE.sizes)(states), [[1, 0], [0, 0]])
  with pytest.raises(matching.PointError):
    matching.raise_errors(states)


def test_the_exact_references_match_no_points_with_cost_zero():
  empty = np.zeros((0, 2))
  partner, cost = matching.optimal_matching(empty, empty, 1)
  assert partner.shape == (0,) and cost == 0.0
  # emd2 used to be reached with weights 1/0 (a ZeroDivisionError).
  assert matching.pot_cost(empty, empty, 2) == 0.0


def test_a_traced_exponent_that_is_not_positive_gives_nan_costs():
  cost = jax.jit(matching.cost_matrix)
  assert np.isnan(cost(jnp.zeros((1, 2)), jnp.ones((1, 2)), jnp.float32(-1)))
