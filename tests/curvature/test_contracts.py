"""jaxpapers.curvature under Auto and Explicit meshes, and a table of misuse."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import curvature
from jaxpapers import optim
from jaxpapers import tree as tree_lib


def _loss(params, batch):
  """A two-layer model written without matmuls over the sharded axis."""
  x, y = batch
  hidden = jnp.tanh(jnp.sum(x[..., None] * params["w1"][None], axis=-2))
  return 0.5 * jnp.mean((jnp.sum(hidden * params["w2"][None], axis=-1) - y) ** 2)


def _problem():
  rng = np.random.default_rng(0)
  params = {"w1": jnp.asarray(rng.normal(size=(8, 16)), jnp.float32),
            "w2": jnp.asarray(rng.normal(size=(16,)), jnp.float32)}
  x = jnp.asarray(rng.normal(size=(4, 8, 8)), jnp.float32)
  y = jnp.asarray(rng.normal(size=(4, 8)), jnp.float32)
  return params, (x, y)


def _measurements(params, batches):
  """Every public curvature quantity, jitted, at ``params``."""
  one = jax.tree.map(lambda b: b[0], batches)

  @jax.jit
  def measure(params):
    tracker = optim.track_batch_sharpness()
    grads = jax.grad(_loss)(params, one)
    _, state = tracker.update(grads, tracker.init(params), params,
                              value_fn=_loss, batch=one)
    hv = curvature.hvp(_loss, params, grads, one)
    top = curvature.lambda_max(
        lambda v: curvature.hvp(_loss, params, v, one), params, max_iters=8)
    return {
        "batch_sharpness": curvature.batch_sharpness(_loss, params, batches).value,
        "chunked": curvature.batch_sharpness(_loss, params, batches,
                                             chunk_size=2).value,
        "gni": curvature.gni(_loss, params, batches, one).value,
        "quadratic_form": curvature.quadratic_form(_loss, params, grads, one),
        "hvp_w1": hv["w1"],
        "lambda_max": top.eigenvalue,
        "tracked": state.batch_sharpness,
    }

  return measure(params)


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_params_sharded_along_any_axis_give_the_unsharded_numbers(mode,
                                                                  contract_mesh):
  params, batches = _problem()
  expected = _measurements(params, batches)
  mesh = contract_mesh(mode)
  # w1 sharded along both axes, w2 along its only one: every leaf's every axis.
  with jax.set_mesh(mesh):
    sharded = {"w1": jax.device_put(params["w1"], jax.P("data", "model")),
               "w2": jax.device_put(params["w2"], jax.P("model"))}
    got = _measurements(sharded, batches)
  for name in expected:
    np.testing.assert_allclose(got[name], expected[name], rtol=2e-5,
                               atol=1e-6, err_msg=name)


def _quadratic(w, batch):
  return 0.5 * jnp.mean((batch @ w) ** 2)


# One compiled program per input shape for the numeric cases below.
_sharpness = jax.jit(functools.partial(curvature.batch_sharpness, _quadratic),
                     static_argnames="estimator")


MISUSE = [
    # A loss that cannot take one draw (the leading axis removed) is named.
    (lambda: curvature.batch_sharpness(_quadratic, jnp.ones(3),
                                       jnp.ones((4, 2, 5))),
     ValueError, r"loss_fn fails on one draw of batches.*\(2, 5\)"),
    (lambda: curvature.gni(_quadratic, jnp.ones(3), jnp.ones((4, 2, 5)),
                           jnp.ones((5, 3))),
     ValueError, "leading axis of every leaf of batches indexes draws"),
    (lambda: curvature.batch_sharpness_adaptive(
        _quadratic, jnp.ones(3), lambda k, n: jnp.ones((n, 2, 5)),
        jax.random.key(0)),
     ValueError, "loss_fn fails on one draw of batches"),
    (lambda: curvature.batch_sharpness_adaptive(
        _quadratic, jnp.ones(3), lambda k, n: jnp.ones((n + 1, 2, 3)),
        jax.random.key(0)),
     ValueError, r"must return num draws .* got 21 for num=20"),
    (lambda: curvature.batch_sharpness(_quadratic, jnp.ones(3),
                                       (jnp.ones((4, 2, 3)), jnp.ones(3))),
     ValueError, "leaves of batches disagree"),
    (lambda: curvature.batch_sharpness(_quadratic, jnp.ones(3),
                                       jnp.ones((4, 2, 3)), chunk_size=0),
     ValueError, "chunk_size must be None or a positive int"),
    (lambda: curvature.hvp(lambda w: jnp.real(jnp.sum(w * w)),
                           jnp.ones(2, jnp.complex64), jnp.ones(2, jnp.complex64)),
     TypeError, "params must hold real floating.*complex64"),
    (lambda: curvature.batch_sharpness(_quadratic, jnp.ones(3, jnp.int32),
                                       jnp.ones((4, 2, 3))),
     TypeError, "params must hold real floating.*int32"),
    (lambda: curvature.lambda_max(lambda v: 2.0 * v, jnp.ones(3), v0=jnp.zeros(3)),
     ValueError, "v0 is zero"),
    (lambda: curvature.batch_sharpness_adaptive(
        _quadratic, jnp.ones(3), lambda k, n: jnp.ones((n, 2, 3)),
        jax.random.key(0), rel_tol=0.0),
     ValueError, "rel_tol must be a positive scalar"),
    (lambda: curvature.batch_sharpness_adaptive(
        _quadratic, jnp.ones(3), lambda k, n: jnp.ones((n, 2, 3)),
        jax.random.key(0), rel_tol=float("nan")),
     ValueError, "rel_tol must be a positive scalar, got nan"),
    (lambda: curvature.batch_sharpness(_quadratic, jnp.ones(3),
                                       jnp.ones((4, 2, 3)), chunk_size=True),
     ValueError, "chunk_size must be None or a positive int"),
    (lambda: curvature.batch_sharpness_adaptive(
        _quadratic, jnp.ones(3), lambda k, n: jnp.ones((n, 2, 3)),
        jax.random.key(0), min_draws=2.5),
     ValueError, "min_draws must be an int"),
    (lambda: curvature.gni(_quadratic, jnp.ones(3), jnp.ones((4, 2, 3)),
                           jnp.ones((4, 3)), chunk_size=0),
     ValueError, "chunk_size must be None or a positive int"),
    (lambda: curvature.linearize_gradient(_quadratic, jnp.ones(3),
                                          jnp.ones((4, 3)), num_chunks=2.0),
     ValueError, r"num_chunks=2.0 must be a positive divisor \(an int\) .* \(4\)"),
    (lambda: curvature.diagonal_fisher(lambda w, x: jnp.sum(w * x),
                                       jnp.ones(3), jnp.ones((4, 3)),
                                       num_chunks=3),
     ValueError, "num_chunks=3 must be a positive divisor"),
    (lambda: curvature.hvp(_quadratic, jnp.ones(3), jnp.ones(3, jnp.bfloat16),
                           jnp.ones((2, 3))),
     TypeError, "v must have the dtypes of params: bfloat16 vs float32"),
    (lambda: curvature.quadratic_form(_quadratic, jnp.ones(3), jnp.ones(4),
                                      jnp.ones((2, 3))),
     ValueError, "v must have the leaf shapes of params"),
    (lambda: curvature.lambda_max(lambda v: 2.0 * v, jnp.ones(3), tol=-1.0),
     ValueError, "tol must be .*>= 0"),
    (lambda: curvature.directional_curvature(
        lambda w, x: x @ w, jnp.ones(3), jnp.ones((2, 3))),
     ValueError, r"loss_fn must return a scalar, got an array of shape \(2,\)"),
    (lambda: curvature.check_scalar_loss(lambda w: w.astype(jnp.int32).sum(),
                                         jnp.ones(3)),
     ValueError, "loss_fn must return a floating-point scalar"),
    # sgd_steps, sharpness_at, gni_at: sizes checked before anything is traced.
    (lambda: curvature.sgd_steps(_quadratic, jnp.ones(3), jnp.ones((4, 3)),
                                 jax.random.key(0), 0.1, batch_size=5, num_steps=2),
     ValueError, r"batch_size must be an int in \[1, 4\] \(the number of examples"),
    (lambda: curvature.sgd_steps(_quadratic, jnp.ones(3), jnp.ones((4, 3)),
                                 jax.random.key(0), 0.1, batch_size=2, num_steps=0),
     ValueError, "num_steps must be an int >= 1"),
    (lambda: curvature.sgd_steps(_quadratic, jnp.ones(3), jnp.ones((4, 3)),
                                 jax.random.key(0), -0.1, batch_size=2, num_steps=1),
     ValueError, "learning_rate must be > 0"),
    (lambda: curvature.sharpness_at(_quadratic, jnp.ones(3), jnp.ones((4, 3)),
                                    jax.random.key(0), batch_size=2, num_draws=2.5),
     TypeError, "num_draws must be an int"),
    (lambda: curvature.sharpness_at(_quadratic, jnp.ones(3), jnp.ones((4, 3)),
                                    jax.random.key(0), batch_size=2, num_draws=2,
                                    v0=jnp.zeros(3)),
     ValueError, "v0 is zero"),
    (lambda: curvature.gni_at(_quadratic, jnp.ones(3), (jnp.ones((4, 3)), jnp.ones(5)),
                              jax.random.key(0), batch_size=2, num_draws=2),
     ValueError, "leaves of data disagree"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_all_zero_gradients_give_nan_with_no_draws():
  # Every draw's gradient vanishes at w = 0: no direction to measure along.
  est = _sharpness(jnp.zeros(3), jnp.ones((4, 2, 3)))
  assert int(est.num_draws) == 0
  assert np.isnan(est.value) and np.isnan(est.stderr)
  ratio = _sharpness(jnp.zeros(3), jnp.ones((4, 2, 3)),
                     estimator="ratio_of_means")
  assert np.isnan(ratio.value)


def test_an_unstacked_batch_is_b_draws_of_one_example():
  # The documented layout (leading axis = draws), not a refusal: each row is
  # one draw of a single example x, where g = x (x'w) and H = x x', so every
  # draw's ratio is x'x.
  x = jnp.asarray(np.random.default_rng(2).normal(size=(5, 3)), jnp.float32)
  est = _sharpness(jnp.array([1.0, -2.0, 0.5]), x)
  np.testing.assert_allclose(est.value, np.mean(np.sum(np.square(x), 1)),
                             rtol=1e-5)
  assert int(est.num_draws) == 5


def test_a_properly_stacked_single_batch_still_works():
  batch = jnp.asarray(np.random.default_rng(1).normal(size=(5, 3)), jnp.float32)
  w = jnp.array([1.0, -2.0, 0.5])
  est = _sharpness(w, batch[None])
  g = batch.T @ (batch @ w) / 5
  h = batch.T @ batch / 5
  np.testing.assert_allclose(est.value, g @ h @ g / (g @ g), rtol=1e-5)
  assert int(est.num_draws) == 1


def test_traced_zero_start_is_documented_nan_not_an_error():
  top = jax.jit(lambda v0: curvature.lambda_max(lambda v: 2.0 * v, jnp.ones(3),
                                                v0=v0, max_iters=2))(jnp.zeros(3))
  assert np.isnan(top.eigenvalue)


def test_optax_tree_vdot_is_what_explicit_meshes_refuse():
  # Why jaxpapers.tree.vdot exists: the plain dot product over a sharded axis
  # has no defined output sharding on an Explicit mesh.
  mesh = jax.make_mesh((8,), ("model",),
                       axis_types=(jax.sharding.AxisType.Explicit,))
  with jax.set_mesh(mesh):
    x = jax.device_put(jnp.arange(16.0), jax.P("model"))
    with pytest.raises(Exception, match="Contracting dimensions are sharded"):
      jax.jit(optax.tree.vdot)(x, x)
    np.testing.assert_allclose(jax.jit(tree_lib.vdot)(x, x),
                               float(np.sum(np.arange(16.0) ** 2)))
