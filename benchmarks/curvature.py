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

Run: ``python -m benchmarks.curvature`` (``--tiny``: a 64-16-10 MLP, b=8,
2 steps per call, 16 draws, 20 / 40 products, one seed and one round).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import benchmarks
from jaxpapers import profiling
from jaxpapers import curvature
from jaxpapers import data as data_lib
from jaxpapers import models

ACCURACY = 1e-3


class Sizes(NamedTuple):
  widths: tuple[int, ...]  # of the MLP
  batch: int
  steps_per_call: int  # amortise dispatch: both sides run in one lax.scan
  bs_draws: int
  bs_rounds: int
  repeats: int
  warmup_calls: int  # of steps_per_call SGD steps, to near the edge
  reference_products: int
  budgets: dict[str, int]  # products per method
  seeds: int


FULL = Sizes(widths=(64, 256, 256, 10), batch=64, steps_per_call=50,
             bs_draws=100, bs_rounds=5, repeats=7, warmup_calls=40,
             reference_products=200,
             budgets={"lanczos": 150, "power": 1500}, seeds=3)
# 16 draws: chunk_size="auto" still splits them (chunks of 8).
TINY = Sizes(widths=(64, 16, 10), batch=8, steps_per_call=2, bs_draws=16,
             bs_rounds=1, repeats=1, warmup_calls=1, reference_products=20,
             budgets={"lanczos": 20, "power": 40}, seeds=1)


def _loss(params, batch):
  x, y = batch
  return jnp.mean(jnp.sum((models.apply_mlp(params, x) - y) ** 2, axis=-1))


def _batches(data, key, batch, num):
  return data_lib.sample_minibatches(key, data, batch, num)


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


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  steps = sizes.steps_per_call
  digits = data_lib.load_digits(label_noise=0.2)
  data = (jnp.asarray(digits.x), jnp.asarray(digits.y))
  params = models.init_mlp(jax.random.key(0), sizes.widths, init_scale=0.2)
  batches = _batches(data, jax.random.key(1), sizes.batch, steps)

  sgd = profiling.time_jitted(_sgd_steps, params, batches,
                              repeats=sizes.repeats)
  bs = profiling.time_jitted(_bs_samples, params, batches,
                             repeats=sizes.repeats)
  print(f"BS sample / SGD step cost: {bs / sgd:.2f}x (goal <= 2.5)"
        f"  [{1e6 * bs / steps:.0f} us vs"
        f" {1e6 * sgd / steps:.0f} us per step]")

  draws = _batches(data, jax.random.key(2), sizes.batch, sizes.bs_draws)
  estimate = lambda chunk: jax.jit(functools.partial(
      curvature.batch_sharpness, _loss, chunk_size=chunk))
  secs = profiling.alternating_seconds(
      {"auto": (estimate("auto"), (params, draws)),
       "vmap": (estimate(None), (params, draws))}, rounds=sizes.bs_rounds,
      repeats=min(3, sizes.repeats))
  ratio = np.median([a / v for a, v in zip(secs["auto"], secs["vmap"])])
  print(f"batch_sharpness over {sizes.bs_draws} draws, default / vmap of all"
        " draws:"
        f" {ratio:.2f}x  [{1e3 * np.median(secs['auto']):.0f} vs"
        f" {1e3 * np.median(secs['vmap']):.0f} ms]")

  # Move to a point near the edge of stability: 40 x 50 SGD steps at eta=0.25.
  for i in range(sizes.warmup_calls):
    params = _sgd_steps(params, _batches(data, jax.random.key(100 + i),
                                         sizes.batch, steps))
  _, hvp_fn = curvature.linearize_gradient(_loss, params, data)
  reference = curvature.lambda_max(hvp_fn, params,
                                   max_iters=sizes.reference_products, tol=0.0)
  ref = float(reference.eigenvalue)
  # tol=0 runs the whole budget; `estimates` then shows when each method first
  # reached the accuracy.
  budgets = sizes.budgets
  solve = jax.jit(functools.partial(curvature.lambda_max, hvp_fn, tol=0.0),
                  static_argnames=("method", "max_iters"))
  counts = {method: [] for method in budgets}
  for seed in range(sizes.seeds):
    for method, budget in budgets.items():
      res = solve(params, method=method, max_iters=budget,
                  key=jax.random.key(seed))
      counts[method].append(_first_accurate(res.estimates, ref))
  print(f"lambda_max reference = {ref:.4f} (Lanczos,"
        f" {sizes.reference_products} products)")
  for method, values in counts.items():
    print(f"  {method:8s}: products to {ACCURACY:g} relative accuracy: {values}")
  if None in counts["power"] or None in counts["lanczos"]:
    print("  a method did not reach the accuracy within its budget", budgets)
  else:
    ratio = np.mean(counts["power"]) / np.mean(counts["lanczos"])
    print(f"HVPs power / Lanczos: {ratio:.1f}x fewer for Lanczos (goal >= 5)")


if __name__ == "__main__":
  benchmarks.cli(main)
