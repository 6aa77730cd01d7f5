"""sgd_steps, sharpness_at and gni_at against the primitives they compose."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import curvature
from jaxpapers import data as data_lib


def _loss(w, batch):
  x, y = batch
  return 0.5 * jnp.mean((x @ w - y) ** 2)


def _problem(n=8):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(n, 3)), jnp.float32)
  y = jnp.asarray(rng.normal(size=(n,)), jnp.float32)
  return jnp.asarray(rng.normal(size=(3,)), jnp.float32), (x, y)


def test_sgd_steps_is_sgd_on_the_keyed_batches_and_resumes_exactly():
  w, data = _problem()
  key, lr = jax.random.key(1), 0.1
  out = curvature.sgd_steps(_loss, w, data, key, lr, batch_size=4, num_steps=4)
  expected, sharpness, losses = w, [], []
  for step in range(4):
    batch = data_lib.take(data, data_lib.minibatch_indices(
        jax.random.fold_in(key, step), 8, 4))
    a, c = curvature.directional_curvature(_loss, expected, batch)
    sharpness.append(a / c)
    losses.append(_loss(expected, batch))
    expected = expected - lr * jax.grad(_loss)(expected, batch)
  np.testing.assert_allclose(out.params, expected, rtol=1e-5)
  np.testing.assert_allclose(out.step_sharpness, np.mean(sharpness), rtol=1e-5)
  np.testing.assert_allclose(out.mean_loss, np.mean(losses), rtol=1e-5)
  # Two calls of two steps are one call of four: batch t depends on (key, t).
  half = curvature.sgd_steps(_loss, w, data, key, lr, batch_size=4, num_steps=2)
  rest = curvature.sgd_steps(_loss, half.params, data, key, lr, jnp.int32(2),
                             batch_size=4, num_steps=2)
  np.testing.assert_allclose(rest.params, out.params, rtol=1e-6)


def test_sharpness_at_full_batch_is_one_exact_draw_and_the_top_eigenvalue():
  w, data = _problem()
  out = curvature.sharpness_at(_loss, w, data, jax.random.key(0), batch_size=8,
                               num_draws=5, max_iters=3, tol=0.0)
  assert int(out.batch_sharpness.num_draws) == 1
  a, c = curvature.directional_curvature(_loss, w, data)
  np.testing.assert_allclose(out.batch_sharpness.value, a / c, rtol=1e-5)
  x = np.asarray(data[0], np.float64)
  np.testing.assert_allclose(out.lambda_max.eigenvalue,
                             np.linalg.eigvalsh(x.T @ x / 8)[-1], rtol=1e-4)
  mini = curvature.sharpness_at(_loss, w, data, jax.random.key(0), batch_size=4,
                                num_draws=5)
  batches = data_lib.sample_minibatches(jax.random.key(0), data, 4, 5)
  np.testing.assert_allclose(mini.batch_sharpness.value,
                             curvature.batch_sharpness(_loss, w, batches).value, rtol=1e-6)


def test_gni_at_is_gni_on_sampled_minibatches():
  w, data = _problem()
  batches = data_lib.sample_minibatches(jax.random.key(2), data, 4, 3)
  np.testing.assert_allclose(
      curvature.gni_at(_loss, w, data, jax.random.key(2), batch_size=4, num_draws=3),
      curvature.gni(_loss, w, batches, data).value, rtol=1e-6)
