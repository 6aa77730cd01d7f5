"""Adapter, cosine head, one task's training, the adapter Fisher, CIL metrics."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import continual
from jaxpapers import curvature


def test_adapter_is_the_identity_at_init_and_residual_low_rank_after():
  adapter = continual.LowRankAdapter(6, 2, rngs=nnx.Rngs(0))
  x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 6)), jnp.float32)
  np.testing.assert_array_equal(adapter(x), x)
  adapter.up_RxD[...] = jnp.ones((2, 6))
  down = np.asarray(adapter.down_DxR[...])
  expected = np.asarray(x) + np.maximum(np.asarray(x) @ down, 0) @ np.ones(
      (2, 6))
  np.testing.assert_allclose(adapter(x), expected, rtol=1e-5)


def test_cosine_head_is_the_scaled_cosine():
  head = continual.CosineClassifier(5, 3, scale=7.0, rngs=nnx.Rngs(1))
  x = np.random.default_rng(1).normal(size=(4, 5))
  w = np.asarray(head.prototypes_CxD[...])
  cosine = (x @ w.T) / np.linalg.norm(x, axis=1)[:, None] / np.linalg.norm(
      w, axis=1)[None]
  np.testing.assert_allclose(head(jnp.asarray(x, jnp.float32)), 7.0 * cosine,
                             rtol=1e-5, atol=1e-5)


def test_cosine_head_is_scale_free_and_zero_rows_give_zero():
  # A fixed 1e-12 added to the norms biased small rows (and 1e-30 rows
  # scored 0); the rows are now scaled by their largest entry first.
  head = continual.CosineClassifier(5, 3, rngs=nnx.Rngs(1))
  x = jnp.asarray(np.random.default_rng(2).normal(size=(2, 5)), jnp.float32)
  for scale in (1e-30, 1e30):
    np.testing.assert_allclose(head(x * scale), head(x), rtol=1e-5, atol=1e-5)
  zero = jnp.zeros((1, 5))
  np.testing.assert_array_equal(head(zero), 0.0)
  assert np.isfinite(jax.grad(lambda z: jnp.sum(head(z)))(zero)).all()


@pytest.mark.parametrize("make", [
    lambda: continual.LowRankAdapter(0, 2, rngs=nnx.Rngs(0)),
    lambda: continual.CosineClassifier(4, 3, scale=0.0, rngs=nnx.Rngs(0)),
    lambda: continual.TaskTraining(momentum=1.0),
    lambda: continual.TaskTraining(epochs=0)])
def test_bad_sizes_are_refused_at_construction(make):
  with pytest.raises(ValueError):
    make()


def _toy_task(num_classes=4, per_class=16, seed=0):
  """Well-separated Gaussian classes 2 and 3 (the second task of two)."""
  rng = np.random.default_rng(seed)
  centres = 3.0 * rng.normal(size=(num_classes, 8))
  labels = np.repeat(np.arange(2, 4), per_class)
  x = centres[labels] + 0.3 * rng.normal(size=(labels.size, 8))
  return (jnp.asarray(x, jnp.float32), jnp.asarray(labels, jnp.int32),
          centres)


def test_a_task_learns_its_classes_and_leaves_frozen_rows_alone():
  x, labels, _ = _toy_task()
  weights = jnp.ones(labels.shape, jnp.float32)
  graphs, params = continual.init_learner(jax.random.key(0), 8, 2, 4)
  trained = continual.train_task(
      graphs, params, x, labels, weights, jax.random.key(1), num_seen=4,
      num_frozen=2, training=continual.TaskTraining(epochs=10, batch_size=8))
  np.testing.assert_array_equal(trained["head"]["prototypes_CxD"][:2],
                                params["head"]["prototypes_CxD"][:2])
  assert not np.allclose(trained["head"]["prototypes_CxD"][2:],
                         params["head"]["prototypes_CxD"][2:])
  assert not np.allclose(trained["adapter"]["up_RxD"], 0)
  predictions = continual.predict(graphs, trained, x, 4)
  assert float(jnp.mean(predictions == labels)) == 1.0
  # Classes not seen yet are never predicted.
  assert set(np.asarray(continual.predict(graphs, trained, x, 3))) <= {0, 1, 2}


def test_the_batch_loss_is_a_weighted_mean_at_any_weight_scale():
  # The mean divided by max(sum of weights, 1): weights of 0.01 scaled the
  # loss (and the step) down 12.5 times.
  x, labels, _ = _toy_task()
  graphs, params = continual.init_learner(jax.random.key(0), 8, 2, 4)
  # The settings (and shapes) of the test above: one compilation for both.
  training = continual.TaskTraining(epochs=10, batch_size=8)
  train = lambda w: continual.train_task(
      graphs, params, x, labels, jnp.full(labels.shape, w, jnp.float32),
      jax.random.key(1), num_seen=4, num_frozen=2, training=training)
  for a, b in zip(jax.tree.leaves(train(0.01)), jax.tree.leaves(train(1.0))):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_batch_size_must_divide_the_rows():
  x, labels, _ = _toy_task()
  graphs, params = continual.init_learner(jax.random.key(0), 8, 2, 4)
  with pytest.raises(ValueError, match="multiple of batch_size"):
    continual.train_task(graphs, params, x[:30], labels[:30],
                         jnp.ones(30, jnp.float32), jax.random.key(1),
                         num_seen=4, num_frozen=2)


def test_adapter_fisher_ignores_padding_rows():
  x, labels, _ = _toy_task()
  graphs, params = continual.init_learner(jax.random.key(0), 8, 2, 4)
  params["adapter"]["up_RxD"] = 0.1 * jnp.ones_like(params["adapter"]["up_RxD"])
  real = 20
  weights = (jnp.arange(labels.size) < real).astype(jnp.float32)
  fisher = continual.adapter_fisher(graphs, params, x, labels, weights, 4)

  def nll(adapter, example):
    return -jax.nn.log_softmax(continual.logits(
        graphs, {"adapter": adapter, "head": params["head"]}, example[0][None],
        4)[0])[example[1]]

  expected = jax.jit(curvature.diagonal_fisher, static_argnums=0)(
      nll, params["adapter"], (x[:real], labels[:real]))
  for key in expected:
    np.testing.assert_allclose(fisher[key], expected[key], rtol=1e-4,
                               atol=1e-9)


def test_class_incremental_metrics_by_hand():
  r = np.array([[0.9, np.nan, np.nan],
                [0.7, 0.8, np.nan],
                [0.8, 0.4, 0.6]])
  m = continual.class_incremental_metrics(r, np.array([0.9, 0.75, 0.6]))
  assert np.isclose(m["average_incremental_accuracy"], 0.75)
  assert m["final_accuracy"] == 0.6
  # Task 0: best earlier 0.9, final 0.8; task 1: best 0.8, final 0.4.
  assert np.isclose(m["forgetting"], (0.1 + 0.4) / 2)
  with pytest.raises(ValueError, match="seen_accuracy"):
    continual.class_incremental_metrics(r, np.ones(2))
