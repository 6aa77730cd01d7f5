"""soap against a straightforward numpy loop of the authors' algorithm."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import optim

SHAPES = {"square": (3, 3), "tensor": (2, 3, 2), "wide": (3, 6), "vector": (4,)}
HYPER = dict(learning_rate=0.05, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1,
             precondition_frequency=3, max_precond_dim=4)
NUM_STEPS = 12


def _project(x, bases, back=False):
  """The authors' projection: contract axis 0, which then moves to the end."""
  for q in bases:
    x = np.moveaxis(x, 0, -1) if q is None else np.tensordot(
        x, q, axes=([0], [1 if back else 0]))
  return x


def _gram(g, axis):
  others = [a for a in range(g.ndim) if a != axis]
  return np.tensordot(g, g, axes=(others, others))


def _reference(grad_fn, params, *, learning_rate, b1, b2, eps, weight_decay,
               precondition_frequency, max_precond_dim):
  """nikhilvyas/SOAP's step in numpy; momentum kept in the eigenbasis."""
  state = {k: {"step": 0, "exp_avg": np.zeros_like(p),
               "exp_avg_sq": np.zeros_like(p), "bases": None}
           for k, p in params.items()}
  trajectory = []
  for _ in range(NUM_STEPS):
    grads = grad_fn(params)
    new_params = {}
    for k, p in params.items():
      g, s = grads[k], state[k]
      update = np.zeros_like(p)
      if s["bases"] is None:  # first step: only build the eigenbases
        s["factors"] = [(1 - b2) * _gram(g, i)
                        if p.ndim >= 2 and d <= max_precond_dim else None
                        for i, d in enumerate(p.shape)]
        s["bases"] = [None if f is None else np.linalg.eigh(f)[1][:, ::-1]
                      for f in s["factors"]]
      else:
        g_rot = _project(g, s["bases"])
        s["step"] += 1
        s["exp_avg"] = b1 * s["exp_avg"] + (1 - b1) * g_rot
        s["exp_avg_sq"] = b2 * s["exp_avg_sq"] + (1 - b2) * g_rot ** 2
        step_size = np.sqrt(1 - b2 ** s["step"]) / (1 - b1 ** s["step"])
        update = -learning_rate * step_size * _project(
            s["exp_avg"] / (np.sqrt(s["exp_avg_sq"]) + eps), s["bases"],
            back=True)
        exp_avg = _project(s["exp_avg"], s["bases"], back=True)
        s["factors"] = [None if f is None else b2 * f + (1 - b2) * _gram(g, i)
                        for i, f in enumerate(s["factors"])]
        if s["step"] % precondition_frequency == 0:
          for i, (f, q) in enumerate(zip(s["factors"], s["bases"])):
            if f is None:
              continue
            order = np.argsort(-np.diag(q.T @ f @ q))
            s["exp_avg_sq"] = np.take(s["exp_avg_sq"], order, axis=i)
            s["bases"][i] = np.linalg.qr(f @ q[:, order])[0]
        s["exp_avg"] = _project(exp_avg, s["bases"])
      new_params[k] = p + update - learning_rate * weight_decay * p
    params = new_params
    trajectory.append(params)
  return trajectory


def test_matches_the_authors_loop():
  rng = np.random.default_rng(0)
  params0 = {k: rng.normal(size=s) for k, s in SHAPES.items()}
  noise = [{k: rng.normal(size=s) for k, s in SHAPES.items()}
           for _ in range(NUM_STEPS)]
  noise_per_step = iter(noise)

  def numpy_grad(p):
    n = next(noise_per_step)
    return {k: n[k] + 0.5 * p[k] for k in p}

  with jax.enable_x64(True):
    expected = iter(_reference(numpy_grad, params0, **HYPER))
    tx = optim.soap(**HYPER)
    params = jax.tree.map(jnp.asarray, params0)
    state = tx.init(params)
    update = jax.jit(tx.update)
    for t in range(NUM_STEPS):
      grads = jax.tree.map(lambda n, p: n + 0.5 * p, noise[t], params)
      updates, state = update(grads, state, params)
      params = optax.apply_updates(params, updates)
      want = next(expected)
      for k in SHAPES:
        np.testing.assert_allclose(params[k], want[k], rtol=1e-9, atol=1e-11,
                                   err_msg=f"{k} at step {t}")
  # Every kind of axis was exercised: preconditioned, too long, vector.
  bases = optax.tree.get(state, "eigenbases")
  assert [q is None for q in bases["wide"]] == [False, True]
  assert bases["vector"] == (None,)


def test_first_update_only_builds_orthonormal_eigenbases():
  g = jnp.array([[2.0, 0.0], [1.0, 1.0]])
  tx = optim.scale_by_soap(b2=0.9)
  updates, state = tx.update(g, tx.init(g), g)
  np.testing.assert_array_equal(updates, 0.0)
  for axis, (factor, q) in enumerate(zip(state.preconditioners, state.eigenbases)):
    gram = g @ g.T if axis == 0 else g.T @ g
    np.testing.assert_allclose(factor, 0.1 * gram, rtol=1e-6)
    np.testing.assert_allclose(q.T @ q, np.eye(2), atol=1e-6)
    diagonal = q.T @ factor @ q
    np.testing.assert_allclose(diagonal - np.diag(np.diag(diagonal)), 0.0,
                               atol=1e-6)
    assert np.all(np.diff(np.diag(diagonal)) <= 0)  # descending


def test_bad_arguments_are_named_errors():
  with pytest.raises(ValueError, match="precondition_frequency must be >= 1"):
    optim.scale_by_soap(precondition_frequency=0)
  with pytest.raises(ValueError, match="max_precond_dim must be >= 1"):
    optim.scale_by_soap(max_precond_dim=0)
  with pytest.raises(ValueError, match="static_args"):
    jax.jit(lambda d: optim.scale_by_soap(max_precond_dim=d).init(jnp.ones(2)))(3)
