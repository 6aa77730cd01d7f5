"""The evaluation protocol's metrics and GCAL's information-maximisation loss."""

import jax.numpy as jnp
import numpy as np

from jaxpapers.graph import tta


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
