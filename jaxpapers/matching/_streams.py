r"""Balanced update streams for a dynamic matching, and their replay against OPT.

A stream starts from ``n`` points per side, uniform in :math:`[0, 1]^d` or
drawn from Gaussian clusters (clipped to the cube), and applies ``num_ops``
operations in blocks of ``block``. Within a block each side gets
``block / 2`` operations, as many insertions (of a fresh point) as deletions
(of a random live point), in a random order that never empties a side, so
:math:`|A| = |B| = n` at every block boundary: the checkpoints where a
perfect matching, and so OPT, is defined. Slots follow
:class:`~jaxpapers.matching.ShiftedQuadtree`'s rule (an insertion takes the
most recently freed slot), so the operations apply to a structure of
:func:`stream_capacity` slots built from the initial points.

Host-side (numpy): a stream is data, made once before anything is timed.
:func:`replay_stream` runs it through one structure per random shift and
compares every block boundary with the exact optimum. See
``docs/wasserstein.md``.
"""

import dataclasses
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import _checks
from jaxpapers import profiling
from jaxpapers.matching import _exact as exact
from jaxpapers.matching import _quadtree as quadtree

DISTRIBUTIONS = ("uniform", "clustered")


def stream_capacity(n: int, block: int) -> int:
  """The slots per side a stream of ``n`` points and blocks of ``block`` needs.

  A block moves a side by at most ``block / 4`` points from ``n`` (it holds
  ``block / 4`` insertions and as many deletions per side).

  Args:
    n: points per side at every block boundary (an int >= 1).
    block: operations per block (an int >= 4, a multiple of 4).

  Returns:
    ``n + block // 4``, the ``capacity`` of the structure the stream runs on.

  Raises:
    ValueError: ``n`` or ``block`` out of range (a float or bool:
      ``TypeError`` too).

  Example:
    >>> stream_capacity(64, 500)
    189
  """
  n = _checks.check_int("n", n, 1)
  return n + _check_block(block) // 4


def _check_block(block) -> int:
  block = _checks.check_int("block", block, 4)
  if block % 4:
    raise ValueError("block must be a multiple of 4 (as many insertions as"
                     f" deletions on each side); got {block}.")
  return block


def _sample_points(rng, distribution, num, dim, centres, scale):
  if distribution == "uniform":
    return rng.random((num, dim), np.float32)
  points = centres[rng.integers(len(centres), size=num)]
  points = points + scale * rng.standard_normal((num, dim))
  return np.clip(points, 0.0, 1.0).astype(np.float32)


def _balanced_signs(rng, num_ops, live):
  """A random order of num_ops/2 insertions (+1) and deletions (-1) of one side.

  Redrawn until the side keeps at least one live point throughout.
  """
  signs = np.repeat([1, -1], num_ops // 2)
  while True:
    order = rng.permutation(signs)
    if np.cumsum(order).min() > -live:
      return order


def _check_stream(distribution, dim, n, num_ops, block, num_clusters,
                  cluster_scale) -> None:
  if distribution not in DISTRIBUTIONS:
    raise ValueError(f"distribution must be one of {DISTRIBUTIONS}; got"
                     f" {distribution!r}.")
  _checks.check_int("dim", dim, 1)
  _checks.check_int("n", n, 1)
  block = _check_block(block)
  if _checks.check_int("num_ops", num_ops, block) % block:
    raise ValueError(f"num_ops must be a multiple of block = {block}; got"
                     f" {num_ops}.")
  _checks.check_int("num_clusters", num_clusters, 1)
  _checks.check_real("cluster_scale", cluster_scale, low=0.0)


def make_stream(seed: int, distribution: str, dim: int, n: int, *,
                num_ops: int, block: int, num_clusters: int = 8,
                cluster_scale: float = 0.05
                ) -> tuple[np.ndarray, np.ndarray, quadtree.Operations]:
  """The initial points and ``[num_ops / block, block]`` operations of one stream.

  Draws, from ``np.random.default_rng(seed)`` and in this order: the cluster
  centres (drawn for either distribution), the ``2 n`` initial points, then
  per block the sides' orders of insertions and deletions, the deleted
  slots, and the block's ``block`` new points (one per operation; a
  deletion ignores its point).

  Args:
    seed: the numpy generator's seed.
    distribution: ``"uniform"`` in :math:`[0, 1]^d`, or ``"clustered"``:
      ``num_clusters`` uniform centres plus Gaussian noise of standard
      deviation ``cluster_scale``, clipped to the cube.
    dim: the dimension ``d``.
    n: points per side at the start and at every block boundary.
    num_ops: operations in all, a multiple of ``block``.
    block: operations per block, a multiple of 4 (half per side, half of
      those insertions).
    num_clusters: cluster centres (``"clustered"`` only, drawn always).
    cluster_scale: the clusters' standard deviation (>= 0).

  Returns:
    ``(points_a, points_b, ops)``: float32 ``[n, d]`` initial points per side
    and :class:`~jaxpapers.matching.Operations` of int32 ``kind``, ``side``
    and ``slot`` of shape ``[num_ops / block, block]`` and float32 ``point``
    ``[num_ops / block, block, d]``, for a structure of
    ``stream_capacity(n, block)`` slots; ``ops`` block ``b`` is
    ``Operations(*(x[b] for x in ops))``.

  Raises:
    ValueError: an unknown ``distribution``, a count out of range, ``block``
      not a multiple of 4, ``num_ops`` not a multiple of ``block``, or a
      negative or non-finite ``cluster_scale`` (a float or bool count:
      ``TypeError`` too).

  Example:
    >>> a, b, ops = make_stream(0, "uniform", dim=2, n=8, num_ops=16, block=8)
    >>> a.shape, ops.kind.shape, ops.point.shape
    ((8, 2), (2, 8), (2, 8, 2))
  """
  _check_stream(distribution, dim, n, num_ops, block, num_clusters,
                cluster_scale)
  rng = np.random.default_rng(seed)
  centres = rng.random((num_clusters, dim))
  draw = lambda num: _sample_points(rng, distribution, num, dim, centres,
                                    cluster_scale)
  capacity = stream_capacity(n, block)
  initial = draw(2 * n)
  live = [list(range(n)), list(range(n))]
  free = [list(range(capacity - 1, n - 1, -1)) for _ in range(2)]
  kinds, sides, slots, points = [], [], [], []
  for _ in range(num_ops // block):
    signs = [iter(_balanced_signs(rng, block // 2, n)) for _ in range(2)]
    for side in rng.permutation(np.repeat([0, 1], block // 2)):
      if next(signs[side]) > 0:
        slot = free[side].pop()
        live[side].append(slot)
        kinds.append(quadtree.INSERT)
      else:
        slot = live[side].pop(rng.integers(len(live[side])))
        free[side].append(slot)
        kinds.append(quadtree.DELETE)
      sides.append(side)
      slots.append(slot)
    points.append(draw(block))
  shape = (-1, block)
  return initial[:n], initial[n:], quadtree.Operations(
      np.reshape(kinds, shape).astype(np.int32),
      np.reshape(sides, shape).astype(np.int32),
      np.reshape(slots, shape).astype(np.int32), np.stack(points))


class Replay(NamedTuple):
  """A stream replayed on one structure per shift (:func:`replay_stream`).

  Checkpoints are block boundaries (``|A| = |B|``); ``ps`` index the
  exponents given.

  Attributes:
    opt: float64 ``[checkpoints, ps]``, OPT by
      :func:`~jaxpapers.matching.optimal_matching` (the same for every shift).
    greedy: ``[checkpoints, ps, shifts]``, the greedy matching's cost.
    tree: ``[checkpoints, ps, shifts]``, W_T.
    update_seconds: ``[checkpoints, shifts]``, one compiled ``apply`` of the
      block divided by its operations.
    hungarian_seconds: ``[checkpoints, ps]``, one OPT (cost matrix included),
      timed right after the block's updates.
    matches_rebuild: bool ``[shifts]``, the final state equals one built from
      its live points (imbalances and W_T exactly, greedy cost to 1e-6).
    rebuild_seconds: ``[shifts]``, that rebuild plus its greedy cost.
  """
  opt: np.ndarray
  greedy: np.ndarray
  tree: np.ndarray
  update_seconds: np.ndarray
  hungarian_seconds: np.ndarray
  matches_rebuild: np.ndarray
  rebuild_seconds: np.ndarray


def _live_points(state, side):
  return np.asarray(state.points_sd[side])[np.asarray(state.alive_s[side])]


def _checkpoint(tree, by_p, states, block):
  """Applies ``block`` to every state (in place), then the costs against OPT."""
  seconds = []
  for s, state in enumerate(states):
    (states[s], _), took = profiling.call_seconds(tree.apply, state, block)
    seconds.append(took / len(block.kind))
  a, b = _live_points(states[0], 0), _live_points(states[0], 1)
  matchings = [tree.greedy_matching(state) for state in states]
  opt, hungarian, greedy, tree_cost = [], [], [], []
  for p, tree_p in by_p.items():
    (_, cost), took = profiling.call_seconds(exact.optimal_matching, a, b, p)
    opt.append(cost)
    hungarian.append(took)
    greedy.append([float(tree_p.matching_cost(state, m))
                   for state, m in zip(states, matchings)])
    tree_cost.append([float(tree_p.tree_cost(state)) for state in states])
  return opt, greedy, tree_cost, seconds, hungarian


def _rebuild(tree, key, state):
  """Whether ``state`` equals a rebuild from its live points; the rebuild's time."""
  greedy_cost = lambda s: float(tree.matching_cost(s, tree.greedy_matching(s)))

  def rebuild():
    rebuilt = tree.build(key, _live_points(state, 0), _live_points(state, 1))
    return rebuilt, greedy_cost(rebuilt)

  (rebuilt, cost), seconds = profiling.call_seconds(rebuild)
  equal = bool(np.array_equal(rebuilt.imbalance, state.imbalance)
               and float(tree.tree_cost(rebuilt)) == float(
                   tree.tree_cost(state))
               and np.isclose(cost, greedy_cost(state), rtol=1e-6))
  return equal, seconds


def replay_stream(tree: quadtree.ShiftedQuadtree, keys: jax.Array,
                  points_a, points_b, ops: quadtree.Operations,
                  ps: Sequence[float]) -> Replay:
  """Replays a stream on one structure per shift, checking each block against OPT.

  One structure per key is built from the initial points; block ``b`` of
  ``ops`` is then applied to each (one compiled ``apply``, timed by
  :func:`jaxpapers.profiling.call_seconds` after a warm-up) and, at the
  block boundary, the greedy cost and W_T of every shift are compared with
  the optimum for every ``p`` in ``ps`` (the structure's cells, counts and
  greedy matching do not depend on ``p``; the costs do). At the end each
  state is compared with a rebuild from its live points. Host-side: eager
  calls, timings and scipy.

  Args:
    tree: the structure; its ``p`` is replaced by each of ``ps``.
    keys: a ``[shifts]`` batch of PRNG keys (``jax.random.split``), one
      random shift each.
    points_a, points_b: the initial ``[n, d]`` points.
    ops: :class:`~jaxpapers.matching.Operations` of shape
      ``[num_blocks, block]`` (:func:`make_stream`), each block balanced.
    ps: the exponents compared (each > 0 and finite).

  Returns:
    A :class:`Replay` of numpy arrays.

  Raises:
    TypeError: ``tree`` not a ShiftedQuadtree, ``ops`` not Operations,
      ``keys`` not a 1-D batch of PRNG keys.
    ValueError: ``ops`` not ``[num_blocks, block]``, no or bad ``ps``; the
      structure's own errors (``CapacityError``, ``MissingPointError``,
      ``UnbalancedError``, ...) for a stream that does not fit it.

  Example:
    >>> import jax
    >>> a, b, ops = make_stream(0, "uniform", dim=2, n=4, num_ops=8, block=4)
    >>> tree = quadtree.ShiftedQuadtree(dim=2, capacity=stream_capacity(4, 4))
    >>> keys = jax.random.split(jax.random.key(0), 2)
    >>> replay = replay_stream(tree, keys, a, b, ops, ps=(1,))
    >>> replay.greedy.shape, bool(replay.matches_rebuild.all())
    ((2, 1, 2), True)

  See ``docs/wasserstein.md``.
  """
  _check_replay(tree, keys, ops, ps)
  by_p = {p: dataclasses.replace(tree, p=p) for p in ps}
  states = [tree.build(key, points_a, points_b) for key in keys]
  blocks = [quadtree.Operations(*(jnp.asarray(x[b]) for x in ops))
            for b in range(len(ops.kind))]
  # Compile (and build the cost matrix's kernel) before anything is timed.
  jax.block_until_ready(tree.apply(states[0], blocks[0]))
  for p in ps:
    exact.optimal_matching(points_a, points_b, p)
  rows = [_checkpoint(tree, by_p, states, block) for block in blocks]
  ends = [_rebuild(tree, key, state) for key, state in zip(keys, states)]
  return Replay(*(np.asarray(x) for x in zip(*rows)),
                *(np.asarray(x) for x in zip(*ends)))


def _check_replay(tree, keys, ops, ps) -> None:
  if not isinstance(tree, quadtree.ShiftedQuadtree):
    raise TypeError("tree must be a ShiftedQuadtree; got"
                    f" {type(tree).__name__}.")
  if not (isinstance(keys, jax.Array)
          and jnp.issubdtype(keys.dtype, jax.dtypes.prng_key)
          and keys.ndim == 1 and len(keys)):
    raise TypeError("keys must be a 1-D batch of PRNG keys"
                    " (jax.random.split); got"
                    f" {getattr(keys, 'dtype', type(keys).__name__)}"
                    f"{list(np.shape(keys))}.")
  if not isinstance(ops, quadtree.Operations):
    raise TypeError(f"ops must be Operations; got {type(ops).__name__}.")
  if np.ndim(ops.kind) != 2 or not np.size(ops.kind):
    raise ValueError("ops must hold [num_blocks, block] operations"
                     f" (make_stream); got kind of shape"
                     f" {list(np.shape(ops.kind))}.")
  if isinstance(ps, (str, bytes)) or not np.size(ps):
    raise ValueError("ps must be a non-empty sequence of exponents; got"
                     f" {ps!r}.")
  if len(set(ps)) != len(ps):
    raise ValueError(f"ps must be distinct; got {tuple(ps)}.")
  for p in ps:
    _checks.check_real("ps[i]", p, low=0.0, low_open=True)


def ratios_to_opt(opt, greedy, tree, *, rtol: float = 1e-5) -> dict:
  """OPT <= greedy <= W_T at every checkpoint and shift, and the ratios to OPT.

  Args:
    opt: ``[checkpoints]`` optimal costs (one ``p`` of a :class:`Replay`:
      ``replay.opt[:, k]``).
    greedy: ``[checkpoints, shifts]`` greedy costs (``replay.greedy[:, k]``).
    tree: ``[checkpoints, shifts]`` tree costs W_T (``replay.tree[:, k]``).
    rtol: the relative slack of each comparison (float32 costs against
      float64 optima), >= 0.

  Returns:
    A dict: ``bound_violations`` (how many of ``OPT <= greedy (1 + rtol)``
    and ``greedy <= W_T (1 + rtol)`` fail), ``num_comparisons`` (greedy costs
    compared), ``min_greedy_over_opt``, ``max_greedy_over_tree``, and
    ``greedy_over_opt`` and ``tree_over_opt``: float64 ``[shifts]``, each
    shift's ratio averaged over checkpoints (OPT is the same for every shift).

  Raises:
    ValueError: ``opt`` not 1-D, ``greedy`` or ``tree`` not
      ``[len(opt), shifts]`` of one shape, no checkpoints, or a bad ``rtol``.

  Example:
    >>> out = ratios_to_opt([1.0, 2.0], [[1.5], [3.0]], [[4.0], [8.0]])
    >>> out["bound_violations"], out["greedy_over_opt"].tolist()
    (0, [1.5])
  """
  opt, greedy, tree = (np.asarray(x, np.float64) for x in (opt, greedy, tree))
  if (opt.ndim != 1 or not opt.size or greedy.ndim != 2
      or greedy.shape[0] != opt.size or tree.shape != greedy.shape):
    raise ValueError("opt must be [checkpoints] and greedy and tree"
                     " [checkpoints, shifts], at least one checkpoint; got"
                     f" {list(opt.shape)}, {list(greedy.shape)} and"
                     f" {list(tree.shape)}.")
  slack = 1 + _checks.check_real("rtol", rtol, low=0.0)
  opt = opt[:, None]
  out = {"bound_violations": int(np.sum(opt > greedy * slack)
                                 + np.sum(greedy > tree * slack)),
         "num_comparisons": int(greedy.size),
         "min_greedy_over_opt": float(np.min(greedy / opt)),
         "max_greedy_over_tree": float(np.max(greedy / tree))}
  for name, values in (("greedy_over_opt", greedy), ("tree_over_opt", tree)):
    out[name] = np.mean(values / opt, 0)
  return out
