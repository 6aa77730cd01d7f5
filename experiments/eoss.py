r"""Edge of Stochastic Stability at CPU scale: Batch Sharpness vs lambda_max.

For each step size eta and batch size b of the grid, trains an MLP with
plain SGD (our CPU-scale protocol, ``docs/eoss.md``) and measures, every ``measure_every`` steps,

* Batch Sharpness (BS, mean of per-draw ratios; the ratio of means beside),
* lambda_max of the full-batch Hessian (Lanczos, warm-started),
* GNI, and the mean step sharpness over the interval (recorded by
  :func:`jaxpapers.optim.track_batch_sharpness` inside the optimizer chain),
* the full-batch loss.

The report checks the paper's claim: mini-batch BS plateaus at 2/eta, with
lambda_max below it and rising with b; full batch puts lambda_max at 2/eta.
"""

import functools
import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from experiments.configs import eoss as eoss_config
from jaxpapers import curvature
from jaxpapers import data as data_lib
from jaxpapers import models
from jaxpapers import optim

PAPER = {
    "title": "Edge of Stochastic Stability",
    "authors": "Andreyev & Beneventano",
    "url": "https://arxiv.org/abs/2412.20553",
}
CLAIM = (
    "Under mini-batch SGD with step size eta, Batch Sharpness (the expected"
    " curvature of mini-batch Hessians along their own gradients) stabilises"
    " at 2/eta while lambda_max of the full-batch Hessian stays below it and"
    " rises with the batch size; full-batch GD puts lambda_max at 2/eta."
)
BS_BAND = (0.75, 1.15)  # median BS over the tail, in units of 2/eta
# Full-batch GD: the curvature along the gradient (BS with one draw) is what
# self-stabilises at 2/eta, and lambda_max >= it (a Rayleigh quotient bound);
# Cohen et al. (2021) describe lambda_max as hovering "just above" 2/eta.
FULL_BATCH_BS_TOL = 0.05
FULL_BATCH_LAMBDA_BAND = (0.95, 1.25)
UNIT = "multiples of 2/eta"
# Averaged over seeds; the last four are the reported results.
SUMMARY_KEYS = ("bs_median", "lambda_max_median", "bs_over_threshold",
                "lambda_max_over_threshold", "gni_median", "final_loss")
QUALITATIVE_RESULTS = [
    harness.paper_result(
        "mini-batch SGD", "lambda_max is generally smaller than Batch"
        " Sharpness, and is suppressed more for smaller batches (abstract)."),
    harness.paper_result(
        "authors' CPU sanity run (CIFAR-10, 64 samples, eta=0.05)",
        "BS overshoots to about 49, then hovers at 35-39 vs 2/eta = 40;"
        " lambda_max about 14."),
]


class TrainState(NamedTuple):
  step: jax.Array
  params: models.MLPParams
  eigenvector: models.MLPParams  # warm start of the next lambda_max solve
  diverged: jax.Array


def mse_loss(params: models.MLPParams, batch: tuple[jax.Array, jax.Array]):
  """Squared error on one-hot targets: sum over outputs, mean over samples."""
  x, y = batch
  return jnp.mean(jnp.sum((models.apply_mlp(params, x) - y) ** 2, axis=-1))


@functools.partial(jax.jit, static_argnames=("batch_size", "num_steps"))
def train_chunk(params, first_step, learning_rate, data, data_key, *,
                batch_size: int, num_steps: int):
  """``num_steps`` SGD steps; batch t is a pure function of (data_key, t)."""
  num_examples = data[0].shape[0]
  tx = optax.chain(optim.track_batch_sharpness(), optax.sgd(learning_rate))
  # SGD is stateless, so a fresh tracker per chunk makes its running mean the
  # mean step sharpness over this chunk, and resuming needs only params.
  opt_state = tx.init(params)

  def step_fn(carry, step):
    params, opt_state = carry
    key = jax.random.fold_in(data_key, step)
    batch = data_lib.take(
        data, data_lib.minibatch_indices(key, num_examples, batch_size)
    )
    loss, grads = jax.value_and_grad(mse_loss)(params, batch)
    updates, opt_state = tx.update(
        grads, opt_state, params, value_fn=mse_loss, grad=grads, batch=batch
    )
    return (optax.apply_updates(params, updates), opt_state), loss

  steps = first_step + jnp.arange(num_steps, dtype=jnp.int32)
  (params, opt_state), losses = jax.lax.scan(step_fn, (params, opt_state), steps)
  step_sharpness = optax.tree.get(opt_state, "batch_sharpness_mean")
  return params, step_sharpness, jnp.mean(losses)


@functools.partial(jax.jit, static_argnames=("batch_size", "settings"))
def measure(params, eigenvector, data, key, *, batch_size: int,
            settings: harness.StaticConfig):
  """BS, lambda_max and the loss at ``params``; returns (scalars, eigenvector).

  ``settings`` is ``config.measure`` (draws, Lanczos budget and tolerance).
  """
  bs_draws, lanczos_iters, lanczos_tol = (
      settings.value.bs_draws, settings.value.lanczos_iters,
      settings.value.lanczos_tol)
  num_examples = data[0].shape[0]
  if batch_size == num_examples:
    # Every full-batch "draw" is the same batch: one draw is exact.
    bs_batches = jax.tree.map(lambda x: x[None], data)
  else:
    bs_batches = data_lib.sample_minibatches(key, data, batch_size, bs_draws)
  bs = curvature.batch_sharpness(mse_loss, params, bs_batches)
  _, hvp_fn = curvature.linearize_gradient(mse_loss, params, data)
  top = curvature.lambda_max(hvp_fn, params, v0=eigenvector,
                             max_iters=lanczos_iters, tol=lanczos_tol)
  logits = models.apply_mlp(params, data[0])
  scalars = {
      "loss": mse_loss(params, data),
      "train_accuracy": jnp.mean(jnp.argmax(logits, -1) == jnp.argmax(data[1], -1)),
      "batch_sharpness": bs.value,
      "batch_sharpness_se": bs.stderr,
      "batch_sharpness_ratio_of_means": bs.mean_curvature / bs.mean_grad_sq_norm,
      "lambda_max": top.eigenvalue,
      "lambda_max_hvps": top.num_hvps,
      "lambda_max_residual": top.residual,
  }
  return scalars, top.eigenvector


@functools.partial(jax.jit, static_argnames=("batch_size", "num_draws"))
def measure_gni(params, data, key, *, batch_size: int, num_draws: int):
  """GNI costs one full-data Hessian product per draw: measured less often."""
  batches = data_lib.sample_minibatches(key, data, batch_size, num_draws)
  return curvature.gni(mse_loss, params, batches, data).value


def grid_name(learning_rate: float, batch_size: int) -> str:
  batch = "full" if batch_size == 0 else str(batch_size)
  return f"lr{learning_rate:g}_b{batch}"


def train_run(config, workdir, data, learning_rate, batch_size, seed):
  """Trains (or resumes) one run; returns its metric records."""
  num_examples = data[0].shape[0]
  b = num_examples if batch_size == 0 else batch_size
  key = jax.random.key(seed)
  init_key, eig_key, data_key, measure_key = jax.random.split(key, 4)
  params = models.init_mlp(
      init_key, (data[0].shape[1], *config.model.hidden, data[1].shape[1]),
      init_scale=config.model.init_scale,
  )
  eigenvector = jax.tree.map(
      lambda p, k: jax.random.normal(k, p.shape, p.dtype), params,
      optax.tree.split_key_like(eig_key, params),
  )
  measure_fn = functools.partial(measure, batch_size=b,
                                 settings=harness.StaticConfig(config.measure))

  def measure_state(state, **interval_stats):
    key = jax.random.fold_in(measure_key, state.step)
    bs_key, gni_key = jax.random.split(key)
    scalars, eigvec = measure_fn(state.params, state.eigenvector, data, bs_key)
    if int(state.step) % config.measure.gni_every == 0:
      scalars["gni"] = measure_gni(state.params, data, gni_key, batch_size=b,
                                   num_draws=config.measure.gni_draws)
    scalars = jax.device_get(scalars)
    diverged = not math.isfinite(scalars["loss"])
    state = state._replace(eigenvector=eigvec, diverged=jnp.bool_(diverged))
    return state, {**scalars, **interval_stats}

  lr = jnp.float32(learning_rate)

  def chunk(state, step):
    params, step_sharpness, train_loss = train_chunk(
        state.params, state.step, lr, data, data_key, batch_size=b,
        num_steps=config.measure_every,
    )
    state = state._replace(step=state.step + config.measure_every,
                           params=params)
    state, record = measure_state(state, step_sharpness=step_sharpness,
                                  train_loss=train_loss)
    return harness.Chunk(state, step + config.measure_every, record,
                         stop=bool(state.diverged))

  state = TrainState(jnp.int32(0), params, eigenvector, jnp.bool_(False))
  return workdir.train(
      f"{grid_name(learning_rate, batch_size)}_seed{seed}", state, chunk,
      num_steps=(config.full_batch_num_steps if batch_size == 0
                 else config.num_steps),
      checkpoint_every=config.checkpoint_every, initial=measure_state,
  ).records


def summarize_run(records, learning_rate, batch_size, tail_fraction):
  """Tail medians of BS and lambda_max (in absolute units and in 2/eta)."""
  threshold = 2.0 / learning_rate
  last_step = records[-1]["step"]
  start = (1.0 - tail_fraction) * last_step
  tail = [r for r in records if r["step"] >= start and r["step"] > 0]
  bs = np.array([r["batch_sharpness"] for r in tail])
  lam = np.array([r["lambda_max"] for r in tail])
  gni = [r["gni"] for r in tail if "gni" in r]
  return {
      "learning_rate": learning_rate,
      "batch_size": batch_size,
      "threshold": threshold,
      "final_step": last_step,
      "diverged": not all(math.isfinite(r["loss"]) for r in records),
      "final_loss": records[-1]["loss"],
      "bs_median": float(np.median(bs)),
      "lambda_max_median": float(np.median(lam)),
      "gni_median": float(np.median(gni)) if gni else float("nan"),
      "bs_over_threshold": float(np.median(bs) / threshold),
      "lambda_max_over_threshold": float(np.median(lam) / threshold),
  }


def evaluate_claim(summaries, config):
  """The pass/fail checks of the claim, one per run and one per step size."""
  checks = []
  for lr in config.learning_rates:
    runs = [s for s in summaries if s["learning_rate"] == lr]
    mini = sorted((s for s in runs if s["batch_size"] != 0),
                  key=lambda s: s["batch_size"])
    for s in mini:
      lo, hi = BS_BAND
      ratio, tag = s["bs_over_threshold"], f"eta{lr:g}_b{s['batch_size']}"
      checks.append(harness.check(
          f"bs_at_threshold_{tag}",
          f"eta={lr:g} b={s['batch_size']}: median BS in [{lo}, {hi}]x2/eta",
          lo <= ratio <= hi and not s["diverged"],
          f"BS = {ratio:.3f} x 2/eta ({s['bs_median']:.3f} vs"
          f" {s['threshold']:.3f})"))
      checks.append(harness.check(
          f"lambda_max_below_bs_{tag}",
          f"eta={lr:g} b={s['batch_size']}: lambda_max < BS",
          s["lambda_max_median"] < s["bs_median"],
          f"lambda_max = {s['lambda_max_median']:.3f}, BS ="
          f" {s['bs_median']:.3f}"))
    plateaus = [s["lambda_max_median"] for s in mini]
    checks.append(harness.check(
        f"lambda_max_grows_with_batch_eta{lr:g}",
        f"eta={lr:g}: lambda_max plateau grows with batch size",
        np.all(np.diff(plateaus) > 0),
        ", ".join(f"b={s['batch_size']}: {s['lambda_max_median']:.3f}"
                  for s in mini)))
    for s in (s for s in runs if s["batch_size"] == 0):
      ratio = s["bs_over_threshold"]
      checks.append(harness.check(
          f"full_batch_gradient_curvature_eta{lr:g}",
          f"eta={lr:g} full batch: curvature along the gradient = 2/eta"
          f" within {FULL_BATCH_BS_TOL:.0%}",
          abs(ratio - 1) <= FULL_BATCH_BS_TOL and not s["diverged"],
          f"g'Hg/g'g = {ratio:.3f} x 2/eta"))
      ratio = s["lambda_max_over_threshold"]
      lo, hi = FULL_BATCH_LAMBDA_BAND
      checks.append(harness.check(
          f"full_batch_lambda_max_eta{lr:g}",
          f"eta={lr:g} full batch: lambda_max at or just above 2/eta"
          f" ([{lo}, {hi}]x)",
          lo <= ratio <= hi and not s["diverged"],
          f"lambda_max = {ratio:.3f} x 2/eta"))
  return checks


def plot_runs(workdir, all_records, config):
  """F1: BS and lambda_max in units of 2/eta vs step, one panel per run."""
  lrs, bss = config.learning_rates, config.batch_sizes
  fig, axes = harness.panels(len(lrs), len(bss), size=(3.2, 2.6))
  for (i, lr), (j, b) in itertools.product(enumerate(lrs), enumerate(bss)):
    ax = axes[i, j]
    for seed in config.seeds:
      records = all_records[(lr, b, seed)]
      steps = [r["step"] for r in records]
      ax.plot(steps, [r["batch_sharpness"] * lr / 2 for r in records], "C0",
              lw=1, label="Batch Sharpness")
      ax.plot(steps, [r["lambda_max"] * lr / 2 for r in records], "C1", lw=1,
              label="$\\lambda_{max}$")
    ax.axhline(1.0, color="k", ls="--", lw=1, label="2/$\\eta$")
    ax.set(title=f"$\\eta$={lr:g}, b={'full' if b == 0 else b}", ylim=(0, 1.5),
           xlabel="SGD step", ylabel="curvature (multiples of 2/$\\eta$)")
  return workdir.save_figure(
      fig, "sharpness_vs_step", title="Batch Sharpness settles at 2/$\\eta$;"
      " $\\lambda_{max}$ stays below it for mini-batches")


def plot_plateaus(workdir, summaries, config, num_examples):
  """F2: lambda_max and BS plateaus (multiples of 2/eta) vs batch size."""
  fig, axes = harness.panels(size=(4.8, 3.4))
  for k, lr in enumerate(config.learning_rates):
    runs = sorted((s for s in summaries if s["learning_rate"] == lr),
                  key=lambda s: s["batch_size"] or num_examples)
    sizes = [s["batch_size"] or num_examples for s in runs]
    axes[0, 0].plot(sizes, [s["lambda_max_over_threshold"] for s in runs],
                    "o-", color=f"C{k}", label=f"$\\lambda_{{max}}$, $\\eta$={lr:g}")
    axes[0, 0].plot(sizes, [s["bs_over_threshold"] for s in runs], "s:",
                    color=f"C{k}", label=f"BS, $\\eta$={lr:g}")
  axes[0, 0].axhline(1.0, color="k", ls="--", lw=1, label="2/$\\eta$")
  axes[0, 0].set(xscale="log", xlabel="batch size (examples; rightmost: full"
                 " batch)", ylabel="median over the last 30% of steps\n"
                 "(multiples of 2/$\\eta$)")
  return workdir.save_figure(
      fig, "plateau_vs_batch_size",
      title="$\\lambda_{max}$ rises with the batch size to 2/$\\eta$")


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  digits = data_lib.load_digits(
      num_examples=config.data.num_examples,
      label_noise=config.data.label_noise, seed=config.data.seed,
  )
  data = (jnp.asarray(digits.x), jnp.asarray(digits.y))
  grid = [(lr, b) for lr in config.learning_rates for b in config.batch_sizes]
  workdir.plan(len(grid) * len(config.seeds))
  all_records, summaries = {}, []
  for lr, b in grid:
    per_seed = []
    for seed in config.seeds:
      records = train_run(config, workdir, data, lr, b, seed)
      all_records[(lr, b, seed)] = records
      per_seed.append(summarize_run(records, lr, b, config.tail_fraction))
    summaries.append(harness.over_seeds(per_seed, SUMMARY_KEYS))

  results = [row for s in summaries for row in harness.results_of(
      grid_name(s["learning_rate"], s["batch_size"]), s, SUMMARY_KEYS[2:],
      num_samples=len(config.seeds), higher_is_better=SUMMARY_KEYS[2:5],
      units={"bs_over_threshold": UNIT, "lambda_max_over_threshold": UNIT})]
  workdir.write_report(
      paper=PAPER, claim=CLAIM,
      dataset={"name": "digits (label noise)", "provenance": digits.provenance},
      model=model_metadata(config), seeds=list(config.seeds), results=results,
      paper_results=paper_results(config), checks=evaluate_claim(summaries, config),
      figures=[plot_runs(workdir, all_records, config),
               plot_plateaus(workdir, summaries, config, data[0].shape[0])],
      notes=[f"{s['learning_rate']:g}/{s['batch_size']}: diverged"
             for s in summaries if s["diverged"]],
      extra_run_data={"summaries": summaries})


def paper_results(config):
  """The paper's numbers in our units (multiples of 2/eta), per grid cell."""
  return [harness.paper_result(
      grid_name(lr, b), "Batch Sharpness stabilises at 2/eta (abstract)." if b
      else "Full-batch GD: lambda_max stabilises around 2/eta (Cohen et al.,"
      " 2021, arXiv 2103.00065).",
      metric="bs_over_threshold" if b else "lambda_max_over_threshold",
      score=1.0, unit=UNIT)
          for lr in config.learning_rates for b in config.batch_sizes
          ] + QUALITATIVE_RESULTS


def model_metadata(config):
  num_params = sum(x.size for x in jax.tree.leaves(
      models.init_mlp(jax.random.key(0), (64, *config.model.hidden, 10))))
  return {"architecture": f"MLP 64-{'-'.join(map(str, config.model.hidden))}"
                          "-10, ReLU, Kaiming-normal x init_scale",
          "init_scale": config.model.init_scale, "num_params": int(num_params),
          "optimizer": "plain SGD, constant step size",
          "loss": "squared error on one-hot targets"}


def validate(config):
  if max(config.batch_sizes) > config.data.num_examples:
    raise ValueError(f"batch_sizes={config.batch_sizes} must not exceed"
                     f" data.num_examples={config.data.num_examples} (0 is"
                     " the full batch).")
  for field in ("num_steps", "full_batch_num_steps", "checkpoint_every"):
    if config[field] % config.measure_every:
      raise ValueError(f"{field}={config[field]} must be a multiple of"
                       f" measure_every={config.measure_every}.")


if __name__ == "__main__":
  harness.run(main, name="eoss", fields=eoss_config.FIELDS, validate=validate)
