"""The protocol of continual test-time graph adaptation, shared by EMC and its baselines.

An adaptation method is an :class:`Adapter`: three pure functions

* ``init(model, source_graph, labels, labelled, key) -> state`` (sees the
  frozen source model and the labelled source domain),
* ``update(state, graph) -> state`` (one unlabelled target domain),
* ``predict(state, graph) -> log-probs (N, C)`` (never changes the state).

The evaluation follows GCAL's code: after adapting to domain i the method
predicts every domain j <= i (column 0: the source test split), giving the
accuracy matrix ``R[i][j]``. From it, average performance ``AP_i = mean_j<=i
R[i][j]`` and forgetting ``F_i = mean_j<i (R[j][j] - R[i][j])``; GCAL reports
``mean_gain = -F_i``. :func:`adapt_sequence` runs a method through a
sequence, :func:`accuracy_matrix` and :func:`continual_metrics` summarise
its evaluation, and :func:`evaluate_run` gives both with the updates' costs.
"""

import numbers
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers import profiling
from jaxpapers import tree
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import masked_mean


class Adapter(NamedTuple):
  init: Callable[..., Any]
  update: Callable[[Any, GraphsTuple], Any]
  predict: Callable[[Any, GraphsTuple], jax.Array]


class AdaptationRun(NamedTuple):
  """One method's pass through a domain sequence (:func:`adapt_sequence`).

  Attributes:
    method: the adapter.
    graphs: the domains; ``graphs[0]`` is the labelled source.
    states: ``states[0]`` from ``init`` on the source, ``states[i]`` after
      target domain ``i``.
    updates: ``updates[i - 1]``, the compiled update that took
      ``states[i - 1]`` and ``graphs[i]`` to ``states[i]``.
    footprints: ``footprints[i - 1]``, that update's compiled memory
      (:func:`jaxpapers.profiling.compiled_footprint`).
  """

  method: Adapter
  graphs: Sequence[GraphsTuple]
  states: list[Any]
  updates: list[Callable[[Any, GraphsTuple], Any]]
  footprints: list[dict[str, int]]

  def accuracy_rows(self, accuracy: Callable[..., Any], labels: Sequence[Any],
                    masks: Sequence[Any]) -> list[list[float]]:
    """The rows ``R[i][:i + 1]`` of the accuracy matrix, one per state.

    ``R[i][j] = accuracy(predict(states[i], graphs[j]), labels[j],
    masks[j])``: after domain ``i`` the method predicts every domain
    ``j <= i`` (``masks[0]``: the source's test split), as in GCAL's code.
    """
    return [[float(accuracy(self.method.predict(state, self.graphs[j]),
                            labels[j], masks[j])) for j in range(i + 1)]
            for i, state in enumerate(self.states)]

  def replay(self) -> list[Any]:
    """Every target's update again, from the state before it (the updates are pure)."""
    return [update(state, graph) for update, state, graph
            in zip(self.updates, self.states, self.graphs[1:])]

  def update_seconds(self, repeats: int = 3) -> list[float]:
    """Per target domain, the seconds of its update: a warm-up, then the best of ``repeats``."""
    return [profiling.time_jitted(update, state, graph, repeats=repeats)
            for update, state, graph
            in zip(self.updates, self.states, self.graphs[1:])]


def adapt_sequence(method: Adapter, model: Any, graphs: Sequence[GraphsTuple],
                   source_labels: Any, source_labelled: Any, key: jax.Array,
                   cache: profiling.CompiledCache | None = None
                   ) -> AdaptationRun:
  """Adapts ``method`` from the labelled source ``graphs[0]`` through the targets ``graphs[1:]``.

  ``method.init`` sees ``model``, the source graph, its labels and the mask
  of labelled nodes; each target's ``update`` is compiled ahead of time by
  ``cache``: share one cache to compile a method once for every domain and
  run of one padded shape (e.g. :class:`~jaxpapers.graph.PaddedDomains`).
  """
  if not graphs:
    raise ValueError("graphs is empty: adapt_sequence needs the source graph"
                     " first.")
  cache = profiling.CompiledCache() if cache is None else cache
  states = [method.init(model, graphs[0], source_labels, source_labelled, key)]
  updates, footprints = [], []
  for graph in graphs[1:]:
    update, footprint = cache(method.update, states[-1], graph)
    updates.append(update)
    footprints.append(footprint)
    states.append(update(states[-1], graph))
  return AdaptationRun(method, graphs, states, updates, footprints)


def evaluate_run(run: AdaptationRun, accuracy: Callable[..., Any],
                 labels: Sequence[Any], masks: Sequence[Any], *,
                 repeats: int = 3) -> dict[str, Any]:
  """A run's accuracy matrix, its continual metrics and its updates' costs.

  The summary of one method through one sequence, as EMC's and GCAL's
  evaluations report it: ``R`` from :meth:`AdaptationRun.accuracy_rows`,
  :func:`continual_metrics` of it, the mean over target domains of each
  update's seconds (:meth:`AdaptationRun.update_seconds`: a warm-up, then the
  best of ``repeats``) and the largest compiled footprint of the updates.

  Args:
    run: an :func:`adapt_sequence` run with at least one target domain.
    accuracy: ``accuracy(log_probs, labels, mask) -> scalar`` (e.g. a jitted
      :func:`jaxpapers.graph.masked_accuracy`).
    labels: per domain (``run.graphs`` order), the node labels.
    masks: per domain, the evaluated nodes (``masks[0]``: the source's test
      split).
    repeats: timed calls per update after the warm-up; the best counts.

  Returns:
    A dict with ``R`` (nested lists, NaN above the diagonal),
    ``average_performance``, ``forgetting``, ``diagonal``, ``ap_curve``,
    ``seconds_per_domain``, ``peak_bytes`` and ``temp_bytes``; the byte counts
    are floats (largest over the updates).

  Raises:
    ValueError: no target domain in ``run``, ``labels`` or ``masks`` not one
      per domain, or ``repeats`` not an int >= 1.

  Example:
    >>> import jax
    >>> from jaxpapers import graph
    >>> seq = graph.csbm_sequence(num_domains=2, num_nodes=40, seed=0)
    >>> padded = graph.PaddedDomains({0: seq}, multiple=64)
    >>> labels = padded.node_arrays(0, "labels")
    >>> model = graph.init_gcn(jax.random.key(0), 32, seq.num_classes, hidden=8)
    >>> run = adapt_sequence(graph.frozen(), model, padded.graphs[0],
    ...                      labels[0], padded.node_arrays(0, "train_mask")[0],
    ...                      jax.random.key(1))
    >>> out = evaluate_run(run, graph.masked_accuracy, labels,
    ...                    padded.node_arrays(0, "test_mask"), repeats=1)
    >>> len(out["R"]), out["forgetting"]  # the frozen model forgets nothing
    (2, 0.0)

  References: GCAL's evaluation code (accuracy matrix, AP, forgetting),
  https://github.com/joe817/GCAL; EMC's protocol, ``docs/emc.md``.
  """
  num_domains = len(run.graphs)
  if num_domains < 2:
    raise ValueError(f"run has {num_domains} domain(s): evaluate_run needs the"
                     " source and at least one target domain.")
  if len(labels) != num_domains or len(masks) != num_domains:
    raise ValueError(f"labels and masks must hold one array per domain"
                     f" ({num_domains}); got {len(labels)} and {len(masks)}.")
  check_int("repeats", repeats, 1)
  r = accuracy_matrix(run.accuracy_rows(accuracy, labels, masks))
  return {"R": r.tolist(), **continual_metrics(r),
          "seconds_per_domain": float(np.mean(run.update_seconds(repeats))),
          **{key: float(max(f[key] for f in run.footprints))
             for key in ("peak_bytes", "temp_bytes")}}


def accuracy_matrix(rows: Sequence[Sequence[float]]) -> np.ndarray:
  """``R`` from its rows, ``rows[i] = R[i][:i + 1]``; NaN above the diagonal.

  Example:
    >>> accuracy_matrix([[0.9], [0.8, 0.6]]).tolist()
    [[0.9, nan], [0.8, 0.6]]
  """
  if not len(rows):
    raise ValueError("rows is empty: an accuracy matrix needs one row.")
  r = np.full((len(rows), len(rows)), np.nan)
  for i, row in enumerate(rows):
    if len(np.shape(row)) != 1 or len(row) > len(rows):
      raise ValueError(
          f"rows[{i}] must be 1-D with at most {len(rows)} accuracies (a row of"
          f" R, normally R[{i}][:{i + 1}]); got shape {np.shape(row)}.")
    r[i, : len(row)] = row
  return r


def _row(accuracy_matrix: np.ndarray,
         step: int | None) -> tuple[np.ndarray, int]:
  """The matrix as a non-empty square array and the row ``step`` (default last)."""
  r = np.asarray(accuracy_matrix, np.float64)
  if r.ndim != 2 or r.shape[0] != r.shape[1] or r.shape[0] == 0:
    raise ValueError(
        "accuracy_matrix must be a non-empty square (T, T) matrix; got shape"
        f" {r.shape}.")
  i = r.shape[0] - 1 if step is None else step
  if (not isinstance(i, numbers.Integral) or isinstance(i, bool)
      or not 0 <= i < r.shape[0]):
    raise ValueError(
        f"step must be an int in [0, {r.shape[0]}) (a row of the matrix); got"
        f" {step!r}.")
  return r, int(i)


def continual_metrics(matrix: np.ndarray) -> dict[str, Any]:
  """The final average performance and forgetting, ``R[i][i]`` and the curve ``AP_i``.

  Example:
    >>> metrics = continual_metrics(np.array([[1.0, np.nan], [0.75, 0.5]]))
    >>> metrics["average_performance"], metrics["forgetting"], metrics["ap_curve"]
    (0.625, 0.25, [1.0, 0.625])
  """
  r, _ = _row(matrix, None)
  return {"average_performance": average_performance(r),
          "forgetting": forgetting(r), "diagonal": np.diag(r).tolist(),
          "ap_curve": [average_performance(r, i) for i in range(r.shape[0])]}


def average_performance(accuracy_matrix: np.ndarray, step: int | None = None
                        ) -> float:
  """``mean_{j<=i} R[i][j]`` at row ``i = step`` (default: the last row).

  Example:
    >>> average_performance(np.array([[1.0, 0.0], [0.75, 0.5]]))
    0.625
  """
  r, i = _row(accuracy_matrix, step)
  return float(np.mean(r[i, : i + 1]))


def forgetting(accuracy_matrix: np.ndarray, step: int | None = None) -> float:
  """``mean_{j<i} (R[j][j] - R[i][j])``: accuracy lost on earlier domains (0 at i=0).

  Example:
    >>> forgetting(np.array([[1.0, 0.0], [0.75, 0.5]]))
    0.25
  """
  r, i = _row(accuracy_matrix, step)
  if i == 0:
    return 0.0
  return float(np.mean(np.diag(r)[:i] - r[i, :i]))


def information_maximization(logits_NxC: jax.Array, mask_N: jax.Array,
                             marginal_weight: float = 0.1) -> jax.Array:
  """GCAL's IM loss: mean entropy of p(y|x) minus ``marginal_weight`` x entropy of the mean.

  Over the real nodes only. Minimising it makes predictions confident
  (first term) while keeping classes balanced (second term).

  Raises:
    ValueError: ``logits_NxC`` not 2-D, ``mask_N`` not of shape ``(N,)``,
      or a concrete ``marginal_weight`` that is negative or not finite.
  """
  if np.ndim(logits_NxC) != 2 or np.shape(mask_N) != np.shape(logits_NxC)[:1]:
    raise ValueError(
        "information_maximization needs logits_NxC (N, C) and mask_N (N,); got"
        f" {np.shape(logits_NxC)} and {np.shape(mask_N)}.")
  if not isinstance(marginal_weight, jax.core.Tracer):
    check_real("marginal_weight", marginal_weight, low=0.0)
  spec = tree.explicit_spec(logits_NxC)
  if spec is not None:
    # Explicit axes weight the nodes only with a mask sharded like them.
    mask_N = jax.sharding.reshard(mask_N, jax.P(spec[0]))
  weights = mask_N.astype(jnp.float32)
  total = jnp.maximum(jnp.sum(weights), 1.0)
  logp = jax.nn.log_softmax(logits_NxC)
  p = jnp.exp(logp)
  entropy = -jnp.sum(weights * jnp.sum(p * logp, -1)) / total
  p_bar = masked_mean(p, mask_N)
  marginal = -jnp.sum(p_bar * jnp.log(p_bar + 1e-12))
  return entropy - marginal_weight * marginal


def adam_l2(learning_rate: float, weight_decay: float
            ) -> optax.GradientTransformation:
  """torch's ``Adam(lr, weight_decay)``: L2 added to the gradient before Adam.

  Raises:
    ValueError: a number (not a schedule) that is negative or not finite.
  """
  for name, value in (("learning_rate", learning_rate),
                      ("weight_decay", weight_decay)):
    if not callable(value) and not isinstance(value, jax.core.Tracer):
      check_real(name, value, low=0.0)
  return optax.chain(optax.add_decayed_weights(weight_decay),
                     optax.adam(learning_rate))
