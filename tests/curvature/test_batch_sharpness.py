"""Batch Sharpness and GNI in closed form: least squares and per-draw quadratics."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import curvature
from jaxpapers import data as data_lib

DIM = 4


def _loss(w, batch):
  x, y = batch
  return 0.5 * jnp.mean((x @ w - y) ** 2)


def _problem(seed=0, n=64):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, DIM)).astype(np.float32) * np.array([1, 2, 0.5, 3],
                                                              np.float32)
  y = rng.normal(size=(n,)).astype(np.float32)
  w = rng.normal(size=(DIM,)).astype(np.float32)
  return w, (x, y)


def _numpy_draws(w, xb, yb):
  """Per-draw a = g^T H g and c = g^T g for least squares, in float64."""
  w = w.astype(np.float64)
  a, c = [], []
  for x, y in zip(xb.astype(np.float64), yb.astype(np.float64)):
    h = x.T @ x / len(y)
    g = x.T @ (x @ w - y) / len(y)
    a.append(g @ h @ g)
    c.append(g @ g)
  return np.array(a), np.array(c)


def _batches(data, batch_size=8, num=50, seed=1):
  return data_lib.sample_minibatches(jax.random.key(seed), data, batch_size, num)


def test_mean_of_ratios_closed_form():
  w, data = _problem()
  batches = _batches(data)
  a, c = _numpy_draws(w, *map(np.asarray, batches))
  est = jax.jit(lambda w, b: curvature.batch_sharpness(_loss, w, b))(w, batches)
  r = a / c
  np.testing.assert_allclose(est.value, r.mean(), rtol=1e-4)
  np.testing.assert_allclose(est.stderr, r.std(ddof=1) / np.sqrt(len(r)),
                             rtol=1e-3)
  assert int(est.num_draws) == len(r)
  np.testing.assert_allclose(est.mean_curvature, a.mean(), rtol=1e-4)
  np.testing.assert_allclose(est.mean_grad_sq_norm, c.mean(), rtol=1e-4)


def test_ratio_of_means_closed_form_with_delta_method_se():
  w, data = _problem(seed=3)
  batches = _batches(data, seed=4)
  a, c = _numpy_draws(w, *map(np.asarray, batches))
  est = curvature.batch_sharpness(_loss, w, batches, estimator="ratio_of_means")
  k = len(a)
  cov = np.cov(np.stack([a, c]), ddof=1)
  rel_var = (cov[0, 0] / a.mean() ** 2 + cov[1, 1] / c.mean() ** 2
             - 2 * cov[0, 1] / (a.mean() * c.mean())) / k
  ratio = a.mean() / c.mean()
  np.testing.assert_allclose(est.value, ratio, rtol=1e-4)
  np.testing.assert_allclose(est.stderr, ratio * np.sqrt(rel_var), rtol=1e-3)
  np.testing.assert_allclose(est.rel_se, np.sqrt(rel_var), rtol=1e-3)


def test_one_direction_problem_has_exact_sharpness():
  # Every batch Hessian is s^2 e1 e1^T and every gradient lies along e1, so
  # each draw's ratio is exactly s^2 whatever the batch.
  x = jnp.zeros((32, DIM)).at[:, 0].set(3.0)
  y = jnp.linspace(-1.0, 1.0, 32)
  est = curvature.batch_sharpness(_loss, jnp.ones(DIM), _batches((x, y)))
  np.testing.assert_allclose(est.value, 9.0, rtol=1e-5)
  np.testing.assert_allclose(est.stderr, 0.0, atol=1e-5)


def test_chunked_map_equals_vmap():
  w, data = _problem()
  batches = _batches(data)
  full = curvature.batch_sharpness(_loss, w, batches, chunk_size=None)
  chunked = curvature.batch_sharpness(_loss, w, batches, chunk_size=7)
  np.testing.assert_allclose(chunked.value, full.value, rtol=1e-6)
  np.testing.assert_allclose(chunked.stderr, full.stderr, rtol=1e-5)
  # The default ("auto": chunks of 8 here) gives the vmapped numbers too.
  auto = curvature.batch_sharpness(_loss, w, batches)
  np.testing.assert_allclose(auto.value, full.value, rtol=1e-6)
  np.testing.assert_allclose(auto.stderr, full.stderr, rtol=1e-5)
  assert int(auto.num_draws) == int(full.num_draws) == 50


def _scan_lengths(fn, *args):
  """Lengths of the scans in ``fn``'s jaxpr (``lax.map`` chunks are one)."""
  jaxpr = jax.make_jaxpr(fn)(*args)
  return [e.params["length"] for e in jaxpr.eqns if e.primitive.name == "scan"]


def test_auto_chunk_size_follows_the_draw_count_and_per_draw_bytes():
  w, data = _problem()
  bs = lambda w, b: curvature.batch_sharpness(_loss, w, b)
  assert _scan_lengths(bs, w, _batches(data, num=50)) == [6]  # 6 chunks of 8
  assert _scan_lengths(bs, w, _batches(data, num=8)) == []  # one vmap
  # 16 MiB of params per draw: three draws fill a chunk's 64 MiB.
  loss = lambda w, batch: _loss(w[:DIM], batch)
  big = jax.ShapeDtypeStruct((4 * 2**20,), jnp.float32)
  bs = lambda w, b: curvature.batch_sharpness(loss, w, b)
  assert _scan_lengths(bs, big, _batches(data, num=50)) == [16]
  huge = jax.ShapeDtypeStruct((64 * 2**20,), jnp.float32)
  assert _scan_lengths(bs, huge, _batches(data, num=50)) == [50]


def test_sharded_draws_give_the_single_device_value():
  w, data = _problem(n=128)
  batches = _batches(data, num=64)
  mesh = jax.make_mesh((8,), ("draws",), axis_types=(jax.sharding.AxisType.Explicit,))
  sharding = jax.NamedSharding(mesh, jax.P("draws"))
  sharded = jax.device_put(batches, sharding)
  fn = jax.jit(lambda w, b: curvature.batch_sharpness(_loss, w, b))
  single = fn(w, batches)
  with jax.set_mesh(mesh):
    multi = fn(w, sharded)
  assert len(jax.tree.leaves(sharded)[0].sharding.device_set) == 8
  np.testing.assert_allclose(multi.value, single.value, rtol=1e-6)
  np.testing.assert_allclose(multi.stderr, single.stderr, rtol=1e-5)


def _adaptive_reference(w, data, key, batch_size, chunk, min_draws, max_draws,
                        rel_tol):
  """The authors' stopping rule, replayed in numpy on the same keys as the JAX loop.

  Their loop (``calculate_averaged_grad_H_grad``, github.com/arseniqum/
  edge-of-stochastic-stability, utils/measure.py) appends draw ``i`` (0-based),
  skips the test while ``i < min_estimates`` and divides the delta-method
  variance by ``i`` = K - 1; chunks only move where the test can fire.
  """
  a_all, c_all = [], []
  while True:
    key, draw_key = jax.random.split(key)
    xb, yb = data_lib.sample_minibatches(draw_key, data, batch_size, chunk)
    a, c = _numpy_draws(w, np.asarray(xb), np.asarray(yb))
    a_all += list(a)
    c_all += list(c)
    i = len(a_all) - 1
    if len(a_all) >= max_draws:
      return len(a_all), float(np.mean(np.array(a_all) / np.array(c_all)))
    if i < min_draws:
      continue
    mean_x, mean_y = np.mean(a_all), np.mean(c_all)
    var_x, var_y = np.var(a_all, ddof=1), np.var(c_all, ddof=1)
    cov_xy = np.cov(a_all, c_all, ddof=1)[0, 1]
    ratio = mean_x / mean_y
    var_ratio = (var_x / mean_y**2 - 2 * cov_xy * mean_x / mean_y**3
                 + var_y * mean_x**2 / mean_y**4) / i
    if np.sqrt(var_ratio) / abs(ratio) < rel_tol:
      return len(a_all), float(np.mean(np.array(a_all) / np.array(c_all)))


@pytest.mark.parametrize("rel_tol,chunk", [(0.2, 5), (0.2, 1), (0.3, 1),
                                           (1e-9, 10)])
def test_adaptive_stopping_rule_replays_the_authors_rule(rel_tol, chunk):
  w, data = _problem(n=64)
  key = jax.random.key(7)
  sampler = functools.partial(_sample, data)
  est = curvature.batch_sharpness_adaptive(
      _loss, w, sampler, key, min_draws=10, max_draws=60, rel_tol=rel_tol,
      chunk_size=chunk,
  )
  k, value = _adaptive_reference(w, data, key, 4, chunk, 10, 60, rel_tol)
  assert int(est.num_draws) == k
  np.testing.assert_allclose(est.value, value, rtol=1e-4)
  if rel_tol == 1e-9:
    assert k == 60  # the budget, not the tolerance, stopped it
  else:
    assert 10 < k < 60  # the tolerance did


def _sample(data, key, num):
  return data_lib.sample_minibatches(key, data, 4, num)


def test_gni_closed_form():
  w, data = _problem(n=32)
  batches = _batches(data, batch_size=8, num=20)
  x, y = (np.asarray(d, np.float64) for d in data)
  h = x.T @ x / len(y)
  full_grad = x.T @ (x @ w - y) / len(y)
  xb, yb = (np.asarray(b, np.float64) for b in batches)
  grads = [xi.T @ (xi @ w - yi) / len(yi) for xi, yi in zip(xb, yb)]
  expected = np.mean([g @ h @ g for g in grads]) / (full_grad @ full_grad)
  for num_chunks in (1, 4):
    got = curvature.gni(_loss, w, batches, data, num_chunks=num_chunks)
    np.testing.assert_allclose(got.value, expected, rtol=1e-4)


def test_mismatched_batch_leaves_are_a_named_error():
  w, (x, y) = _problem()
  bad = (x[None, :8], y[None, :7])
  with pytest.raises(ValueError, match="loss_fn fails on one draw of batches"):
    curvature.batch_sharpness(_loss, w, bad)
  bad = (jnp.stack([x[:8]] * 3), jnp.stack([y[:8]] * 2))
  with pytest.raises(ValueError, match="batches disagree"):
    curvature.batch_sharpness(_loss, w, bad)


def test_no_draws_is_a_named_error():
  w, (x, y) = _problem()
  with pytest.raises(ValueError, match="batches is empty"):
    curvature.batch_sharpness(_loss, w, (x[None, :0][:0], y[None, :0][:0]))


def _quadratic_form_loss(w, q):
  return 0.5 * w @ q["A"] @ w - q["c"] @ w


def _graph_loss(w, g):
  """Squared differences of a linear node score along a draw's edges."""
  score = g["nodes"] @ w
  diff = score[g["edges"][:, 0]] - score[g["edges"][:, 1]]
  return 0.5 * jnp.mean(diff**2) + 0.5 * g["decay"] * (w @ w)


@functools.partial(jax.jit, static_argnums=0)
def _every_estimate(loss, w, stack, data):
  """Each entry point that takes a stack of draws, in one compiled program."""
  num = jax.tree.leaves(stack)[0].shape[0]
  tile = lambda key, n: jax.tree.map(lambda x: x[np.arange(n) % num], stack)
  return {
      "auto": curvature.batch_sharpness(loss, w, stack).value,
      "chunked": curvature.batch_sharpness(  # a numpy int is an int
          loss, w, stack, chunk_size=np.int64(2)).value,
      "ratio_of_means": curvature.batch_sharpness(
          loss, w, stack, estimator="ratio_of_means").value,
      # Two passes over the stack: the tolerance is never met, the budget is.
      "adaptive": curvature.batch_sharpness_adaptive(
          loss, w, tile, jax.random.key(0), min_draws=2, max_draws=2 * num,
          rel_tol=1e-9, chunk_size=num).value,
      "gni": curvature.gni(loss, w, stack, data).value,
  }


def _closed_form(hessians, grads):
  """Each estimate for per-draw quadratics (exact H_j, g_j), in float64.

  GNI measures on the first draw (its H is hessians[0], its gradient grads[0]).
  """
  a = np.einsum("ki,kij,kj->k", grads, hessians, grads)
  c = np.einsum("ki,ki->k", grads, grads)
  gni = np.mean(np.einsum("ki,ij,kj->k", grads, hessians[0], grads))
  mean_of_ratios = np.mean(a / c)
  return {"auto": mean_of_ratios, "chunked": mean_of_ratios,
          "ratio_of_means": a.mean() / c.mean(),
          "adaptive": mean_of_ratios, "gni": gni / c[0]}


def test_a_stack_of_quadratic_forms_gives_the_closed_form():
  # Each draw is one quadratic L_j(w) = w'A_j w / 2 - c_j'w, not a batch of
  # examples: H_j = A_j and g_j = A_j w - c_j in the module's definition.
  rng = np.random.default_rng(5)
  k, d = 6, 3
  m = rng.normal(size=(k, d, d))
  shift = np.arange(1, k + 1)[:, None, None] * np.eye(d)  # well conditioned
  hess = m @ np.swapaxes(m, 1, 2) / d + shift
  forms = {"A": hess.astype(np.float32),
           "c": rng.normal(size=(k, d)).astype(np.float32)}
  w = np.array([1.0, -0.5, 2.0], np.float32)
  hess = forms["A"].astype(np.float64)
  grads = hess @ w.astype(np.float64) - forms["c"]
  first = jax.tree.map(lambda x: x[0], forms)
  got = _every_estimate(_quadratic_form_loss, w, forms, first)
  expected = _closed_form(hess, grads)
  for name, value in expected.items():
    np.testing.assert_allclose(got[name], value, rtol=2e-5, err_msg=name)
  # A NaN in one draw is not dropped as if its gradient had vanished.
  forms["c"][2, 0] = np.nan
  got = _every_estimate(_quadratic_form_loss, w, forms, first)
  for name in expected:
    assert np.isnan(got[name]), name


def test_fixed_size_graphs_with_a_per_draw_scalar_give_the_closed_form():
  # Per-draw leaves of unrelated shapes ((N, F) nodes, (E, 2) int edges, a
  # scalar): L_j = w'M_j w / 2 with M_j = mean_e d_e d_e' + decay_j I.
  rng = np.random.default_rng(6)
  k, n, e, f = 5, 4, 7, 3
  graphs = {"nodes": rng.normal(size=(k, n, f)).astype(np.float32),
            "edges": rng.integers(0, n, size=(k, e, 2)).astype(np.int32),
            "decay": np.linspace(0.1, 0.5, k).astype(np.float32)}
  w = np.array([0.5, -1.0, 1.5], np.float32)
  nodes = graphs["nodes"].astype(np.float64)
  rows = np.arange(k)[:, None]
  src, dst = graphs["edges"][..., 0], graphs["edges"][..., 1]
  diff = nodes[rows, src] - nodes[rows, dst]
  hess = (np.einsum("kei,kej->kij", diff, diff) / e
          + graphs["decay"][:, None, None] * np.eye(f))
  grads = hess @ w.astype(np.float64)
  # The other entry points share the check (see the quadratic forms above).
  got = jax.jit(functools.partial(curvature.batch_sharpness, _graph_loss))(
      w, graphs)
  np.testing.assert_allclose(got.value, _closed_form(hess, grads)["auto"],
                             rtol=2e-5)
  assert int(got.num_draws) == k


def test_adaptive_budget_must_be_a_multiple_of_the_chunk():
  w, data = _problem()
  with pytest.raises(ValueError, match="multiple of chunk_size"):
    curvature.batch_sharpness_adaptive(
        _loss, w, functools.partial(_sample, data), jax.random.key(0),
        max_draws=50, chunk_size=20)
