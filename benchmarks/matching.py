"""Dynamic W_p matching benchmark (issues 21 and 41), printed as ratios from one run.

:class:`jaxpapers.matching.ShiftedQuadtree` (p = 1, uniform points, the
experiment's balanced stream of insertions and deletions) against exact
recomputation, at n = 256 to 16,384 points per side:

1. **Update cost against n** (d = 2): microseconds per operation in blocks of
   2,000 (``apply``: one compiled ``lax.scan``), with the state donated (the
   update in place) and without (each call first copies the whole state),
   and the fitted exponent of the donated cost in n (goal: <= 0.2, flat).
   Every n runs without a hash-table overflow (``state.error`` is 0).
2. **Update, and update + query, against recomputation** (d = 2): a
   recomputation's update is an O(1) append and its query the whole solve:
   ``scipy.optimize.linear_sum_assignment`` and POT's ``ot.emd2`` (cost
   matrix included). Our query is the greedy bottom-up matching and its cost
   (``greedy_matching`` + ``matching_cost``, an approximate matching, against
   their exact optimum). The solvers run up to n = 4,096; at 16,384 (a 2 GiB
   cost matrix each) their time is extrapolated from the 1,024-4,096 trend
   and marked so.
3. **1-D**: exact recomputation by sorting both sides (numpy, O(n log n)),
   the strongest exact baseline in one dimension, against our d = 1 update
   and update + query.

Our sizes are timed in alternating rounds, and so are scipy and POT against
each other, but ours and the solvers (or the sort) in separate loops of the
same run: each number is the median over its rounds and each ratio one of
medians, so run the benchmark more than once for a range (docs/wasserstein.md
gives two runs').

Run: ``python -m benchmarks.matching`` (``--tiny``: n = 16 and 32, blocks of
16, one round).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import benchmarks
from jaxpapers import matching
from jaxpapers import profiling

EXPONENT_GOAL = 0.2


class Sizes(NamedTuple):
  sizes: tuple[int, ...]  # n per side
  solver_sizes: tuple[int, ...]  # n where scipy and POT run
  block: int  # operations per apply call
  rounds: int
  repeats: int


FULL = Sizes(sizes=(256, 1024, 4096, 16384), solver_sizes=(256, 1024, 4096),
             block=2000, rounds=5, repeats=3)
TINY = Sizes(sizes=(16, 32), solver_sizes=(16, 32), block=16, rounds=1,
             repeats=1)


class Case(NamedTuple):
  tree: matching.ShiftedQuadtree
  state: matching.QuadtreeState
  ops: matching.Operations
  points_a: np.ndarray
  points_b: np.ndarray


def _case(dim, size, block):
  # The stream's first block; its capacity leaves room for the block's inserts.
  points_a, points_b, ops = matching.make_stream(
      dim, "uniform", dim, size, num_ops=block, block=block, num_clusters=8)
  tree = matching.ShiftedQuadtree(
      dim=dim, capacity=matching.stream_capacity(size, block), p=1)
  state = tree.build(jax.random.key(0), points_a, points_b)
  return Case(tree, state, matching.Operations(*(jnp.asarray(x[0]) for x in ops)),
              points_a, points_b)


def _donated_seconds(case, repeats):
  """Best of ``repeats`` ``apply(..., donate=True)`` calls, each on a fresh copy of the state."""
  best = np.inf
  for repeat in range(repeats + 1):  # the first call compiles
    fresh = jax.tree.map(jnp.copy, case.state)
    jax.block_until_ready(fresh)
    (new, _), seconds = profiling.call_seconds(
        lambda s: case.tree.apply(s, case.ops, donate=True), fresh)
    if repeat:
      best = min(best, seconds)
  if int(new.error):
    raise RuntimeError(f"n = {case.points_a.shape[0]}: error bits {int(new.error)}")
  return best


def _query(case):
  def greedy_cost(state):
    return case.tree.matching_cost(state, case.tree.greedy_matching(state))
  return greedy_cost


def _sort_cost(points_a, points_b):
  return float(np.abs(np.sort(points_a[:, 0]) - np.sort(points_b[:, 0])).sum())


def _median(values):
  return float(np.median(values))


def _ours(dim, sizes):
  """Per round: donated and copying update per op, and the greedy query."""
  cases = {n: _case(dim, n, sizes.block) for n in sizes.sizes}
  out = {n: {"donated": [], "copying": [], "query": []} for n in cases}
  for _ in range(sizes.rounds):
    for n, case in cases.items():
      copying = profiling.time_jitted(case.tree.apply, case.state, case.ops,
                                      repeats=sizes.repeats)
      out[n]["copying"].append(copying / sizes.block)
      out[n]["donated"].append(_donated_seconds(case, sizes.repeats) / sizes.block)
      out[n]["query"].append(profiling.time_jitted(
          _query(case), case.state, repeats=sizes.repeats))
  return cases, out


def _exponent(sizes, seconds):
  return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL

  # 1. Update cost against n, and 2. against scipy and POT (d = 2).
  cases, ours = _ours(2, sizes)
  donated = [_median(ours[n]["donated"]) for n in sizes.sizes]
  copying = [_median(ours[n]["copying"]) for n in sizes.sizes]
  for n, d, c in zip(sizes.sizes, donated, copying):
    print(f"d=2, n={n}: update {1e6 * d:.1f} us per op donated,"
          f" {1e6 * c:.1f} us copying the state ({c / d:.2f}x); no overflow")
  print(f"d=2: update-cost exponent in n over n={sizes.sizes[0]}..{sizes.sizes[-1]}:"
        f" {_exponent(sizes.sizes, donated):.2f} donated (goal <= {EXPONENT_GOAL}),"
        f" {_exponent(sizes.sizes, copying):.2f} copying")

  solvers = {"scipy": lambda a, b: matching.optimal_matching(a, b, 1),
             "POT": lambda a, b: matching.pot_cost(a, b, 1)}
  solver_seconds = {name: {} for name in solvers}
  for n in sizes.solver_sizes:
    case = cases[n]
    seconds = profiling.alternating_seconds(
        {name: (fn, (case.points_a, case.points_b)) for name, fn in solvers.items()},
        rounds=min(sizes.rounds, 3), repeats=1)
    for name in solvers:
      solver_seconds[name][n] = seconds[name]
  for n in sizes.sizes:
    update = np.asarray(ours[n]["donated"])
    query = np.asarray(ours[n]["query"])
    line = (f"d=2, n={n}: ours update {1e6 * _median(update):.1f} us,"
            f" update+query {1e3 * _median(update + query):.2f} ms;")
    for name in solvers:
      if n in solver_seconds[name]:
        solve = _median(solver_seconds[name][n])
        line += (f" {name} {1e3 * solve:.0f} ms:"
                 f" {solve / _median(update):.3g}x per update,"
                 f" {solve / _median(update + query):.3g}x per update+query;")
      else:  # extrapolated from the two largest sizes run
        known = sorted(solver_seconds[name])[-2:]
        slope = _exponent(known, [_median(solver_seconds[name][k]) for k in known])
        solve = _median(solver_seconds[name][known[-1]]) * (n / known[-1]) ** slope
        line += (f" {name} ~{solve:.0f} s extrapolated (n^{slope:.2f}, not run):"
                 f" ~{solve / _median(update + query):.3g}x per update+query;")
    print(line.rstrip(";"))

  # 3. One dimension: exact recomputation by sorting.
  cases_1d, ours_1d = _ours(1, sizes)
  for n, case in cases_1d.items():
    sort = profiling.alternating_seconds(
        {"sort": (_sort_cost, (case.points_a, case.points_b))},
        rounds=sizes.rounds, repeats=sizes.repeats)["sort"]
    update = np.asarray(ours_1d[n]["donated"])
    both = update + np.asarray(ours_1d[n]["query"])
    print(f"d=1, n={n}: sorting {1e6 * _median(sort):.0f} us:"
          f" {_median(sort) / _median(update):.3g}x per update"
          f" (ours {1e6 * _median(update):.1f} us),"
          f" {_median(sort) / _median(both):.3g}x per update+query")


if __name__ == "__main__":
  benchmarks.cli(main)
