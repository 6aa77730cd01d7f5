r"""A dynamic W_p matching over a randomly shifted quadtree (a baseline of ours).

Two point sets :math:`A, B \subset [0, R]^d` change by insertions and
deletions; the structure keeps, in :math:`O(L)` cell updates per operation
(``L`` levels), the per-cell counts of a randomly shifted hierarchical grid, the
tree transport cost :math:`W_T` that bounds the :math:`W_p^p` cost from
above, and on demand the greedy bottom-up matching that attains it.

**Source status: a reconstruction.** The motivating work (dynamic
:math:`W_p` matching under insertions and deletions, with an
:math:`O(d\epsilon^{-3/2})`-approximate :math:`W_1` result in
:math:`(\mathbb{R}^d, \ell_p)` and a :math:`2k(1+\epsilon)`-approximation in
finite metrics) is known to us from its abstract only; its algorithms are
not. What is here is a simpler, testable estimator built from ideas shared by
public related work (randomly shifted grid hierarchies, per-cell imbalance
counts, greedy bottom-up matching): it does **not** achieve that work's
bounds and makes no approximation guarantee beyond
:math:`\mathrm{OPT} \le \mathrm{greedy} \le W_T`. See ``docs/wasserstein.md``.

The tree. A shift :math:`s \sim U[0, R)^d` is drawn from the state key; level
:math:`j = 0..L` has cells of side :math:`s_j = 2R / 2^j` (level 0 is one
cell covering :math:`[0, 2R)^d`), and a point's level-``j`` cell is
:math:`\lfloor (x + s) / s_j \rfloor`. With
:math:`\mathrm{diam}_j = s_j d^{1/p}` the :math:`\ell_p` diameter of a
level-``j`` cell, a cell at level :math:`j \ge 1` hangs from its parent by
an edge of weight :math:`w_j = \tfrac12 \mathrm{diam}_{j-1}^p` and each
point from its finest cell by :math:`w_\mathrm{leaf} = \tfrac12
\mathrm{diam}_L^p`. Two points whose lowest common cell is at level ``j``
are at tree distance :math:`\ge \mathrm{diam}_j^p \ge \|a - b\|_p^p`, so for
:math:`|A| = |B| = n`

.. math::
  W_T = \sum_{j=1}^{L} w_j \sum_{C \in \text{level } j}
        |n_A(C) - n_B(C)| + 2 w_\mathrm{leaf}\, n
  \;\ge\; \mathrm{cost}(\text{greedy}) \;\ge\; \mathrm{OPT}
  = \min_\pi \sum_i \|a_i - b_{\pi(i)}\|_p^p,

where greedy pairs A and B points inside each finest cell (lowest slot first)
and passes the unmatched majority to the parent: it is optimal for the tree
metric, whose optimum is :math:`W_T`. For ``p = 1`` the weights are
:math:`w_j = \tfrac12 s_{j-1} d`, the tree-EMD of randomly shifted
quadtrees.

Layout. Everything is an array of static size, so updates are jit-compatible
and batchable (``jax.lax.scan`` over operations, ``jax.vmap`` over
independent structures, e.g. shifts). Points live in ``capacity`` slots per
side; an insertion takes the most recently freed slot (initially 0, 1, 2,
...). Each level's non-empty cells sit in a hash table of
:math:`T \ge 8\,\mathrm{capacity}` entries keyed by the integer cell
coordinates; a cell lives in the first free entry of the ``WINDOW`` (64)
entries that follow its hash, so a lookup is one fixed-size read (no probe
loop, no tombstones: an entry whose counts drop to zero is free again). An
update touches one cell per level (``O(L d WINDOW)`` integer work) and keeps
the per-level imbalance sums :math:`D_j = \sum_C |n_A(C) - n_B(C)|` as exact
integers, so :math:`W_T` has no rounding drift.

Errors. Deleting a point that is not present, inserting into a full side
(or into a full window: see ``WINDOW`` for why that does not happen in
practice) or
inserting a point that is not finite or lies outside :math:`[0, R]^d`
leaves the state unchanged and sets a bit of ``state.error``; called
eagerly, :meth:`ShiftedQuadtree.insert`, :meth:`~ShiftedQuadtree.delete`,
:meth:`~ShiftedQuadtree.apply` and :meth:`~ShiftedQuadtree.build` raise
:class:`CapacityError`, :class:`MissingPointError` or :class:`PointError` at
once (a bad concrete point before any work); under ``jit`` or ``vmap`` call
:func:`raise_errors` on the result. A point outside the box would be clipped
into the grid, where :math:`W_T` no longer bounds the cost (it can fall below
OPT), so a state that records one gives a NaN :meth:`~ShiftedQuadtree.tree_cost`
and :meth:`~ShiftedQuadtree.matching_cost`: it no longer holds the point sets
the caller meant. A matching of unequal sides raises :class:`UnbalancedError`.

References:
  P. Indyk and N. Thaper, Fast image retrieval via embeddings, 3rd
  International Workshop on Statistical and Computational Theories of Vision,
  2003 (randomly shifted grids embed :math:`W_1` into :math:`\ell_1`).
  G. Goranci et al., `Fully dynamic Euclidean bichromatic matching in
  sublinear update time <https://proceedings.mlr.press/v267/goranci25a.html>`_,
  ICML 2025 (the dynamic setting).
"""

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers._checks import is_concrete

INSERT, DELETE = 0, 1
_CAPACITY_BIT, _MISSING_BIT, _TABLE_BIT, _INVALID_BIT, _POINT_BIT = (
    1, 2, 4, 8, 16)
# Hash-table entries read per lookup. A level holds at most 2 capacity live
# cells in T >= 8 capacity entries (load alpha <= 1/4). Linear probing
# clusters: the chance that a new cell finds the WINDOW entries after its hash
# all taken decays like (alpha e^(1 - alpha))^WINDOW (Knuth's analysis, for an
# idealised random hash), 0.53^64 ~ 2e-18 here; at the old load 1/2 and
# window 32 it was 0.82^32 ~ 2e-3, and a 2-D stream of n = 2048 did fill a
# window. Measured on random points (d = 2..8, n = 2048..8192, every level):
# the longest displacement from a cell's hash was 8-13 entries at load 1/4
# against 19-34 at load 1/2.
WINDOW = 64
_MAX_LEVELS = 20  # 2^L cells per axis must fit float32's 24-bit mantissa


class CapacityError(ValueError):
  """An insertion into a side whose ``capacity`` slots are all live."""


class MissingPointError(ValueError):
  """A deletion of a slot that holds no live point."""


class UnbalancedError(ValueError):
  """A perfect matching requested between sides of unequal sizes."""


class PointError(ValueError):
  """An inserted point that is not finite or lies outside ``[0, domain]^d``."""


class QuadtreeState(NamedTuple):
  """State of :class:`ShiftedQuadtree` (side 0 is A, side 1 is B).

  Attributes:
    shift: the random shift :math:`s`, ``[d]``.
    points_sd: coordinates of every slot, ``[2, capacity, d]``.
    alive_s: which slots hold live points, ``[2, capacity]`` bool.
    cell_sl: table entry of each slot's cell at levels 1..L, ``[2, capacity, L]``.
    free_s: per side a stack of free slots, top at ``num_free - 1``.
    num_free: free slots per side, ``[2]`` int32.
    cell_keys: integer cell coordinates per table entry, ``[L, T, d]``.
    cell_counts: :math:`(n_A(C), n_B(C))` per entry, ``[L, T, 2]`` int32; an
      entry is in use while its counts are not both zero.
    imbalance: :math:`D_j` per level ``j = 1..L``, ``[L]`` int32.
    error: bit 1 a full side, bit 2 a deletion of a missing point, bit 4 a
      full hash-table window, bit 8 an operation whose side is not 0 or 1 or
      whose kind is neither INSERT nor DELETE, bit 16 an insertion of a point
      that is not finite or lies outside ``[0, domain]^d`` (the last four
      never set by valid streams). Each failed operation was skipped.
  """

  shift: jax.Array
  points_sd: jax.Array
  alive_s: jax.Array
  cell_sl: jax.Array
  free_s: jax.Array
  num_free: jax.Array
  cell_keys: jax.Array
  cell_counts: jax.Array
  imbalance: jax.Array
  error: jax.Array


class Operations(NamedTuple):
  """A batch of updates for :meth:`ShiftedQuadtree.apply`, one row each.

  Attributes:
    kind: :data:`INSERT` (0) or :data:`DELETE` (1), ``[B]`` int32.
    side: 0 (A) or 1 (B), ``[B]`` int32.
    slot: the slot to delete (ignored by insertions), ``[B]`` int32.
    point: the point to insert (ignored by deletions), ``[B, d]``.
  """

  kind: jax.Array
  side: jax.Array
  slot: jax.Array
  point: jax.Array


class Matching(NamedTuple):
  """A matching between the live slots: -1 marks an unmatched or free slot.

  Attributes:
    partner_of_a: the B slot matched to each A slot, ``[capacity]`` int32.
    partner_of_b: the A slot matched to each B slot, ``[capacity]`` int32.
  """

  partner_of_a: jax.Array
  partner_of_b: jax.Array


def raise_errors(state: QuadtreeState) -> None:
  """Raises the named error that ``state.error`` records, if any (host side).

  Raises:
    TypeError: ``state`` is not a :class:`QuadtreeState`.
    PointError: an insertion's point was not finite or lay outside
      ``[0, domain]^d``.
    CapacityError: an insertion found its side (or a hash window) full.
    MissingPointError: a deletion named a slot without a live point.
    ValueError: an operation named a side other than 0 and 1, or a kind
      other than INSERT and DELETE.
  """
  if not isinstance(state, QuadtreeState):
    raise TypeError(
        f"state must be a QuadtreeState; got {type(state).__name__}.")
  # bitwise_or over a vmapped batch: every member's bits are reported.
  error = int(np.bitwise_or.reduce(np.asarray(state.error), axis=None))
  if error & _POINT_BIT:
    raise PointError("insert: a point was not finite or lay outside"
                     " [0, domain]^d (W_T would no longer bound the cost);"
                     " the operation was skipped.")
  if error & _CAPACITY_BIT:
    raise CapacityError("insert: the side is full (all `capacity` slots are"
                        " live); the operation was skipped.")
  if error & _TABLE_BIT:
    raise CapacityError(f"insert: {WINDOW} hash-table entries in a row were"
                        " in use (a hash overflow); the operation was skipped.")
  if error & _INVALID_BIT:
    raise ValueError("an operation's side must be 0 (A) or 1 (B) and its kind"
                     " INSERT (0) or DELETE (1); the operation was skipped.")
  if error & _MISSING_BIT:
    raise MissingPointError("delete: `slot` holds no live point of that side;"
                            " the operation was skipped.")


def _check_index(value, name: str) -> None:
  """Raises ``ValueError`` unless ``value`` is an integer scalar (a side or slot)."""
  if isinstance(value, int) and not isinstance(value, bool):
    return  # the common eager case, without a dtype lookup
  dtype = jnp.result_type(value)
  if np.ndim(value) != 0 or not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{name} must be an integer scalar; got {dtype}"
                     f"{list(np.shape(value))}.")


@dataclasses.dataclass(frozen=True)
class ShiftedQuadtree:
  r"""Dynamic A/B point sets in :math:`[0, R]^d` with :math:`W_T` and greedy matching.

  Args:
    dim: the dimension ``d``.
    capacity: slots per side (the most live points a side may hold).
    p: the order of both the :math:`\ell_p` metric and the cost
      :math:`\sum \|a - b\|_p^p`, ``p >= 1``.
    resolution: the finest cell side is at most this (:math:`\delta_{\min}`,
      in units of ``domain``): ``L = ceil(log2(1 / resolution)) + 1`` levels.
    domain: the side ``R`` of the box the points lie in. A point outside
      ``[0, R]^d`` (or not finite) is refused: it would be clipped into the
      grid, where the bound no longer holds (see the module docstring).

  Raises:
    ValueError: for a ``dim`` or ``capacity`` that is not a positive int, a
      ``p`` that is not a finite number >= 1, a ``resolution`` outside
      ``(0, 1]`` or finer than ``2**-19``, or a ``domain`` that is not a
      finite number > 0.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers.matching import ShiftedQuadtree
    >>> tree = ShiftedQuadtree(dim=2, capacity=4, p=1)
    >>> state = tree.init(jax.random.key(0))
    >>> state, a = tree.insert(state, 0, jnp.array([0.1, 0.2]))
    >>> state, b = tree.insert(state, 1, jnp.array([0.1, 0.3]))
    >>> int(a), int(b), bool(tree.tree_cost(state) >= 0.1)
    (0, 0, True)
    >>> matching = tree.greedy_matching(state)
    >>> matching.partner_of_a.tolist()
    [0, -1, -1, -1]
    >>> round(float(tree.matching_cost(state, matching)), 4)
    0.1
  """

  dim: int
  capacity: int
  p: float = 1.0
  resolution: float = 1e-3
  domain: float = 1.0

  def __post_init__(self):
    for name in ("dim", "capacity"):
      check_int(name, getattr(self, name), 1)
    for name in ("p", "resolution", "domain"):
      check_real(name, getattr(self, name))
    if not self.p >= 1:
      raise ValueError(f"p must be >= 1 (an l_p metric); got {self.p!r}.")
    if not 2.0 ** (1 - _MAX_LEVELS) <= self.resolution <= 1:
      raise ValueError(
          f"resolution must lie in [2**-{_MAX_LEVELS - 1}, 1]; got"
          f" {self.resolution!r}.")
    if not self.domain > 0:
      raise ValueError(f"domain must be > 0; got {self.domain!r}.")

  # ------------------------------------------------------------ geometry --

  @property
  def num_levels(self) -> int:
    """``L``: levels 1..L below the root cell."""
    return math.ceil(math.log2(1 / self.resolution) - 1e-9) + 1

  @property
  def table_size(self) -> int:
    """Entries ``T`` of each level's hash table: a power of 2, >= 8 capacity (see ``WINDOW``)."""
    return 1 << max(3, (8 * self.capacity - 1).bit_length())

  def cell_sides(self) -> np.ndarray:
    """:math:`s_j = 2R / 2^j` for ``j = 0..L``."""
    return 2 * self.domain / 2.0 ** np.arange(self.num_levels + 1)

  def edge_weights(self) -> tuple[np.ndarray, float]:
    r"""``(w_j for j = 1..L, w_leaf)``: :math:`\tfrac12 \mathrm{diam}_{j-1}^p`, :math:`\tfrac12 \mathrm{diam}_L^p`."""
    diameter_p = self.cell_sides() ** self.p * self.dim
    return 0.5 * diameter_p[:-1], 0.5 * float(diameter_p[-1])

  def cell_coords(self, shift: jax.Array, point: jax.Array) -> jax.Array:
    """Integer coordinates of ``point``'s cell at levels 1..L, ``[L, d]``.

    The finest level's coordinates are computed once and the coarser ones
    obtained by bit shifts, so the cells nest exactly.

    Raises:
      ValueError: ``shift`` or ``point`` is not a float ``[d]`` array.
      PointError: a concrete ``point`` is not finite or lies outside
        ``[0, domain]^d``. A traced one is clipped into the grid (its cell
        is then not the point's own; the updates skip such points).
    """
    self._check_point(shift, "shift", batched=False)
    self._check_point(point, "point", batched=False)
    self._check_values(point, "point")
    levels = self.num_levels
    finest = jnp.floor((point + shift) * (2.0 ** levels / (2 * self.domain)))
    finest = jnp.clip(finest, 0, 2 ** levels - 1).astype(jnp.int32)
    down = jnp.arange(levels - 1, -1, -1, dtype=jnp.int32)  # L - j
    return jnp.right_shift(finest[None, :], down[:, None])

  # --------------------------------------------------------------- state --

  def init(self, key: jax.Array) -> QuadtreeState:
    """An empty structure with its shift drawn from ``key``.

    Raises:
      TypeError: ``key`` is neither a typed PRNG key (``jax.random.key``) nor
        a raw ``uint32[2]`` key (``jax.random.PRNGKey``).
    """
    dtype, shape = getattr(key, "dtype", None), np.shape(key)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype,
                                                        jax.dtypes.prng_key)
    if not ((typed and shape == ()) or (dtype == jnp.uint32 and shape == (2,))):
      got = (type(key).__name__ if dtype is None
             else f"{dtype}{list(shape)}")
      raise TypeError(f"key must be one PRNG key (jax.random.key); got {got}.")
    d, cap, levels, size = (self.dim, self.capacity, self.num_levels,
                            self.table_size)
    shift = jax.random.uniform(key, (d,), maxval=self.domain)
    # Every field is typed like the shift (full_like), so inside shard_map
    # the scan over operations carries device-varying values from the start.
    full = lambda shape, dtype, value=0: jnp.full_like(shift, value, dtype,
                                                       shape=shape)
    # The stack's top is its last entry: slots are handed out 0, 1, 2, ...
    free = (full((2, cap), jnp.int32)
            + jnp.arange(cap - 1, -1, -1, dtype=jnp.int32)[None])
    return QuadtreeState(
        shift=shift,
        points_sd=full((2, cap, d), shift.dtype),
        alive_s=full((2, cap), bool, False),
        cell_sl=full((2, cap, levels), jnp.int32),
        free_s=free,
        num_free=full((2,), jnp.int32, cap),
        cell_keys=full((levels, size, d), jnp.int32),
        cell_counts=full((levels, size, 2), jnp.int32),
        imbalance=full((levels,), jnp.int32),
        error=full((), jnp.int32))

  def sizes(self, state: QuadtreeState) -> jax.Array:
    """``[|A|, |B|]``, the live points per side."""
    self._check_state(state)
    return self.capacity - state.num_free

  def _check_state(self, state) -> None:
    """Raises unless ``state`` has this structure's shapes (one structure: under ``vmap``, per member)."""
    if not isinstance(state, QuadtreeState):
      raise TypeError(
          f"state must be a QuadtreeState; got {type(state).__name__}.")
    d, cap, levels, size = (self.dim, self.capacity, self.num_levels,
                            self.table_size)
    expected = QuadtreeState(
        shift=(d,), points_sd=(2, cap, d), alive_s=(2, cap),
        cell_sl=(2, cap, levels), free_s=(2, cap), num_free=(2,),
        cell_keys=(levels, size, d), cell_counts=(levels, size, 2),
        imbalance=(levels,), error=())
    for name, array, shape in zip(QuadtreeState._fields, state, expected):
      if np.shape(array) != shape:
        raise ValueError(
            f"state.{name} has shape {list(np.shape(array))}, not this"
            f" structure's {list(shape)} (a state of another ShiftedQuadtree,"
            " or a vmapped batch outside vmap?).")

  def _check_point(self, point: jax.Array, name: str, batched: bool) -> None:
    shape = point.shape[1:] if batched else point.shape
    if (point.ndim != (2 if batched else 1) or shape != (self.dim,)
        or not jnp.issubdtype(point.dtype, jnp.floating)):
      raise ValueError(
          f"{name} must be a float array of shape {'[B, ' if batched else '['}"
          f"{self.dim}]; got {point.dtype}{list(point.shape)}.")

  def _in_box(self, point):
    """Whether each ``[..., d]`` point is finite and inside ``[0, domain]^d`` (numpy or jax)."""
    xp = np if isinstance(point, np.ndarray) else jnp
    return xp.all(xp.isfinite(point) & (point >= 0) & (point <= self.domain),
                  axis=-1)

  def _check_values(self, point, name: str, rows=None) -> None:
    """Raises :class:`PointError` for a concrete point outside the box.

    ``point`` is one ``[d]`` point or a ``[B, d]`` batch; ``rows`` (a bool
    mask) limits the check to those rows (the insertions of a batch). Traced
    points are left to the update, which skips them and sets the error bit.
    """
    if not is_concrete(point):
      return
    values = np.asarray(point)
    bad = np.atleast_1d(~self._in_box(values))
    if rows is not None:
      bad &= rows
    if bad.any():
      first = int(np.flatnonzero(bad)[0])
      where = "" if values.ndim == 1 else f"[{first}]"
      raise PointError(
          f"{name}{where} = {np.atleast_2d(values)[first].tolist()} must be"
          f" finite and lie in [0, {self.domain}]^{self.dim}: outside the box"
          f" W_T no longer bounds the cost ({int(bad.sum())} such points).")

  # ------------------------------------------------------------- updates --

  def _locate(self, keys_td, counts_t2, key_d):
    """``(entry, ok)``: where ``key_d`` lives in one level's table, or may go.

    The ``WINDOW`` entries from the key's hash are read at once: the key's
    own entry if it is there, else the first empty one (``ok`` False when
    the window is full).
    """
    mask = self.table_size - 1
    hashed = jnp.uint32(2166136261)
    for c in range(self.dim):  # FNV-1a over the integer coordinates
      hashed = (hashed ^ key_d[c].astype(jnp.uint32)) * jnp.uint32(16777619)
    start = (hashed & jnp.uint32(mask)).astype(jnp.int32)
    window = (start + jnp.arange(min(WINDOW, self.table_size))) & mask
    used = jnp.sum(counts_t2[window], axis=-1) > 0
    hit = used & jnp.all(keys_td[window] == key_d[None, :], axis=-1)
    found = jnp.any(hit)
    entry = window[jnp.where(found, jnp.argmax(hit), jnp.argmax(~used))]
    return entry, found | jnp.any(~used)

  def _update(self, state: QuadtreeState, kind, side, slot, point):
    """One insertion or deletion as a single branch-free path.

    One path for both kinds, rather than a ``lax.cond`` between them, ran
    about twice as fast per operation inside ``lax.scan`` on CPU.
    """
    cap, levels = self.capacity, jnp.arange(self.num_levels)
    valid = ((side == 0) | (side == 1)) & ((kind == INSERT) | (kind == DELETE))
    is_insert = kind == INSERT
    top = state.num_free[side] - 1
    asked = jnp.clip(slot, 0, cap - 1)
    # A point outside the box would be clipped into a wrong cell (W_T then
    # no longer bounds the cost): it is skipped and recorded like a full side.
    point_ok = self._in_box(point)
    insert_ok = valid & is_insert & (top >= 0) & point_ok
    delete_ok = (valid & ~is_insert & (slot >= 0) & (slot < cap)
                 & state.alive_s[side, asked])
    slot = jnp.where(is_insert, state.free_s[side, jnp.maximum(top, 0)], asked)
    coords_ld = self.cell_coords(state.shift, point)
    probed_l, room_l = jax.vmap(self._locate)(state.cell_keys,
                                              state.cell_counts, coords_ld)
    room = jnp.all(room_l)
    insert_ok &= room
    ok = insert_ok | delete_ok
    entry_l = jnp.where(is_insert, probed_l, state.cell_sl[side, slot])
    old_l2 = state.cell_counts[levels, entry_l]
    change = jnp.where(is_insert, 1, -1) * ok.astype(jnp.int32)
    new_l2 = old_l2.at[:, side].add(change)
    gap = lambda c: jnp.abs(c[:, 0] - c[:, 1])
    push = jnp.minimum(state.num_free[side], cap - 1)
    error = jnp.where(
        valid,
        jnp.where(is_insert & (top < 0), _CAPACITY_BIT, 0)
        | jnp.where(is_insert & ~point_ok, _POINT_BIT, 0)
        | jnp.where(is_insert & (top >= 0) & point_ok & ~room, _TABLE_BIT, 0)
        | jnp.where(~is_insert & ~delete_ok, _MISSING_BIT, 0),
        _INVALID_BIT)
    new = (jnp.where(insert_ok, point, state.points_sd[side, slot]),
           jnp.where(ok, is_insert, state.alive_s[side, slot]),
           jnp.where(insert_ok, entry_l, state.cell_sl[side, slot]),
           jnp.where(delete_ok, slot, state.free_s[side, push]),
           jnp.where(insert_ok, coords_ld, state.cell_keys[levels, entry_l]))
    # Every read of the state happens before any write: inside lax.scan,
    # XLA:CPU otherwise copied each buffer that one step both reads and
    # writes (alive_s, cell_sl, free_s: O(capacity) bytes per operation),
    # which made an update's cost grow with n instead of O(L WINDOW).
    state, new, slot, push, entry_l, change, old_l2, new_l2, error = (
        jax.lax.optimization_barrier((state, new, slot, push, entry_l, change,
                                      old_l2, new_l2, error)))
    point_new, alive_new, cell_new, free_new, keys_new = new
    return state._replace(
        points_sd=state.points_sd.at[side, slot].set(point_new),
        alive_s=state.alive_s.at[side, slot].set(alive_new),
        cell_sl=state.cell_sl.at[side, slot].set(cell_new),
        free_s=state.free_s.at[side, push].set(free_new),
        num_free=state.num_free.at[side].add(-change),
        cell_keys=state.cell_keys.at[levels, entry_l].set(keys_new),
        cell_counts=state.cell_counts.at[levels, entry_l].set(new_l2),
        imbalance=state.imbalance + gap(new_l2) - gap(old_l2),
        error=state.error | error), slot

  def insert(self, state: QuadtreeState, side: int | jax.Array,
             point: jax.Array) -> tuple[QuadtreeState, jax.Array]:
    """Inserts ``point`` (``[d]``) into side ``side`` (0 = A, 1 = B).

    Returns:
      ``(state, slot)``: the new state and the slot the point occupies.

    Raises:
      TypeError, ValueError: ``state`` is not a state of this structure,
        ``point`` is not a float ``[d]`` array or ``side`` not an integer
        scalar (at trace time); or called eagerly with a ``side`` other than
        0 and 1 (under ``jit`` the insertion is skipped and recorded in
        ``state.error``).
      PointError: a concrete ``point`` that is not finite or lies outside
        ``[0, domain]^d``, before any work (a traced one is skipped and
        recorded in ``state.error``; see the module docstring).
      CapacityError: called eagerly on a full side (under ``jit`` the
        insertion is skipped and recorded in ``state.error``).
    """
    self._check_state(state)
    point = jnp.asarray(point)
    self._check_point(point, "point", batched=False)
    _check_index(side, "side")
    if point.dtype != state.points_sd.dtype:
      point = point.astype(state.points_sd.dtype)
    self._check_values(point, "point")
    new, slot = _compiled_update(self, state, jnp.int32(INSERT),
                                 jnp.asarray(side, jnp.int32), jnp.int32(0),
                                 point)
    if is_concrete(new):
      raise_errors(new)
    return new, slot

  def delete(self, state: QuadtreeState, side: int | jax.Array,
             slot: int | jax.Array) -> QuadtreeState:
    """Deletes the point in ``slot`` of side ``side``.

    Raises:
      MissingPointError: called eagerly on a slot without a live point
        (under ``jit`` the deletion is skipped and recorded in ``state.error``).
      TypeError, ValueError: ``state`` is not a state of this structure, or
        ``side`` or ``slot`` not an integer scalar (at trace time); called
        eagerly with a ``side`` other than 0 and 1 (under ``jit``, skipped
        and recorded as well).
    """
    self._check_state(state)
    _check_index(side, "side")
    _check_index(slot, "slot")
    new, _ = _compiled_update(self, state, jnp.int32(DELETE),
                              jnp.asarray(side, jnp.int32),
                              jnp.asarray(slot, jnp.int32),
                              jnp.zeros(self.dim, state.points_sd.dtype))
    if is_concrete(new):
      raise_errors(new)
    return new

  def apply(self, state: QuadtreeState, ops: Operations, *,
            donate: bool = False) -> tuple[QuadtreeState, jax.Array]:
    """Applies a batch of operations in order (one ``lax.scan``).

    Args:
      state: the structure's state.
      ops: the operations, one row each.
      donate: reuse ``state``'s buffers for the result (``jax.jit``'s
        ``donate_argnums``). A call that does not donate copies the whole
        state first, ``O(capacity + levels x table size)`` bytes, because the
        result cannot overwrite an input the caller still holds; over a block
        of B operations that adds ``O(capacity / B)`` to each update. With
        ``donate=True`` the update cost does not depend on n, but ``state``
        is invalid after the call (reading it raises ``RuntimeError``).

    Returns:
      ``(state, slots)``: per operation the slot inserted into or deleted.

    Raises:
      TypeError, ValueError: ``state`` is not a state of this structure,
        ``ops`` not :class:`Operations`, ``ops.point`` not a float ``[B, d]``
        array or ``ops.kind``/``side``/``slot`` not int ``[B]`` arrays;
        called eagerly, an operation with a side other than 0/1 or a kind
        other than INSERT/DELETE (skipped and recorded under ``jit``).
      PointError: a concrete insertion's point that is not finite or lies
        outside ``[0, domain]^d``, before any work (deletions ignore their
        point; traced points are skipped and recorded).
      CapacityError, MissingPointError: called eagerly, when an operation
        failed (it was skipped; the others were applied).
    """
    if not isinstance(donate, bool):
      raise TypeError(f"donate must be a bool; got {type(donate).__name__}.")
    if not isinstance(ops, Operations):
      raise TypeError(f"ops must be Operations; got {type(ops).__name__}.")
    self._check_state(state)
    ops = Operations(*(jnp.asarray(field) for field in ops))
    self._check_point(ops.point, "ops.point", batched=True)
    for name in ("kind", "side", "slot"):
      field = getattr(ops, name)
      if field.shape != ops.point.shape[:1] or not jnp.issubdtype(
          field.dtype, jnp.integer):
        raise ValueError(
            f"ops.{name} must be an int array of shape"
            f" [{ops.point.shape[0]}] (one per ops.point row); got"
            f" {field.dtype}{list(field.shape)}.")
    ops = ops._replace(
        kind=ops.kind.astype(jnp.int32), side=ops.side.astype(jnp.int32),
        slot=ops.slot.astype(jnp.int32),
        point=ops.point.astype(state.points_sd.dtype))
    if is_concrete(ops.kind):
      self._check_values(ops.point, "ops.point",
                         rows=np.asarray(ops.kind) == INSERT)
    return self._run(state, ops, donate=donate)

  def _run(self, state, ops, donate=False):
    new, slots = (_compiled_apply_donated if donate else _compiled_apply)(
        self, state, ops)
    if is_concrete(new):
      raise_errors(new)
    return new, slots

  def _apply(self, state: QuadtreeState, ops: Operations):
    return jax.lax.scan(lambda current, op: self._update(current, *op), state,
                        tuple(ops))

  def build(self, key: jax.Array, points_a: jax.Array, points_b: jax.Array
            ) -> QuadtreeState:
    """A structure holding ``points_a`` in A slots 0.. and ``points_b`` in B slots 0...

    Raises:
      TypeError: ``key`` is not one PRNG key.
      ValueError: ``points_a`` or ``points_b`` is not a float ``[n, d]``
        array.
      PointError: a concrete point that is not finite or lies outside
        ``[0, domain]^d``, before any work (traced ones are skipped and
        recorded in ``state.error``).
      CapacityError: called eagerly with more points than ``capacity``.
    """
    state = self.init(key)
    points_a, points_b = jnp.asarray(points_a), jnp.asarray(points_b)
    for name, points in (("points_a", points_a), ("points_b", points_b)):
      self._check_point(points, name, batched=True)
      self._check_values(points.astype(state.points_sd.dtype), name)
    points = jnp.concatenate([points_a, points_b]).astype(
        state.points_sd.dtype)
    sides = jnp.concatenate([jnp.zeros(len(points_a), jnp.int32),
                             jnp.ones(len(points_b), jnp.int32)])
    ops = Operations(jnp.full(len(points), INSERT, jnp.int32), sides,
                     jnp.zeros(len(points), jnp.int32), points)
    return self._run(state, ops)[0]

  # ------------------------------------------------------------- queries --

  def tree_cost(self, state: QuadtreeState) -> jax.Array:
    r""":math:`W_T = \sum_j w_j D_j + w_\mathrm{leaf} (|A| + |B|)`, an upper bound on :math:`W_p^p` for :math:`|A| = |B|`.

    NaN when ``state.error`` records a skipped bad point (bit 16): the
    structure then lacks a point the caller inserted, and its finite
    :math:`W_T` could fall below the intended OPT.
    """
    self._check_state(state)
    return _compiled_tree_cost(self, state)

  def _tree_cost(self, state: QuadtreeState) -> jax.Array:
    weights, leaf = self.edge_weights()
    dtype = state.points_sd.dtype
    cost = (jnp.dot(jnp.asarray(weights, dtype), state.imbalance.astype(dtype))
            + leaf * jnp.sum(self.sizes(state)).astype(dtype))
    return jnp.where((state.error & _POINT_BIT) != 0, jnp.nan, cost)

  def greedy_matching(self, state: QuadtreeState) -> Matching:
    """The greedy bottom-up matching (``O(n L log n)``: one sort per level).

    In each cell, from the finest level to the root, the open A and B points
    are paired in slot order and the unmatched majority moves up. With
    ``|A| != |B|`` the surplus stays unmatched at the root (-1).

    Raises:
      TypeError, ValueError: ``state`` is not a state of this structure.
      UnbalancedError: called eagerly with ``|A| != |B|``.
    """
    self._check_state(state)
    if is_concrete(state.num_free):
      num_a, num_b = np.asarray(self.sizes(state)).tolist()
      if num_a != num_b:
        raise UnbalancedError(
            f"greedy_matching: a perfect matching needs |A| = |B|; got"
            f" |A| = {num_a}, |B| = {num_b}.")
    return _compiled_greedy(self, state)

  def _greedy(self, state: QuadtreeState) -> Matching:
    cap, size = self.capacity, self.table_size
    side_n = jnp.repeat(jnp.arange(2, dtype=jnp.int32), cap)
    slot_n = jnp.tile(jnp.arange(cap, dtype=jnp.int32), 2)
    alive_n = state.alive_s.reshape(-1)
    # Level 0 (the root) is one cell for everybody: entry 0.
    cell_nl = jnp.concatenate([jnp.zeros((2 * cap, 1), jnp.int32),
                               state.cell_sl.reshape(2 * cap, -1)], axis=1)
    position = jnp.arange(2 * cap)

    def match_level(i, partner_n):
      level = self.num_levels - i
      is_open = alive_n & (partner_n < 0)
      group_n = jnp.where(is_open, cell_nl[:, level], size)  # size: closed
      order = jnp.lexsort((slot_n, side_n, group_n))
      group, side = group_n[order], side_n[order]
      first = lambda new: jax.lax.cummax(jnp.where(new, position, 0))
      new_cell = jnp.concatenate([jnp.ones(1, bool), group[1:] != group[:-1]])
      cell_start = first(new_cell)
      rank = position - first(new_cell | jnp.concatenate(
          [jnp.ones(1, bool), side[1:] != side[:-1]]))
      count_a = jax.ops.segment_sum((is_open & (side_n == 0)).astype(jnp.int32),
                                    group_n, size + 1)[group]
      count_b = jax.ops.segment_sum((is_open & (side_n == 1)).astype(jnp.int32),
                                    group_n, size + 1)[group]
      is_a = side == 0
      matched = (group < size) & (rank < jnp.where(is_a, count_b, count_a))
      mate = jnp.where(is_a, cell_start + count_a + rank, cell_start + rank)
      mate = order[jnp.clip(mate, 0, 2 * cap - 1)]
      return partner_n.at[order].set(
          jnp.where(matched, mate, partner_n[order]))

    partner_n = jax.lax.fori_loop(0, self.num_levels + 1, match_level,
                                  # typed like the state (see init)
                                  jnp.full_like(state.error, -1,
                                                shape=(2 * cap,)))
    slot_of = jnp.where(partner_n >= 0, partner_n % cap, -1)
    return Matching(slot_of[:cap], slot_of[cap:])

  def matching_cost(self, state: QuadtreeState, matching: Matching
                    ) -> jax.Array:
    r""":math:`\sum_{(a, b) \in M} \|a - b\|_p^p` over the matched A slots.

    A pair must join a live A slot to a live B slot (-1: unmatched). Traced,
    a pair that does not (an id outside ``[-1, capacity)`` or a free slot,
    whose stale coordinates would be read) makes the cost NaN, and so does a
    state that records a skipped bad point (see :meth:`tree_cost`).

    Raises:
      TypeError, ValueError: ``state`` is not a state of this structure,
        ``matching`` not a :class:`Matching` of two int ``[capacity]``
        arrays, or (concrete) a pair that does not join live slots.
    """
    self._check_state(state)
    if not isinstance(matching, Matching):
      raise TypeError(
          f"matching must be a Matching; got {type(matching).__name__}.")
    for name, ids in zip(Matching._fields, matching):
      dtype = jnp.result_type(ids)
      if np.shape(ids) != (self.capacity,) or not jnp.issubdtype(
          dtype, jnp.integer):
        raise ValueError(f"matching.{name} must be an int array of shape"
                         f" [{self.capacity}]; got {dtype}"
                         f"{list(np.shape(ids))}.")
    if is_concrete(state.alive_s, matching.partner_of_a):
      partner, alive = (np.asarray(matching.partner_of_a),
                        np.asarray(state.alive_s))
      bad = ~self._pairs_ok(partner, alive)
      if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"matching.partner_of_a[{first}] = {int(partner[first])} does not"
            f" join a live A slot to a live B slot in [0, {self.capacity})"
            f" ({int(bad.sum())} such pairs; -1 marks an unmatched slot).")
    return _compiled_matching_cost(self, state, matching)

  def _pairs_ok(self, partner, alive):
    """Per A slot: unmatched (-1), or a live A slot matched to a live B slot (numpy or jax)."""
    xp = np if isinstance(partner, np.ndarray) else jnp
    in_range = (partner >= 0) & (partner < self.capacity)
    b_alive = alive[1][xp.clip(partner, 0, self.capacity - 1)]
    return (partner == -1) | (in_range & alive[0] & b_alive)

  def _matching_cost(self, state: QuadtreeState, matching: Matching
                     ) -> jax.Array:
    partner = matching.partner_of_a
    b_nd = state.points_sd[1, jnp.maximum(partner, 0)]
    cost = jnp.sum(jnp.abs(state.points_sd[0] - b_nd) ** self.p, axis=-1)
    total = jnp.sum(jnp.where(partner >= 0, cost, 0))
    valid = (jnp.all(self._pairs_ok(partner, state.alive_s))
             & ((state.error & _POINT_BIT) == 0))
    return jnp.where(valid, total, jnp.nan)


# Compiled once per structure (hashable: its fields), so that eager calls are
# fast too; under an outer jit they are inlined.
_compiled_update = jax.jit(ShiftedQuadtree._update, static_argnums=0)
_compiled_apply = jax.jit(ShiftedQuadtree._apply, static_argnums=0)
_compiled_apply_donated = jax.jit(ShiftedQuadtree._apply, static_argnums=0,
                                  donate_argnums=1)
_compiled_greedy = jax.jit(ShiftedQuadtree._greedy, static_argnums=0)
_compiled_tree_cost = jax.jit(ShiftedQuadtree._tree_cost, static_argnums=0)
_compiled_matching_cost = jax.jit(ShiftedQuadtree._matching_cost,
                                  static_argnums=0)
