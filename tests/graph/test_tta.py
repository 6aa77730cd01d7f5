"""The evaluation protocol: adaptation runs, the accuracy matrix and its metrics, IM loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import profiling
from jaxpapers.graph import _baselines as baselines
from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _tta as tta


def test_average_performance_and_forgetting_by_hand():
  r = np.array([[0.9, 0, 0], [0.8, 0.7, 0], [0.6, 0.75, 0.5]])
  assert np.isclose(tta.average_performance(r), (0.6 + 0.75 + 0.5) / 3)
  assert np.isclose(tta.average_performance(r, 1), 0.75)
  # Domain 0 lost 0.3, domain 1 gained 0.05.
  assert np.isclose(tta.forgetting(r), (0.3 - 0.05) / 2)
  assert tta.forgetting(r, 0) == 0.0


def test_information_maximization_matches_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(6, 3))
  mask = np.array([True, True, False, True, True, False])
  p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
  entropy = -np.mean(np.sum(p * np.log(p), 1)[mask])
  p_bar = p[mask].mean(0)
  expected = entropy + 0.1 * np.sum(p_bar * np.log(p_bar))
  got = tta.information_maximization(jnp.asarray(logits, jnp.float32),
                                     jnp.asarray(mask), 0.1)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_accuracy_matrix_and_continual_metrics_from_rows():
  r = tta.accuracy_matrix([[0.9], [0.8, 0.7], [0.6, 0.75, 0.5]])
  assert r.shape == (3, 3) and np.isnan(r[0, 1]) and np.isnan(r[1, 2])
  metrics = tta.continual_metrics(r)
  assert np.isclose(metrics["average_performance"], (0.6 + 0.75 + 0.5) / 3)
  assert np.isclose(metrics["forgetting"], (0.3 - 0.05) / 2)
  assert metrics["diagonal"] == [0.9, 0.7, 0.5]
  assert np.allclose(metrics["ap_curve"], [0.9, 0.75, (0.6 + 0.75 + 0.5) / 3])


@pytest.fixture(scope="module")
def padded_sequence():
  seq = domains.csbm_sequence(num_domains=3, num_nodes=60, feature_width=6,
                              p_in=0.1, p_out=0.02, seed=1)
  padded = domains.PaddedDomains({0: seq}, multiple=64)
  model = gcn.init_gcn(jax.random.key(0), 6, seq.num_classes, hidden=8)
  return seq, padded, model


def _adapt(method, padded_sequence, cache=None):
  seq, padded, model = padded_sequence
  source = seq.domains[0]
  return tta.adapt_sequence(
      method, model, padded.graphs[0], padded.node_array(source.labels),
      padded.node_array(source.train_mask), jax.random.key(1), cache)


@pytest.mark.usefixtures("standard_dtype_promotion")  # Tent's Adam
def test_adapt_sequence_compiles_once_per_signature_and_replays(
    padded_sequence):
  cache = profiling.CompiledCache()
  run = _adapt(baselines.tent(learning_rate=1e-2), padded_sequence, cache)
  assert len(run.states) == 3 and len(run.updates) == len(run.footprints) == 2
  # Both targets share one padded shape: one compile, reused.
  assert len(cache) == 1 and run.updates[0] is run.updates[1]
  assert run.footprints[0]["peak_bytes"] != 0
  # Tent changes the model at every domain; the replay repeats it exactly.
  norms = [jax.tree.leaves(s.model.params.norms) for s in run.states]
  assert not np.array_equal(norms[0][0], norms[1][0])
  for replayed, state in zip(run.replay(), run.states[1:]):
    for a, b in zip(jax.tree.leaves(replayed), jax.tree.leaves(state)):
      np.testing.assert_array_equal(a, b)
  seconds = run.update_seconds(repeats=1)
  assert len(seconds) == 2 and all(s > 0 for s in seconds)
  _adapt(baselines.tent(learning_rate=1e-2), padded_sequence, cache)
  assert len(cache) == 2  # another Tent is another function: compiled anew


def test_evaluate_run_summarises_the_matrix_and_the_updates(padded_sequence):
  seq, padded, _ = padded_sequence
  run = _adapt(baselines.frozen(), padded_sequence)
  labels, masks = (padded.node_arrays(0, f) for f in ("labels", "test_mask"))
  assert [a.tolist() for a in labels] == [
      padded.node_array(d.labels).tolist() for d in seq.domains]
  out = tta.evaluate_run(run, gcn.masked_accuracy, labels, masks, repeats=1)
  r = tta.accuracy_matrix(run.accuracy_rows(gcn.masked_accuracy, labels,
                                            masks))
  np.testing.assert_array_equal(np.asarray(out["R"], float), r)
  assert {k: out[k] for k in ("average_performance", "forgetting", "diagonal",
                              "ap_curve")} == tta.continual_metrics(r)
  assert out["seconds_per_domain"] > 0
  for key in ("peak_bytes", "temp_bytes"):
    assert out[key] == max(f[key] for f in run.footprints)


def test_accuracy_rows_of_the_frozen_model_repeat_its_columns(padded_sequence):
  seq, padded, model = padded_sequence
  run = _adapt(baselines.frozen(), padded_sequence)
  labels = [padded.node_array(d.labels) for d in seq.domains]
  masks = [padded.node_array(d.test_mask) for d in seq.domains]
  rows = run.accuracy_rows(gcn.masked_accuracy, labels, masks)
  assert [len(row) for row in rows] == [1, 2, 3]
  # The frozen model never changes: R[i][j] is the same for every i >= j.
  expected = [float(gcn.masked_accuracy(gcn.log_probs(model, g), y, m))
              for g, y, m in zip(padded.graphs[0], labels, masks)]
  for row in rows:
    np.testing.assert_allclose(row, expected[: len(row)], atol=1e-6)
  assert tta.continual_metrics(tta.accuracy_matrix(rows))["forgetting"] == 0.0
