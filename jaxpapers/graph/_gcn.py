"""The source model of graph test-time adaptation: a 2-layer GCN encoder and a linear head.

As in GCAL's default (EERM's GCN with ``use_bn``), every GCN layer is
followed by BatchNorm and ReLU:

  h(A, X) = relu(BN_2(Â relu(BN_1(Â X W_1 + b_1)) W_2 + b_2)),   g(H) = H W + b,

with ``Â = D^-1/2 (A + I) D^-1/2`` and dropout after the first layer while
training. Pure functions of a :class:`GCN` pytree (parameters plus BatchNorm
running statistics); BatchNorm can use the running statistics (eval mode) or
the statistics of the graph at hand, over its real nodes only (train mode,
and what Tent-style adaptation uses).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers._checks import is_concrete
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers import tree
from jaxpapers.graph._graphs import check_finite_features
from jaxpapers.graph._graphs import check_graph
from jaxpapers.graph._graphs import gcn_propagate
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import masked_moments
from jaxpapers.graph._graphs import node_features
from jaxpapers.graph._graphs import node_mask
from jaxpapers.graph._graphs import validated
from jaxpapers.graph._tta import adam_l2

BN_EPSILON = 1e-5
BN_MOMENTUM = 0.1  # torch's default, as in GCAL's source training


class GCNParams(NamedTuple):
  convs: tuple[dict[str, jax.Array], ...]  # {"w": (d_in, d_out), "b": (d_out,)}
  norms: tuple[dict[str, jax.Array], ...]  # {"scale": (d,), "bias": (d,)}
  head: dict[str, jax.Array]  # {"w": (d, C), "b": (C,)}


class BatchStats(NamedTuple):
  means: tuple[jax.Array, ...]
  variances: tuple[jax.Array, ...]


class GCN(NamedTuple):
  """A GCN source model: parameters and BatchNorm running statistics."""

  params: GCNParams
  stats: BatchStats

  @property
  def feature_width(self) -> int:
    return self.params.convs[0]["w"].shape[0]

  @property
  def num_classes(self) -> int:
    return self.params.head["w"].shape[1]


def init_gcn(key: jax.Array, feature_width: int, num_classes: int, *,
             hidden: int = 256, num_layers: int = 2) -> GCN:
  """Glorot-uniform weights, zero biases, unit BatchNorm scales, identity stats.

  Example:
    >>> import jax
    >>> model = init_gcn(jax.random.key(0), 8, 3, hidden=16)
    >>> model.feature_width, model.num_classes
    (8, 3)
  """
  for name, value in (("feature_width", feature_width),
                      ("num_classes", num_classes), ("hidden", hidden),
                      ("num_layers", num_layers)):
    check_int(name, value, 1)
  keys = jax.random.split(key, num_layers + 1)
  widths = (feature_width,) + (hidden,) * num_layers
  glorot = jax.nn.initializers.glorot_uniform()
  convs = tuple(
      {"w": glorot(k, (a, b), jnp.float32), "b": jnp.zeros((b,), jnp.float32)}
      for k, a, b in zip(keys[:-1], widths[:-1], widths[1:])
  )
  norms = tuple({"scale": jnp.ones((hidden,), jnp.float32),
                 "bias": jnp.zeros((hidden,), jnp.float32)}
                for _ in range(num_layers))
  head = {"w": glorot(keys[-1], (hidden, num_classes), jnp.float32),
          "b": jnp.zeros((num_classes,), jnp.float32)}
  stats = BatchStats(
      means=tuple(jnp.zeros((hidden,), jnp.float32) for _ in range(num_layers)),
      variances=tuple(jnp.ones((hidden,), jnp.float32) for _ in range(num_layers)),
  )
  return GCN(GCNParams(convs, norms, head), stats)


def _batch_norm(z, norm, mean, var):
  inv = jax.lax.rsqrt(var + BN_EPSILON) * norm["scale"]
  return (z - mean[None, :]) * inv[None, :] + norm["bias"][None, :]


def _encode(params: GCNParams, graph: GraphsTuple, stats: BatchStats | None,
            dropout_key: jax.Array | None, dropout_rate: float
            ) -> tuple[jax.Array, BatchStats]:
  """Encoder pass; ``stats=None`` normalises with this graph's own moments."""
  mask = node_mask(graph)
  x = node_features(graph)
  means, variances = [], []
  for layer, (conv, norm) in enumerate(zip(params.convs, params.norms)):
    if layer > 0 and dropout_key is not None and dropout_rate > 0:
      keep = jax.random.bernoulli(jax.random.fold_in(dropout_key, layer),
                                  1.0 - dropout_rate, x.shape)
      x = jnp.where(keep, x / (1.0 - dropout_rate), 0.0)
    # Parameters sharded along Explicit axes are gathered where used (FSDP):
    # those axes contract and broadcast only alike-sharded axes.
    conv, norm = tree.gather_explicit((conv, norm))[0]
    # Â (X W) = (Â X) W: propagate the narrower side, since the messages
    # (one row per edge) dominate the memory of a layer.
    if conv["w"].shape[0] < conv["w"].shape[1]:
      z = gcn_propagate(graph, x) @ conv["w"] + conv["b"][None, :]
    else:
      z = gcn_propagate(graph, x @ conv["w"]) + conv["b"][None, :]
    if stats is None:
      mean, var = masked_moments(z, mask)
    else:
      mean, var = stats.means[layer], stats.variances[layer]
    means.append(mean)
    variances.append(var)
    x = jax.nn.relu(_batch_norm(z, norm, mean, var))
  return x, BatchStats(tuple(means), tuple(variances))


def embed(model: GCN, graph: GraphsTuple) -> jax.Array:
  """Encoder h in eval mode (running BatchNorm statistics): ``(N, hidden)``."""
  graph = validated(graph, "graph", feature_width=model.feature_width)
  return _encode(model.params, graph, model.stats, None, 0.0)[0]


def embed_with_graph_stats(params: GCNParams, graph: GraphsTuple
                           ) -> tuple[jax.Array, BatchStats]:
  """Encoder h with BatchNorm over this graph's real nodes; also returns those moments."""
  graph = validated(graph, "graph", feature_width=params.convs[0]["w"].shape[0])
  return _encode(params, graph, None, None, 0.0)


def classify(head: dict[str, jax.Array], h_NxD: jax.Array) -> jax.Array:
  """Linear classifier g: logits ``(N, C)``.

  Raises:
    ValueError: ``h_NxD`` not 2-D or its width not the head's input width.
  """
  width = np.shape(head["w"])[0]
  if np.ndim(h_NxD) != 2 or np.shape(h_NxD)[1] != width:
    raise ValueError(
        f"h_NxD must be (N, {width}) (the head's input width); got"
        f" {np.shape(h_NxD)}.")
  head = tree.gather_explicit(head)[0]  # see _encode
  return h_NxD @ head["w"] + head["b"][None, :]


def log_probs(model: GCN, graph: GraphsTuple) -> jax.Array:
  """``log softmax(g(h(A, X)))`` in eval mode."""
  return jax.nn.log_softmax(classify(model.params.head, embed(model, graph)))


def masked_accuracy(log_probs_NxC: jax.Array, labels_N: jax.Array,
                    mask_N: jax.Array) -> jax.Array:
  """Accuracy of the argmax over the nodes where ``mask_N`` is True.

  Raises:
    ValueError: ``log_probs_NxC`` not 2-D, or ``labels_N`` and ``mask_N``
      not of shape ``(N,)``.
  """
  shapes = [np.shape(x) for x in (log_probs_NxC, labels_N, mask_N)]
  if (len(shapes[0]) != 2 or shapes[1] != shapes[0][:1]
      or shapes[2] != shapes[0][:1]):
    raise ValueError(
        "masked_accuracy needs log_probs_NxC (N, C), labels_N (N,) and mask_N"
        f" (N,); got shapes {shapes}.")
  hits = jnp.logical_and(jnp.argmax(log_probs_NxC, -1) == labels_N, mask_N)
  return jnp.sum(hits.astype(jnp.float32)) / jnp.maximum(
      jnp.sum(mask_N.astype(jnp.float32)), 1.0)


class SourceFit(NamedTuple):
  model: GCN
  best_epoch: jax.Array
  best_val_accuracy: jax.Array


def fit_source(key: jax.Array, graph: GraphsTuple, labels: jax.Array,
               train_mask: jax.Array, val_mask: jax.Array, *, num_classes: int,
               hidden: int = 256, epochs: int = 100,
               learning_rate: float = 1e-3, weight_decay: float = 5e-4,
               dropout_rate: float = 0.2) -> SourceFit:
  """Full-batch supervised training on the source graph, keeping the best-validation model.

  GCAL's protocol: Adam with L2 weight decay (added to the gradient, as
  torch's ``Adam(weight_decay=...)``), cross-entropy on the training nodes,
  BatchNorm in train mode with running statistics updated at momentum 0.1,
  validation accuracy in eval mode after every epoch.

  Args:
    key: PRNG key (initialisation and dropout).
    graph: the source graph (padded or not).
    labels: ``(N,)`` int class of every node (any value in [0, C) on
      unlabelled nodes).
    train_mask: ``(N,)`` bool, nodes whose labels enter the loss.
    val_mask: ``(N,)`` bool, nodes for model selection.
    num_classes: C.
    hidden: width of both GCN layers.
    epochs: number of full-batch Adam steps.
    learning_rate: Adam step size.
    weight_decay: L2 coefficient.
    dropout_rate: dropout after the first layer.

  Returns:
    :class:`SourceFit` with the best-validation model.

  Raises:
    ValueError: a malformed graph, NaN or inf features on a real node,
      masks or labels not of shape ``(N,)``, a ``train_mask`` that selects
      no real node, a label of a training or validation node outside
      ``[0, num_classes)`` (its loss term would be dropped silently), or a
      hyperparameter out of range. Values are checked when concrete; traced
      out-of-range labels make the returned model and
      ``best_val_accuracy`` NaN, and a traced ``train_mask`` without real
      nodes a NaN loss (hence a NaN model).
    TypeError: non-integer ``labels``.
  """
  check_graph(graph, "graph")
  check_finite_features(graph, "graph")
  for name, value in (("num_classes", num_classes), ("hidden", hidden),
                      ("epochs", epochs)):
    check_int(name, value, 1)
  check_real("learning_rate", learning_rate, low=0.0)
  check_real("weight_decay", weight_decay, low=0.0)
  check_real("dropout_rate", dropout_rate, low=0.0, high=1.0, high_open=True)
  num_nodes = node_features(graph).shape[0]
  for name, value in (("labels", labels), ("train_mask", train_mask),
                      ("val_mask", val_mask)):
    if tuple(np.shape(value)) != (num_nodes,):
      raise ValueError(
          f"{name} must have shape ({num_nodes},); got {np.shape(value)}.")
  if not jnp.issubdtype(jnp.result_type(labels), jnp.integer):
    raise TypeError(
        f"labels must be integer classes; got dtype {jnp.result_type(labels)}.")
  real = node_mask(graph)
  if is_concrete(train_mask, real) and not np.any(
      np.logical_and(np.asarray(train_mask), np.asarray(real))):
    raise ValueError("train_mask selects no real node: nothing to train on.")
  if is_concrete(labels, train_mask, val_mask, real):
    used = np.logical_and(np.logical_or(np.asarray(train_mask),
                                        np.asarray(val_mask)), np.asarray(real))
    outside = used & ((np.asarray(labels) < 0)
                      | (np.asarray(labels) >= num_classes))
    if outside.any():
      node = int(np.flatnonzero(outside)[0])
      raise ValueError(
          f"labels of training and validation nodes must lie in [0,"
          f" {num_classes}) (num_classes); node {node} has label"
          f" {int(np.asarray(labels)[node])}.")
  return _fit_source(key, graph, jnp.asarray(labels, jnp.int32),
                     jnp.asarray(train_mask), jnp.asarray(val_mask),
                     num_classes=num_classes, hidden=hidden, epochs=epochs,
                     learning_rate=learning_rate, weight_decay=weight_decay,
                     dropout_rate=dropout_rate)


@functools.partial(jax.jit, static_argnames=(
    "num_classes", "hidden", "epochs", "learning_rate", "weight_decay",
    "dropout_rate"))
def _fit_source(key, graph, labels, train_mask, val_mask, *, num_classes,
                hidden, epochs, learning_rate, weight_decay, dropout_rate):
  init_key, dropout_key = jax.random.split(key)
  model = init_gcn(init_key, node_features(graph).shape[1], num_classes,
                   hidden=hidden)
  tx = adam_l2(learning_rate, weight_decay)
  train_weights = jnp.logical_and(train_mask, node_mask(graph)).astype(jnp.float32)
  val_mask = jnp.logical_and(val_mask, node_mask(graph))

  def loss_fn(params, step):
    h, batch_stats = _encode(params, graph, None,
                             jax.random.fold_in(dropout_key, step), dropout_rate)
    logp = jax.nn.log_softmax(classify(params.head, h))
    nll = -jnp.take_along_axis(logp, labels[:, None], axis=1)[:, 0]
    return jnp.sum(nll * train_weights) / jnp.sum(train_weights), batch_stats

  def epoch(carry, step):
    model, opt_state, best = carry
    grads, batch_stats = jax.grad(loss_fn, has_aux=True)(model.params, step)
    updates, opt_state = tx.update(grads, opt_state, model.params)
    params = optax.apply_updates(model.params, updates)
    stats = jax.tree.map(lambda run, new: (1 - BN_MOMENTUM) * run
                         + BN_MOMENTUM * new, model.stats, batch_stats)
    model = GCN(params, stats)
    val = masked_accuracy(log_probs(model, graph), labels, val_mask)
    better = val > best.best_val_accuracy
    best = jax.tree.map(lambda new, old: jnp.where(better, new, old),
                        SourceFit(model, step, val), best)
    return (model, opt_state, best), None

  best = SourceFit(model, jnp.int32(-1), jnp.float32(-1.0))
  (_, _, best), _ = jax.lax.scan(
      epoch, (model, tx.init(model.params), best),
      jnp.arange(epochs, dtype=jnp.int32))
  # An out-of-range label (traced, so unchecked) drops out of the loss and
  # the accuracy: the fit is NaN rather than a plausible model without it.
  used = jnp.logical_and(jnp.logical_or(train_mask, val_mask), node_mask(graph))
  valid = jnp.all(jnp.where(used, (labels >= 0) & (labels < num_classes), True))
  return best._replace(
      model=jax.tree.map(lambda x: jnp.where(valid, x, jnp.nan), best.model),
      best_val_accuracy=jnp.where(valid, best.best_val_accuracy, jnp.nan))
