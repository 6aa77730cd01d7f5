"""The diagonal empirical Fisher against per-example gradients taken one by one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import curvature


def _nll(params, example):
  """-log p(y | x) of a one-hidden-layer softmax classifier."""
  x, y = example
  logits = jnp.tanh(x @ params["w1"]) @ params["w2"] + params["b"]
  return -jax.nn.log_softmax(logits)[y]


def _problem(num_examples=12):
  rng = np.random.default_rng(0)
  params = {"w1": jnp.asarray(rng.normal(size=(5, 4)), jnp.float32),
            "w2": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),
            "b": jnp.asarray(rng.normal(size=(3,)), jnp.float32)}
  x = jnp.asarray(rng.normal(size=(num_examples, 5)), jnp.float32)
  y = jnp.asarray(rng.integers(0, 3, num_examples), jnp.int32)
  return params, (x, y)


def _one_by_one(params, data):
  x, y = data
  squares = [jax.tree.map(jnp.square, jax.grad(_nll)(params, (x[n], y[n])))
             for n in range(x.shape[0])]
  return jax.tree.map(lambda *s: np.mean(np.stack(s), axis=0), *squares)


@pytest.mark.parametrize("num_chunks", [1, 3])
def test_matches_per_example_gradients_one_by_one(num_chunks):
  params, data = _problem()
  fisher = jax.jit(curvature.diagonal_fisher, static_argnums=0,
                   static_argnames="num_chunks")(
                       _nll, params, data, num_chunks=num_chunks)
  expected = _one_by_one(params, data)
  for key in params:
    np.testing.assert_allclose(fisher[key], expected[key], rtol=1e-5,
                               atol=1e-7)
    assert np.all(np.asarray(fisher[key]) >= 0)


def test_closed_form_of_a_linear_least_squares_loss():
  # loss_n = (w.x_n - y_n)^2 / 2 -> grad_n = r_n x_n, F = mean(r^2 x^2).
  rng = np.random.default_rng(1)
  x, y, w = rng.normal(size=(6, 3)), rng.normal(size=6), rng.normal(size=3)
  loss = lambda w, ex: 0.5 * (jnp.dot(w, ex[0]) - ex[1]) ** 2
  fisher = curvature.diagonal_fisher(
      loss, jnp.asarray(w, jnp.float32),
      (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)))
  residual = x @ w - y
  np.testing.assert_allclose(fisher, np.mean(residual[:, None] ** 2 * x ** 2, 0),
                             rtol=1e-5)


def test_bad_input_is_named():
  params, data = _problem()
  with pytest.raises(ValueError, match="num_chunks=5"):
    curvature.diagonal_fisher(_nll, params, data, num_chunks=5)
  with pytest.raises(ValueError, match="must return a scalar"):
    curvature.diagonal_fisher(lambda p, ex: p["b"] * 1.0, params, data)
  with pytest.raises(ValueError, match="disagree on their leading"):
    curvature.diagonal_fisher(_nll, params, (data[0], data[1][:3]))
  with pytest.raises(TypeError, match="params"):
    curvature.diagonal_fisher(lambda p, ex: jnp.sum(ex[0]) * 1.0,
                              {"w": jnp.zeros(2, jnp.int32)}, data)
