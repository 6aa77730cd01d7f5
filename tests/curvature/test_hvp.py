"""hvp and linearize_gradient against jax.hessian on small nets."""

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
import numpy as np
import pytest

from jaxpapers import curvature
from jaxpapers import models


def _net_and_data(seed=0, n=12):
  key = jax.random.key(seed)
  k1, k2, k3 = jax.random.split(key, 3)
  params = models.init_mlp(k1, (3, 5, 2))
  x = jax.random.normal(k2, (n, 3))
  y = jax.random.normal(k3, (n, 2))
  return params, (x, y)


def _loss(params, batch):
  x, y = batch
  return jnp.mean(jnp.sum(jnp.tanh(models.apply_mlp(params, x)) - y, -1) ** 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hvp_matches_dense_hessian(seed):
  params, batch = _net_and_data(seed)
  flat, unravel = ravel_pytree(params)
  dense = jax.hessian(lambda f: _loss(unravel(f), batch))(flat)
  v = jax.random.normal(jax.random.key(seed + 10), flat.shape)
  got = ravel_pytree(curvature.hvp(_loss, params, unravel(v), batch))[0]
  np.testing.assert_allclose(got, dense @ v, rtol=1e-4, atol=1e-5)


def test_hvp_under_jit_and_vmap_over_directions():
  params, batch = _net_and_data()
  flat, unravel = ravel_pytree(params)
  dense = jax.hessian(lambda f: _loss(unravel(f), batch))(flat)
  vs = jax.random.normal(jax.random.key(3), (4, flat.size))
  fn = jax.jit(jax.vmap(
      lambda v: ravel_pytree(curvature.hvp(_loss, params, unravel(v), batch))[0]
  ))
  np.testing.assert_allclose(fn(vs), vs @ dense.T, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("num_chunks", [1, 3, 4])
def test_linearize_gradient_chunked_equals_full(num_chunks):
  params, batch = _net_and_data(n=12)
  flat, unravel = ravel_pytree(params)
  dense = jax.hessian(lambda f: _loss(unravel(f), batch))(flat)
  grad, hvp_fn = curvature.linearize_gradient(
      _loss, params, batch, num_chunks=num_chunks
  )
  v = jax.random.normal(jax.random.key(4), flat.shape)
  np.testing.assert_allclose(ravel_pytree(hvp_fn(unravel(v)))[0], dense @ v,
                             rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(
      ravel_pytree(grad)[0],
      jax.grad(lambda f: _loss(unravel(f), batch))(flat), rtol=1e-5, atol=1e-6)


def test_non_scalar_loss_is_a_named_error():
  params, batch = _net_and_data()
  bad = lambda p, b: models.apply_mlp(p, b[0])
  with pytest.raises(ValueError, match="loss_fn must return a scalar"):
    curvature.hvp(bad, params, params, batch)


def test_direction_with_wrong_shape_is_a_named_error():
  params, batch = _net_and_data()
  v = jax.tree.map(lambda p: jnp.zeros(p.shape + (1,)), params)
  with pytest.raises(ValueError, match="v must have the leaf shapes"):
    curvature.hvp(_loss, params, v, batch)


def test_chunks_must_divide_examples():
  params, batch = _net_and_data(n=12)
  with pytest.raises(ValueError, match="num_chunks=5 must be a positive divisor"):
    curvature.linearize_gradient(_loss, params, batch, num_chunks=5)


@pytest.mark.parametrize("seed", [0, 1])
def test_quadratic_form_matches_dense_hessian_and_vmaps(seed):
  params, batch = _net_and_data(seed)
  flat, unravel = ravel_pytree(params)
  dense = jax.hessian(lambda f: _loss(unravel(f), batch))(flat)
  vs = jax.random.normal(jax.random.key(seed + 20), (3, flat.size))
  got = jax.jit(jax.vmap(
      lambda v: curvature.quadratic_form(_loss, params, unravel(v), batch)))(vs)
  np.testing.assert_allclose(got, np.einsum("ki,ij,kj->k", vs, dense, vs),
                             rtol=1e-4, atol=1e-5)
