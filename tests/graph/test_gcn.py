"""The GCN source model: training, masking of padding, permutation equivariance."""

import jax
import numpy as np
import pytest

from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _graphs as graphs


@pytest.fixture(scope="module")
def source():
  seq = domains.csbm_sequence(num_domains=2, num_nodes=120, feature_width=6,
                              p_in=0.08, p_out=0.01, seed=3)
  return seq.domains[0]


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
@pytest.mark.usefixtures("standard_dtype_promotion")
def test_fit_source_learns_an_easy_csbm(source):
  fit = gcn.fit_source(jax.random.key(0), source.graph, source.labels,
                       source.train_mask, source.val_mask, num_classes=4,
                       hidden=16, epochs=40, learning_rate=1e-2)
  assert 0 <= int(fit.best_epoch) < 40
  assert float(fit.best_val_accuracy) >= 0.85
  test_acc = gcn.masked_accuracy(gcn.log_probs(fit.model, source.graph),
                                 source.labels, source.test_mask)
  assert float(test_acc) >= 0.8


@pytest.mark.slow  # compiles a fit (several seconds)
@pytest.mark.usefixtures("standard_dtype_promotion")
def test_traced_out_of_range_labels_make_the_fit_nan():
  # Concrete labels are refused (test_contracts.py); traced, a label >= C
  # would drop out of the loss and the accuracy without a trace.
  path = graphs.make_graph(np.eye(4, dtype=np.float32), [0, 1, 2], [1, 2, 3])
  everywhere = np.ones(4, bool)
  fit = jax.jit(lambda labels: gcn.fit_source(
      jax.random.key(0), path, labels, everywhere, everywhere, num_classes=2,
      hidden=2, epochs=1))
  bad = fit(np.array([0, 1, 0, 2], np.int32))
  assert np.isnan(float(bad.best_val_accuracy))
  assert all(np.isnan(x).all() for x in jax.tree.leaves(bad.model))
  good = fit(np.array([0, 1, 0, 1], np.int32))
  assert 0 <= float(good.best_val_accuracy) <= 1
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(good.model))


def test_fit_source_needs_labelled_nodes(source):
  with pytest.raises(ValueError, match="train_mask selects no real node"):
    gcn.fit_source(jax.random.key(0), source.graph, source.labels,
                   np.zeros(120, bool), source.val_mask, num_classes=4)


def test_encoder_ignores_padding_and_is_permutation_equivariant(source):
  model = gcn.init_gcn(jax.random.key(1), 6, 4, hidden=8)
  graph = source.graph
  embed_stats = jax.jit(gcn.embed_with_graph_stats)
  h, stats = embed_stats(model.params, graph)
  padded = graphs.pad_graph(graph, 160, graph.senders.size + 20)
  h_pad, stats_pad = embed_stats(model.params, padded)
  np.testing.assert_allclose(h_pad[:120], h, atol=1e-5)
  for a, b in zip(jax.tree.leaves(stats), jax.tree.leaves(stats_pad)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  # Graph-statistics BatchNorm standardises the real nodes of the first layer.
  assert np.all(np.asarray(stats.variances[0]) > 0)
  perm = np.random.default_rng(0).permutation(120)
  inverse = np.argsort(perm)
  permuted = graphs.make_graph(graph.nodes["features"][perm], inverse[graph.senders],
                               inverse[graph.receivers])
  np.testing.assert_allclose(embed_stats(model.params, permuted)[0], h[perm],
                             atol=1e-5)
