"""ema_nesterov: identities, a numpy loop reference, convex acceleration, memory."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import optim

LR_PEAK = 0.05


def LR_SCHEDULE(step):  # pylint: disable=invalid-name
  """Linear decay to 10% over 50 steps, in float64 under x64 (optax's is f32)."""
  frac = jnp.minimum(jnp.asarray(step).astype(jnp.result_type(float)), 50.0)
  return LR_PEAK * (1.0 - 0.9 * frac / 50.0)


def _lr_ratio(step):
  return LR_SCHEDULE(step) / LR_PEAK


def _at(schedule, t):
  """A schedule's value at the int32 step counter that optax passes it."""
  return float(schedule(jnp.int32(t)))


def _problem(dtype):
  """A smooth non-quadratic regression (log-cosh loss) over a dict of params."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(8, 4))
  y = rng.normal(size=(8, 3))
  params = {"w": rng.normal(size=(4, 3)), "b": np.zeros(3)}

  def loss(p):
    r = jnp.asarray(x, dtype) @ p["w"] + p["b"].reshape(1, -1) - jnp.asarray(y, dtype)
    return jnp.mean(jnp.log(jnp.cosh(r)))

  def numpy_grad(p):
    t = np.tanh(x @ p["w"] + p["b"][None] - y) / y.size
    return {"w": x.T @ t, "b": t.sum(0)}

  return loss, numpy_grad, params


def _numpy_inner(kind):
  """(init, update) of optax.sgd / optax.adamw written out in numpy."""
  if kind == "sgd":
    return (lambda p: None,
            lambda g, s, p, t: ({k: -_at(LR_SCHEDULE, t) * g[k] for k in g}, s))
  b1, b2, eps, wd = 0.9, 0.95, 1e-8, 0.1

  def update(g, s, p, t):
    mu = {k: b1 * s[0][k] + (1 - b1) * g[k] for k in g}
    nu = {k: b2 * s[1][k] + (1 - b2) * g[k] ** 2 for k in g}
    lr = _at(LR_SCHEDULE, t)
    u = {k: -lr * ((mu[k] / (1 - b1 ** (t + 1)))
                   / (np.sqrt(nu[k] / (1 - b2 ** (t + 1))) + eps) + wd * p[k])
         for k in g}
    return u, (mu, nu)

  return (lambda p: ({k: 0 * v for k, v in p.items()},) * 2, update)


def _optax_inner(kind):
  if kind == "sgd":
    return optax.sgd(LR_SCHEDULE)
  return optax.adamw(LR_SCHEDULE, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)


def _reference(kind, numpy_grad, x0, num_steps, *, beta_max, gamma, warmup,
               rest, m_init, increment):
  """The authors' update loop (OptimAI-Lab/ema-nesterov) in NumPy, on anchors.

  Returns the anchors and the lookahead points; ``increment="inner"`` is our
  ablation, not in their code.
  """
  inner_init, inner_update = _numpy_inner(kind)
  x = dict(x0)
  m = {k: np.zeros_like(v) for k, v in x.items()}
  s = inner_init(x)
  beta = lambda t: beta_max * _at(_lr_ratio, t) if warmup <= t < rest else 0.0
  anchors, lookaheads = [], []
  for t in range(num_steps):
    y = {k: x[k] + beta(t) * m[k] for k in x}
    u, s = inner_update(numpy_grad(y), s, y, t)
    x_next = {k: y[k] + u[k] for k in x}
    inc = {k: x_next[k] - x[k] if increment == "anchor" else u[k] for k in x}
    if t == 0 and m_init == "first_increment":
      m = inc
    else:
      m = {k: gamma * m[k] + (1 - gamma) * inc[k] for k in x}
    x = x_next
    anchors.append(x)
    lookaheads.append({k: x[k] + beta(t + 1) * m[k] for k in x})
  return anchors, lookaheads


@pytest.mark.usefixtures("standard_dtype_promotion")  # optax.adamw
@pytest.mark.parametrize("kind,m_init,increment", [
    ("sgd", "first_increment", "anchor"),
    ("sgd", "zeros", "inner"),
    ("adamw", "first_increment", "anchor"),
    ("adamw", "zeros", "anchor"),
])
def test_matches_numpy_loop_for_50_steps(kind, m_init, increment):
  with jax.enable_x64(True):
    loss, numpy_grad, x0 = _problem(jnp.float64)
    hyper = dict(beta_max=0.7, gamma=0.9, warmup=5, rest=40, m_init=m_init,
                 increment=increment)
    anchors, lookaheads = _reference(kind, numpy_grad, x0, 50, **hyper)
    tx = optim.ema_nesterov(
        _optax_inner(kind), beta_max=0.7, gamma=0.9, lr_ratio=_lr_ratio,
        warmup_steps=5, rest_start=40, m_init=m_init, increment=increment)

    def step(carry, _):
      params, state = carry
      updates, state = tx.update(jax.grad(loss)(params), state, params)
      params = optax.apply_updates(params, updates)
      return (params, state), (params, optim.ema_nesterov_eval_params(params, state))

    params = jax.tree.map(jnp.asarray, x0)
    _, (ys, xs) = jax.lax.scan(step, (params, tx.init(params)), length=50)
    for name in x0:
      np.testing.assert_allclose(ys[name], [y[name] for y in lookaheads],
                                 rtol=1e-10, atol=1e-12)
      np.testing.assert_allclose(xs[name], [x[name] for x in anchors],
                                 rtol=1e-10, atol=1e-12)
    # The reference loop is not degenerate: the lookahead was on and off.
    assert not np.allclose(ys["w"][20], xs["w"][20])
    np.testing.assert_array_equal(ys["w"][45], xs["w"][45])


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_beta_zero_is_exactly_the_inner_optimizer():
  loss, _, x0 = _problem(jnp.float32)
  params = jax.tree.map(lambda v: jnp.asarray(v, jnp.float32), x0)

  grad_fn = jax.jit(jax.grad(loss))

  # Op by op (no jit around the optimizer): one XLA program per op, so both
  # sides round identically and any difference is the wrapper's.
  def trajectory(tx):
    p, state, path = params, tx.init(params), []
    for _ in range(20):
      updates, state = tx.update(grad_fn(p), state, p)
      p = optax.apply_updates(p, updates)
      path.append(p)
    return path, state

  with_wrapper, state = trajectory(
      optim.ema_nesterov(_optax_inner("adamw"), beta_max=0.0, gamma=0.9))
  plain, _ = trajectory(_optax_inner("adamw"))
  jax.tree.map(np.testing.assert_array_equal, with_wrapper, plain)
  jax.tree.map(np.testing.assert_array_equal,
               optim.ema_nesterov_eval_params(with_wrapper[-1], state),
               with_wrapper[-1])


def test_gamma_zero_is_classic_nesterov_extrapolation():
  h = jnp.array([1.0, 0.3, 0.05])
  eta, beta = 0.9, 0.6
  tx = optim.ema_nesterov(optax.sgd(eta), beta_max=beta, gamma=0.0)
  y = jnp.array([1.0, -2.0, 3.0])
  state = tx.init(y)
  x_prev = x = np.asarray(y, np.float64)
  y_ref = x
  for _ in range(30):
    updates, state = tx.update(h * y, state, y)
    y = optax.apply_updates(y, updates)
    x_prev, x = x, y_ref - eta * np.asarray(h, np.float64) * y_ref
    y_ref = x + beta * (x - x_prev)
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(optim.ema_nesterov_eval_params(y, state), x,
                               rtol=1e-5, atol=1e-6)


def _critically_damped_beta(gamma, kappa):
  r"""beta that critically damps the slowest mode of a quadratic.

  On an eigenvalue h of eta*A the anchor and m follow a 2x2 linear map with
  trace (1-h)(1+b) + gamma*h and determinant (1-h) b, b = gamma + (1-gamma)
  beta. A double root at h = 1/kappa needs, to leading order in sqrt(h),
  b = 1 - 2 sqrt((1-gamma) h), a rate 1 - sqrt((1-gamma)/kappa): steps grow
  like sqrt(kappa). Solved for beta.
  """
  return 1 - 2 / math.sqrt((1 - gamma) * kappa)


@functools.partial(jax.jit, static_argnames="accelerated")
def _steps_to_relative_error(h, beta, gamma, *, accelerated):
  """SGD steps (eta = 1/L) on f = sum(h x^2)/2 until |x_t| <= 1e-6 |x_0|."""
  tx = (optim.ema_nesterov(optax.sgd(1.0), beta_max=beta, gamma=gamma)
        if accelerated else optax.sgd(1.0))
  x0 = jnp.ones_like(h)
  anchor = ((lambda p, s: optim.ema_nesterov_eval_params(p, s))
            if accelerated else (lambda p, s: p))

  def not_done(carry):
    _, _, t, err = carry
    return (err > 1e-6) & (t < 500_000)

  def step(carry):
    params, state, t, _ = carry
    updates, state = tx.update(h * params, state, params)
    params = optax.apply_updates(params, updates)
    err = jnp.linalg.norm(anchor(params, state)) / jnp.linalg.norm(x0)
    return params, state, t + 1, err

  init = (x0, tx.init(x0), jnp.int32(0), jnp.float32(1.0))
  return jax.lax.while_loop(not_done, step, init)[2]


def test_convex_quadratics_need_sqrt_kappa_steps():
  spectra = {k: jnp.logspace(-math.log10(k), 0, 100) for k in (1e2, 1e4)}
  steps = lambda kappa, **kw: int(_steps_to_relative_error(spectra[kappa], **kw))
  sgd_ratio = (steps(1e4, beta=0.0, gamma=0.0, accelerated=False)
               / steps(1e2, beta=0.0, gamma=0.0, accelerated=False))
  assert sgd_ratio > 50  # plain SGD: steps grow like kappa
  for gamma in (0.0, 0.5, 0.9):
    counts = [steps(k, beta=_critically_damped_beta(gamma, k), gamma=gamma,
                    accelerated=True) for k in (1e2, 1e4)]
    assert counts[1] < 500_000
    assert counts[1] / counts[0] <= 15, (gamma, counts)


@pytest.mark.usefixtures("standard_dtype_promotion")
@pytest.mark.parametrize("mu_dtype", [None, jnp.float32])
def test_exactly_one_extra_parameter_sized_buffer(mu_dtype):
  params = {"w": jnp.zeros((64, 32), jnp.bfloat16), "b": jnp.zeros(32, jnp.bfloat16)}
  size = lambda tree: sum(x.size for x in jax.tree.leaves(tree))
  inner = optax.adamw(1e-3)
  state = optim.ema_nesterov(inner, mu_dtype=mu_dtype).init(params)
  assert size(state) - size(inner.init(params)) == size(params) + 2  # + t, beta
  assert size(state.m) == size(params)
  assert jax.tree.leaves(state.m)[0].dtype == (mu_dtype or jnp.bfloat16)
  grads = jax.tree.map(jnp.ones_like, params)
  tx = optim.ema_nesterov(inner, mu_dtype=mu_dtype)
  updates, new_state = tx.update(grads, state, params)
  assert jax.tree.map(lambda u: u.dtype, updates) == jax.tree.map(
      lambda p: p.dtype, params)
  assert jax.tree.map(jax.typeof, new_state) == jax.tree.map(jax.typeof, state)


def test_beta_schedule_gating_and_lr_ratio():
  tx = optim.ema_nesterov(optax.sgd(1.0), beta_max=0.5, gamma=0.5,
                          lr_ratio=lambda t: 1 / (1 + t.astype(jnp.float32)),
                          warmup_steps=3,
                          rest_start=6)
  p = jnp.zeros(2)
  state = tx.init(p)
  betas = []
  for _ in range(8):
    betas.append(float(state.beta))
    _, state = tx.update(jnp.ones(2), state, p)
  np.testing.assert_allclose(betas, [0, 0, 0, 0.5 / 4, 0.5 / 5, 0.5 / 6, 0, 0],
                             rtol=1e-6)


def test_eval_params_finds_the_state_inside_wrappers_and_says_when_missing():
  make = lambda: optim.ema_nesterov(optax.sgd(0.1), beta_max=0.5, gamma=0.5)

  def run(tx):
    params = jnp.array([1.0, -2.0, 3.0])
    state = tx.init(params)
    for _ in range(3):
      updates, state = tx.update(params, state, params)
      params = optax.apply_updates(params, updates)
    return params, optim.ema_nesterov_eval_params(params, state)

  params, anchor = run(make())
  assert not np.allclose(anchor, params)
  wrapped = (
      optax.chain(optax.clip_by_global_norm(1e6), make()),
      optax.apply_if_finite(make(), 3),
      optax.inject_hyperparams(optim.ema_nesterov)(
          optax.sgd(0.1), beta_max=0.5, gamma=0.5),
  )
  for tx in wrapped:
    np.testing.assert_allclose(run(tx), (params, anchor), rtol=1e-6)
  with pytest.raises(ValueError, match="exactly one EmaNesterovState"):
    optim.ema_nesterov_eval_params(params, optax.sgd(0.1).init(params))


def test_eval_params_of_an_nnx_optimizer_equal_those_of_plain_optax():
  from flax import nnx  # pylint: disable=g-import-not-at-top
  make = lambda: optim.ema_nesterov(optax.sgd(0.1), beta_max=0.5, gamma=0.5)
  model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
  pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  optimizer = nnx.Optimizer(model, make(), wrt=nnx.Param)
  tx = make()
  state = tx.init(pure)
  loss = lambda m: jnp.sum(m(jnp.ones((1, 3))) ** 2)
  for _ in range(3):
    grads = nnx.grad(loss)(model)
    optimizer.update(model, grads)
    updates, state = tx.update(nnx.to_pure_dict(grads), state, pure)
    pure = optax.apply_updates(pure, updates)
  anchor = optim.ema_nesterov_eval_params(nnx.state(model, nnx.Param),
                                          optimizer.opt_state)
  assert isinstance(anchor, nnx.State)
  expected = optim.ema_nesterov_eval_params(pure, state)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6),
               nnx.to_pure_dict(anchor), expected)
  assert not np.allclose(expected["kernel"], pure["kernel"])
  with pytest.raises(TypeError, match=r"pass nnx.state\(model, nnx.Param\)"):
    optim.ema_nesterov_eval_params(model, optimizer.opt_state)


def test_eval_params_leaves_leaves_without_lookahead_alone():
  tx = optax.partition(
      {"look": optim.ema_nesterov(optax.sgd(0.1), beta_max=0.5, gamma=0.5),
       "plain": optax.sgd(0.1)}, {"a": "look", "b": "plain"})
  params = {"a": jnp.array([1.0, -2.0]), "b": jnp.array([3.0])}
  state = tx.init(params)
  for _ in range(3):
    updates, state = tx.update(params, state, params)
    params = optax.apply_updates(params, updates)
  anchor = optim.ema_nesterov_eval_params(params, state)
  np.testing.assert_array_equal(anchor["b"], params["b"])
  assert not np.allclose(anchor["a"], params["a"])


def test_bad_arguments_are_named_errors():
  sgd = optax.sgd(0.1)
  with pytest.raises(ValueError, match="inner must be an optax"):
    optim.ema_nesterov(lambda g: g)
  with pytest.raises(ValueError, match="gamma must lie in"):
    optim.ema_nesterov(sgd, gamma=1.0)
  with pytest.raises(ValueError, match="beta_max must be >= 0"):
    optim.ema_nesterov(sgd, beta_max=-0.1)
  with pytest.raises(ValueError, match="m_init must be one of"):
    optim.ema_nesterov(sgd, m_init="ones")
  with pytest.raises(ValueError, match="increment must be one of"):
    optim.ema_nesterov(sgd, increment="lookahead")
  with pytest.raises(ValueError, match="rest_start=5 must exceed warmup_steps=5"):
    optim.ema_nesterov(sgd, warmup_steps=5, rest_start=5)
  with pytest.raises(ValueError, match="static_args"):
    optim.ema_nesterov(sgd, lr_ratio=0.5)
  with pytest.warns(UserWarning, match="not contractive"):
    optim.ema_nesterov(sgd, beta_max=1.0)
