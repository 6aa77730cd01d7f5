"""Balanced update streams, their replay against OPT, and the ratios to OPT."""

import jax
import numpy as np
import pytest

from jaxpapers import matching


def test_stream_is_balanced_at_every_checkpoint_and_names_live_slots():
  n, block = 6, 40
  points_a, points_b, ops = matching.make_stream(
      1, "clustered", 3, n, num_ops=1000, block=block)
  assert points_a.shape == points_b.shape == (n, 3)
  assert ops.kind.shape == (25, 40) and ops.point.shape == (25, 40, 3)
  assert 0 <= ops.point.min() and ops.point.max() <= 1
  live = [set(range(n)), set(range(n))]
  for block_ops in zip(*(x for x in ops[:3])):
    for kind, side, slot in zip(*block_ops):
      if kind == matching.DELETE:
        live[side].remove(slot)  # a KeyError would be a dead slot
      else:
        assert slot not in live[side] and slot < matching.stream_capacity(
            n, block)
        live[side].add(slot)
      assert live[side]
    assert len(live[0]) == len(live[1]) == n
  assert (ops.kind == matching.INSERT).mean() == 0.5


@pytest.mark.slow  # a training loop: compile-bound
def test_replay_matches_a_hand_replay_and_holds_the_bound():
  """Every checkpoint's OPT, greedy cost and W_T equal a replay by hand."""
  n, block, dim = 5, 8, 2
  points_a, points_b, ops = matching.make_stream(
      3, "uniform", dim, n, num_ops=16, block=block)
  tree = matching.ShiftedQuadtree(dim, matching.stream_capacity(n, block),
                                  resolution=0.05)
  keys = jax.random.split(jax.random.key(0), 2)
  replay = matching.replay_stream(tree, keys, points_a, points_b, ops, (1, 2))
  assert replay.opt.shape == (2, 2) and replay.greedy.shape == (2, 2, 2)
  assert replay.update_seconds.shape == (2, 2)
  assert replay.matches_rebuild.tolist() == [True, True]
  for s, key in enumerate(keys):
    state = tree.build(key, points_a, points_b)
    for b in range(2):
      state, _ = tree.apply(state, matching.Operations(*(x[b] for x in ops)))
      alive = [np.asarray(state.alive_s[i]) for i in range(2)]
      a, b_points = (np.asarray(state.points_sd[i])[alive[i]] for i in range(2))
      for k, p in enumerate((1, 2)):
        tree_p = matching.ShiftedQuadtree(dim, tree.capacity, p=p,
                                          resolution=0.05)
        assert replay.opt[b, k] == matching.optimal_matching(a, b_points, p)[1]
        assert replay.tree[b, k, s] == float(tree_p.tree_cost(state))
        assert replay.greedy[b, k, s] == float(tree_p.matching_cost(
            state, tree_p.greedy_matching(state)))
  out = matching.ratios_to_opt(replay.opt[:, 0], replay.greedy[:, 0],
                               replay.tree[:, 0])
  assert out["bound_violations"] == 0 and out["num_comparisons"] == 4


def test_ratios_average_each_shift_over_checkpoints_and_count_violations():
  out = matching.ratios_to_opt([1.0, 2.0], [[1.5, 2.0], [3.0, 2.0]],
                               [[10.0, 20.0], [20.0, 30.0]])
  # Shift 0: (1.5 + 1.5) / 2, shift 1: (2 + 1) / 2.
  np.testing.assert_allclose(out["greedy_over_opt"], [1.5, 1.5])
  np.testing.assert_allclose(out["tree_over_opt"], [10.0, 17.5])
  assert out["min_greedy_over_opt"] == 1.0
  assert out["max_greedy_over_tree"] == 0.15
  bad = matching.ratios_to_opt([2.0], [[1.0, 3.0]], [[5.0, 2.0]])
  assert bad["bound_violations"] == 2  # greedy < OPT, then greedy > W_T
  # Within the relative slack: no violation.
  assert matching.ratios_to_opt([1.0], [[1.0 - 1e-6]], [[1.0]],
                                rtol=1e-5)["bound_violations"] == 0
