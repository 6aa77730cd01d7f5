"""optax's common battery (contrib/_common_test.py, sharding_test.py) for ema_nesterov and soap.

jit with extra arguments and no recompilation, convergence on a mixed
vector/matrix target, inject_hyperparams, dtype preservation, MultiSteps,
apply_if_finite, state type stability, init on abstract params, and sharded
params on a (2, 4) mesh of the 8 test devices.
"""

import contextlib
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import optim

NUM_STEPS = 400


def _decay(peak):
  """Cosine decay to 0 over NUM_STEPS (optax's own fails strict promotion)."""
  def schedule(step):
    frac = jnp.minimum(jnp.asarray(step).astype(jnp.float32), NUM_STEPS) / NUM_STEPS
    return peak * 0.5 * (1 + jnp.cos(jnp.pi * frac))
  return schedule


_ratio = _decay(1.0)


def _muon(lr):
  return optax.contrib.muon(lr, adam_learning_rate=lr)


# name -> (factory(**hyper) -> tx, hyperparameters, needs standard promotion).
# The factories are what inject_hyperparams wraps; the first argument is bound.
OPTIMIZERS = {
    "ema_nesterov(sgd)": (
        functools.partial(optim.ema_nesterov, optax.sgd(_decay(0.1))),
        dict(beta_max=0.7, gamma=0.9, lr_ratio=_ratio, warmup_steps=2,
             rest_start=NUM_STEPS - 20), False),
    "ema_nesterov(adamw)": (
        functools.partial(optim.ema_nesterov,
                          optax.adamw(_decay(0.1), b2=0.95)),
        dict(beta_max=0.5, gamma=0.99, lr_ratio=_ratio, warmup_steps=2,
             rest_start=NUM_STEPS - 20, mu_dtype=jnp.float32), True),
    "ema_nesterov(muon)": (
        functools.partial(optim.ema_nesterov, _muon(_decay(0.05))),
        dict(beta_max=0.5, gamma=0.9, lr_ratio=_ratio, warmup_steps=2), True),
    "ema_nesterov(soap)": (
        functools.partial(optim.ema_nesterov,
                          optim.soap(_decay(0.1), weight_decay=0.0)),
        dict(beta_max=0.5, gamma=0.9, lr_ratio=_ratio, m_init="zeros"), False),
    "soap": (
        optim.soap,
        dict(learning_rate=0.1, weight_decay=1e-3, precondition_frequency=2,
             max_precond_dim=3), False),
}
# Hyperparameters that fix the state's structure stay static; so do
# ema_nesterov's lr_ratio and mu_dtype, callables that inject_hyperparams
# would otherwise take for schedules.
STATIC = {"soap": ("max_precond_dim",)}
# The wrapper around Muon and SOAP gets the tests where the base optimizer
# matters (jit, convergence, sharding); wrapper mechanics (inject, dtypes,
# MultiSteps, apply_if_finite, abstract init) are covered around sgd and
# adamw, and soap has the whole battery on its own.
CORE = ("ema_nesterov(sgd)", "ema_nesterov(adamw)", "soap")


def _make(name, **overrides):
  factory, hyper, _ = OPTIMIZERS[name]
  return factory(**{**hyper, **overrides})


@pytest.fixture(autouse=True)
def _promotion_for_optax_parts(request):
  """Standard promotion where optax's own parts need it (the Adam family)."""
  callspec = getattr(request.node, "callspec", None)
  name = callspec.params.get("name") if callspec else None
  standard = name is not None and OPTIMIZERS[name][2]
  with (jax.numpy_dtype_promotion("standard") if standard
        else contextlib.nullcontext()):
    yield


def _target(dtype=jnp.float32):
  final = {"v": jnp.array([1.0, -1.0, 2.0], dtype),
           "m": jnp.array([[1.0, 0.0, 0.5], [-1.0, 1.0, 0.0]], dtype)}
  init = jax.tree.map(jnp.zeros_like, final)
  loss = lambda p: sum(jnp.sum(jnp.square(p[k] - final[k])) for k in p)
  return init, final, loss


def _eval_params(name, params, state):
  return (params if name == "soap"
          else optim.ema_nesterov_eval_params(params, state))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_extra_args_in_a_chain_with_clipping_and_no_recompilation(name):
  tx = optax.chain(optax.clip_by_global_norm(0.5), _make(name))
  params, _, loss = _target()

  @jax.jit
  def step(params, state):
    value, grads = jax.value_and_grad(loss)(params)
    updates, state = tx.update(grads, state, params, value=value,
                               unexpected_extra_arg=1)
    return optax.apply_updates(params, updates), state

  state = tx.init(params)
  for _ in range(3):
    params, state = step(params, state)
  assert step._cache_size() == 1  # pylint: disable=protected-access
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_converges_on_a_mixed_vector_and_matrix_target(name):
  tx = _make(name)
  params, final, loss = _target()

  def step(carry, _):
    params, state = carry
    updates, state = tx.update(jax.grad(loss)(params), state, params)
    return (optax.apply_updates(params, updates), state), None

  run = jax.jit(lambda p: jax.lax.scan(step, (p, tx.init(p)), length=NUM_STEPS)[0])
  params, state = run(params)
  chex.assert_trees_all_close(_eval_params(name, params, state), final,
                              atol=3e-2)


@pytest.mark.parametrize("name", CORE)
def test_inject_hyperparams_traces_numeric_hyperparameters(name):
  factory, hyper, _ = OPTIMIZERS[name]
  static = STATIC.get(name, ()) + tuple(
      k for k in ("lr_ratio", "mu_dtype") if k in hyper)
  injected = optax.inject_hyperparams(factory, static_args=static)(**hyper)
  plain = factory(**hyper)
  params, _, loss = _target()
  grads = jax.grad(loss)(params)
  s_plain, s_inject = plain.init(params), injected.init(params)
  traced = s_inject.hyperparams
  assert "gamma" in traced or "precondition_frequency" in traced
  for _ in range(3):  # past ema_nesterov's warm-up and soap's first refresh
    u_plain, s_plain = jax.jit(plain.update)(grads, s_plain, params)
    u_inject, s_inject = jax.jit(injected.update)(grads, s_inject, params)
    chex.assert_trees_all_close((u_inject, s_inject.inner_state),
                                (u_plain, s_plain), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", CORE)
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
def test_updates_keep_the_params_dtype_and_state_types_are_stable(name, dtype):
  tx = _make(name)
  params, _, loss = _target(dtype)
  grads = jax.grad(loss)(params)
  state = tx.init(params)

  @jax.jit
  def maybe_update(state, flag):
    # lax.cond needs both branches to agree on every state type.
    return jax.lax.cond(flag, lambda: tx.update(grads, state, params),
                        lambda: (grads, state))

  updates, new_state = maybe_update(state, True)
  chex.assert_trees_all_equal_shapes_and_dtypes(updates, params)
  assert jax.tree.map(jax.typeof, new_state) == jax.tree.map(jax.typeof, state)


@pytest.mark.parametrize("name", CORE)
def test_multi_steps_averages_micro_batches(name):
  params, _, loss = _target()
  tx = optax.MultiSteps(_make(name), every_k_schedule=2)
  state = tx.init(params)
  g1 = jax.grad(loss)(params)
  g2 = jax.tree.map(lambda g: 3.0 * g, g1)
  update = jax.jit(tx.update)
  with jax.numpy_dtype_promotion("standard"):  # MultiSteps' own arithmetic
    first, state = update(g1, state, params)
    second, state = update(g2, state, params)
  jax.tree.map(lambda u: np.testing.assert_array_equal(u, 0.0), first)
  single = _make(name)
  expected, _ = single.update(jax.tree.map(lambda g: 2.0 * g, g1),
                              single.init(params), params)
  chex.assert_trees_all_close(second, expected, rtol=1e-5)


@pytest.mark.parametrize("name", CORE)
def test_apply_if_finite_skips_a_nan_step(name):
  params, _, loss = _target()
  grads = jax.grad(loss)(params)
  nan_grads = jax.tree.map(lambda g: g.at[0].set(jnp.nan), grads)
  guarded = optax.apply_if_finite(_make(name), max_consecutive_errors=3)
  state = guarded.init(params)
  skipped, state = jax.jit(guarded.update)(nan_grads, state, params)
  jax.tree.map(lambda u: np.testing.assert_array_equal(u, 0.0), skipped)
  assert int(state.notfinite_count) == 1
  updates, _ = jax.jit(guarded.update)(grads, state, params)
  plain = _make(name)
  expected, _ = plain.update(grads, plain.init(params), params)
  chex.assert_trees_all_close(updates, expected, rtol=1e-6)


@pytest.mark.parametrize("name", CORE)
def test_init_on_abstract_params(name):
  params, _, _ = _target()
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
  tx = _make(name)
  layout = lambda tree: jax.tree.map(lambda x: (x.shape, x.dtype), tree)
  assert layout(tx.init(abstract)) == layout(tx.init(params))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_shardings_follow_sharded_params(name):
  specs = {"vector": jax.P("model"), "matrix": jax.P("data", "model")}
  if "muon" in name:
    # optax's Newton-Schulz contracts the matrix's sharded axes, which an
    # explicit mesh rejects (XLA inserts the collectives on an auto mesh).
    _check_auto_mesh_shardings(name, specs)
    return
  mesh = jax.make_mesh((2, 4), ("data", "model"))
  with jax.set_mesh(mesh):
    params = {"vector": jnp.zeros(4, out_sharding=specs["vector"]),
              "matrix": jnp.ones((2, 8), out_sharding=specs["matrix"])}
    grads = jax.tree.map(lambda p: 0.1 * p + 1.0, params)
    tx = _make(name)
    state = tx.init(params)
    _, eager = tx.update(grads, state, params)
    updates, jitted = jax.jit(tx.update)(grads, jax.jit(tx.init)(params), params)
  types = lambda tree: jax.tree.map(jax.typeof, tree)
  assert types(eager) == types(state) == types(jitted)
  assert types(updates) == types(params)
  moment = optax.tree.get(state, "mu" if name == "soap" else "m")
  assert jax.tree.map(lambda x: x.sharding.spec, moment) == specs


def _check_auto_mesh_shardings(name, specs):
  """State and updates keep the params' shardings; values match unsharded."""
  mesh = jax.make_mesh((2, 4), ("data", "model"),
                       axis_types=(jax.sharding.AxisType.Auto,) * 2)
  host = {"vector": jnp.zeros(4), "matrix": jnp.ones((2, 8))}
  params = {k: jax.device_put(v, jax.NamedSharding(mesh, specs[k]))
            for k, v in host.items()}
  grads_of = lambda tree: jax.tree.map(lambda p: 0.1 * p + 1.0, tree)
  tx = _make(name)
  updates, state = jax.jit(tx.update)(grads_of(params), jax.jit(tx.init)(params),
                                      params)
  spec_of = lambda tree: jax.tree.map(lambda x: x.sharding.spec, tree)
  assert spec_of(optax.tree.get(state, "m")) == specs
  assert spec_of(updates) == specs
  expected, _ = tx.update(grads_of(host), tx.init(host), host)
  chex.assert_trees_all_close(updates, expected, rtol=1e-6)
