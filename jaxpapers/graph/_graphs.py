"""A thin layer over jraph's ``GraphsTuple``: building, padding, masks, GCN propagation.

jraph (0.0.6.dev0, archived in 2025) is pinned; we use only the part that
works on today's jax: ``GraphsTuple``, ``batch`` and ``pad_with_graphs``.
``jraph.zero_out_padding`` calls the removed ``jax.tree_map`` and is
re-implemented here with ``jax.tree.map``.

Convention. ``graph.nodes`` is a dict with ``"features"`` (``(N, F)`` float)
and ``"mask"`` (``(N,)`` bool, True for real nodes). ``pad_with_graphs``
zero-fills node fields, so padding nodes get ``mask=False`` without any
bookkeeping, and an unpadded graph (all True) and its padded copy give the
same results. jraph's own ``get_node_padding_mask`` guesses padding from
``n_node`` and treats the last graph as padding even when nothing was
padded; the explicit mask avoids that guess. ``graph.edges`` is ``None``
(unit weights) or an ``(E,)`` float array of edge weights; padding edges
join padding nodes only and get weight 0.
"""

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real

GraphsTuple = jraph.GraphsTuple
FEATURES = "features"
MASK = "mask"


def make_graph(
    features: np.ndarray | jax.Array,
    senders: np.ndarray | jax.Array,
    receivers: np.ndarray | jax.Array,
    *,
    edge_weights: np.ndarray | jax.Array | None = None,
) -> GraphsTuple:
  """One graph with node features and directed edges ``senders -> receivers``.

  For an undirected graph list both directions (see :func:`symmetrize`).

  Args:
    features: ``(N, F)`` node features.
    senders: ``(E,)`` int source node of each edge.
    receivers: ``(E,)`` int target node of each edge.
    edge_weights: optional ``(E,)`` weights (default: 1 per edge).

  Returns:
    A ``GraphsTuple`` with ``n_node=[N]``, ``n_edge=[E]`` and all nodes real.

  Example:
    >>> import numpy as np
    >>> g = make_graph(np.ones((3, 2), np.float32), np.array([0, 1]),
    ...                np.array([1, 2]))
    >>> int(g.n_node[0]), int(g.n_edge[0]), node_mask(g).tolist()
    (3, 2, [True, True, True])
  """
  features = np.asarray(features) if not isinstance(features, jax.Array) else features
  if features.ndim != 2:
    raise ValueError(
        f"features must be (num_nodes, num_features); got shape {features.shape}."
    )
  if not jnp.issubdtype(features.dtype, jnp.floating):
    raise TypeError(
        f"features must be floating-point node features, got dtype"
        f" {features.dtype}."
    )
  num_nodes = features.shape[0]
  senders = _node_indices(senders, "senders")
  receivers = _node_indices(receivers, "receivers")
  if senders.shape != receivers.shape or senders.ndim != 1:
    raise ValueError(
        "senders and receivers must be 1-D and of equal length; got"
        f" {senders.shape} and {receivers.shape}."
    )
  if senders.size and (min(senders.min(), receivers.min()) < 0
                       or max(senders.max(), receivers.max()) >= num_nodes):
    raise ValueError(
        f"senders and receivers must index nodes in [0, {num_nodes})."
    )
  if edge_weights is not None:
    edge_weights = np.asarray(edge_weights, np.float32)
    if edge_weights.shape != senders.shape:
      raise ValueError(
          f"edge_weights must have shape {senders.shape}; got"
          f" {edge_weights.shape}."
      )
    if not np.all(np.isfinite(edge_weights)):
      raise ValueError("edge_weights must be finite; got NaN or inf.")
  return GraphsTuple(
      nodes={FEATURES: features, MASK: np.ones((num_nodes,), bool)},
      edges=edge_weights,
      senders=senders,
      receivers=receivers,
      globals=None,
      n_node=np.array([num_nodes], np.int32),
      n_edge=np.array([senders.size], np.int32),
  )


def _node_indices(indices, name: str) -> np.ndarray:
  """``indices`` as int32 node ids; refuses non-integers (they would be truncated)."""
  indices = np.asarray(indices)
  if indices.size and not np.issubdtype(indices.dtype, np.integer):
    raise TypeError(
        f"{name} must be integer node ids; got dtype {indices.dtype}.")
  return indices.astype(np.int32)


def symmetrize(senders: np.ndarray, receivers: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
  """Both directions of every edge, without duplicates or self loops.

  Raises:
    ValueError: unless ``senders`` and ``receivers`` are 1-D and equally long.
    TypeError: non-integer ids.
  """
  senders = _node_indices(senders, "senders")
  receivers = _node_indices(receivers, "receivers")
  if senders.shape != receivers.shape or senders.ndim != 1:
    raise ValueError(
        "senders and receivers must be 1-D and of equal length; got"
        f" {senders.shape} and {receivers.shape}."
    )
  pairs = np.concatenate([np.stack([senders, receivers], 1),
                          np.stack([receivers, senders], 1)])
  pairs = np.unique(pairs[pairs[:, 0] != pairs[:, 1]], axis=0)
  return pairs[:, 0].astype(np.int32), pairs[:, 1].astype(np.int32)


def node_features(graph: GraphsTuple) -> jax.Array:
  """``(N, F)`` node features (padding rows included)."""
  return graph.nodes[FEATURES]


def node_mask(graph: GraphsTuple) -> jax.Array:
  """``(N,)`` bool, True for real nodes."""
  return graph.nodes[MASK]


def edge_weights(graph: GraphsTuple) -> jax.Array:
  """``(E,)`` float weights; 0 on edges that touch a padding node."""
  mask = node_mask(graph)
  real = jnp.logical_and(mask[graph.senders], mask[graph.receivers])
  weights = (jnp.ones(graph.senders.shape, jnp.float32) if graph.edges is None
             else jnp.asarray(graph.edges, jnp.float32))
  return jnp.where(real, weights, 0.0)


def zero_out_padding(graph: GraphsTuple) -> GraphsTuple:
  """Zeroes every node and edge field of padding nodes and edges.

  jraph's version calls ``jax.tree_map``, which jax removed in 0.6.
  """
  check_graph(graph, "graph")
  mask = node_mask(graph)
  edge_real = jnp.logical_and(mask[graph.senders], mask[graph.receivers])

  def zero(where):
    def fn(x):
      keep = where.reshape(where.shape + (1,) * (x.ndim - 1))
      return jnp.where(keep, x, jnp.zeros((), x.dtype))
    return fn

  return graph._replace(
      nodes=jax.tree.map(zero(mask), graph.nodes),
      edges=jax.tree.map(zero(edge_real), graph.edges),
  )


def check_graph(graph: GraphsTuple, name: str, *,
                feature_width: int | None = None) -> None:
  """Trace-time validation; raises ``ValueError`` naming ``name``.

  Checks the node dict convention, a non-empty node axis, 2-D features and,
  when given, the feature width. Works on concrete and traced graphs.
  """
  if not isinstance(graph, GraphsTuple):
    raise ValueError(f"{name} must be a jraph.GraphsTuple; got {type(graph)}.")
  if not isinstance(graph.nodes, dict) or not {FEATURES, MASK} <= set(graph.nodes):
    raise ValueError(
        f"{name}.nodes must be a dict with keys {FEATURES!r} and {MASK!r}"
        " (build graphs with jaxpapers.graph.make_graph)."
    )
  shape = tuple(graph.nodes[FEATURES].shape)
  if len(shape) != 2:
    raise ValueError(
        f"{name}.nodes[{FEATURES!r}] must be (num_nodes, num_features); got"
        f" shape {shape}."
    )
  if shape[0] == 0:
    raise ValueError(f"{name} is empty: it has no nodes.")
  if tuple(graph.nodes[MASK].shape) != shape[:1]:
    raise ValueError(
        f"{name}.nodes[{MASK!r}] must have shape {shape[:1]}; got"
        f" {tuple(graph.nodes[MASK].shape)}."
    )
  if feature_width is not None and shape[1] != feature_width:
    raise ValueError(
        f"{name} has {shape[1]} node features per node, but the model expects"
        f" {feature_width}."
    )


def check_finite_features(graph: GraphsTuple, name: str) -> None:
  """Raises ``ValueError`` naming ``name`` if a real node's concrete features are NaN or inf.

  Methods that select nodes by confidence would silently leave a NaN node
  out (a NaN is never "confident"), so a non-finite feature is refused here
  when the features are concrete. Traced features cannot be checked; the
  callers document what they give instead (NaN).
  """
  features, mask = node_features(graph), node_mask(graph)
  if isinstance(features, jax.core.Tracer) or isinstance(mask, jax.core.Tracer):
    return
  features = np.asarray(features)
  if not jnp.issubdtype(features.dtype, jnp.floating):
    raise TypeError(
        f"{name}.nodes[{FEATURES!r}] must be floating-point node features;"
        f" got dtype {features.dtype}.")
  finite = np.all(np.isfinite(features), axis=1)
  bad = np.flatnonzero(np.asarray(mask) & ~finite)
  if bad.size:
    raise ValueError(
        f"{name} has non-finite (NaN or inf) node features at {bad.size} real"
        f" node(s), first node {int(bad[0])}; features must be finite.")


def validated(graph: GraphsTuple, name: str, *,
              feature_width: int | None = None) -> GraphsTuple:
  """:func:`check_graph`, then gathers leaves sharded over explicit mesh axes.

  Message passing gathers node rows by edge index, which explicit sharding
  cannot resolve on its own; a graph sharded over nodes or edges is
  therefore replicated on entry (the methods here adapt to one graph at a
  time, so there is no graph parallelism to lose). Unsharded and
  auto-sharded inputs pass through unchanged.
  """
  check_graph(graph, name, feature_width=feature_width)

  def replicate(x):
    mesh_axes = jax.typeof(x).sharding.spec  # one entry per array dimension
    if any(axis is not None for axis in mesh_axes):
      return jax.sharding.reshard(x, jax.P())
    return x

  return jax.tree.map(replicate, graph)


def padded_size(count: int, multiple: int = 64) -> int:
  """Smallest multiple of ``multiple`` strictly above ``count``.

  ``pad_with_graphs`` needs at least one padding node, hence "strictly".
  ``count`` must be an int >= 0 and ``multiple`` one >= 1 (``ValueError``).
  """
  check_int("count", count, 0)
  check_int("multiple", multiple, 1)
  return multiple * (count // multiple + 1)


def pad_graph(graph: GraphsTuple, num_nodes: int, num_edges: int,
              num_graphs: int = 2) -> GraphsTuple:
  """Pads ``graph`` to static sizes with one dummy graph (jraph.pad_with_graphs).

  Args:
    graph: a concrete (host) graph following the node dict convention.
    num_nodes: total nodes after padding, more than the real nodes.
    num_edges: total edges after padding, at least the real edges.
    num_graphs: total graphs after padding, more than the real graphs.

  Returns:
    The padded graph; padding nodes have ``mask=False`` and no features.
  """
  for name, value in (("num_nodes", num_nodes), ("num_edges", num_edges),
                      ("num_graphs", num_graphs)):
    check_int(name, value, 0)
  real_nodes = int(np.sum(graph.n_node))
  real_edges = int(np.sum(graph.n_edge))
  real_graphs = int(np.shape(graph.n_node)[0])
  if num_nodes <= real_nodes:
    raise ValueError(
        f"num_nodes={num_nodes} must exceed the {real_nodes} real nodes (jraph"
        " needs one padding node)."
    )
  if num_edges < real_edges:
    raise ValueError(
        f"num_edges={num_edges} is below the {real_edges} real edges."
    )
  if num_graphs <= real_graphs:
    raise ValueError(
        f"num_graphs={num_graphs} must exceed the {real_graphs} real graphs."
    )
  return jraph.pad_with_graphs(graph, num_nodes, num_edges, num_graphs)


def pad_to_common_size(graphs: Sequence[GraphsTuple], multiple: int = 64
                       ) -> list[GraphsTuple]:
  """Pads every graph to the same static shape, so one compilation serves all.

  Sizes are the next multiple of ``multiple`` (a positive int) above the
  largest graph's; ``graphs`` must not be empty.
  """
  if not graphs:
    raise ValueError("graphs is empty: there is no size to pad to.")
  if not isinstance(multiple, int) or multiple < 1:
    raise ValueError(f"multiple must be a positive int, got {multiple!r}.")
  num_nodes = padded_size(max(int(np.sum(g.n_node)) for g in graphs), multiple)
  num_edges = padded_size(max(int(np.sum(g.n_edge)) for g in graphs), multiple)
  num_graphs = max(np.shape(g.n_node)[0] for g in graphs) + 1
  return [pad_graph(g, num_nodes, num_edges, num_graphs) for g in graphs]


def batch(graphs: Sequence[GraphsTuple]) -> GraphsTuple:
  """Disjoint union of graphs (jraph.batch); node masks are concatenated.

  Every graph must follow the node dict convention (:func:`check_graph`)
  with the same feature width; ``graphs`` must not be empty.
  """
  graphs = list(graphs)
  if not graphs:
    raise ValueError("graphs is empty: there is nothing to batch.")
  check_graph(graphs[0], "graphs[0]")
  width = graphs[0].nodes[FEATURES].shape[1]
  for i, g in enumerate(graphs[1:], 1):
    check_graph(g, f"graphs[{i}]", feature_width=width)
  return jraph.batch(graphs)


EDGE_CHUNK = 2048


def gcn_propagate(graph: GraphsTuple, x_NxD: jax.Array, *,
                  edge_chunk: int = EDGE_CHUNK) -> jax.Array:
  """``D^-1/2 (A + I) D^-1/2 x`` with (weighted) degrees that count the self loop.

  Padding edges carry weight 0, so real rows never see padding nodes. The
  messages (one row per edge) are formed and summed ``edge_chunk`` edges at a
  time, so memory grows with ``N x D`` rather than ``E x D`` (and the chunks
  stay in cache, which is also faster on CPU). A graph without edges leaves
  every node isolated (the result is ``x``).

  Edge weights must be finite and non-negative: a negative weight can make a
  degree ``1 + sum w`` zero or negative and its ``D^-1/2`` NaN, an infinite
  one gives ``inf * 0``. Concrete weights are checked (``ValueError``);
  traced ones cannot be, and give NaN rows there.
  """
  check_int("edge_chunk", edge_chunk, 1)
  x_NxD = jnp.asarray(x_NxD)
  num_nodes = node_mask(graph).shape[0]
  if x_NxD.ndim != 2 or x_NxD.shape[0] != num_nodes:
    raise ValueError(
        f"x_NxD must have one row per node of the graph, shape ({num_nodes},"
        f" D), got {x_NxD.shape}.")
  if graph.edges is not None and not isinstance(graph.edges, jax.core.Tracer):
    if np.any(np.asarray(graph.edges) < 0):
      raise ValueError("graph.edges holds negative edge weights; GCN degree"
                       " normalisation needs non-negative weights.")
    if not np.all(np.isfinite(np.asarray(graph.edges))):
      raise ValueError("graph.edges holds NaN or inf edge weights; GCN degree"
                       " normalisation needs finite weights.")
  # Explicit axes cannot gather or scatter at edge indices into a sharded node
  # axis: the structure is replicated, x's node axis is gathered (its feature
  # axis stays sharded) and the result goes back to x's sharding.
  graph, _ = tree.gather_explicit(graph)
  x_spec = tree.explicit_spec(x_NxD)
  node_sharded = x_spec is not None and x_spec[0] is not None
  if node_sharded:
    x_NxD = jax.sharding.reshard(x_NxD, jax.P(None, *x_spec[1:]))
  weights = edge_weights(graph)
  degree = 1.0 + jax.ops.segment_sum(weights, graph.receivers, num_nodes)
  inv_sqrt = jax.lax.rsqrt(degree)
  coeff = weights * inv_sqrt[graph.senders] * inv_sqrt[graph.receivers]
  num_chunks = max(1, -(-coeff.shape[0] // edge_chunk))
  padding = num_chunks * edge_chunk - coeff.shape[0]
  # Zero-weight padding edges 0 -> 0 leave the sum unchanged.
  chunked = [jnp.pad(a, (0, padding)).reshape(num_chunks, -1)
             for a in (coeff, graph.senders, graph.receivers)]

  def add_chunk(total_NxD, chunk):
    coeff_C, senders_C, receivers_C = chunk
    messages_CxD = coeff_C[:, None] * x_NxD[senders_C]
    # A scatter-add into the carry keeps x's sharding (a feature axis sharded
    # on an Explicit mesh); segment_sum would build an unsharded result.
    return total_NxD.at[receivers_C].add(messages_CxD), None

  aggregated, _ = jax.lax.scan(add_chunk, (inv_sqrt * inv_sqrt)[:, None] * x_NxD,
                               chunked)
  if node_sharded:
    aggregated = jax.sharding.reshard(aggregated, x_spec)
  return aggregated


def masked_mean(x_NxD: jax.Array, mask_N: jax.Array) -> jax.Array:
  """Mean over real rows (0 when there are none).

  Raises:
    ValueError: ``x_NxD`` not 2-D or ``mask_N`` not of shape ``(N,)``.
  """
  if np.ndim(x_NxD) != 2 or np.shape(mask_N) != np.shape(x_NxD)[:1]:
    raise ValueError(
        "masked_mean needs x_NxD (N, D) and mask_N (N,); got"
        f" {np.shape(x_NxD)} and {np.shape(mask_N)}.")
  weights = mask_N.astype(x_NxD.dtype)
  # A sum over rows sharded along an Explicit axis needs its output sharding:
  # the columns keep theirs.
  x_spec = tree.explicit_spec(x_NxD)
  columns = None if x_spec is None else jax.P(*x_spec[1:])
  return (jnp.matmul(weights, x_NxD, out_sharding=columns)
          / jnp.maximum(jnp.sum(weights), 1.0))


def masked_moments(x_NxD: jax.Array, mask_N: jax.Array
                   ) -> tuple[jax.Array, jax.Array]:
  """Mean and biased variance over real rows."""
  mean = masked_mean(x_NxD, mask_N)
  var = masked_mean(jnp.square(x_NxD - mean[None, :]), mask_N)
  return mean, var


def num_real_nodes(graph: GraphsTuple) -> jax.Array:
  return jnp.sum(node_mask(graph).astype(jnp.int32))


def ceil_fraction(fraction: float, count: int) -> int:
  """``ceil(fraction * count)`` without float round-up (0.05 * 2000 -> 100).

  ``fraction`` must be finite and >= 0, ``count`` an int >= 0 (``ValueError``).
  """
  check_real("fraction", fraction, low=0.0)
  check_int("count", count, 0)
  return math.ceil(round(fraction * count, 9))
