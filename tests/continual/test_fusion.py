"""DAF fusion: brute-force minimisers, reductions, ordering, jit, misuse."""

import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from jaxpapers import continual
from jaxpapers import curvature

SHAPES = {"down": (4, 3), "up": (3, 4), "bias": (5,)}


def _tree(rng, scale=1.0, positive=False):
  leaves = {k: rng.normal(size=s) * scale for k, s in SHAPES.items()}
  if positive:
    leaves = {k: np.abs(v) + 0.05 for k, v in leaves.items()}
  return {k: jnp.asarray(v, jnp.float32) for k, v in leaves.items()}


def _problem(seed):
  """theta0, g_{t-1}, a_t and the Hessian diagonals of two quadratic losses."""
  rng = np.random.default_rng(seed)
  theta0, previous, task = _tree(rng), _tree(rng), _tree(rng)
  h_old_true, h_new_true = _tree(rng, positive=True), _tree(rng, positive=True)

  def quadratic(centre, h):
    return lambda g: 0.5 * sum(jnp.sum(h[k] * (g[k] - centre[k]) ** 2)
                               for k in g)

  # The curvatures DAF receives are read off the losses: their Hessians are
  # diagonal, so one Hessian-vector product with ones gives the diagonal.
  ones = jax.tree.map(jnp.ones_like, theta0)
  diagonal = lambda loss: curvature.hvp(loss, theta0, ones)
  return (theta0, previous, task, diagonal(quadratic(previous, h_old_true)),
          diagonal(quadratic(task, h_new_true)))


def _np(tree):
  return {k: np.asarray(v, np.float64) for k, v in tree.items()}


def _objective64(alpha, beta, theta0, previous, task, h_old, h_new, lam,
                 keys=None):
  """J(alpha, beta) in float64 numpy, over ``keys`` (default: every leaf)."""
  total = 0.0
  for k in keys or theta0:
    g = theta0[k] + alpha * (previous[k] - theta0[k]) + beta * (task[k]
                                                                - theta0[k])
    total += 0.5 * (np.sum(h_old[k] * (g - previous[k]) ** 2)
                    + np.sum(h_new[k] * (g - task[k]) ** 2)
                    + lam * np.sum((g - theta0[k]) ** 2))
  return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_coef_is_the_brute_force_minimiser_of_the_taylor_model(seed):
  problem = _problem(seed)
  fused, info = continual.fuse(*problem, 3, continual.FusionConfig(rho=0.05))
  theta0, previous, task, h_old, h_new = map(_np, problem)
  lam = 0.05 * np.mean(np.concatenate(
      [(h_old[k] + h_new[k]).ravel() for k in h_old]))
  np.testing.assert_allclose(info.lam, lam, rtol=1e-5)
  best = optimize.minimize(
      lambda c: _objective64(*c, theta0, previous, task, h_old, h_new, lam),
      x0=[0.5, 0.5], method="Nelder-Mead",
      options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000})
  np.testing.assert_allclose([info.alpha, info.beta], best.x, atol=2e-4)
  # No point of a grid around the optimum does better.
  grid = np.linspace(-0.05, 0.05, 21)
  alpha, beta = float(info.alpha), float(info.beta)
  ours = _objective64(alpha, beta, theta0, previous, task, h_old, h_new, lam)
  assert all(ours <= _objective64(alpha + da, beta + db, theta0,
                                  previous, task, h_old, h_new, lam) + 1e-6
             for da in grid for db in grid)
  for k in SHAPES:
    expected = theta0[k] + best.x[0] * (previous[k] - theta0[k]) + best.x[1] * (
        task[k] - theta0[k])
    np.testing.assert_allclose(fused[k], expected, atol=1e-3)


def test_per_layer_solves_one_system_per_leaf():
  problem = _problem(3)
  _, info = continual.fuse(*problem, 2,
                           continual.FusionConfig(per_layer=True, rho=0.1))
  theta0, previous, task, h_old, h_new = map(_np, problem)
  lam = float(info.lam)
  for k in SHAPES:
    best = optimize.minimize(
        lambda c: _objective64(*c, theta0, previous, task, h_old, h_new, lam,
                               keys=[k]),
        x0=[0.5, 0.5], method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000})
    np.testing.assert_allclose([info.alpha[k], info.beta[k]], best.x,
                               atol=2e-4)


def test_single_beta_is_the_brute_force_minimiser_on_the_segment():
  problem = _problem(4)
  _, info = continual.fuse(*problem, 2, continual.FusionConfig("single_beta"))
  theta0, previous, task, h_old, h_new = map(_np, problem)
  best = optimize.minimize_scalar(
      lambda b: _objective64(1 - b, b, theta0, previous, task, h_old, h_new,
                             0.0), bounds=(-2, 3), method="bounded",
      options={"xatol": 1e-10})
  np.testing.assert_allclose(info.beta, best.x, atol=1e-5)
  np.testing.assert_allclose(info.alpha, 1 - best.x, atol=1e-5)
  assert float(info.lam) == 0.0


@pytest.mark.parametrize("t", [2, 3, 5])
def test_two_coef_with_isotropic_curvature_and_no_kl_is_the_running_mean(t):
  theta0, previous, task, _, _ = _problem(5)
  c = 0.7
  h_old = jax.tree.map(lambda x: jnp.full_like(x, (t - 1) * c), theta0)
  h_new = jax.tree.map(lambda x: jnp.full_like(x, c), theta0)
  fused, info = continual.fuse(theta0, previous, task, h_old, h_new, t,
                               continual.FusionConfig(rho=0.0))
  mean, mean_info = continual.fuse(theta0, previous, task, h_old, h_new, t,
                                   continual.FusionConfig("running_mean"))
  np.testing.assert_allclose([info.alpha, info.beta], [1 - 1 / t, 1 / t],
                             rtol=1e-4)
  np.testing.assert_allclose([mean_info.alpha, mean_info.beta],
                             [1 - 1 / t, 1 / t], rtol=1e-6)
  for k in SHAPES:
    np.testing.assert_allclose(fused[k], mean[k], atol=1e-5)
    np.testing.assert_allclose(
        mean[k], (t - 1) / t * previous[k] + task[k] / t, atol=1e-5)


def test_first_task_keeps_no_old_direction():
  theta0, _, task, _, h_new = _problem(6)
  zeros = jax.tree.map(jnp.zeros_like, theta0)
  _, info = continual.fuse(theta0, theta0, task, zeros, h_new, 1)
  v = {k: np.asarray(task[k] - theta0[k], np.float64) for k in SHAPES}
  h = _np(h_new)
  vhv = sum(np.sum(h[k] * v[k] ** 2) for k in SHAPES)
  vv = sum(np.sum(v[k] ** 2) for k in SHAPES)
  assert float(info.alpha) == 0.0
  np.testing.assert_allclose(info.beta, vhv / (vhv + float(info.lam) * vv),
                             rtol=1e-5)


@pytest.mark.parametrize("mode", ["two_coef", "single_beta", "running_mean"])
def test_fusion_is_invariant_to_the_order_of_the_leaves(mode):
  problem = _problem(7)
  config = continual.FusionConfig(mode)
  fused, info = continual.fuse(*problem, 3, config)
  order = ["up", "bias", "down"]
  as_list = [[tree[k] for k in order] for tree in problem]
  fused_list, info_list = continual.fuse(*as_list, 3, config)
  np.testing.assert_allclose(info_list.alpha, info.alpha, rtol=1e-5)
  np.testing.assert_allclose(info_list.beta, info.beta, rtol=1e-5)
  for k, leaf in zip(order, fused_list):
    np.testing.assert_allclose(leaf, fused[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", [
    continual.FusionConfig(), continual.FusionConfig(per_layer=True),
    continual.FusionConfig("single_beta"),
    continual.FusionConfig("running_mean", theta0="first_task")])
def test_jit_with_a_traced_task_index_matches_eager(config):
  problem = _problem(8)
  eager, eager_info = continual.fuse(*problem, 3, config)
  jitted, jit_info = jax.jit(continual.fuse, static_argnums=6)(
      *problem, jnp.asarray(3, jnp.int32), config)
  for a, b in zip(jax.tree.leaves((eager, eager_info.alpha, eager_info.beta)),
                  jax.tree.leaves((jitted, jit_info.alpha, jit_info.beta))):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_update_accumulates_curvature_and_first_task_moves_the_prior():
  theta0, a1, a2, h1, h2 = _problem(9)
  config = continual.FusionConfig(theta0="first_task")
  step = jax.jit(continual.update, static_argnums=3)
  state, _ = step(continual.init(theta0), a1, h1, config)
  for k in SHAPES:  # after task 1 the prior centre and the global are a_1
    np.testing.assert_array_equal(state.theta0[k], a1[k])
    np.testing.assert_array_equal(state.global_params[k], a1[k])
  state, info = step(state, a2, h2, config)
  expected, expected_info = continual.fuse(a1, a1, a2, h1, h2, 2, config)
  assert int(state.num_tasks) == 2
  np.testing.assert_allclose(info.beta, expected_info.beta, rtol=1e-5)
  for k in SHAPES:
    np.testing.assert_allclose(state.h_old[k], h1[k] + h2[k], rtol=1e-6)
    np.testing.assert_allclose(state.global_params[k], expected[k], atol=1e-6)


def test_negative_curvature_is_clipped_and_counted_not_nan():
  theta0, previous, task, h_old, h_new = _problem(10)
  negative = {**h_new, "bias": -h_new["bias"]}
  fused, info = continual.fuse(theta0, previous, task, h_old, negative, 2)
  clipped = {**h_new, "bias": jnp.zeros_like(h_new["bias"])}
  expected, _ = continual.fuse(theta0, previous, task, h_old, clipped, 2)
  assert int(info.num_clipped) == SHAPES["bias"][0]
  assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(fused))
  for k in SHAPES:
    np.testing.assert_allclose(fused[k], expected[k], rtol=1e-6)


def test_mismatched_or_bad_inputs_are_named():
  theta0, previous, task, h_old, h_new = _problem(11)
  with pytest.raises(ValueError, match="task must have the pytree structure"):
    continual.fuse(theta0, previous, {"down": task["down"]}, h_old, h_new, 2)
  with pytest.raises(ValueError, match="h_new must have the leaf shapes"):
    continual.fuse(theta0, previous, task, h_old,
                   {**h_new, "bias": jnp.zeros(4)}, 2)
  with pytest.raises(TypeError, match="previous"):
    continual.fuse(theta0, {**previous, "bias": jnp.zeros(5, jnp.int32)},
                   task, h_old, h_new, 2)
  with pytest.raises(ValueError, match="task_index"):
    continual.fuse(theta0, previous, task, h_old, h_new, 0)
  with pytest.raises(ValueError, match="empty"):
    continual.fuse({}, {}, {}, {}, {}, 1)


@pytest.mark.parametrize("kwargs,match", [({"mode": "mean"}, "mode"),
                                          ({"rho": -1.0}, "rho"),
                                          ({"theta0": "zeros"}, "theta0")])
def test_config_is_validated_at_construction(kwargs, match):
  with pytest.raises(ValueError, match=match):
    continual.FusionConfig(**kwargs)


@hypothesis.settings(max_examples=15, deadline=None)
@hypothesis.given(seed=st.integers(0, 10_000), t=st.integers(2, 6),
                  rho=st.floats(0.0, 1.0))
def test_two_coef_never_loses_to_the_running_mean_on_its_objective(seed, t,
                                                                   rho):
  problem = _problem(seed)
  _, info = continual.fuse(*problem, t, continual.FusionConfig(rho=rho))
  lam = float(info.lam)
  ours = float(continual.objective(info.alpha, info.beta, *problem, lam))
  for alpha, beta in ((1 - 1 / t, 1 / t), (0.0, 1.0), (1.0, 0.0), (0.0, 0.0)):
    other = float(continual.objective(jnp.float32(alpha), jnp.float32(beta),
                                      *problem, lam))
    assert ours <= other * (1 + 1e-5) + 1e-5


def _span_minimum64(theta0, previous, task, h_old, h_new, lam):
  """min J over theta0 + span{u, v} in float64 (SVD least squares)."""
  flat = lambda tree: np.concatenate(
      [np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(tree)])
  theta0, previous, task, h_old, h_new = map(
      flat, (theta0, previous, task, h_old, h_new))
  basis = np.stack([previous - theta0, task - theta0], axis=1)
  m = h_old + h_new + lam
  gram = basis.T @ (m[:, None] * basis)
  rhs = basis.T @ (h_old * (previous - theta0) + h_new * (task - theta0))
  coefs = np.linalg.lstsq(gram, rhs, rcond=None)[0]
  return _objective_at64(theta0 + basis @ coefs, theta0, previous, task,
                         h_old, h_new, lam)


def _objective_at64(fused, theta0, previous, task, h_old, h_new, lam):
  """J at a given adapter, float64."""
  flat = lambda tree: np.concatenate(
      [np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(tree)])
  g, theta0, previous, task, h_old, h_new = map(
      flat, (fused, theta0, previous, task, h_old, h_new))
  return 0.5 * (np.sum(h_old * (g - previous) ** 2)
                + np.sum(h_new * (g - task) ** 2)
                + lam * np.sum((g - theta0) ** 2))


@pytest.mark.parametrize("distance", [0.0, 1e-6, 1e-3, 1.0])
def test_two_coef_reaches_the_minimum_for_parallel_to_orthogonal_directions(
    distance):
  # |v - u| / |u| = distance. A fixed 1e-12 ridge on the 2x2 normal
  # equations gave NaN at 0 and 1e-6 and J 154% above its minimum at 1e-3.
  rng = np.random.default_rng(12)
  theta0, previous, _, h_old, h_new = _problem(12)
  u = {k: np.asarray(previous[k] - theta0[k], np.float64) for k in SHAPES}
  step = {k: rng.normal(size=s) for k, s in SHAPES.items()}
  norm = lambda tree: np.sqrt(sum(np.sum(x ** 2) for x in tree.values()))
  task = {k: jnp.asarray(previous[k] + distance * norm(u) / norm(step)
                         * step[k], jnp.float32) for k in SHAPES}
  fused, info = continual.fuse(theta0, previous, task, h_old, h_new, 2)
  lam = float(info.lam)
  best = _span_minimum64(theta0, previous, task, h_old, h_new, lam)
  ours = _objective_at64(fused, theta0, previous, task, h_old, h_new, lam)
  assert np.isfinite([info.alpha, info.beta]).all()
  np.testing.assert_allclose(ours, best, rtol=1e-6)


def test_one_task_fed_twice_stays_at_the_minimum_on_its_line():
  # Used to give 2a, then NaN: u and v are parallel from task 2 on.
  a = jnp.array([1.0, 2.0, -1.0, 0.5])
  ones = jnp.ones(4)
  fused, info = continual.fuse(jnp.zeros(4), a, a, ones, ones, 2)
  # The exact minimiser on the line through a: 2 g - 2 a + lam g = 0.
  np.testing.assert_allclose(fused, a * 2 / (2 + float(info.lam)), rtol=1e-6)
  state = continual.init(jnp.zeros(4))
  for t in range(1, 4):
    previous, h_old = state.global_params, state.h_old
    state, info = continual.update(state, a, ones)
    lam = float(info.lam)
    best = _span_minimum64(jnp.zeros(4), previous, a, h_old, ones, lam)
    ours = _objective_at64(state.global_params, jnp.zeros(4), previous, a,
                           h_old, ones, lam)
    np.testing.assert_allclose(ours, best, rtol=1e-6)
    # One direction: the minimum-norm pair, alpha / beta = |u| / |v|.
    np.testing.assert_allclose(
        float(info.alpha) * np.linalg.norm(a),
        float(info.beta) * np.linalg.norm(previous), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("config", [
    continual.FusionConfig(), continual.FusionConfig("single_beta")])
def test_fusion_is_scale_free_and_a_nan_input_gives_nan(config):
  # No fixed tiny constant decides a case: parameters and curvatures of
  # size 1e-30 or 1e30 fuse like those of size 1.
  theta0, previous, task, h_old, h_new = _problem(13)
  reference, info = continual.fuse(theta0, previous, task, h_old, h_new, 2,
                                   config)
  for scale in (1e-30, 1e30):
    times = lambda tree: jax.tree.map(lambda x: x * scale, tree)
    fused, scaled_info = continual.fuse(
        *map(times, (theta0, previous, task, h_old, h_new)), 2, config)
    for k in SHAPES:
      np.testing.assert_allclose(fused[k] / scale, reference[k], rtol=1e-5,
                                 atol=1e-5)
    np.testing.assert_allclose(jax.tree.leaves(scaled_info.beta),
                               jax.tree.leaves(info.beta), rtol=1e-5)
  nan_curvature = {**h_new, "bias": h_new["bias"].at[0].set(jnp.nan)}
  fused, info = continual.fuse(theta0, previous, task, h_old, nan_curvature,
                               2, config)
  assert np.isnan(fused["bias"]).all()
  assert np.isnan(jax.tree.leaves(info.beta)).any()


def test_running_mean_with_a_traced_task_index_below_one_is_nan():
  theta0, previous, task, h_old, h_new = _problem(14)
  fused, info = jax.jit(continual.fuse, static_argnums=6)(
      theta0, previous, task, h_old, h_new, jnp.int32(0),
      continual.FusionConfig("running_mean"))
  assert np.isnan(info.beta) and all(
      np.isnan(leaf).all() for leaf in jax.tree.leaves(fused))
