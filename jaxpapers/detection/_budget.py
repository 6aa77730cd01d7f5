r"""BUTR-style query budgeting: a training-free, monotone, conservative K(x).

A two-stage DETR initialises its decoder queries from the top-K encoder
proposals by confidence, with K fixed (900 in DINO). BUTR (2026) argues that
dynamic queries act as a *budget* and estimates an input-dependent K(x) from
the encoder confidences with a lightweight, training-free budgeter that is
monotone and conservative, then takes the standard top-K(x) proposals.

**Reconstruction.** Only BUTR's abstract was available; the budget formula
and every default below are ours, not the paper's:

.. math::
  s_j = \max_c \sigma(\ell_{j,c}), \qquad
  \hat n(x) = \sum_j s_j\, 1[s_j \ge \tau], \qquad
  K(x) = \min\big(\operatorname{clip}(\lceil \rho\, \hat n(x) \rceil + m,
  K_{\min}, K_{\max}),\ N\big)

with :math:`\tau = 0.2`, :math:`\rho = 1.5`, :math:`m = 50`,
:math:`K_{\min} = 100`, :math:`K_{\max} = 900` (DINO's query count) and
:math:`N` proposals (``count="hard"`` counts :math:`1[s_j \ge \tau]`).
Raising any :math:`s_j` never lowers :math:`\hat n`, so K is monotone;
:math:`\rho \ge 1`, :math:`m \ge 0` and the floor over-provision
(conservative: a missed tiny object costs more than a spare query).

Baselines behind the same :class:`Budgeter` interface: a fixed K, and
DQ-DETR's counting buckets (counts below 10 / 100 / 500 map to budgets 300 /
500 / 900 / 1500; Huang et al., 2024), fed by our counter :math:`\hat n`
instead of DQ-DETR's learned density classifier. DQ-DETR gives a whole batch
the budget of its densest image: :func:`share_batch_max`.

Under ``jit`` the number of queries must be static, so selection always
gathers the top :math:`K_{\max}` proposals and carries a validity mask
``arange(K_max) < K(x)`` (:func:`top_k_queries`); it vmaps over a batch of
images with different budgets.

**Bad confidences.** Concrete confidences outside [0, 1] (NaN included) are
refused. A traced NaN confidence cannot be refused and would drop out of the
count, silently lowering the budget: instead the count is NaN and every
budget read from it is the flag ``NO_BUDGET`` (-1), which selects no query,
survives :func:`share_batch_max` and is refused when passed on concretely.

References:
  BUTR: "budgeting-based DETR" (2026), abstract only.
  DQ-DETR: Y.-X. Huang et al., "DQ-DETR: DETR with Dynamic Query for Tiny
  Object Detection", ECCV 2024, https://arxiv.org/abs/2404.03507, code
  https://github.com/hoiliu-0801/DQ-DETR.
  DINO: H. Zhang et al., ICLR 2023, https://arxiv.org/abs/2203.03605
  (two-stage top-900 query selection).
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real

COUNTS = ("soft", "hard")
# The budget of a count that cannot be read (NaN or negative, traced only).
NO_BUDGET = -1


class Budgeter(NamedTuple):
  """A query budget rule: ``budget(scores_N) -> K`` (int32 scalar).

  ``floor`` and ``ceiling`` bound every budget it returns before the cut at
  the proposal count; ``ceiling`` is the static size of the padded top-K
  selection. ``budget`` raises ``ValueError`` at trace time for an empty
  proposal set or a floor above the proposal count, and for confidences
  outside [0, 1] when they are concrete (not traced); a budget read from a
  traced NaN confidence is ``NO_BUDGET`` (-1; module docstring).
  """

  name: str
  budget: Callable[[jax.Array], jax.Array]
  floor: int
  ceiling: int


class QuerySelection(NamedTuple):
  """The top-``max_budget`` proposals by confidence, the first ``budget`` valid."""

  indices: jax.Array  # (max_budget,) int32, by descending confidence
  scores: jax.Array  # (max_budget,) the confidences of those proposals
  valid: jax.Array  # (max_budget,) bool, arange(max_budget) < budget
  budget: jax.Array  # () int32, the number of valid queries


def confidences(class_logits_NxC: jax.Array) -> jax.Array:
  r"""Encoder confidences :math:`s_j = \max_c \sigma(\ell_{j,c})`, without gradient.

  Args:
    class_logits_NxC: ``(N, C)`` class logits of the N encoder proposals.

  Returns:
    ``(N,)`` confidences in [0, 1]; ``stop_gradient`` keeps the budgeter
    out of training.

  Example:
    >>> import jax.numpy as jnp
    >>> s = confidences(jnp.array([[0.0, -1.0], [2.0, 3.0]]))
    >>> [round(v, 3) for v in s.tolist()]
    [0.5, 0.953]
  """
  if class_logits_NxC.ndim != 2 or not class_logits_NxC.shape[1]:
    raise ValueError("class_logits_NxC must have shape (num_proposals,"
                     f" num_classes) with num_classes >= 1; got"
                     f" {class_logits_NxC.shape}.")
  if not jnp.issubdtype(class_logits_NxC.dtype, jnp.floating):
    raise TypeError("class_logits_NxC must be floating point; got"
                    f" {class_logits_NxC.dtype}.")
  return jax.lax.stop_gradient(jnp.max(jax.nn.sigmoid(class_logits_NxC), -1))


def check_scores(scores_N: jax.Array, floor: int = 1) -> None:
  """Raises for scores a budgeter cannot use (see :class:`Budgeter`).

  ``floor`` (an int >= 1) is the smallest budget the caller will ask for.
  """
  check_int("floor", floor, 1)
  if scores_N.ndim != 1:
    raise ValueError(f"scores_N must be 1-D (one confidence per proposal);"
                     f" got shape {scores_N.shape}.")
  if not jnp.issubdtype(scores_N.dtype, jnp.floating):
    raise TypeError(f"scores_N must be floating point; got {scores_N.dtype}.")
  if scores_N.shape[0] == 0:
    raise ValueError("scores_N is an empty proposal set: a budget needs at"
                     " least one proposal.")
  if floor > scores_N.shape[0]:
    raise ValueError(f"the budget floor {floor} is above the proposal count"
                     f" {scores_N.shape[0]}; lower k_min or pass more"
                     " proposals.")
  if not isinstance(scores_N, jax.core.Tracer):
    values = np.asarray(scores_N)
    if not np.all((values >= 0) & (values <= 1)):
      bad = values[~((values >= 0) & (values <= 1))]
      raise ValueError("scores_N must be confidences in [0, 1]; got"
                       f" {bad.size} outside (NaN included), e.g. {bad[0]}"
                       " (pass sigmoid probabilities, see confidences()).")


def soft_count(scores_N: jax.Array, threshold: float, count: str = "soft"
               ) -> jax.Array:
  r""":math:`\hat n = \sum_j s_j 1[s_j \ge \tau]` (``"soft"``) or :math:`\sum_j 1[s_j \ge \tau]` (``"hard"``).

  ``scores_N`` are ``(N,)`` confidences in [0, 1] (see :func:`check_scores`),
  ``threshold`` a confidence in [0, 1] and ``count`` one of ``COUNTS``. A
  traced NaN confidence makes the count NaN (it cannot be counted, and
  leaving it out would lower the count).

  Example:
    >>> import jax.numpy as jnp
    >>> s = jnp.array([0.9, 0.5, 0.1])
    >>> round(float(soft_count(s, 0.2)), 4), float(soft_count(s, 0.2, "hard"))
    (1.4, 2.0)
  """
  check_scores(scores_N)
  _check_threshold(threshold)
  _check_count(count)
  above_N = scores_N >= threshold
  if count == "hard":
    counted = jnp.sum(above_N.astype(scores_N.dtype))
  else:
    counted = jnp.sum(jnp.where(above_N, scores_N, 0))
  return jnp.where(jnp.any(jnp.isnan(scores_N)), jnp.nan, counted)


def budget_from_count(count: jax.Array, *, rate: float, margin: int,
                      k_min: int, k_max: int) -> jax.Array:
  r""":math:`\operatorname{clip}(\lceil \rho\, n \rceil + m, K_{\min}, K_{\max})` as int32.

  The rule of :func:`butr` on any count (any shape, one budget per entry);
  with the true object count it is the oracle budget. ``rate > 0`` finite,
  ``margin >= 0`` and ``1 <= k_min <= k_max`` (Python ints) are checked, and
  a concrete count must be finite and >= 0; a traced NaN or negative count
  gives ``NO_BUDGET`` (-1), not a clipped budget.

  Example:
    >>> int(budget_from_count(jnp.float32(200.0), rate=1.5, margin=50,
    ...                       k_min=100, k_max=900))
    350
  """
  check_real("rate", rate, low=0.0, low_open=True,
             why=" (queries per object)")
  check_int("margin", margin, 0)
  check_int("k_min", k_min, 1)
  check_int("k_max", k_max, k_min)
  count = jnp.asarray(count, jnp.float32)
  if not isinstance(count, jax.core.Tracer):
    values = np.asarray(count)
    if not np.all(np.isfinite(values) & (values >= 0)):
      bad = values[~(np.isfinite(values) & (values >= 0))]
      raise ValueError(f"count must be finite and >= 0 (objects per image);"
                       f" got {bad[0]}.")
  raw = jnp.ceil(rate * jnp.where(count >= 0, count, 0)) + margin
  budget = jnp.clip(raw, k_min, k_max).astype(jnp.int32)
  return jnp.where(count >= 0, budget, NO_BUDGET)


def _check_threshold(threshold: float) -> None:
  if isinstance(threshold, jax.core.Tracer):
    raise TypeError("threshold must be a concrete number (a Python float);"
                    " got a traced value.")
  if not 0.0 <= threshold <= 1.0:
    raise ValueError(f"threshold must be a confidence in [0, 1]; got"
                     f" {threshold}.")


def _check_count(count: str) -> None:
  if count not in COUNTS:
    raise ValueError(f"count must be one of {COUNTS}; got {count!r}.")


def butr(threshold: float = 0.2, rate: float = 1.5, margin: int = 50,
         k_min: int = 100, k_max: int = 900, count: str = "soft") -> Budgeter:
  r"""The BUTR budgeter (our reconstruction; module docstring).

  Args:
    threshold: :math:`\tau`, confidences below it do not count.
    rate: :math:`\rho \ge 1`, queries per counted object.
    margin: :math:`m \ge 0`, spare queries.
    k_min: the floor :math:`K_{\min} \ge 1`.
    k_max: the ceiling :math:`K_{\max} \ge K_{\min}` (1500 matches
      DQ-DETR's largest budget).
    count: ``"soft"`` (confidence-weighted) or ``"hard"`` counter.

  Returns:
    A :class:`Budgeter` (its budget is ``NO_BUDGET`` for a traced NaN
    confidence).

  Raises:
    ValueError / TypeError: for hyperparameters outside those ranges (a
      finite ``rate``).

  Example:
    >>> import jax.numpy as jnp
    >>> scores = jnp.concatenate([jnp.full(200, 0.9), jnp.full(800, 0.05)])
    >>> int(butr().budget(scores))  # ceil(1.5 * 180) + 50
    320
  """
  _check_threshold(threshold)
  _check_count(count)
  check_real("rate", rate, low=1.0, why=" (a conservative budget)")
  check_int("margin", margin, 0)
  check_int("k_min", k_min, 1)
  check_int("k_max", k_max, k_min)

  def budget(scores_N: jax.Array) -> jax.Array:
    check_scores(scores_N, k_min)
    scores_N = jax.lax.stop_gradient(scores_N)
    k = budget_from_count(soft_count(scores_N, threshold, count), rate=rate,
                          margin=margin, k_min=k_min, k_max=k_max)
    return jnp.minimum(k, scores_N.shape[0])

  return Budgeter(f"butr(rho={rate:g}, m={margin})", budget, k_min, k_max)


def fixed(k: int) -> Budgeter:
  """The same K for every image (DINO's two-stage selection uses 900).

  Example:
    >>> import jax.numpy as jnp
    >>> int(fixed(3).budget(jnp.zeros(10)))
    3
  """
  check_int("k", k, 1)

  def budget(scores_N: jax.Array) -> jax.Array:
    check_scores(scores_N, k)
    return jnp.int32(k)

  return Budgeter(f"fixed K={k}", budget, k, k)


def dq_detr(count_thresholds: tuple[int, ...] = (10, 100, 500),
            budgets: tuple[int, ...] = (300, 500, 900, 1500),
            threshold: float = 0.2, count: str = "soft") -> Budgeter:
  r"""DQ-DETR's counting buckets on our counter :math:`\hat n`.

  Image counts below ``count_thresholds[i]`` (and at or above the previous
  one) get ``budgets[i]``; counts at or above the last threshold get the
  last budget. Budgets above the proposal count are cut to it. Thresholds
  are finite counts >= 0, budgets ints >= 1, both non-decreasing; a traced
  NaN confidence gives ``NO_BUDGET``.

  Example:
    >>> import jax.numpy as jnp
    >>> scores = jnp.concatenate([jnp.full(50, 1.0), jnp.zeros(950)])
    >>> int(dq_detr().budget(scores))  # 10 <= 50 < 100
    500
  """
  _check_threshold(threshold)
  _check_count(count)
  for t in count_thresholds:
    if (isinstance(t, (bool, jax.core.Tracer))
        or not isinstance(t, (int, float, np.integer, np.floating))
        or not (np.isfinite(t) and t >= 0)):
      raise ValueError(f"count_thresholds must be finite counts >= 0; got"
                       f" {count_thresholds}.")
  if len(budgets) != len(count_thresholds) + 1:
    raise ValueError(f"budgets needs one entry more than count_thresholds;"
                     f" got {len(budgets)} and {len(count_thresholds)}.")
  if list(count_thresholds) != sorted(count_thresholds) or list(
      budgets) != sorted(budgets):
    raise ValueError(f"count_thresholds {count_thresholds} and budgets"
                     f" {budgets} must be non-decreasing (a monotone rule).")
  for b in budgets:
    check_int("budgets entry", b, 1)
  thresholds = jnp.asarray(count_thresholds, jnp.float32)
  table = jnp.asarray(budgets, jnp.int32)

  def budget(scores_N: jax.Array) -> jax.Array:
    check_scores(scores_N, budgets[0])
    n = soft_count(jax.lax.stop_gradient(scores_N), threshold, count)
    bucket = jnp.sum(n.astype(jnp.float32) >= thresholds)
    # A one-hot pick, not table[bucket]: a gather whose index is sharded
    # along a batch (vmap over sharded images) has no inferable Explicit
    # output sharding.
    picked = jnp.sum(jnp.where(jnp.arange(table.shape[0]) == bucket, table, 0))
    return jnp.where(jnp.isnan(n), NO_BUDGET,
                     jnp.minimum(picked, scores_N.shape[0]))

  return Budgeter("DQ-DETR buckets", budget, budgets[0], budgets[-1])


def share_batch_max(budgets_B: jax.Array) -> jax.Array:
  """Every image of a batch gets the batch's largest budget (DQ-DETR's rule).

  Budgets are >= 0 (refused otherwise when concrete); a traced batch with a
  ``NO_BUDGET`` (-1) entry gives every image ``NO_BUDGET``, so the flag is
  not hidden behind the other images' budgets.

  Example:
    >>> import jax.numpy as jnp
    >>> share_batch_max(jnp.array([300, 900, 500])).tolist()
    [900, 900, 900]
  """
  if budgets_B.ndim != 1 or not jnp.issubdtype(budgets_B.dtype, jnp.integer):
    raise ValueError("budgets_B must be a 1-D integer array (one budget per"
                     f" image); got {budgets_B.dtype} of shape"
                     f" {budgets_B.shape}.")
  if not budgets_B.shape[0]:
    raise ValueError("budgets_B is empty: a batch needs at least one image.")
  if not isinstance(budgets_B, jax.core.Tracer) and np.any(
      np.asarray(budgets_B) < 0):
    raise ValueError(f"budgets_B must be >= 0; got {np.asarray(budgets_B).min()}"
                     f" ({NO_BUDGET} is the budget of NaN confidences).")
  shared = jnp.where(jnp.any(budgets_B < 0), NO_BUDGET, jnp.max(budgets_B))
  shared_B = jnp.broadcast_to(shared, budgets_B.shape)
  return tree.reshard_like(shared_B, budgets_B)  # sharded like the batch


def top_k_queries(scores_N: jax.Array, budget: jax.Array, *, max_budget: int
                  ) -> QuerySelection:
  """The top-``budget`` proposals by confidence, as a static top-``max_budget`` plus a mask.

  Ties go to the lower index (as a stable descending sort). ``max_budget``
  is a static hard cap: a ``budget`` above it selects ``max_budget``.

  Args:
    scores_N: ``(N,)`` confidences.
    budget: int scalar >= 0, may be traced (one per image under ``vmap``);
      a concrete negative one is refused, a traced one (``NO_BUDGET``)
      selects nothing and is returned as it is.
    max_budget: Python int in [1, N], the padded size.

  Returns:
    A :class:`QuerySelection`.

  Example:
    >>> import jax.numpy as jnp
    >>> sel = top_k_queries(jnp.array([0.1, 0.9, 0.5, 0.7]), jnp.int32(2),
    ...                     max_budget=3)
    >>> sel.indices.tolist(), sel.valid.tolist()
    ([1, 3, 2], [True, True, False])
  """
  check_scores(scores_N)
  check_int("max_budget", max_budget, 1)
  if max_budget > scores_N.shape[0]:
    raise ValueError(f"max_budget {max_budget} is above the proposal count"
                     f" {scores_N.shape[0]}.")
  budget = jnp.asarray(budget)
  if budget.shape != () or not jnp.issubdtype(budget.dtype, jnp.integer):
    raise ValueError(f"budget must be an integer scalar; got {budget.dtype}"
                     f" of shape {budget.shape}.")
  if not isinstance(budget, jax.core.Tracer) and int(budget) < 0:
    raise ValueError(f"budget must be >= 0 (a number of queries); got"
                     f" {int(budget)} ({NO_BUDGET} is the budget of NaN"
                     " confidences).")
  # top_k needs its axis whole: proposals sharded along an Explicit axis are
  # gathered first.
  top_scores, indices = jax.lax.top_k(tree.gather_explicit(scores_N)[0],
                                      max_budget)
  valid = jnp.arange(max_budget) < budget
  return QuerySelection(indices, top_scores, valid,
                        jnp.minimum(budget, max_budget).astype(jnp.int32))


def select_queries(budgeter: Budgeter, scores_N: jax.Array) -> QuerySelection:
  """``budgeter``'s K(x) and the top-K(x) proposals, padded to its ceiling.

  The padded size is ``min(budgeter.ceiling, N)``, static, so this jits and
  vmaps over a batch of images with different budgets.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> scores_BxN = jax.random.uniform(jax.random.key(0), (4, 1024))
    >>> sel = jax.vmap(lambda s: select_queries(butr(), s))(scores_BxN)
    >>> sel.valid.shape, sel.budget.tolist() == sel.valid.sum(1).tolist()
    ((4, 900), True)
  """
  if not isinstance(budgeter, Budgeter):
    raise TypeError(f"budgeter must be a Budgeter (butr, fixed, dq_detr); got"
                    f" {type(budgeter).__name__}.")
  k = budgeter.budget(scores_N)
  return top_k_queries(scores_N, k,
                       max_budget=min(budgeter.ceiling, scores_N.shape[0]))
