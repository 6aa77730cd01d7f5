"""jaxpapers.optim against optax's contracts and a table of misuse.

inject_hyperparams with nothing but defaults (abstract and jitted init
included), pytrees with None leaves and empty dicts, sharded params on Auto
and Explicit meshes with and without ``jax.set_mesh``, and every documented
range checked at construction with an error that names the argument.
"""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import optim


def _loss(params):
  return jnp.sum(params["w"] ** 2) + jnp.sum(jnp.sin(params["b"]))


# name -> (factory taking only keyword hyperparameters, their values, the
# inner optimiser needs standard promotion).
FACTORIES = {
    "soap": (optim.soap, {"learning_rate": 1e-2}, False),
    "scale_by_soap": (optim.scale_by_soap, {}, False),
    "ema_nesterov(adamw)": (
        functools.partial(optim.ema_nesterov, optax.adamw(1e-2)), {}, True),
    "track_batch_sharpness": (optim.track_batch_sharpness, {}, False),
}


def _params(seed=0):
  # A square matrix: its gradients give full-rank factors, so the eigenbases
  # are unique up to signs (which SOAP is invariant to) and two correct
  # implementations must agree.
  rng = np.random.default_rng(seed)
  return {"w": jnp.asarray(rng.normal(size=(8, 8)), jnp.float32),
          "b": jnp.asarray(rng.normal(size=(8,)), jnp.float32),
          "none": None, "empty": {}}


def _promotion(name):
  return (jax.numpy_dtype_promotion("standard") if FACTORIES[name][2]
          else contextlib.nullcontext())


def _run(tx, params, steps=4, jit=True):
  """Updates after ``steps`` jitted steps on a fixed gradient sequence."""

  @jax.jit
  def step(state, params, scale):
    grads = jax.tree.map(lambda x: scale * x + 0.3 * x ** 2, params)
    return tx.update(grads, state, params, value_fn=_loss)

  state = jax.jit(tx.init)(params) if jit else tx.init(params)
  for i in range(steps):
    updates, state = step(state, params, jnp.float32(i + 1))
  return updates, state


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_inject_hyperparams_with_only_defaults(name):
  factory, hyper, _ = FACTORIES[name]
  params = _params()
  with _promotion(name):
    injected = optax.inject_hyperparams(factory)(**hyper)
    jax.eval_shape(injected.init, params)  # abstract init
    got, _ = _run(injected, params)
    expected, _ = _run(factory(**hyper), params, jit=False)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6,
                                                       atol=1e-9),
               got, expected)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_none_leaves_and_empty_dicts_pass_through(name):
  factory, hyper, _ = FACTORIES[name]
  params = _params()
  with _promotion(name):
    updates, state = _run(factory(**hyper), params)
    chained, _ = _run(optax.chain(optax.identity(), factory(**hyper)), params)
  assert updates["none"] is None and updates["empty"] == {}
  assert jax.tree.structure(updates) == jax.tree.structure(params)
  assert all(np.isfinite(x).all() for x in jax.tree.leaves((updates, state)))
  jax.tree.map(np.testing.assert_array_equal, chained, updates)


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
@pytest.mark.parametrize("under_set_mesh", [False, True])
@pytest.mark.parametrize("name", ["soap", "ema_nesterov(adamw)"])
def test_sharded_params_give_the_unsharded_updates(name, mode, under_set_mesh,
                                                   contract_mesh):
  factory, hyper, _ = FACTORIES[name]
  mesh = contract_mesh(mode)
  params = _params()
  specs = {"w": jax.P("data", "model"), "b": jax.P("model")}
  sharded = {**params, **{k: jax.device_put(params[k],
                                            jax.NamedSharding(mesh, spec))
                          for k, spec in specs.items()}}
  tx = factory(**hyper, precondition_frequency=2) if "soap" in name else (
      factory(**hyper))
  context = jax.set_mesh(mesh) if under_set_mesh else contextlib.nullcontext()
  # JAX itself refuses to jit array creation on Explicit avals outside
  # jax.set_mesh (optax.adam's init too), so init runs eagerly there.
  jit_init = under_set_mesh or mode == "Auto"
  with _promotion(name), context:
    got, _ = _run(tx, sharded, jit=jit_init)
  with _promotion(name):
    expected, _ = _run(tx, params)
  for key in specs:
    # float32 rounding through eigh and QR on sharded vs whole factors.
    np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=1e-6)
    assert got[key].sharding.spec == specs[key]


def test_integer_and_complex_params_are_refused():
  for tx in (optim.soap(1e-3), optim.ema_nesterov(optax.sgd(0.1)),
             optim.track_batch_sharpness()):
    with pytest.raises(TypeError, match=r"params must hold real floating.*"
                       r"\['w'\].*int32"):
      tx.init({"w": jnp.ones((2, 2), jnp.int32)})
    with pytest.raises(TypeError, match="complex64"):
      tx.init({"w": jnp.ones((2,), jnp.complex64)})


_SOAP = optim.soap(1e-3)
_EMA = optim.ema_nesterov(optax.sgd(0.1))

# (call, the message it must raise): every documented range, at construction.
MISUSE = [
    (lambda: optim.soap(eps=-1.0), "eps must be >= 0"),
    (lambda: optim.soap(b1=1.0), r"b1 must lie in \[0, 1\)"),
    (lambda: optim.soap(b2=1.5), r"b2 must lie in \[0, 1\)"),
    (lambda: optim.scale_by_soap(shampoo_beta=-0.1),
     r"shampoo_beta must lie in \[0, 1\)"),
    (lambda: optim.scale_by_soap(precondition_frequency=0),
     "precondition_frequency must be >= 1"),
    (lambda: optim.scale_by_soap(max_precond_dim=0), "max_precond_dim must be >= 1"),
    (lambda: optim.track_batch_sharpness(decay=-0.5), r"decay must be None or lie in \[0, 1\)"),
    (lambda: optim.track_batch_sharpness(decay=1.0), r"decay must be None or lie in \[0, 1\)"),
    (lambda: optim.ema_nesterov(optax.sgd(0.1), gamma=1.0), "gamma must lie in"),
    (lambda: optim.ema_nesterov(optax.sgd(0.1), beta_max=-0.1), "beta_max must be >= 0"),
    (lambda: optim.soap(weight_decay=-0.01), "weight_decay must be >= 0"),
    # An infinite eps used to zero every update silently.
    (lambda: optim.soap(eps=float("inf")), "eps must be >= 0 and finite"),
    (lambda: optim.soap(learning_rate=float("nan")),
     "learning_rate must be finite"),
    # int() used to truncate 2.5 to 2.
    (lambda: optim.scale_by_soap(precondition_frequency=2.5),
     r"precondition_frequency must be >= 1 \(a whole number\)"),
    (lambda: optim.scale_by_soap(max_precond_dim=float("nan")),
     "max_precond_dim must be >= 1"),
    (lambda: optim.ema_nesterov(optax.sgd(0.1), beta_max=float("inf")),
     "beta_max must be >= 0 and finite"),
    (lambda: optim.ema_nesterov(optax.sgd(0.1), warmup_steps=2.5),
     r"warmup_steps must be >= 0 \(a whole number\)"),
    (lambda: optim.ema_nesterov(optax.sgd(0.1), rest_start=float("nan")),
     "rest_start must be >= 0"),
    (lambda: _SOAP.update({"w": jnp.ones(3)}, _SOAP.init({"w": jnp.ones(2)})),
     "updates must have the leaf shapes of the params soap was initialised"),
    (lambda: _EMA.update({"w": jnp.ones(3)}, _EMA.init({"w": jnp.ones(2)})),
     "updates must have the leaf shapes of the params ema_nesterov"),
    (lambda: optim.ema_nesterov_eval_params(
        {"w": jnp.ones(2)}, optim.ema_nesterov(optax.sgd(0.1)).init(
            {"v": jnp.ones(2)})),
     "params must have the pytree structure of the params ema_nesterov"),
    (lambda: optim.ema_nesterov_eval_params(
        {"w": jnp.ones(3)}, optim.ema_nesterov(optax.sgd(0.1)).init(
            {"w": jnp.ones(2)})),
     r"params must have the leaf shapes .*: \(3,\) vs \(2,\)"),
    (lambda: optim.ema_nesterov_eval_params({"w": jnp.ones(2)},
                                            optax.sgd(0.1).init(jnp.ones(2))),
     "state must contain exactly one EmaNesterovState"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, message = MISUSE[index]
  with pytest.raises(ValueError, match=message):
    call()


def test_traced_max_precond_dim_in_init_names_static_args():
  injected = optax.inject_hyperparams(optim.scale_by_soap)(max_precond_dim=9)
  with pytest.raises(ValueError, match="static_args"):
    jax.eval_shape(injected.init, _params())
  static = optax.inject_hyperparams(optim.scale_by_soap,
                                    static_args=("max_precond_dim",))(
                                        max_precond_dim=9)
  state = jax.eval_shape(static.init, _params())
  bases = optax.tree.get(state, "eigenbases")
  assert [q.shape for q in bases["w"]] == [(8, 8), (8, 8)]
