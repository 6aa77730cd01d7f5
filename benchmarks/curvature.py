"""Curvature benchmarks (EoSS issue), printed as ratios from one run.

1. Cost of one Batch Sharpness sample (mini-batch gradient plus one
   forward-over-reverse HVP) over the cost of one SGD step, on the EoSS MLP
   (64-256-256-10, b=64, digits). Goal: <= 2.5.
2. ``batch_sharpness`` over 100 draws with its default chunking
   (``chunk_size="auto"``: chunks of 8 here) against vmapping all draws
   (``chunk_size=None``, the former default), medians of alternating rounds.
3. Hessian-vector products that Lanczos and power iteration need to reach
   1e-3 relative accuracy on lambda_max of the full-batch Hessian, at a point
   of an SGD run near the edge of stability. Goal: power / Lanczos >= 5.

Run: ``python -m benchmarks.curvature``.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import profiling
from jaxpapers import curvature
from jaxpapers import data as data_lib
from jaxpapers import models

BATCH = 64
STEPS_PER_CALL = 50  # amortise dispatch: both sides run in one lax.scan
ACCURACY = 1e-3
BS_DRAWS = 100
BS_ROUNDS = 5


def _loss(params, batch):
  x, y = batch
  return jnp.mean(jnp.sum((models.apply_mlp(params, x) - y) ** 2, axis=-1))


def _batches(data, key, num):
  return data_lib.sample_minibatches(key, data, BATCH, num)


@jax.jit
def _sgd_steps(params, batches):
  def step(p, batch):
    grads = jax.grad(_loss)(p, batch)
    return optax.apply_updates(p, jax.tree.map(lambda g: -0.25 * g, grads)), None
  return jax.lax.scan(step, params, batches)[0]


@jax.jit
def _bs_samples(params, batches):
  def sample(total, batch):
    a, c = curvature.directional_curvature(_loss, params, batch)
    return total + a / c, None
  return jax.lax.scan(sample, jnp.zeros(()), batches)[0]


def _first_accurate(estimates, reference):
  err = np.abs(np.asarray(estimates) - reference) / abs(reference)
  hits = np.flatnonzero(err <= ACCURACY)
  return int(hits[0]) + 1 if hits.size else None


def main():
  digits = data_lib.load_digits(label_noise=0.2)
  data = (jnp.asarray(digits.x), jnp.asarray(digits.y))
  params = models.init_mlp(jax.random.key(0), (64, 256, 256, 10), init_scale=0.2)
  batches = _batches(data, jax.random.key(1), STEPS_PER_CALL)

  sgd = profiling.time_jitted(_sgd_steps, params, batches)
  bs = profiling.time_jitted(_bs_samples, params, batches)
  print(f"BS sample / SGD step cost: {bs / sgd:.2f}x (goal <= 2.5)"
        f"  [{1e6 * bs / STEPS_PER_CALL:.0f} us vs"
        f" {1e6 * sgd / STEPS_PER_CALL:.0f} us per step]")

  draws = _batches(data, jax.random.key(2), BS_DRAWS)
  estimate = lambda chunk: jax.jit(functools.partial(
      curvature.batch_sharpness, _loss, chunk_size=chunk))
  secs = profiling.alternating_seconds(
      {"auto": (estimate("auto"), (params, draws)),
       "vmap": (estimate(None), (params, draws))}, rounds=BS_ROUNDS)
  ratio = np.median([a / v for a, v in zip(secs["auto"], secs["vmap"])])
  print(f"batch_sharpness over {BS_DRAWS} draws, default / vmap of all draws:"
        f" {ratio:.2f}x  [{1e3 * np.median(secs['auto']):.0f} vs"
        f" {1e3 * np.median(secs['vmap']):.0f} ms]")

  # Move to a point near the edge of stability: 40 x 50 SGD steps at eta=0.25.
  for i in range(40):
    params = _sgd_steps(params, _batches(data, jax.random.key(100 + i),
                                         STEPS_PER_CALL))
  _, hvp_fn = curvature.linearize_gradient(_loss, params, data)
  reference = curvature.lambda_max(hvp_fn, params, max_iters=200, tol=0.0)
  ref = float(reference.eigenvalue)
  # tol=0 runs the whole budget; `estimates` then shows when each method first
  # reached the accuracy.
  budgets = {"lanczos": 150, "power": 1500}
  solve = jax.jit(functools.partial(curvature.lambda_max, hvp_fn, tol=0.0),
                  static_argnames=("method", "max_iters"))
  counts = {method: [] for method in budgets}
  for seed in range(3):
    for method, budget in budgets.items():
      res = solve(params, method=method, max_iters=budget,
                  key=jax.random.key(seed))
      counts[method].append(_first_accurate(res.estimates, ref))
  print(f"lambda_max reference = {ref:.4f} (Lanczos, 200 products)")
  for method, values in counts.items():
    print(f"  {method:8s}: products to {ACCURACY:g} relative accuracy: {values}")
  if None in counts["power"] or None in counts["lanczos"]:
    print("  a method did not reach the accuracy within its budget", budgets)
  else:
    ratio = np.mean(counts["power"]) / np.mean(counts["lanczos"])
    print(f"HVPs power / Lanczos: {ratio:.1f}x fewer for Lanczos (goal >= 5)")


if __name__ == "__main__":
  main()
