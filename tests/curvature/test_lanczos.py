"""Lanczos and power iteration against numpy.linalg.eigvalsh."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import curvature


def _symmetric(seed, n, top_gap=0.5, negative=False):
  """A random symmetric matrix with a controlled spectrum."""
  rng = np.random.default_rng(seed)
  q, _ = np.linalg.qr(rng.normal(size=(n, n)))
  spectrum = np.sort(rng.uniform(-1.0 if negative else 0.0, 1.0, n))
  spectrum[-1] = spectrum[-2] + top_gap
  return ((q * spectrum) @ q.T).astype(np.float32)


def _tree_operator(h):
  """Splits R^n into a two-leaf pytree to exercise the flattening."""
  split = h.shape[0] // 3
  params = {"a": jnp.zeros(split), "b": jnp.zeros(h.shape[0] - split)}

  def hvp_fn(v):
    out = jnp.asarray(h) @ jnp.concatenate([v["a"], v["b"]])
    return {"a": out[:split], "b": out[split:]}

  return hvp_fn, params


@pytest.mark.parametrize("method", ["lanczos", "power"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_eigenvalue_matches_eigvalsh(method, seed):
  h = _symmetric(seed, 40, top_gap=0.5)
  hvp_fn, params = _tree_operator(h)
  res = jax.jit(lambda p: curvature.lambda_max(
      hvp_fn, p, method=method, max_iters=300, tol=1e-4))(params)
  expected = np.linalg.eigvalsh(h.astype(np.float64))[-1]
  np.testing.assert_allclose(res.eigenvalue, expected, rtol=1e-4)
  assert bool(res.converged)
  vec = np.concatenate([res.eigenvector["a"], res.eigenvector["b"]])
  np.testing.assert_allclose(np.linalg.norm(vec), 1.0, rtol=1e-5)
  np.testing.assert_allclose(h @ vec, expected * vec, atol=5e-3)


def test_lanczos_returns_algebraically_largest_for_indefinite():
  h = _symmetric(5, 30, top_gap=0.3, negative=True)
  h = h - 3.0 * np.eye(30, dtype=np.float32)  # most eigenvalues now negative
  res = curvature.lambda_max(lambda v: jnp.asarray(h) @ v, jnp.zeros(30),
                             max_iters=30, tol=1e-6)
  np.testing.assert_allclose(res.eigenvalue, np.linalg.eigvalsh(h)[-1],
                             rtol=1e-4)


def test_power_iteration_finds_largest_magnitude_with_its_sign():
  h = np.diag(np.array([1.0, 2.0, -5.0], np.float32))
  res = curvature.lambda_max(lambda v: jnp.asarray(h) @ v, jnp.zeros(3),
                             method="power", max_iters=200, tol=1e-6)
  np.testing.assert_allclose(res.eigenvalue, -5.0, rtol=1e-4)


def test_lanczos_needs_far_fewer_products_than_power_on_a_small_gap():
  h = _symmetric(3, 200, top_gap=0.02)
  ops = [curvature.lambda_max(lambda v: jnp.asarray(h) @ v, jnp.zeros(200),
                              method=m, max_iters=budget, tol=1e-4)
         for m, budget in (("lanczos", 150), ("power", 3000))]
  assert all(bool(r.converged) for r in ops)
  assert int(ops[0].num_hvps) * 5 <= int(ops[1].num_hvps)


def test_warm_start_from_the_eigenvector_converges_at_once():
  h = _symmetric(4, 25)
  w, v = np.linalg.eigh(h.astype(np.float64))
  for method in ("lanczos", "power"):
    res = curvature.lambda_max(lambda x: jnp.asarray(h) @ x, jnp.zeros(25),
                               method=method, v0=jnp.asarray(v[:, -1], jnp.float32),
                               max_iters=50, tol=1e-4)
    assert int(res.num_hvps) <= 2
    np.testing.assert_allclose(res.eigenvalue, w[-1], rtol=1e-5)


def test_estimates_record_each_product_and_nan_after():
  h = _symmetric(6, 30, top_gap=0.1)
  res = curvature.lambda_max(lambda v: jnp.asarray(h) @ v, jnp.zeros(30),
                             max_iters=50, tol=1e-4)
  k = int(res.num_hvps)
  est = np.asarray(res.estimates)
  assert np.all(np.isfinite(est[:k])) and np.all(np.isnan(est[k:]))
  assert est[k - 1] == pytest.approx(float(res.eigenvalue))
  # Ritz values of nested Krylov spaces can only grow (Cauchy interlacing).
  assert np.all(np.diff(est[:k]) >= -1e-5)


def test_bad_arguments_are_named_errors():
  op = lambda v: v
  with pytest.raises(ValueError, match="method must be"):
    curvature.lambda_max(op, jnp.zeros(3), method="lobpcg")
  with pytest.raises(ValueError, match="max_iters must be a positive int"):
    curvature.lambda_max(op, jnp.zeros(3), max_iters=0)
  with pytest.raises(ValueError, match="v0 must have the leaf shapes"):
    curvature.lambda_max(op, jnp.zeros(3), v0=jnp.zeros(4))
