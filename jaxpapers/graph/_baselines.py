"""Baselines of continual test-time graph adaptation, as :class:`~jaxpapers.graph.Adapter` instances.

* :func:`frozen` -- the source model, never adapted.
* :func:`tent` -- Tent (Wang et al., 2021): BatchNorm uses the statistics of
  the graph at hand, and its scale and shift take Adam steps on the mean
  prediction entropy of each target domain (our EMC protocol,
  ``docs/emc.md``: ``adam(1e-3)``, one step per domain). Adam's state
  carries over from domain to domain.
* :func:`im_adaptation` -- "direct adaptation", GCAL without its memory:
  every parameter takes ``epochs`` steps of Adam with L2 (1e-2, 1e-4) on the
  information-maximisation loss of the current domain only, BatchNorm in
  eval mode, and the model becomes the teacher EMA (momentum 0.9) at the end
  of each domain (GCAL's ``forward_and_adapt`` without replay).

The generative-memory baseline is :func:`jaxpapers.graph.generative_memory`.
"""

from typing import Any, NamedTuple

import jax
import optax

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.graph._gcn import classify
from jaxpapers.graph._gcn import embed
from jaxpapers.graph._gcn import embed_with_graph_stats
from jaxpapers.graph._gcn import GCN
from jaxpapers.graph._gcn import log_probs
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import node_mask
from jaxpapers.graph._graphs import validated
from jaxpapers.graph._tta import adam_l2
from jaxpapers.graph._tta import Adapter
from jaxpapers.graph._tta import information_maximization


def frozen() -> Adapter:
  """No adaptation: ``predict`` is the source model in eval mode.

  Example:
    >>> import jax
    >>> from jaxpapers import graph
    >>> seq = graph.csbm_sequence(num_domains=2, num_nodes=40, seed=0)
    >>> model = graph.init_gcn(jax.random.key(0), 32, 4, hidden=8)
    >>> method = frozen()
    >>> state = method.init(model, seq.domains[0].graph, None, None, None)
    >>> method.update(state, seq.domains[1].graph) is state
    True
  """

  def init_fn(model, source_graph, labels, labelled, key):
    del source_graph, labels, labelled, key
    return model

  def update_fn(state, graph):
    del graph
    return state

  return Adapter(init_fn, update_fn, jax.jit(log_probs))


class TentState(NamedTuple):
  model: GCN
  opt_state: Any


def _graph_stats_log_probs(params, graph):
  return jax.nn.log_softmax(classify(params.head,
                                     embed_with_graph_stats(params, graph)[0]))


def tent(learning_rate: float = 1e-3, steps: int = 1) -> Adapter:
  """Tent on the BatchNorm scales and shifts (entropy minimisation).

  Args:
    learning_rate: Adam step size.
    steps: Adam steps per target domain.

  Returns:
    An :class:`Adapter`; its predictions normalise with each graph's own
    BatchNorm statistics, as Tent does at test time.

  Raises:
    ValueError: ``learning_rate`` not finite and >= 0, or ``steps`` not an
      int >= 0.
  """
  check_real("learning_rate", learning_rate, low=0.0)
  check_int("steps", steps, 0)
  tx = optax.adam(learning_rate)

  def init_fn(model, source_graph, labels, labelled, key):
    del source_graph, labels, labelled, key
    return TentState(model, tx.init(model.params.norms))

  @jax.jit
  def update_fn(state, graph):
    graph = validated(graph, "graph", feature_width=state.model.feature_width)
    mask = node_mask(graph)

    def entropy(norms, params):
      params = params._replace(norms=norms)
      logits = classify(params.head, embed_with_graph_stats(params, graph)[0])
      return information_maximization(logits, mask, marginal_weight=0.0)

    params, opt_state = state.model.params, state.opt_state
    for _ in range(steps):
      grads = jax.grad(entropy)(params.norms, params)
      updates, opt_state = tx.update(grads, opt_state, params.norms)
      params = params._replace(norms=optax.apply_updates(params.norms, updates))
    return TentState(state.model._replace(params=params), opt_state)

  @jax.jit
  def predict_fn(state, graph):
    return _graph_stats_log_probs(state.model.params, graph)

  return Adapter(init_fn, update_fn, predict_fn)


class IMState(NamedTuple):
  model: GCN
  opt_state: Any


def im_step(model: GCN, opt_state: Any, teacher: Any, graph: GraphsTuple,
            tx: optax.GradientTransformation, *, marginal_weight: float,
            teacher_momentum: float, replay_loss=None):
  """One GCAL adaptation step on all parameters; returns ``(model, opt_state, teacher)``.

  ``replay_loss(params)`` (optional) is added to the IM loss of ``graph``.
  A concrete ``teacher_momentum`` outside ``[0, 1]`` is a ``ValueError``.
  """
  if not isinstance(teacher_momentum, jax.core.Tracer):
    check_real("teacher_momentum", teacher_momentum, low=0.0, high=1.0)
  graph = validated(graph, "graph", feature_width=model.feature_width)
  mask = node_mask(graph)

  def loss_fn(params):
    logits = classify(params.head, embed(GCN(params, model.stats), graph))
    loss = information_maximization(logits, mask, marginal_weight)
    return loss if replay_loss is None else loss + replay_loss(params)

  grads = jax.grad(loss_fn)(model.params)
  updates, opt_state = tx.update(grads, opt_state, model.params)
  params = optax.apply_updates(model.params, updates)
  teacher = jax.tree.map(
      lambda t, p: teacher_momentum * t + (1.0 - teacher_momentum) * p,
      teacher, params)
  return model._replace(params=params), opt_state, teacher


def im_adaptation(epochs: int = 1, learning_rate: float = 1e-2,
                  weight_decay: float = 1e-4, teacher_momentum: float = 0.9,
                  marginal_weight: float = 0.1) -> Adapter:
  """Direct adaptation: GCAL's information maximisation on the current domain, no memory.

  Args:
    epochs: full-batch steps per domain (GCAL's ``test_epochs``, default 1).
    learning_rate: Adam step size (GCAL's ``lr_model``).
    weight_decay: L2 coefficient (GCAL's ``wd_model``).
    teacher_momentum: EMA of the teacher that replaces the model after each
      domain.
    marginal_weight: weight of the marginal-entropy term (GCAL's
      ``entropy_weight``).

  Returns:
    An :class:`Adapter`.

  Raises:
    ValueError: ``epochs`` not an int >= 0, ``teacher_momentum`` outside
      ``[0, 1]``, or another argument not finite and >= 0.
  """
  check_int("epochs", epochs, 0)
  check_real("teacher_momentum", teacher_momentum, low=0.0, high=1.0)
  check_real("marginal_weight", marginal_weight, low=0.0)
  tx = adam_l2(learning_rate, weight_decay)

  def init_fn(model, source_graph, labels, labelled, key):
    del source_graph, labels, labelled, key
    return IMState(model, tx.init(model.params))

  @jax.jit
  def update_fn(state, graph):
    model, opt_state, teacher = state.model, state.opt_state, state.model.params
    for _ in range(epochs):
      model, opt_state, teacher = im_step(
          model, opt_state, teacher, graph, tx, marginal_weight=marginal_weight,
          teacher_momentum=teacher_momentum)
    return IMState(model._replace(params=teacher), opt_state)

  @jax.jit
  def predict_fn(state, graph):
    return log_probs(state.model, graph)

  return Adapter(init_fn, update_fn, predict_fn)
