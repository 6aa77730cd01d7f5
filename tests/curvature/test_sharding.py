"""jaxpapers.curvature under Auto and Explicit meshes gives the unsharded numbers.

Parameters sharded along their feature axes and batches along the draw
(batch) axis; the functions that
tests/curvature/test_contracts.py::test_params_sharded_along_any_axis_give_the_unsharded_numbers
measures with sharded parameters also get a case with sharded batches here.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import curvature
from jaxpapers import tree as tree_lib
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

_PARAMS = {"w1": _f32(4, 8), "w2": _f32(8)}
_PARAMS_SPEC = {"w1": jax.P(None, "model"), "w2": jax.P("model")}
_BATCHES = (_f32(4, 2, 4), _f32(4, 2))  # 4 draws of 2 examples
_DATA = (_f32(8, 4), _f32(8))  # 8 examples
_BATCH_SPEC = jax.P("data")
_TOLERANCE = {"rtol": 2e-5, "atol": 1e-6}


def _loss(params, batch):
  """A two-layer model written without matmuls over the sharded axis."""
  x, y = batch
  hidden = jnp.tanh(jnp.sum(x[..., None] * params["w1"][None], axis=-2))
  return 0.5 * jnp.mean((jnp.sum(hidden * params["w2"][None], axis=-1) - y) ** 2)


def _example_loss(params, example):
  x, y = example
  return _loss(params, (x[None], y[None]))


def _linearized(params, data):
  grad, hvp_fn = curvature.linearize_gradient(_loss, params, data)
  chunked_grad, chunked_hvp = curvature.linearize_gradient(_loss, params, data,
                                                           num_chunks=2)
  return grad, hvp_fn(grad), chunked_grad, chunked_hvp(grad)


def _adaptive(params, x_pool, y_pool):
  """The adaptive rule on mini-batches drawn from a sharded pool."""

  # A sampler indexes the whole pool (an Explicit mesh refuses a gather
  # from a sharded one without an out_sharding).
  (x_pool, y_pool), _ = tree_lib.gather_explicit((x_pool, y_pool))

  def sample_batches(key, num):
    index = jax.random.randint(key, (num, 2), 0, x_pool.shape[0])
    return x_pool[index], y_pool[index]

  return curvature.batch_sharpness_adaptive(
      _loss, params, sample_batches, jax.random.key(0), min_draws=4,
      max_draws=8, chunk_size=4)


def _stability(params, data):
  """An SGD chunk from ``params``, then both sharpnesses and GNI there."""
  key = jax.random.key(0)
  sgd = curvature.sgd_steps(_loss, params, data, key, 0.1, batch_size=4,
                            num_steps=2)
  bs, top = curvature.sharpness_at(_loss, sgd.params, data, key, batch_size=4,
                                   num_draws=2, max_iters=4)
  return (sgd, bs.value, top.eigenvalue,
          curvature.gni_at(_loss, sgd.params, data, key, batch_size=4,
                           num_draws=2))


def _measured(params, batches, data, one):
  grads = jax.grad(_loss)(params, one)
  curvature.check_scalar_loss(_loss, params, one)
  return {
      "batch_sharpness": curvature.batch_sharpness(_loss, params, batches),
      "chunked": curvature.batch_sharpness(_loss, params, batches,
                                           chunk_size=2),
      "gni": curvature.gni(_loss, params, batches, data, num_chunks=2),
      "hvp": curvature.hvp(_loss, params, grads, one),
      "quadratic_form": curvature.quadratic_form(_loss, params, grads, one),
      "lambda_max": curvature.lambda_max(
          lambda v: curvature.hvp(_loss, params, v, one), params,
          max_iters=4).eigenvalue,
  }


CASES = {
    "curvature.directional_curvature": (
        lambda params, batch: curvature.directional_curvature(_loss, params,
                                                              batch),
        (_PARAMS, _DATA), (_PARAMS_SPEC, _BATCH_SPEC), _TOLERANCE),
    "curvature.diagonal_fisher": (
        lambda params, data: (
            curvature.diagonal_fisher(_example_loss, params, data),
            curvature.diagonal_fisher(_example_loss, params, data,
                                      num_chunks=2)),
        (_PARAMS, _DATA), (_PARAMS_SPEC, _BATCH_SPEC), _TOLERANCE),
    "curvature.linearize_gradient": (
        _linearized, (_PARAMS, _DATA), (_PARAMS_SPEC, _BATCH_SPEC),
        _TOLERANCE),
    # The examples replicated: the mini-batches are gathered from all of them.
    "curvature.sgd_steps+curvature.sharpness_at+curvature.gni_at": (
        _stability, (_PARAMS, _DATA), (_PARAMS_SPEC, None),
        {"rtol": 1e-4, "atol": 1e-5}),
    "curvature.batch_sharpness_adaptive": (
        _adaptive, (_PARAMS, *_DATA), (_PARAMS_SPEC, _BATCH_SPEC, _BATCH_SPEC),
        _TOLERANCE),
    "curvature.batch_sharpness+curvature.gni+curvature.hvp"
    "+curvature.quadratic_form+curvature.lambda_max"
    "+curvature.check_scalar_loss": (
        _measured, (_PARAMS, _BATCHES, _DATA, jax.tree.map(lambda b: b[0],
                                                           _BATCHES)),
        # gni's measurement set replicated: its Hessian products run inside
        # the vmap over the data-sharded draws, and the parameters hold
        # "model" (linearize_gradient's case shards the set itself).
        (_PARAMS_SPEC, _BATCH_SPEC, None, _BATCH_SPEC),
        {"rtol": 1e-4, "atol": 1e-5}),
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "curvature.directional_curvature": ("Auto", "Explicit"),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
