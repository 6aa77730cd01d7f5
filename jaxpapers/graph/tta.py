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
``mean_gain = -F_i``.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.graph.graphs import GraphsTuple


class Adapter(NamedTuple):
  init: Callable[..., Any]
  update: Callable[[Any, GraphsTuple], Any]
  predict: Callable[[Any, GraphsTuple], jax.Array]


def average_performance(accuracy_matrix: np.ndarray, step: int | None = None
                        ) -> float:
  """``mean_{j<=i} R[i][j]`` at row ``i = step`` (default: the last row).

  Example:
    >>> average_performance(np.array([[1.0, 0.0], [0.75, 0.5]]))
    0.625
  """
  r = np.asarray(accuracy_matrix)
  i = r.shape[0] - 1 if step is None else step
  return float(np.mean(r[i, : i + 1]))


def forgetting(accuracy_matrix: np.ndarray, step: int | None = None) -> float:
  """``mean_{j<i} (R[j][j] - R[i][j])``: accuracy lost on earlier domains (0 at i=0).

  Example:
    >>> forgetting(np.array([[1.0, 0.0], [0.75, 0.5]]))
    0.25
  """
  r = np.asarray(accuracy_matrix)
  i = r.shape[0] - 1 if step is None else step
  if i == 0:
    return 0.0
  return float(np.mean(np.diag(r)[:i] - r[i, :i]))


def information_maximization(logits_NxC: jax.Array, mask_N: jax.Array,
                             marginal_weight: float = 0.1) -> jax.Array:
  """GCAL's IM loss: mean entropy of p(y|x) minus ``marginal_weight`` x entropy of the mean.

  Over the real nodes only. Minimising it makes predictions confident
  (first term) while keeping classes balanced (second term).
  """
  weights = mask_N.astype(jnp.float32)
  total = jnp.maximum(jnp.sum(weights), 1.0)
  logp = jax.nn.log_softmax(logits_NxC)
  p = jnp.exp(logp)
  entropy = -jnp.sum(weights * jnp.sum(p * logp, -1)) / total
  p_bar = weights @ p / total
  marginal = -jnp.sum(p_bar * jnp.log(p_bar + 1e-12))
  return entropy - marginal_weight * marginal


def adam_l2(learning_rate: float, weight_decay: float
            ) -> optax.GradientTransformation:
  """torch's ``Adam(lr, weight_decay)``: L2 added to the gradient before Adam."""
  return optax.chain(optax.add_decayed_weights(weight_decay),
                     optax.adam(learning_rate))
