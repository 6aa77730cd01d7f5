"""The dynamic shifted-quadtree matching: rebuild equality, bounds, errors."""

import dataclasses
import itertools
import re

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import matching


def _reference_cells(tree, shift, points_a, points_b):
  """Per level ``{cell coords: (n_A, n_B)}``, computed with numpy dicts."""
  levels = tree.num_levels
  scale = np.float32(2.0 ** levels / (2 * tree.domain))
  cells = [dict() for _ in range(levels)]
  for side, points in enumerate((points_a, points_b)):
    finest = np.floor((np.asarray(points, np.float32) + shift) * scale)
    finest = np.clip(finest, 0, 2 ** levels - 1).astype(np.int64)
    for x in finest:
      for j in range(levels):  # table level j holds cells of level j + 1
        key = tuple((x >> (levels - 1 - j)).tolist())
        counts = cells[j].setdefault(key, [0, 0])
        counts[side] += 1
  return [{k: tuple(v) for k, v in level.items()} for level in cells]


def _cells_of(state):
  """The state's non-empty cells per level, as :func:`_reference_cells` gives them."""
  keys, counts = np.asarray(state.cell_keys), np.asarray(state.cell_counts)
  assert counts.min() >= 0
  used = counts.sum(-1) > 0
  return [{tuple(keys[j, t].tolist()): tuple(counts[j, t].tolist())
           for t in np.flatnonzero(used[j])} for j in range(len(used))]


def _reference_tree_cost(tree, cells):
  weights, leaf = tree.edge_weights()
  imbalance = [sum(abs(a - b) for a, b in level.values()) for level in cells]
  size = sum(a + b for a, b in cells[0].values())
  return float(np.dot(weights, imbalance) + leaf * size), imbalance


def _live(state, side):
  alive = np.asarray(state.alive_s[side])
  return np.flatnonzero(alive), np.asarray(state.points_sd[side])[alive]


def _run_intents(tree, intents, seed):
  """Applies (kind, side, choice) intents one call at a time; returns state, ops.

  A deletion removes the live point of rank ``choice`` on its side; it
  becomes an insertion on an empty side, and an insertion a deletion on a
  full one. The ops come back with the slots used, for replaying them
  through :meth:`ShiftedQuadtree.apply`.
  """
  rng = np.random.default_rng(seed)
  state = tree.init(jax.random.key(seed))
  live = [[], []]
  ops = []
  for kind, side, choice in intents:
    if (kind == matching.DELETE and live[side]
        or len(live[side]) == tree.capacity):
      slot = live[side].pop(choice % len(live[side]))
      state = tree.delete(state, side, slot)
      ops.append((matching.DELETE, side, slot, np.zeros(tree.dim, np.float32)))
    else:
      point = rng.random(tree.dim, np.float32)
      state, slot = tree.insert(state, side, jnp.asarray(point))
      live[side].append(int(slot))
      ops.append((matching.INSERT, side, int(slot), point))
  kind, side, slot, point = (np.asarray(x) for x in zip(*ops))
  return state, matching.Operations(jnp.asarray(kind, jnp.int32),
                                    jnp.asarray(side, jnp.int32),
                                    jnp.asarray(slot, jnp.int32),
                                    jnp.asarray(point))


_INTENT = st.tuples(st.sampled_from([matching.INSERT, matching.DELETE]),
                    st.integers(0, 1), st.integers(0, 7))


@settings(max_examples=15, deadline=None)
@given(dim=st.just(3), seed=st.integers(0, 2**16),
       intents=st.lists(_INTENT, min_size=24, max_size=24))
def test_dynamic_state_equals_a_rebuild_on_the_live_points(dim, seed, intents):
  tree = matching.ShiftedQuadtree(dim=dim, capacity=6, p=1, resolution=1 / 64)
  state, ops = _run_intents(tree, intents, seed)
  # One lax.scan over the same operations reaches the very same arrays.
  replayed, slots = tree.apply(tree.init(jax.random.key(seed)), ops)
  np.testing.assert_array_equal(slots, ops.slot)
  for got, want in zip(replayed, state):
    np.testing.assert_array_equal(got, want)

  slots_a, points_a = _live(state, 0)
  slots_b, points_b = _live(state, 1)
  rebuilt = tree.init(jax.random.key(seed))
  for side, points in enumerate((points_a, points_b)):
    for point in points:
      rebuilt, _ = tree.insert(rebuilt, side, jnp.asarray(point))
  reference = _reference_cells(tree, np.asarray(state.shift), points_a,
                               points_b)
  assert _cells_of(state) == _cells_of(rebuilt) == reference
  want_cost, want_imbalance = _reference_tree_cost(tree, reference)
  np.testing.assert_array_equal(state.imbalance, want_imbalance)
  np.testing.assert_array_equal(tree.sizes(state), [len(slots_a), len(slots_b)])
  np.testing.assert_allclose(tree.tree_cost(state), want_cost, rtol=1e-6)
  assert tree.tree_cost(state) == tree.tree_cost(rebuilt)

  # The same greedy matching up to the rebuild's renumbering of the slots
  # (it keeps their order, so lowest-slot-first ties break alike).
  if len(slots_a) != len(slots_b):
    return
  got, again = tree.greedy_matching(state), tree.greedy_matching(rebuilt)
  rank_b = {s: r for r, s in enumerate(slots_b)}
  relabelled = [rank_b.get(int(s), -1) for s in np.asarray(got.partner_of_a)[slots_a]]
  np.testing.assert_array_equal(relabelled,
                                np.asarray(again.partner_of_a)[:len(slots_a)])


def _tree_distance(tree, shift, a, b):
  """The tree distance of two points, from their lowest common cell."""
  cells = _reference_cells(tree, shift, a[None], b[None])
  common = sum(len(level) == 1 for level in cells)  # levels 1..common shared
  weights, leaf = tree.edge_weights()
  return 2 * (leaf + weights[common:].sum())


def _instance(rng, n, dim, clustered):
  if not clustered:
    return rng.random((2, n, dim), np.float32)
  centres = rng.random((4, dim))
  labels = rng.integers(0, 4, (2, n))
  points = centres[labels] + 0.05 * rng.standard_normal((2, n, dim))
  return np.clip(points, 0, 1).astype(np.float32)


@pytest.mark.parametrize("dim", [2, 4, 8])
def test_optimum_below_greedy_below_tree_cost(dim):
  tree = matching.ShiftedQuadtree(dim=dim, capacity=40, p=1)
  rng = np.random.default_rng(dim)
  for trial, (n, clustered) in enumerate(
      itertools.product([6, 40], [False, True])):
    points_a, points_b = _instance(rng, n, dim, clustered)
    state = tree.build(jax.random.key(trial), jnp.asarray(points_a),
                       jnp.asarray(points_b))
    greedy = tree.greedy_matching(state)
    partner = np.asarray(greedy.partner_of_a)[:n]
    # A perfect matching of the n live points on each side.
    assert sorted(partner.tolist()) == list(range(n))
    np.testing.assert_array_equal(np.asarray(greedy.partner_of_b)[partner],
                                  np.arange(n))
    assert (np.asarray(greedy.partner_of_a)[n:] == -1).all()
    shift = np.asarray(state.shift)
    for p in (1, 2):
      # The cells, counts and greedy matching do not depend on p; the costs do.
      tree_p = dataclasses.replace(tree, p=p)
      cost = float(tree_p.matching_cost(state, greedy))
      np.testing.assert_allclose(
          cost, np.sum(np.abs(points_a - points_b[partner]) ** p), rtol=1e-5)
      optimum = matching.optimal_matching(points_a, points_b, p)[1]
      tree_cost = float(tree_p.tree_cost(state))
      assert optimum <= cost * (1 + 1e-5) <= tree_cost * (1 + 2e-5), (p, n)
      # Greedy is optimal for the tree metric: its tree cost is W_T itself.
      tree_cost_of_greedy = sum(_tree_distance(tree_p, shift, a, b)
                                for a, b in zip(points_a, points_b[partner]))
      np.testing.assert_allclose(tree_cost_of_greedy, tree_cost, rtol=1e-5)


def test_exact_references_agree_with_brute_force():
  rng = np.random.default_rng(3)
  for p in (1, 2):
    points_a, points_b = rng.random((2, 6, 3))
    brute = min(sum(np.sum(np.abs(points_a[i] - points_b[j]) ** p)
                    for i, j in enumerate(perm))
                for perm in itertools.permutations(range(6)))
    partner, optimum = matching.optimal_matching(points_a, points_b, p)
    np.testing.assert_allclose(optimum, brute, rtol=1e-5)
    np.testing.assert_allclose(
        np.sum(np.abs(points_a - points_b[partner]) ** p), brute, rtol=1e-5)
    np.testing.assert_allclose(matching.pot_cost(points_a, points_b, p), brute,
                               rtol=1e-5)


def test_entries_are_reused_under_churn():
  """Many more distinct cells than table entries pass through a small table."""
  tree = matching.ShiftedQuadtree(dim=2, capacity=2, p=1, resolution=1 / 256)
  intents = [(matching.INSERT, 0, 0), (matching.INSERT, 1, 0),
             (matching.DELETE, 0, 0), (matching.DELETE, 1, 0)] * 60
  state, _ = _run_intents(tree, intents, seed=0)
  assert tree.table_size == 16
  assert _cells_of(state) == [{} for _ in range(tree.num_levels)]
  np.testing.assert_array_equal(state.imbalance, 0)


def test_a_donated_apply_gives_the_same_state_and_consumes_its_input():
  tree = matching.ShiftedQuadtree(dim=2, capacity=8, p=1, resolution=1 / 64)
  points = jnp.asarray(np.random.default_rng(1).random((8, 2), np.float32))
  ops = matching.Operations(
      kind=jnp.array([matching.DELETE, matching.INSERT, matching.DELETE]),
      side=jnp.array([0, 0, 1]), slot=jnp.array([1, 0, 2]),
      point=jnp.asarray(np.random.default_rng(2).random((3, 2), np.float32)))
  kept, kept_slots = tree.apply(tree.build(jax.random.key(0), points[:4], points[4:]), ops)
  donated_input = tree.build(jax.random.key(0), points[:4], points[4:])
  donated, donated_slots = tree.apply(donated_input, ops, donate=True)
  for a, b in zip(kept + (kept_slots,), donated + (donated_slots,)):
    np.testing.assert_array_equal(a, b)
  assert all(leaf.is_deleted() for leaf in jax.tree.leaves(donated_input))
  with pytest.raises(TypeError, match="donate must be a bool"):
    tree.apply(kept, ops, donate=1)


def test_vmap_over_shifts_matches_one_structure_at_a_time():
  tree = matching.ShiftedQuadtree(dim=2, capacity=8, p=2, resolution=1 / 64)
  points = jnp.asarray(np.random.default_rng(0).random((8, 2), np.float32))
  keys = jax.random.split(jax.random.key(5), 3)
  batched = jax.vmap(tree.build, in_axes=(0, None, None))(
      keys, points[:4], points[4:])
  costs = jax.vmap(tree.tree_cost)(batched)
  for i, key in enumerate(keys):
    one = tree.build(key, points[:4], points[4:])
    np.testing.assert_allclose(costs[i], tree.tree_cost(one), rtol=1e-6)


def test_deleting_a_missing_point_is_a_named_error():
  tree = matching.ShiftedQuadtree(dim=2, capacity=3, resolution=1 / 8)
  state, slot = tree.insert(tree.init(jax.random.key(0)), 0, jnp.ones(2) / 2)
  with pytest.raises(matching.MissingPointError, match="slot"):
    tree.delete(state, 1, slot)  # side B holds nothing
  with pytest.raises(matching.MissingPointError):
    tree.delete(tree.delete(state, 0, slot), 0, slot)  # already deleted
  # Under jit the deletion is skipped and recorded.
  skipped = jax.jit(tree.delete)(state, 0, 7)
  np.testing.assert_array_equal(skipped.alive_s, state.alive_s)
  np.testing.assert_array_equal(skipped.imbalance, state.imbalance)
  with pytest.raises(matching.MissingPointError):
    matching.raise_errors(skipped)


def test_capacity_overflow_is_a_named_error():
  tree = matching.ShiftedQuadtree(dim=1, capacity=2, resolution=1 / 8)
  ops = matching.Operations(jnp.zeros(3, jnp.int32), jnp.zeros(3, jnp.int32),
                            jnp.zeros(3, jnp.int32), jnp.full((3, 1), 0.5))
  with pytest.raises(matching.CapacityError, match="capacity"):
    tree.apply(tree.init(jax.random.key(0)), ops)
  state, slots = jax.jit(tree.apply)(tree.init(jax.random.key(0)), ops)
  np.testing.assert_array_equal(tree.sizes(state), [2, 0])
  np.testing.assert_array_equal(slots[:2], [0, 1])
  with pytest.raises(matching.CapacityError):
    matching.raise_errors(state)


def test_unequal_sides_cannot_be_matched():
  tree = matching.ShiftedQuadtree(dim=2, capacity=3, resolution=1 / 8)
  state, _ = tree.insert(tree.init(jax.random.key(0)), 0, jnp.ones(2) / 2)
  with pytest.raises(matching.UnbalancedError, match=r"\|A\| = 1, \|B\| = 0"):
    tree.greedy_matching(state)
  with pytest.raises(matching.UnbalancedError, match="points_b"):
    matching.optimal_matching(np.zeros((2, 2)), np.zeros((3, 2)), p=1)
  # Under jit the surplus stays unmatched.
  assert jax.jit(tree.greedy_matching)(state).partner_of_a.tolist() == [-1] * 3


@pytest.mark.parametrize("field,value", [
    ("dim", 0), ("capacity", 0), ("capacity", 2.5), ("p", 0.5),
    ("resolution", 0.0), ("resolution", 2.0), ("resolution", 1e-9),
    ("domain", -1.0)])
def test_bad_hyperparameters_are_rejected_at_construction(field, value):
  kwargs = {"dim": 2, "capacity": 4, field: value}
  with pytest.raises(ValueError, match=field):
    matching.ShiftedQuadtree(**kwargs)


def test_a_point_of_the_wrong_shape_is_rejected_at_trace_time():
  tree = matching.ShiftedQuadtree(dim=3, capacity=2)
  with pytest.raises(ValueError, match=r"point must be a float array of shape \[3\]"):
    jax.jit(tree.insert)(tree.init(jax.random.key(0)), 0, jnp.zeros(2))
  with pytest.raises(ValueError, match="ops.point"):
    tree.apply(tree.init(jax.random.key(0)), matching.Operations(
        *(jnp.zeros(1, jnp.int32),) * 3, jnp.zeros((1, 3), jnp.int32)))


def _longest_occupied_run(used_t):
  """Longest run of occupied entries of one level's table, wrapping around."""
  longest, current = 0, 0
  for used in np.concatenate([used_t, used_t]):
    current = current + 1 if used else 0
    longest = max(longest, current)
  return min(longest, len(used_t))


@pytest.mark.slow
def test_a_2d_set_of_2048_points_a_side_leaves_the_windows_far_from_full():
  """The case that filled a 32-entry window at load 1/2; now load 1/4, window 64."""
  n = 2048
  tree = matching.ShiftedQuadtree(dim=2, capacity=n, p=1)
  rng = np.random.default_rng(0)
  points = jnp.asarray(rng.uniform(size=(2 * n, 2)), jnp.float32)
  state = tree.build(jax.random.key(0), points[:n], points[n:])
  matching.raise_errors(state)
  used_lt = np.asarray(state.cell_counts).sum(-1) > 0
  assert used_lt.mean(axis=1).max() <= 0.25  # the load the window is sized for
  longest = max(_longest_occupied_run(used_t) for used_t in used_lt)
  assert longest < matching._quadtree.WINDOW // 2, longest


# The barrier that keeps the carry in place works with the XLA of jax 0.12;
# that of jax 0.10.2 (the oldest stack) still copies the per-slot buffers
# (checked: a minimal scan that reads then writes one carry buffer copies it
# there with or without the barrier), so the update is O(capacity) there.
_OLD_XLA = tuple(int(x) for x in jax.__version__.split(".")[:2]) < (0, 12)


@pytest.mark.xfail(_OLD_XLA, strict=True,
                   reason="jax < 0.12's XLA copies a carry buffer read and written in one step")
def test_a_scan_of_updates_copies_no_capacity_sized_buffer_per_step():
  """XLA updates the scan's carry in place: no copy of a per-slot or table buffer per step.

  Reading and writing one buffer in a step made XLA:CPU copy it whole each
  step (O(capacity) per update); the update reads everything first.
  """
  capacity = 48  # a size no other axis of the program has
  tree = matching.ShiftedQuadtree(dim=2, capacity=capacity, p=1, resolution=1 / 16)
  state = tree.init(jax.random.key(0))
  ops = matching.Operations(jnp.zeros(4, jnp.int32), jnp.array([0, 1, 0, 1], jnp.int32),
                            jnp.zeros(4, jnp.int32), jnp.full((4, 2), 0.5, jnp.float32))
  hlo = matching._quadtree._compiled_apply.lower(tree, state, ops).compile().as_text()
  bodies = set(re.findall(r"body=%?([\w.\-]+)", hlo))
  assert bodies, "the updates no longer run in a while loop"
  copies, computation = [], None
  for line in hlo.splitlines():
    if line and not line.startswith(" ") and "{" in line:
      computation = line.split()[0].lstrip("%")
    elif computation in bodies and " copy(" in line:
      shape = line.split("=", 1)[1].split("copy(")[0]
      dims = [int(x) for x in re.findall(r"\d+", shape.split("{")[0].split("[", 1)[-1])]
      if capacity in dims or tree.table_size in dims:
        copies.append(line.strip()[:120])
  assert not copies, copies
