r"""EMC: Efficient Memory Crystallization for continual test-time graph adaptation.

**This module is a reconstruction.** The EMC paper's text and code were not
available. Its abstract fixes the properties (training-free, test-time; each
domain distilled into a compact memory by the closed-form solution of a
memory-oriented distribution-matching objective; state-evolving memories
across domains); what the memory is, the closed form, the state evolution and
how the memory changes predictions are our design (``docs/emc.md``), not
the paper's equations.

A frozen source GCN gives embeddings ``H = h(A, X)`` and logits ``g(H)``. The
state holds ``m`` memory slots ``M`` in embedding space, each with a class,
the prior ``M~`` used for the latest domain, and the previous memory.

* :func:`init` -- per class, k-means (k-means++ seeding, 10 Lloyd steps) on
  the labelled source embeddings; ``m = max(C, ceil(0.05 n_0))`` slots split
  across classes in proportion to class frequency (at least one each).
* :func:`update` -- for a target domain: pseudo-labels from
  ``predict(S_{t-1}, G_t)`` (confidence >= 0.9, or a class's top 20% when it
  has fewer confident nodes than slots); each confident node joins the
  nearest same-class slot of the prior ``M~_t = evolve(S_{t-1})``; then the
  memory is the minimiser of

  .. math:: J(M) = \frac1{n_C}\|H_C - P^\top M\|_F^2
            + \lambda \sum_j \frac{|C_j|}{n_C} \|M_j - \tilde M_j\|^2,
            \qquad M_j = \frac{\bar H_{C_j} + \lambda \tilde M_j}{1 + \lambda},

  (slots without nodes keep ``M~_j``). No gradient is taken.
* ``evolve``: ``"ema"`` ``M~_{t+1} = (1-beta) M~_t + beta M_t``; ``"drift"``
  ``M_t + rho (M_t - M_{t-1})``; ``"transition"`` ``T M_t`` with
  ``T = M_t M_{t-1}^T (M_{t-1} M_{t-1}^T + gamma I)^{-1}``; ``"none"`` ``M_t``.
* :func:`predict` -- ``"proto"`` mixes the classifier with cosine prototypes,
  ``log p = normalize((1-alpha) log softmax g(H) + alpha log softmax s)``,
  ``s_c = max_{j: y_j = c} cos(H, M_j) / tau``; ``"coral"`` aligns the target
  embedding moments to the source ones before ``g``; ``"bn"`` is ``"proto"``
  on an encoder whose BatchNorm statistics are re-estimated on the target
  graph (re-estimating them on "target union memory" is impossible because
  the memory lives after the last BatchNorm; this part is our choice).
* ``adapt="im_replay"`` (not training-free): one Adam step on the classifier
  ``g`` with GCAL's information-maximisation loss on ``H_t`` plus 0.1 x the
  cross-entropy of ``g`` on the memory slots.

Options are fixed at :func:`init` and travel in the state as static data, so
``update(state, graph)`` and ``predict(state, graph)`` are jitted on padded
graphs and specialise on them.

Example:
  >>> import jax, numpy as np
  >>> from jaxpapers import graph
  >>> seq = graph.csbm_sequence(num_domains=2, num_nodes=60, seed=0)
  >>> source, target = seq.domains
  >>> model = graph.init_gcn(jax.random.key(0), 32, seq.num_classes, hidden=16)
  >>> state = init(source.graph, source.labels, model=model,
  ...              key=jax.random.key(1), labelled=source.train_mask)
  >>> state.memory.shape  # max(C, ceil(0.05 * 60)) = 4 slots of width 16
  (4, 16)
  >>> state = update(state, target.graph)
  >>> predict(state, target.graph).shape
  (60, 4)

References:
  EMC (abstract; paper text unavailable). GCAL, "Adapting Graph Models to
  Evolving Domain Shifts" (ICML 2025), https://arxiv.org/abs/2505.16860 ,
  code https://github.com/joe817/GCAL .
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers import tree
from jaxpapers.graph._gcn import classify
from jaxpapers.graph._gcn import embed
from jaxpapers.graph._gcn import embed_with_graph_stats
from jaxpapers.graph._gcn import GCN
from jaxpapers.graph._graphs import ceil_fraction
from jaxpapers.graph._graphs import check_finite_features
from jaxpapers.graph._graphs import check_graph
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import masked_mean
from jaxpapers.graph._graphs import node_mask
from jaxpapers.graph._graphs import validated
from jaxpapers.graph._tta import adam_l2
from jaxpapers.graph._tta import Adapter
from jaxpapers.graph._tta import information_maximization

EVOLVE = ("ema", "drift", "transition", "none")
PREDICT = ("proto", "coral", "bn")
ADAPT = ("none", "im_replay")
COVARIANCE_SHRINKAGE = 1e-3


@dataclasses.dataclass(frozen=True)
class EMCOptions:
  """Static options of EMC (our reconstruction's defaults, ``docs/emc.md``)."""

  evolve: str = "ema"
  predict: str = "proto"
  adapt: str = "none"
  lam: float = 0.1  # ridge toward the prior in the closed form
  beta: float = 0.5  # evolve="ema"
  rho: float = 0.5  # evolve="drift"
  gamma: float = 1e-2  # evolve="transition"
  alpha: float = 0.5  # weight of the prototype scores in predict
  tau: float = 0.1  # cosine temperature
  confidence: float = 0.9
  fallback_fraction: float = 0.2
  refine_passes: int = 0
  im_learning_rate: float = 1e-2
  im_weight_decay: float = 1e-4
  im_marginal_weight: float = 0.1
  replay_weight: float = 0.1

  def __post_init__(self):
    for name, allowed in (("evolve", EVOLVE), ("predict", PREDICT),
                          ("adapt", ADAPT)):
      if getattr(self, name) not in allowed:
        raise ValueError(
            f"{name} must be one of {allowed}; got {getattr(self, name)!r}."
        )
    check_real("lam", self.lam, low=0.0)
    check_real("tau", self.tau, low=0.0, low_open=True)
    check_real("rho", self.rho, low=0.0)
    # gamma = 0 is allowed: the transition solve is then singular (NaN) only
    # when the previous memory's slots are linearly dependent.
    check_real("gamma", self.gamma, low=0.0)
    for name in ("alpha", "confidence", "beta"):  # weights, a probability
      check_real(name, getattr(self, name), low=0.0, high=1.0)
    check_real("fallback_fraction", self.fallback_fraction, low=0.0,
                high=1.0, low_open=True)
    check_int("refine_passes", self.refine_passes, 0)
    for name in ("im_learning_rate", "im_weight_decay", "im_marginal_weight",
                 "replay_weight"):
      check_real(name, getattr(self, name), low=0.0)


jax.tree_util.register_static(EMCOptions)


class EMCState(NamedTuple):
  memory: jax.Array  # M (m, d)
  prior: jax.Array  # M~ used for the latest domain (m, d)
  previous_memory: jax.Array  # M_{t-1} (m, d)
  slot_classes: jax.Array  # Y_M (m,) int32, sorted
  source_mean: jax.Array  # mu_src (d,)
  source_cov_sqrt: jax.Array  # C_src^{1/2} (d, d), shrunk
  model: GCN  # frozen encoder; the head changes only with adapt="im_replay"
  options: EMCOptions  # static


def slot_budget(class_counts: np.ndarray, num_nodes: int,
                memory_ratio: float) -> np.ndarray:
  """Slots per class: ``m = max(C, ceil(ratio n))`` by largest remainders, >= 1 each.

  Never more slots than labelled nodes of the class.

  Example:
    >>> slot_budget(np.array([45, 35, 20]), 140, 0.05).tolist()  # 7 slots
    [3, 3, 1]

  Raises:
    ValueError: ``class_counts`` not a non-empty 1-D array of integers
      ``>= 1`` (a class without nodes gets no slot), ``num_nodes`` not an int
      ``>= 0`` or ``memory_ratio`` negative or not finite.
  """
  counts = np.asarray(class_counts)
  if (counts.ndim != 1 or counts.size == 0
      or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 1)):
    raise ValueError(
        "class_counts must be a non-empty 1-D array of integer counts >= 1;"
        f" got {counts.tolist()!r}.")
  counts = counts.astype(np.int64)
  check_int("num_nodes", num_nodes, 0)
  check_real("memory_ratio", memory_ratio, low=0.0)
  num_classes = counts.size
  total = max(num_classes, ceil_fraction(memory_ratio, num_nodes))
  share = total * counts / counts.sum()
  slots = np.maximum(np.floor(share).astype(np.int64), 1)
  while slots.sum() > total:  # the floor of 1 overshot: trim the most served
    slots[np.argmax(np.where(slots > 1, slots - share, -np.inf))] -= 1
  while slots.sum() < total:  # largest remainders first
    slots[np.argmax(share - slots)] += 1
  return np.minimum(slots, counts)


def init(source_graph: GraphsTuple, labels, *, model: GCN, key: jax.Array,
         labelled=None, memory_ratio: float = 0.05,
         kmeans_iterations: int = 10, **options) -> EMCState:
  """The source memory ``S_0``: per-class k-means centres of the labelled source embeddings.

  Runs once per source, on the host side: the slot budget depends on the
  (concrete) label counts; the embedding and k-means are jitted.

  Args:
    source_graph: the source graph (padded or not).
    labels: ``(N,)`` int classes (ignored where ``labelled`` is False).
    model: the frozen source :class:`~jaxpapers.graph.GCN`.
    key: PRNG key of the k-means++ seeding.
    labelled: ``(N,)`` bool, the labelled (training) nodes; default all real
      nodes.
    memory_ratio: slots per source node (GCAL's 5%).
    kmeans_iterations: Lloyd iterations.
    **options: fields of :class:`EMCOptions` (``evolve``, ``predict``, ...).

  Returns:
    The initial :class:`EMCState` (``M = M~ = M_prev``).
  """
  opts = EMCOptions(**options)
  check_real("memory_ratio", memory_ratio, low=0.0)
  check_int("kmeans_iterations", kmeans_iterations, 0)
  check_graph(source_graph, "source_graph", feature_width=model.feature_width)
  check_finite_features(source_graph, "source_graph")
  real = np.asarray(node_mask(source_graph))
  labels = np.asarray(labels)
  if labels.shape != real.shape:
    raise ValueError(
        f"labels must have shape {real.shape} (one per node); got {labels.shape}."
    )
  if not np.issubdtype(labels.dtype, np.integer):
    raise TypeError(
        f"labels must be integer classes; got dtype {labels.dtype}.")
  if labelled is not None and np.shape(labelled) != real.shape:
    raise ValueError(
        f"labelled must have shape {real.shape} (one per node); got"
        f" {np.shape(labelled)}.")
  labelled = real if labelled is None else np.logical_and(np.asarray(labelled), real)
  if not labelled.any():
    raise ValueError(
        "labels: no labelled source node (labelled selects no real node of"
        " source_graph); EMC needs labelled source nodes to build its memory."
    )
  num_classes = model.num_classes
  known = labels[labelled]
  if known.min() < 0 or known.max() >= num_classes:
    raise ValueError(
        f"labels of labelled nodes must lie in [0, {num_classes}); got range"
        f" [{known.min()}, {known.max()}]."
    )
  counts = np.bincount(known, minlength=num_classes)
  if (counts == 0).any():
    raise ValueError(
        f"labels: classes {np.flatnonzero(counts == 0).tolist()} have no"
        " labelled source node; every class needs at least one slot."
    )
  slots = slot_budget(counts, int(real.sum()), memory_ratio)
  slot_classes = np.repeat(np.arange(num_classes), slots).astype(np.int32)
  memory, mean, cov_sqrt = _init_memory(
      model, source_graph, jnp.asarray(labels, jnp.int32), jnp.asarray(labelled),
      jnp.asarray(slot_classes), key, iterations=kmeans_iterations)
  return EMCState(memory, memory, memory, jnp.asarray(slot_classes), mean,
                  cov_sqrt, model, opts)


def _pairwise_spec(a_AxD, b_BxD):
  """``out_sharding`` of ``a @ b.T`` on Explicit axes: rows of a, rows of b.

  A contraction over a width sharded along an Explicit axis needs it; b's
  rows are gathered where they share a mesh axis with a's. None without
  Explicit axes.
  """
  a_spec, b_spec = tree.explicit_spec(a_AxD), tree.explicit_spec(b_BxD)
  if a_spec is None and b_spec is None:
    return None
  rows = None if a_spec is None else a_spec[0]
  columns = None if b_spec is None else b_spec[0]
  if set(tree.spec_axes(columns)) & set(tree.spec_axes(rows)):
    columns = None
  return jax.P(rows, columns)


def _squared_distances(x_NxD, c_MxD):
  cross_NxM = jnp.matmul(x_NxD, c_MxD.T,
                         out_sharding=_pairwise_spec(x_NxD, c_MxD))
  return (jnp.sum(x_NxD**2, -1)[:, None] + jnp.sum(c_MxD**2, -1)[None, :]
          - 2.0 * cross_NxM)


@functools.partial(jax.jit, static_argnames="iterations")
def _init_memory(model, graph, labels, labelled, slot_classes, key, *,
                 iterations):
  h = embed(model, graph)
  num_slots = slot_classes.shape[0]
  first_of_class = jnp.concatenate(
      [jnp.ones((1,), bool), slot_classes[1:] != slot_classes[:-1]])

  def seed_slot(j, carry):  # k-means++ within the slot's class
    centres, min_d2 = carry
    candidates = jnp.logical_and(labelled, labels == slot_classes[j])
    weights = jnp.where(first_of_class[j], 1.0, min_d2)
    logits = jnp.where(candidates, jnp.log(jnp.maximum(weights, 1e-30)),
                       -jnp.inf)
    centre = h[jax.random.categorical(jax.random.fold_in(key, j), logits)]
    d2 = jnp.sum((h - centre[None, :]) ** 2, -1)
    min_d2 = jnp.where(first_of_class[j], d2, jnp.minimum(min_d2, d2))
    return centres.at[j].set(centre), min_d2

  centres, _ = jax.lax.fori_loop(
      0, num_slots, seed_slot,
      (jnp.zeros((num_slots, h.shape[1]), h.dtype),
       jnp.zeros((h.shape[0],), h.dtype)))

  def lloyd(_, centres):
    slot_index = _nearest_slot(h, labels, centres, slot_classes)
    return crystallize(h, slot_index, labelled, centres, 0.0)

  centres = jax.lax.fori_loop(0, iterations, lloyd, centres)
  real = node_mask(graph)
  mean = masked_mean(h, real)
  cov = _shrunk_covariance(h, real, mean)
  return centres, mean, _sqrtm(cov)


def _nearest_slot(h_NxD, classes_N, centres_MxD, slot_classes_M):
  """Index of the nearest slot of each node's class."""
  d2 = _squared_distances(h_NxD, centres_MxD)
  allowed = classes_N[:, None] == slot_classes_M[None, :]
  return jnp.argmin(jnp.where(allowed, d2, jnp.inf), axis=1).astype(jnp.int32)


def crystallize(h_NxD: jax.Array, slot_index_N: jax.Array,
                selected_N: jax.Array, prior_MxD: jax.Array,
                lam: float | jax.Array) -> jax.Array:
  """Closed-form minimiser of :func:`memory_objective`.

  ``M_j = (mean of the selected nodes assigned to j + lam M~_j) / (1 + lam)``;
  slots that receive no node keep ``M~_j``. With ``lam = 0`` this is one
  Lloyd (k-means) centre update.

  Args:
    h_NxD: node embeddings.
    slot_index_N: the slot of every node (the one-hot columns of ``P``).
    selected_N: bool, nodes that enter the objective (the confident set).
    prior_MxD: the prior ``M~``.
    lam: ridge weight toward the prior.

  Returns:
    The memory ``M`` (m, d).

  Raises:
    ValueError: shapes other than ``h_NxD (N, d)``, ``slot_index_N (N,)``,
      ``selected_N (N,)`` and ``prior_MxD (m, d)``, a concrete slot index
      of a selected node outside ``[0, m)`` or a concrete ``lam`` negative
      or not finite. Traced slot indices out of range make the memory NaN
      (they would otherwise drop out).
    TypeError: non-integer slot indices.
  """
  _check_assignment(h_NxD, slot_index_N, selected_N, prior_MxD, lam)
  sharded_like_MxD = prior_MxD
  # Explicit axes cannot sum sharded rows onto slots: the inputs are
  # gathered, and the memory goes back to the prior's sharding.
  (h_NxD, slot_index_N, selected_N, prior_MxD), _ = tree.gather_explicit(
      (h_NxD, slot_index_N, selected_N, prior_MxD))
  num_slots = prior_MxD.shape[0]
  weights = selected_N.astype(h_NxD.dtype)
  counts = jax.ops.segment_sum(weights, slot_index_N, num_slots)
  sums = jax.ops.segment_sum(weights[:, None] * h_NxD, slot_index_N, num_slots)
  means = sums / jnp.maximum(counts, 1.0)[:, None]
  solved = (means + lam * prior_MxD) / (1.0 + lam)
  memory = jnp.where((counts > 0)[:, None], solved, prior_MxD)
  memory = jnp.where(_slots_in_range(slot_index_N, selected_N, num_slots),
                     memory, jnp.nan)
  return tree.reshard_like(memory, sharded_like_MxD)


def _slots_in_range(slot_index_N, selected_N, num_slots):
  """Whether every selected node's slot index lies in ``[0, num_slots)``."""
  inside = (slot_index_N >= 0) & (slot_index_N < num_slots)
  return jnp.all(jnp.where(selected_N, inside, True))


def _check_assignment(h_NxD, slot_index_N, selected_N, prior_MxD, lam):
  """Shapes, dtypes and concrete values of a node-to-slot assignment.

  ``h_NxD`` (N, d), ``slot_index_N`` (N,) int, ``selected_N`` (N,),
  ``prior_MxD`` (m, d); selected nodes' slots in ``[0, m)`` and ``lam >= 0``
  when concrete.
  """
  shapes = [np.shape(x) for x in (h_NxD, slot_index_N, selected_N, prior_MxD)]
  if (len(shapes[0]) != 2 or len(shapes[3]) != 2
      or shapes[1] != shapes[0][:1] or shapes[2] != shapes[0][:1]
      or shapes[3][1] != shapes[0][1]):
    raise ValueError(
        "need h_NxD (N, d), slot_index_N (N,), selected_N (N,) and prior_MxD"
        f" (m, d); got shapes {shapes}.")
  if not jnp.issubdtype(jnp.result_type(slot_index_N), jnp.integer):
    raise TypeError("slot_index_N must be integer slot ids; got dtype"
                    f" {jnp.result_type(slot_index_N)}.")
  if not any(isinstance(x, jax.core.Tracer)
             for x in (slot_index_N, selected_N)):
    index, chosen = np.asarray(slot_index_N), np.asarray(selected_N, bool)
    num_slots = shapes[3][0]
    outside = chosen & ((index < 0) | (index >= num_slots))
    if outside.any():
      raise ValueError(
          f"slot_index_N of selected nodes must lie in [0, {num_slots}) (one"
          f" per slot of prior_MxD); got {int(index[outside][0])}.")
  if not isinstance(lam, jax.core.Tracer):
    check_real("lam", lam, low=0.0)


def memory_objective(memory_MxD: jax.Array, h_NxD: jax.Array,
                     slot_index_N: jax.Array, selected_N: jax.Array,
                     prior_MxD: jax.Array, lam: float | jax.Array) -> jax.Array:
  """``J(M) = |H_C - P^T M|^2 / n_C + lam sum_j (|C_j| / n_C) |M_j - M~_j|^2``.

  Checks its inputs as :func:`crystallize` does (``memory_MxD`` has the
  prior's shape); traced slot indices out of range give NaN.
  """
  _check_assignment(h_NxD, slot_index_N, selected_N, prior_MxD, lam)
  if np.shape(memory_MxD) != np.shape(prior_MxD):
    raise ValueError(
        f"memory_MxD must have prior_MxD's shape {np.shape(prior_MxD)}; got"
        f" {np.shape(memory_MxD)}.")
  # Explicit axes cannot gather slots at sharded node indices nor sum
  # sharded rows onto slots: the inputs are gathered.
  (memory_MxD, h_NxD, slot_index_N, selected_N, prior_MxD), _ = (
      tree.gather_explicit((memory_MxD, h_NxD, slot_index_N, selected_N,
                            prior_MxD)))
  weights = selected_N.astype(h_NxD.dtype)
  num_selected = jnp.maximum(jnp.sum(weights), 1.0)
  residual = h_NxD - memory_MxD[slot_index_N]
  fit = jnp.sum(weights * jnp.sum(residual**2, -1)) / num_selected
  counts = jax.ops.segment_sum(weights, slot_index_N, memory_MxD.shape[0])
  ridge = jnp.sum(counts / num_selected
                  * jnp.sum((memory_MxD - prior_MxD) ** 2, -1))
  return jnp.where(
      _slots_in_range(slot_index_N, selected_N, memory_MxD.shape[0]),
      fit + lam * ridge, jnp.nan)


def evolve_prior(state: EMCState) -> jax.Array:
  """``M~_{t+1}`` from the state after domain t (the ``evolve`` option)."""
  opts = state.options
  memory, previous = state.memory, state.previous_memory
  if opts.evolve == "ema":
    return (1.0 - opts.beta) * state.prior + opts.beta * memory
  if opts.evolve == "drift":
    return memory + opts.rho * (memory - previous)
  if opts.evolve == "transition":
    # Slot-by-slot products of slots sharded along an Explicit axis have no
    # output sharding: the few slots are gathered, the prior resharded back.
    (memory, previous), _ = tree.gather_explicit((memory, previous))
    gram = previous @ previous.T + opts.gamma * jnp.eye(previous.shape[0])
    # T = M P^T (P P^T + gamma I)^-1, and gram is symmetric.
    transition = jnp.linalg.solve(gram, previous @ memory.T).T
    return tree.reshard_like(transition @ memory, state.memory)
  return memory


def _embed(state: EMCState, graph: GraphsTuple) -> jax.Array:
  if state.options.predict == "bn":
    return embed_with_graph_stats(state.model.params, graph)[0]
  return embed(state.model, graph)


def _sqrtm(sym_DxD, inverse=False):
  eigvals, eigvecs = jnp.linalg.eigh(sym_DxD)
  eigvals = jnp.maximum(eigvals, 1e-12)
  scale = jax.lax.rsqrt(eigvals) if inverse else jnp.sqrt(eigvals)
  return (eigvecs * scale[None, :]) @ eigvecs.T


def _shrunk_covariance(h_NxD, mask_N, mean_D):
  centred = h_NxD - mean_D[None, :]
  cov = (centred * mask_N.astype(h_NxD.dtype)[:, None]).T @ centred
  cov = cov / jnp.maximum(jnp.sum(mask_N.astype(h_NxD.dtype)), 1.0)
  dim = cov.shape[0]
  return cov + COVARIANCE_SHRINKAGE * jnp.trace(cov) / dim * jnp.eye(dim)


def prototype_scores(h_NxD: jax.Array, memory_MxD: jax.Array,
                     slot_classes_M: jax.Array, num_classes: int,
                     tau: float) -> jax.Array:
  """``s_ic = max_{j: y_j = c} cos(H_i, M_j) / tau``: ``(N, C)``.

  Raises:
    ValueError: shapes that disagree, or concrete values out of range:
      ``slot_classes_M`` outside ``[0, num_classes)``, ``tau`` not finite
      and > 0. A class without slots (or traced out-of-range classes) scores
      ``-inf``.
  """
  shapes = [np.shape(x) for x in (h_NxD, memory_MxD, slot_classes_M)]
  if (len(shapes[0]) != 2 or len(shapes[1]) != 2
      or shapes[1][1] != shapes[0][1] or shapes[2] != shapes[1][:1]):
    raise ValueError(
        "need h_NxD (N, d), memory_MxD (m, d) and slot_classes_M (m,); got"
        f" shapes {shapes}.")
  check_int("num_classes", num_classes, 1)
  if not isinstance(slot_classes_M, jax.core.Tracer):
    classes = np.asarray(slot_classes_M)
    if not np.issubdtype(classes.dtype, np.integer) or np.any(
        (classes < 0) | (classes >= num_classes)):
      raise ValueError(
          f"slot_classes_M must be integer classes in [0, {num_classes});"
          f" got {classes.tolist()}.")
  if not isinstance(tau, jax.core.Tracer):
    check_real("tau", tau, low=0.0, low_open=True)
  h = h_NxD * jax.lax.rsqrt(jnp.sum(h_NxD**2, -1, keepdims=True) + 1e-12)
  m = memory_MxD * jax.lax.rsqrt(
      jnp.sum(memory_MxD**2, -1, keepdims=True) + 1e-12)
  cosine_MxN = jnp.matmul(m, h.T, out_sharding=_pairwise_spec(m, h))
  # segment_max cannot scatter columns, or at slots, sharded along an
  # Explicit axis.
  (cosine_MxN, slot_classes_M), _ = tree.gather_explicit(
      (cosine_MxN, slot_classes_M))
  # No indices_are_sorted hint: slot classes in any order are valid input.
  best_CxN = jax.ops.segment_max(cosine_MxN, slot_classes_M, num_classes)
  return best_CxN.T / tau


def _log_probs(state: EMCState, h_NxD: jax.Array, mask_N: jax.Array
               ) -> jax.Array:
  opts, head = state.options, state.model.params.head
  if opts.predict == "coral":
    mean = masked_mean(h_NxD, mask_N)
    whiten = _sqrtm(_shrunk_covariance(h_NxD, mask_N, mean), inverse=True)
    aligned = ((h_NxD - mean[None, :]) @ whiten @ state.source_cov_sqrt
               + state.source_mean[None, :])
    return jax.nn.log_softmax(classify(head, aligned))
  classifier = jax.nn.log_softmax(classify(head, h_NxD))
  scores = prototype_scores(h_NxD, state.memory, state.slot_classes,
                            state.model.num_classes, opts.tau)
  return jax.nn.log_softmax((1.0 - opts.alpha) * classifier
                            + opts.alpha * jax.nn.log_softmax(scores))


@jax.jit
def predict(state: EMCState, graph: GraphsTuple) -> jax.Array:
  """Training-free prediction ``log p(y | G)``: ``(N, C)`` (the ``predict`` option)."""
  graph = validated(graph, "graph", feature_width=state.model.feature_width)
  return _log_probs(state, jax.lax.stop_gradient(_embed(state, graph)),
                    node_mask(graph))


def confident_nodes(log_probs_NxC: jax.Array, mask_N: jax.Array,
                    slots_per_class_C: jax.Array, confidence: float,
                    fallback_fraction: float) -> tuple[jax.Array, jax.Array]:
  """Pseudo-labels and the confident set.

  A node is confident if its top probability is at least ``confidence``;
  a class with fewer confident nodes than slots keeps instead the top
  ``fallback_fraction`` of the nodes predicted as that class.

  Returns:
    ``(pseudo_labels (N,) int32, selected (N,) bool)``.

  Raises:
    ValueError: ``log_probs_NxC`` not 2-D, ``mask_N`` not ``(N,)``,
      ``slots_per_class_C`` not ``(C,)``, or concrete ``confidence``
      outside ``[0, 1]`` or ``fallback_fraction`` outside ``(0, 1]``.
  """
  shapes = [np.shape(x) for x in (log_probs_NxC, mask_N, slots_per_class_C)]
  if (len(shapes[0]) != 2 or shapes[1] != shapes[0][:1]
      or shapes[2] != shapes[0][1:]):
    raise ValueError(
        "need log_probs_NxC (N, C), mask_N (N,) and slots_per_class_C (C,);"
        f" got shapes {shapes}.")
  if not isinstance(confidence, jax.core.Tracer):
    check_real("confidence", confidence, low=0.0, high=1.0)
  if not isinstance(fallback_fraction, jax.core.Tracer):
    check_real("fallback_fraction", fallback_fraction, low=0.0, high=1.0,
                low_open=True)
  # Explicit axes cannot sort along a sharded node axis: the nodes are
  # gathered, and the results go back to the mask's sharding.
  sharded_like_N = mask_N
  (log_probs_NxC, mask_N), _ = tree.gather_explicit((log_probs_NxC, mask_N))
  num_classes = log_probs_NxC.shape[1]
  pseudo = jnp.argmax(log_probs_NxC, -1).astype(jnp.int32)
  conf = jnp.exp(jnp.max(log_probs_NxC, -1))
  member_CxN = jnp.logical_and(
      pseudo[None, :] == jnp.arange(num_classes)[:, None], mask_N[None, :])
  confident = conf >= confidence
  num_confident = jnp.sum(jnp.logical_and(member_CxN, confident[None, :]), 1)
  num_members = jnp.sum(member_CxN, 1)
  keep = jnp.maximum(jnp.ceil(fallback_fraction * num_members.astype(jnp.float32)
                              - 1e-4).astype(jnp.int32), 1)
  ranked_CxN = -jnp.sort(-jnp.where(member_CxN, conf[None, :], -jnp.inf), 1)
  threshold_C = jnp.take_along_axis(ranked_CxN, (keep - 1)[:, None], 1)[:, 0]
  fallback = num_confident < slots_per_class_C
  selected = jnp.where(fallback[pseudo], conf >= threshold_C[pseudo], confident)
  selected = jnp.logical_and(selected, mask_N)
  return (tree.reshard_like(pseudo, sharded_like_N),
          tree.reshard_like(selected, sharded_like_N))


def _im_replay(state: EMCState, h_NxD, mask_N, memory_MxD):
  opts = state.options
  head = state.model.params.head

  def loss_fn(head):
    im = information_maximization(classify(head, h_NxD), mask_N,
                                  opts.im_marginal_weight)
    slot_logp = jax.nn.log_softmax(classify(head, memory_MxD))
    replay = -jnp.mean(jnp.take_along_axis(
        slot_logp, state.slot_classes[:, None], 1))
    return im + opts.replay_weight * replay

  tx = adam_l2(opts.im_learning_rate, opts.im_weight_decay)
  updates, _ = tx.update(jax.grad(loss_fn)(head), tx.init(head), head)
  head = optax.apply_updates(head, updates)
  params = state.model.params._replace(head=head)
  return state.model._replace(params=params)


def update(state: EMCState, graph: GraphsTuple) -> EMCState:
  """Crystallises one target domain into the memory and evolves the state.

  Args:
    state: ``S_{t-1}``.
    graph: the unlabelled target domain ``G_t`` (padded or not).

  Returns:
    ``S_t`` with ``M <- crystallised memory``, ``M_prev <- M_{t-1}`` and
    ``M~ <- evolve(S_{t-1})``.

  Raises:
    ValueError: ``graph`` is malformed or, when its features are concrete,
      a real node has a NaN or inf feature. A NaN node is never confident,
      so it would silently drop out of the memory; with traced features
      (under ``jit``, :class:`~jaxpapers.profiling.CompiledCache`) the whole
      memory ``M`` is NaN instead.
  """
  check_graph(graph, "graph", feature_width=state.model.feature_width)
  check_finite_features(graph, "graph")
  return _update(state, graph)


@jax.jit
def _update(state: EMCState, graph: GraphsTuple) -> EMCState:
  opts = state.options
  graph = validated(graph, "graph", feature_width=state.model.feature_width)
  mask = node_mask(graph)
  h = jax.lax.stop_gradient(_embed(state, graph))
  prior = evolve_prior(state)
  num_classes = state.model.num_classes
  # A count (a scatter) over sharded slots has no output sharding on Explicit
  # axes: the few slot classes are gathered.
  slots_per_class = jnp.bincount(tree.gather_explicit(state.slot_classes)[0],
                                 length=num_classes)
  pseudo, selected = confident_nodes(_log_probs(state, h, mask), mask,
                                     slots_per_class, opts.confidence,
                                     opts.fallback_fraction)
  memory = prior
  for _ in range(1 + opts.refine_passes):
    slot_index = _nearest_slot(h, pseudo, memory, state.slot_classes)
    memory = crystallize(h, slot_index, selected, prior, opts.lam)
  # A real node with a non-finite embedding is never selected: rather than a
  # plausible memory without it, the memory is NaN (see update).
  finite = jnp.all(jnp.where(mask, jnp.all(jnp.isfinite(h), axis=1), True))
  memory = jnp.where(finite, memory, jnp.nan)
  model = state.model
  if opts.adapt == "im_replay":
    model = _im_replay(state, h, mask, memory)
  return state._replace(memory=memory, prior=prior,
                        previous_memory=state.memory, model=model)


# The named variants of our reconstruction (``docs/emc.md``): the options of
# ``adapter(**VARIANTS[name])``.
VARIANTS = {
    "emc": {},
    "emc_coral": {"predict": "coral"},
    "emc_bn": {"predict": "bn"},
    "emc_im_replay": {"adapt": "im_replay"},
    "emc_evolve_none": {"evolve": "none"},
    "emc_evolve_drift": {"evolve": "drift"},
    "emc_evolve_transition": {"evolve": "transition"},
    # T3A-style: prototypes of confident target nodes, no prior, no evolution.
    "t3a": {"evolve": "none", "lam": 0.0},
}


def adapter(**options) -> Adapter:
  """EMC behind the common :class:`~jaxpapers.graph.Adapter` protocol."""
  EMCOptions(**options)  # fail early on a bad option

  def init_fn(model, source_graph, labels, labelled, key):
    return init(source_graph, labels, model=model, key=key, labelled=labelled,
                **options)

  return Adapter(init_fn, update, predict)
