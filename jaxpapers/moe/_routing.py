r"""Token-to-expert routing: standard top-k and EMO's document-pooled top-k.

Both routers take the logits of the *routed* experts (the shared expert, if
any, is always on and has no logit) and return a :class:`Routing`.

Standard top-k (OLMoE style): ``p = softmax(z)``, the k largest entries of
``p`` are the chosen experts and their probabilities the gates; gates are not
renormalised over the top k.

EMO (Wang et al., 2026; from the authors' code). Tokens of one document may
only choose among that document's *pool* of experts:

.. math::

   s_{d,e} = \sum_{t \in d} \mathrm{softmax}(z_t)_e, \qquad
   \mathrm{pool}_d = \text{the } P_d \text{ experts with the largest } s_{d,\cdot}

(ties to the lower index), then per token ``p_t = softmax(z_t`` masked to
``-inf`` outside ``pool_d)`` (the softmax is renormalised over the pool) and
the top k of ``p_t`` with un-renormalised gates. The pool uses every token of
the document, future ones included (training only). During training ``P_d``
is drawn uniformly per document (and, by default, per layer); at evaluation
the authors route per token (no pool) or with a fixed pool.

Documents are contiguous runs of equal ``segment_ids`` within a row (ids must
be non-decreasing, as :func:`jaxpapers.data.segment_ids` produces). The
authors' code opens a new document *at* each EOS; jaxpapers' segment ids let
the EOS close its document, which is what attention uses too.

Reconstruction: the JAX formulation (segment sums with
``jax.ops.segment_sum``, ranks by pairwise comparison) is ours; the math is
the authors'.

References:
  Wang et al., "EMO: Pretraining Mixture of Experts for Emergent
  Modularity", arXiv:2605.06663, 2026; code: github.com/allenai/EMO.
"""

import functools
import operator
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree

PoolSize = int | Sequence[int] | jax.Array


class Routing(NamedTuple):
  """Routing decisions of B x L tokens among E routed experts.

  Attributes:
    gates: ``(B, L, k)`` float32 gates of the chosen experts (probabilities
      ``p``; not renormalised over the top k).
    experts: ``(B, L, k)`` int32 indices of the chosen experts, by descending
      gate.
    probs: ``(B, L, E)`` routing probabilities ``p`` (renormalised over the
      pool for EMO; zero outside it).
    logits: ``(B, L, E)`` float32 routed logits with ``-inf`` outside the pool
      (the input of the z-loss).
    pool_mask: ``(B, L, E)`` bool, True for experts a token may choose.
  """

  gates: jax.Array
  experts: jax.Array
  probs: jax.Array
  logits: jax.Array
  pool_mask: jax.Array


def topk_route(logits_BxLxE: jax.Array, *, k: int) -> Routing:
  """Standard top-k routing: ``softmax`` over all experts, then the top ``k``.

  Args:
    logits_BxLxE: router logits of the routed experts (``-inf`` marks an
      expert that may not be chosen).
    k: experts per token.

  Returns:
    A :class:`Routing` (``pool_mask`` is all True).

  Example:
    >>> import jax.numpy as jnp
    >>> r = topk_route(jnp.log(jnp.array([[[0.1, 0.6, 0.3]]])), k=2)
    >>> r.experts.tolist(), [round(g, 3) for g in r.gates[0, 0].tolist()]
    ([[[1, 2]]], [0.6, 0.3])
  """
  _check_logits(logits_BxLxE)
  num_experts = logits_BxLxE.shape[-1]
  _check_k(k, num_experts, "the number of routed experts")
  logits = _gather_experts(logits_BxLxE.astype(jnp.float32))
  return _topk_of_masked(logits, k, jnp.ones(logits.shape, jnp.bool_))


def emo_route(logits_BxLxE: jax.Array, segment_ids_BxL: jax.Array, *,
              pool_size: PoolSize, k: int,
              rng: jax.Array | None = None) -> Routing:
  """EMO routing: top-k among each document's pool of experts.

  Args:
    logits_BxLxE: router logits of the E routed experts.
    segment_ids_BxL: document ids, non-decreasing along each row; each run of
      equal ids is one document.
    pool_size: the pool size ``P`` of every document: an int; a pair
      ``(low, high)`` to draw ``P ~ U{low..high}`` per document with ``rng``
      (see :func:`draw_pool_sizes`); or an int array ``(B, L)`` whose entry
      ``[b, d]`` is the pool size of the d-th document of row b. Needs
      ``k <= P <= E``.
    k: experts per token.
    rng: key for drawing pool sizes from a range.

  Returns:
    A :class:`Routing`.

  Raises:
    ValueError: for ``pool_size > E``, ``k > pool_size``, mismatched shapes,
      or (when the ids are concrete) segment ids that decrease along a row.
      Under ``jit`` the ids are not known at trace time: a row with
      decreasing ids (or a traced pool size outside ``[k, E]``) gets NaN
      logits, gates and outputs instead of a wrong answer.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> logits = jax.random.normal(jax.random.key(0), (1, 6, 8))
    >>> segments = jnp.array([[0, 0, 0, 1, 1, 1]])
    >>> r = emo_route(logits, segments, pool_size=3, k=2)
    >>> r.pool_mask.sum(-1).tolist()  # every token may use 3 experts
    [[3, 3, 3, 3, 3, 3]]
    >>> bool((r.pool_mask[0, 0] == r.pool_mask[0, 2]).all())  # same document
    True
  """
  _check_logits(logits_BxLxE)
  batch, length, num_experts = logits_BxLxE.shape
  if segment_ids_BxL.shape != (batch, length):
    raise ValueError(
        f"segment_ids must have shape (B, L) = {(batch, length)} to match the"
        f" logits, got {segment_ids_BxL.shape}."
    )
  _check_k(k, num_experts, "the number of routed experts")
  valid_B = check_segment_ids(segment_ids_BxL)
  pool_BxL, pool_valid_B = _pool_sizes(pool_size, k, num_experts,
                                       (batch, length), rng)
  valid_B = valid_B & pool_valid_B
  logits = _gather_experts(logits_BxLxE.astype(jnp.float32))
  logits = jnp.where(valid_B[:, None, None], logits, jnp.nan)
  document_BxL = document_index(segment_ids_BxL)
  probs = jax.nn.softmax(jax.lax.stop_gradient(logits), axis=-1)
  pool_mask = _pool_mask(probs, document_BxL, pool_BxL)
  return _topk_of_masked(jnp.where(pool_mask, logits, -jnp.inf), k, pool_mask)


def document_index(segment_ids_BxL: jax.Array) -> jax.Array:
  """Index ``0, 1, ...`` of each token's document within its row (runs of equal ids).

  Raises ``ValueError``/``TypeError`` unless the ids are integers ``(B, L)``.
  """
  _check_segment_shape(segment_ids_BxL)
  # Neighbour differences along a sharded row have no sharding of their own
  # on Explicit axes: work on a replicated copy, then give the ids' back.
  segment_ids_BxL, restore = tree.gather_explicit(segment_ids_BxL)
  starts = (segment_ids_BxL[:, 1:] != segment_ids_BxL[:, :-1]).astype(jnp.int32)
  # zeros_like keeps the ids' sharding (Explicit meshes concatenate only alike).
  return restore(jnp.concatenate(
      [jnp.zeros_like(segment_ids_BxL[:, :1], dtype=jnp.int32),
       jnp.cumsum(starts, axis=1, dtype=jnp.int32)], axis=1))


def check_segment_ids(segment_ids_BxL: jax.Array) -> jax.Array:
  """Whether each row's ids are non-decreasing: ``(B,)`` bool.

  Raises ValueError for ids not of shape ``(B, L)`` and, when the ids are
  concrete, for a row that decreases; TypeError for non-integer ids.
  """
  _check_segment_shape(segment_ids_BxL)
  replicated = tree.gather_explicit(segment_ids_BxL)[0]  # see document_index
  sorted_B = jnp.all(replicated[:, 1:] >= replicated[:, :-1], axis=1)
  concrete = _concrete(sorted_B)
  if concrete is not None and not concrete.all():
    raise ValueError(
        "segment_ids must be non-decreasing along each row (documents are"
        f" contiguous); rows {np.flatnonzero(~concrete).tolist()} are not."
    )
  return sorted_B


def _check_segment_shape(segment_ids_BxL):
  if jnp.ndim(segment_ids_BxL) != 2:
    raise ValueError(
        f"segment_ids must have shape (B, L), got {jnp.shape(segment_ids_BxL)}."
    )
  dtype = jnp.result_type(segment_ids_BxL)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"segment_ids must hold integer ids, got dtype {dtype}.")


def draw_pool_sizes(rng: jax.Array, shape: tuple[int, ...],
                    pool_range: Sequence[int]) -> jax.Array:
  """Pool sizes drawn uniformly from ``low..high`` (both included): int32 ``shape``.

  Raises:
    ValueError: unless ``pool_range`` is a pair of ints with ``1 <= low <=
      high``.
  """
  try:
    low, high = (operator.index(p) for p in pool_range)
  except (TypeError, ValueError):
    raise ValueError(
        f"pool_range must be a pair (low, high) of ints, got {pool_range!r}."
    ) from None
  if not 1 <= low <= high:
    raise ValueError(
        f"pool_range must satisfy 1 <= low <= high, got {pool_range!r}.")
  return jax.random.randint(rng, shape, low, high + 1, dtype=jnp.int32)


def check_pool_size(pool_size: int | Sequence[int], k: int,
                    num_experts: int) -> tuple[int, int]:
  """Validates a static pool size (int or ``(low, high)``); returns ``(low, high)``."""
  if isinstance(pool_size, (int, np.integer)):
    low = high = operator.index(pool_size)
  else:
    try:
      low, high = (operator.index(p) for p in pool_size)
    except (TypeError, ValueError):
      raise ValueError(
          "pool_size must be an int, a pair (low, high) of ints or an int"
          f" array, got {pool_size!r}."
      ) from None
    if low > high:
      raise ValueError(f"pool_size range ({low}, {high}) has low > high.")
  if high > num_experts:
    raise ValueError(
        f"pool_size={pool_size!r} exceeds the number of routed experts"
        f" {num_experts}."
    )
  if k > low:
    raise ValueError(
        f"k={k} exceeds pool_size={pool_size!r}: a token must be able to"
        " choose k experts from its pool."
    )
  return low, high


def _pool_sizes(pool_size, k, num_experts, shape, rng):
  """The ``(B, L)`` pool-size array and a ``(B,)`` validity mask."""
  if isinstance(pool_size, (jax.Array, np.ndarray)):
    if pool_size.shape != shape:
      raise ValueError(
          f"pool_size as an array must have shape (B, L) = {shape} (one size"
          f" per document index), got {pool_size.shape}."
      )
    if not jnp.issubdtype(pool_size.dtype, jnp.integer):
      raise ValueError(f"pool_size must hold integers, got {pool_size.dtype}.")
    in_range = (pool_size >= k) & (pool_size <= num_experts)
    concrete = _concrete(in_range)
    if concrete is not None and not concrete.all():
      raise ValueError(
          f"pool_size entries must lie in [k, E] = [{k}, {num_experts}]; got"
          f" values from {int(np.min(pool_size))} to {int(np.max(pool_size))}."
      )
    return pool_size.astype(jnp.int32), jnp.all(in_range, axis=1)
  low, high = check_pool_size(pool_size, k, num_experts)
  valid = jnp.ones(shape[:1], jnp.bool_)
  if low == high:
    return jnp.full(shape, low, jnp.int32), valid
  if rng is None:
    raise ValueError(
        f"rng is required to draw pool sizes from the range {pool_size!r}."
    )
  return draw_pool_sizes(rng, shape, (low, high)), valid


def _pool_mask(probs_BxLxE, document_BxL, pool_BxD):
  """Experts in the pool of each token's document: ``(B, L, E)`` bool."""
  _, length, num_experts = probs_BxLxE.shape
  spec = tree.explicit_spec(probs_BxLxE)
  if spec is not None:
    # Explicit axes scatter the probs only at ids sharded like their tokens.
    document_BxL = jax.sharding.reshard(document_BxL, jax.P(*spec[:-1]))
  # Row by row (vmap) rather than one segment sum over B * L flat documents:
  # the same work, and batched scatters keep a sharded batch axis sharded.
  scores_BxDxE = jax.vmap(functools.partial(
      jax.ops.segment_sum, num_segments=length, indices_are_sorted=True))(
          probs_BxLxE, document_BxL)
  # Rank of expert e: experts scoring higher, plus equal ones of lower index.
  # Pairwise comparisons (fused into one reduction) beat a sort of many short
  # rows several times over on CPU.
  other_BxDxExE = scores_BxDxE[..., None, :]
  this_BxDxExE = scores_BxDxE[..., :, None]
  index = jnp.arange(num_experts)
  lower_index_ExE = index[None, :] < index[:, None]
  rank_BxDxE = jnp.sum(
      (other_BxDxExE > this_BxDxExE)
      | ((other_BxDxExE == this_BxDxExE) & lower_index_ExE[None, None]),
      axis=-1, dtype=jnp.int32)
  keep_BxDxE = rank_BxDxE < pool_BxD[..., None]
  return jnp.take_along_axis(keep_BxDxE, document_BxL[..., None], axis=1)


def _gather_experts(logits_BxLxE):
  """``logits_BxLxE`` with an expert axis sharded along Explicit axes gathered.

  Each token ranks all its experts (top-k, pool ranks), and Explicit axes
  refuse a top-k along a sharded axis; the token axes keep their sharding.
  """
  spec = tree.explicit_spec(logits_BxLxE)
  if spec is None or spec[-1] is None:
    return logits_BxLxE
  return jax.sharding.reshard(logits_BxLxE, jax.P(*spec[:-1], None))


def _topk_of_masked(masked_logits, k, pool_mask):
  probs = jax.nn.softmax(masked_logits, axis=-1)
  gates, experts = jax.lax.top_k(probs, k)
  return Routing(gates, experts.astype(jnp.int32), probs, masked_logits,
                 pool_mask)


def _check_logits(logits):
  if logits.ndim != 3:
    raise ValueError(f"logits must have shape (B, L, E), got {logits.shape}.")
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise ValueError(f"logits must be floating point, got {logits.dtype}.")


def _check_k(k, num_experts, what):
  if (not isinstance(k, (int, np.integer)) or isinstance(k, bool)
      or not 1 <= k <= num_experts):
    raise ValueError(f"k must lie in [1, {what} = {num_experts}], got {k}.")


def _concrete(x):
  """``x`` as numpy when it is known at trace time, else None."""
  try:
    return np.asarray(x)
  except (jax.errors.ConcretizationTypeError,
          jax.errors.TracerArrayConversionError):
    return None
