"""Baselines: frozen, Tent and direct (IM) adaptation."""

import jax
import numpy as np
import optax
import pytest

from jaxpapers.graph import _baselines as baselines
from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _graphs as graphs
from jaxpapers.graph import _tta as tta


@pytest.fixture(scope="module")
def setup():
  seq = domains.csbm_sequence(num_domains=3, num_nodes=60, feature_width=6,
                              p_in=0.1, p_out=0.02, seed=1)
  model = gcn.init_gcn(jax.random.key(0), 6, 4, hidden=8)
  _, stats = jax.jit(gcn.embed_with_graph_stats)(model.params, seq.domains[0].graph)
  return seq, gcn.GCN(model.params, stats)


def _leaves_equal(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_frozen_predicts_with_the_source_model(setup):
  seq, model = setup
  method = baselines.frozen()
  state = method.update(method.init(model, seq.domains[0].graph, None, None, None),
                        seq.domains[1].graph)
  np.testing.assert_allclose(method.predict(state, seq.domains[2].graph),
                             gcn.log_probs(model, seq.domains[2].graph), atol=1e-6)


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_tent_takes_one_adam_step_on_batchnorm_affine_only(setup):
  seq, model = setup
  method = baselines.tent(learning_rate=1e-3)
  state = method.init(model, seq.domains[0].graph, None, None, None)
  target = seq.domains[1].graph
  new = method.update(state, target)
  assert _leaves_equal(new.model.params.convs, model.params.convs)
  assert _leaves_equal(new.model.params.head, model.params.head)
  # Adam's first step is lr * g / (|g| + eps): every entry moves by ~1e-3.
  moves = np.concatenate([np.abs(a - b).ravel() for a, b in zip(
      jax.tree.leaves(new.model.params.norms), jax.tree.leaves(model.params.norms))])
  np.testing.assert_allclose(np.median(moves), 1e-3, rtol=0.05)
  assert int(optax.tree.get(new.opt_state, "count")) == 1

  def entropy(state):  # log-probs are logits too
    return tta.information_maximization(method.predict(state, target),
                                        graphs.node_mask(target), 0.0)
  assert float(entropy(new)) < float(entropy(state))


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_direct_adaptation_ends_at_the_teacher_ema(setup):
  seq, model = setup
  target = seq.domains[1].graph
  method = baselines.im_adaptation(epochs=1)
  new = method.update(method.init(model, seq.domains[0].graph, None, None, None),
                      target)
  tx = tta.adam_l2(1e-2, 1e-4)

  def loss(params):
    logits = gcn.classify(params.head, gcn.embed(gcn.GCN(params, model.stats), target))
    return tta.information_maximization(logits, graphs.node_mask(target), 0.1)

  @jax.jit
  def expected_params(params):
    updates, _ = tx.update(jax.grad(loss)(params), tx.init(params), params)
    student = optax.apply_updates(params, updates)
    return jax.tree.map(lambda t, s: 0.9 * t + 0.1 * s, params, student)

  expected = expected_params(model.params)
  for a, b in zip(jax.tree.leaves(new.model.params), jax.tree.leaves(expected)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert _leaves_equal(new.model.stats, model.stats)  # BatchNorm in eval mode
