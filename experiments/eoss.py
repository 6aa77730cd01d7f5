r"""Edge of Stochastic Stability at CPU scale: Batch Sharpness vs lambda_max.

For each step size eta and batch size b, trains an MLP with plain SGD (our CPU-scale protocol,
``docs/eoss.md``) and measures, every ``measure_every`` steps, Batch Sharpness (BS, mean of
per-draw ratios; the ratio of means beside), lambda_max of the full-batch Hessian (Lanczos,
warm-started), GNI, the mean step sharpness over the interval and the full-batch loss. The
report checks the claim: mini-batch BS plateaus at 2/eta, with lambda_max below it and rising
with b; full batch puts lambda_max at 2/eta.
"""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from jaxpapers import curvature
from jaxpapers import data as data_lib
from jaxpapers import models

PAPER = {"title": "Edge of Stochastic Stability", "authors": "Andreyev & Beneventano",
         "url": "https://arxiv.org/abs/2412.20553"}
CLAIM = ("Under mini-batch SGD with step size eta, Batch Sharpness (the expected curvature of"
         " mini-batch Hessians along their own gradients) stabilises at 2/eta while lambda_max"
         " of the full-batch Hessian stays below it and rises with the batch size; full-batch"
         " GD puts lambda_max at 2/eta.")
NOT_AT_SMOKE_SCALE = ("bs_at_threshold", "lambda_max_below_bs")
BS_BAND = (0.75, 1.15)  # median BS over the tail, in units of 2/eta
# Full-batch GD: the curvature along the gradient (BS with one draw) is what
# self-stabilises at 2/eta, and lambda_max >= it (a Rayleigh quotient bound);
# Cohen et al. (2021) describe lambda_max as hovering "just above" 2/eta.
FULL_BATCH_BS_TOL, FULL_BATCH_LAMBDA_BAND = 0.05, (0.95, 1.25)
UNIT = "multiples of 2/eta"
UNITS = {"bs_over_threshold": UNIT, "lambda_max_over_threshold": UNIT}
# Averaged over seeds; the last four are the reported results.
SUMMARY_KEYS = ("bs_median", "lambda_max_median", "bs_over_threshold",
                "lambda_max_over_threshold", "gni_median", "final_loss")
CURVES = {"batch_sharpness": "Batch Sharpness", "lambda_max": "$\\lambda_{max}$"}  # F1: key, label
PLATEAUS = (("lambda_max", "o-", CURVES["lambda_max"]), ("bs", "s:", "BS"))  # F2: key, style, label
PAPER_SAYS = {  # per grid cell, in our units (multiples of 2/eta), by "full batch?"
    False: "Batch Sharpness stabilises at 2/eta (abstract).",
    True: "Full-batch GD: lambda_max stabilises around 2/eta (Cohen et al., 2021,"
          " arXiv 2103.00065)."}
MODEL = {"optimizer": "plain SGD, constant step size", "loss": "squared error on one-hot targets"}
QUALITATIVE_RESULTS = [
    harness.paper_result("mini-batch SGD", "lambda_max is generally smaller than Batch"
                         " Sharpness, and is suppressed more for smaller batches (abstract)."),
    harness.paper_result("authors' CPU sanity run (CIFAR-10, 64 samples, eta=0.05)",
                         "BS overshoots to about 49, then hovers at 35-39 vs 2/eta = 40;"
                         " lambda_max about 14.")]


def mse_loss(params: models.MLPParams, batch: tuple[jax.Array, jax.Array]):
  """Squared error on one-hot targets: sum over outputs, mean over samples."""
  return jnp.mean(jnp.sum((models.apply_mlp(params, batch[0]) - batch[1]) ** 2, axis=-1))


@functools.partial(jax.jit, static_argnames=("batch_size", "settings"))
def measure(params, eigenvector, data, key, *, batch_size: int, settings: harness.StaticConfig):
  """BS, lambda_max and the loss at ``params`` (``settings``: config.measure)."""
  bs, top = curvature.sharpness_at(
      mse_loss, params, data, key, batch_size=batch_size, num_draws=settings.value.bs_draws,
      v0=eigenvector, max_iters=settings.value.lanczos_iters, tol=settings.value.lanczos_tol)
  logits = models.apply_mlp(params, data[0])
  return {"loss": mse_loss(params, data),
          "train_accuracy": jnp.mean(jnp.argmax(logits, -1) == jnp.argmax(data[1], -1)),
          "batch_sharpness": bs.value, "batch_sharpness_se": bs.stderr,
          "batch_sharpness_ratio_of_means": bs.mean_curvature / bs.mean_grad_sq_norm,
          "lambda_max": top.eigenvalue, "lambda_max_hvps": top.num_hvps,
          "lambda_max_residual": top.residual}, top.eigenvector


# GNI costs one full-data Hessian product per draw: measured less often.
measure_gni = jax.jit(functools.partial(curvature.gni_at, mse_loss),
                      static_argnames=("batch_size", "num_draws"))


def measure_state(config, data, b, key, state, **interval_stats):
  """The state with a new eigenvector (next lambda_max's warm start), and its metric record."""
  bs_key, gni_key = jax.random.split(jax.random.fold_in(key, state["step"]))
  scalars, eigenvector = measure(state["params"], state["eigenvector"], data, bs_key,
                                 batch_size=b, settings=harness.StaticConfig(config.measure))
  if int(state["step"]) % config.measure.gni_every == 0:
    scalars["gni"] = measure_gni(state["params"], data, gni_key, batch_size=b,
                                 num_draws=config.measure.gni_draws)
  return {**state, "eigenvector": eigenvector}, {**jax.device_get(scalars), **interval_stats}


def train_run(config, workdir, data, one: harness.Run):
  """Trains (or resumes) one (eta, b, seed) run; returns its metric records."""
  learning_rate, batch_size = one.settings
  lr, b, every = jnp.float32(learning_rate), batch_size or data[0].shape[0], config.measure_every
  init_key, eig_key, data_key, measure_key = jax.random.split(jax.random.key(one.seed), 4)
  params = models.init_mlp(init_key, (data[0].shape[1], *config.model.hidden, data[1].shape[1]),
                           init_scale=config.model.init_scale)
  eigenvector = jax.tree.map(lambda p, k: jax.random.normal(k, p.shape, p.dtype), params,
                             optax.tree.split_key_like(eig_key, params))
  measured = functools.partial(measure_state, config, data, b, measure_key)

  def chunk(state, step):
    sgd = curvature.sgd_steps(mse_loss, state["params"], data, data_key, lr, state["step"],
                              batch_size=b, num_steps=every)
    state, record = measured({**state, "step": state["step"] + every, "params": sgd.params},
                             step_sharpness=sgd.step_sharpness, train_loss=sgd.mean_loss)
    return harness.Chunk(state, step + every, record, stop=not math.isfinite(record["loss"]))

  return workdir.train(
      one.name, {"step": jnp.int32(0), "params": params, "eigenvector": eigenvector}, chunk,
      num_steps=config.num_steps if batch_size else config.full_batch_num_steps,
      checkpoint_every=config.checkpoint_every, initial=measured).records


def summarize_run(records, settings, tail_fraction):
  """Tail medians of BS and lambda_max (in absolute units and in 2/eta)."""
  (learning_rate, batch_size), threshold = settings, 2.0 / settings[0]
  start = (1.0 - tail_fraction) * records[-1]["step"]
  tail = [r for r in records if r["step"] >= start and r["step"] > 0]
  bs, lam = (np.median([r[k] for r in tail]) for k in ("batch_sharpness", "lambda_max"))
  gni = [r["gni"] for r in tail if "gni" in r]
  return {"learning_rate": learning_rate, "batch_size": batch_size, "threshold": threshold,
          "final_step": records[-1]["step"], "final_loss": records[-1]["loss"],
          "diverged": not all(math.isfinite(r["loss"]) for r in records),
          "gni_median": float(np.median(gni)) if gni else float("nan"),
          "bs_median": float(bs), "bs_over_threshold": float(bs / threshold),
          "lambda_max_median": float(lam), "lambda_max_over_threshold": float(lam / threshold)}


def evaluate_claim(summaries, config):
  """The checks of the claim: per mini-batch run, per step size, per full-batch run."""
  checks, (lo, hi), (full_lo, full_hi) = [], BS_BAND, FULL_BATCH_LAMBDA_BAND
  for lr in config.learning_rates:
    runs = sorted((s for s in summaries if s["learning_rate"] == lr),
                  key=lambda s: s["batch_size"] or math.inf)
    mini = [s for s in runs if s["batch_size"]]
    for s in mini:
      tag, who = f"eta{lr:g}_b{s['batch_size']}", f"eta={lr:g} b={s['batch_size']}:"
      checks += [harness.check(
          f"bs_at_threshold_{tag}", f"{who} median BS in [{lo}, {hi}]x2/eta",
          lo <= s["bs_over_threshold"] <= hi and not s["diverged"],
          f"BS = {s['bs_over_threshold']:.3f} x 2/eta ({s['bs_median']:.3f} vs"
          f" {s['threshold']:.3f})"), harness.check(
          f"lambda_max_below_bs_{tag}", f"{who} lambda_max < BS",
          s["lambda_max_median"] < s["bs_median"],
          f"lambda_max = {s['lambda_max_median']:.3f}, BS = {s['bs_median']:.3f}")]
    checks.append(harness.check(
        f"lambda_max_grows_with_batch_eta{lr:g}",
        f"eta={lr:g}: lambda_max plateau grows with batch size",
        np.all(np.diff([s["lambda_max_median"] for s in mini]) > 0),
        ", ".join(f"b={s['batch_size']}: {s['lambda_max_median']:.3f}" for s in mini)))
    for s in runs[len(mini):]:  # full batch
      checks += [harness.check(
          f"full_batch_gradient_curvature_eta{lr:g}", f"eta={lr:g} full batch: curvature along"
          f" the gradient = 2/eta within {FULL_BATCH_BS_TOL:.0%}",
          abs(s["bs_over_threshold"] - 1) <= FULL_BATCH_BS_TOL and not s["diverged"],
          f"g'Hg/g'g = {s['bs_over_threshold']:.3f} x 2/eta"), harness.check(
          f"full_batch_lambda_max_eta{lr:g}", f"eta={lr:g} full batch: lambda_max at or just"
          f" above 2/eta ([{full_lo}, {full_hi}]x)",
          full_lo <= s["lambda_max_over_threshold"] <= full_hi and not s["diverged"],
          f"lambda_max = {s['lambda_max_over_threshold']:.3f} x 2/eta")]
  return checks


def plot_figures(workdir, sweep, summaries, config, num_examples):
  """F1: BS and lambda_max vs step, a panel per run; F2: their plateaus vs b."""
  with workdir.figure("sharpness_vs_step", title="Batch Sharpness and $\\lambda_{max}$"
                      " (multiples of 2/$\\eta$) vs SGD step, a line per seed",
                      rows=len(config.learning_rates), cols=len(config.batch_sizes),
                      size=(3.2, 2.6)) as axes:
    for ax, (cell, (lr, b)) in zip(axes.flat, sweep.grid.items()):
      for records, (k, (key, label)) in itertools.product(sweep.values[cell],
                                                          enumerate(CURVES.items())):
        ax.plot([r["step"] for r in records], [r[key] * lr / 2 for r in records], f"C{k}",
                lw=1, label=label)
      ax.axhline(1.0, color="k", ls="--", lw=1, label="2/$\\eta$")
      ax.set(title=f"$\\eta$={lr:g}, b={b or 'full'}", ylim=(0, 1.5), xlabel="SGD step",
             ylabel="curvature (multiples of 2/$\\eta$)")
  with workdir.figure("plateau_vs_batch_size", title="Tail medians of $\\lambda_{max}$ and"
                      " BS vs batch size\n(mean over seeds; colour: $\\eta$)",
                      size=(4.8, 3.4)) as axes:
    for (k, lr), (key, style, label) in itertools.product(enumerate(config.learning_rates),
                                                          PLATEAUS):
      runs = sorted((s for s in summaries if s["learning_rate"] == lr),
                    key=lambda s: s["batch_size"] or num_examples)
      axes[0, 0].plot([s["batch_size"] or num_examples for s in runs],
                      [s[f"{key}_over_threshold"] for s in runs], style, color=f"C{k}",
                      label=f"{label}, $\\eta$={lr:g}")
    axes[0, 0].axhline(1.0, color="k", ls="--", lw=1, label="2/$\\eta$")
    axes[0, 0].set(xscale="log", xlabel="batch size (examples; rightmost: full batch)",
                   ylabel="median over the last 30% of steps\n(multiples of 2/$\\eta$)")


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  digits = data_lib.load_digits(num_examples=config.data.num_examples,
                                label_noise=config.data.label_noise, seed=config.data.seed)
  data, hidden = (jnp.asarray(digits.x), jnp.asarray(digits.y)), config.model.hidden
  grid = {f"lr{lr:g}_b{b or 'full'}": (lr, b)
          for lr in config.learning_rates for b in config.batch_sizes}
  summarize = functools.partial(summarize_run, tail_fraction=config.tail_fraction)
  sweep = workdir.sweep(grid, config.seeds, functools.partial(train_run, config, workdir, data),
                        summarize=summarize, keys=SUMMARY_KEYS)
  summaries = list(sweep.summaries.values())
  plot_figures(workdir, sweep, summaries, config, data[0].shape[0])
  workdir.write_report(
      dataset={"name": "digits (label noise)", "provenance": digits.provenance},
      model={"architecture": f"MLP 64-{'-'.join(map(str, hidden))}-10, ReLU, Kaiming-normal"
                             " x init_scale", "init_scale": config.model.init_scale,
             "num_params": int(sum(x.size for x in jax.tree.leaves(
                 models.init_mlp(jax.random.key(0), (64, *hidden, 10))))), **MODEL},
      results=sweep.results(SUMMARY_KEYS[2:], higher_is_better=SUMMARY_KEYS[2:5]),
      paper_results=[harness.paper_result(
          cell, PAPER_SAYS[b == 0], metric=("bs", "lambda_max")[b == 0] + "_over_threshold",
          score=1.0, unit=UNIT) for cell, (_, b) in grid.items()] + QUALITATIVE_RESULTS,
      checks=evaluate_claim(summaries, config),
      notes=[f"{s['learning_rate']:g}/{s['batch_size']}: diverged"
             for s in summaries if s["diverged"]],
      extra_run_data={"summaries": summaries})


if __name__ == "__main__":
  harness.run(main, name="eoss")
