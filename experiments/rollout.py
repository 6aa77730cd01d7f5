r"""Rollout consistency at CPU scale: does the JVP penalty tame free running?

Reconstructed from a 2026 preprint's abstract (``docs/rollout_consistency.md``):
forecasters trained with teacher forcing (TF), TF + lambda * L_JVP and k-step
unrolling (:mod:`jaxpapers.models._forecaster_training`; runs of one seed share
init and batches, so they pair up) are scored free running on each series'
last 20%; ``python -m benchmarks.rollout`` measures the cost side."""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from experiments import harness
from jaxpapers import data as data_lib
from jaxpapers import models

PAPER = {"title": "Local rollout consistency for time-series forecasters (2026"
                  " preprint; paper text not located, method reconstructed"
                  " from the abstract)",
         "authors": "unknown", "url": "docs/rollout_consistency.md"}
CLAIM = (
    "Adding lambda * ||J_f(s+) delta||^2 (the Jacobian of the forecaster along"
    " its own fed-back residual) to teacher-forced training lowers"
    " long-horizon free-running error relative to teacher forcing, at similar"
    " one-step error and a fraction of k-step unrolled training's cost.")
NOT_AT_SMOKE_SCALE = ("jvp_beats_tf_sunspots_dlinear", "one_step_error_similar")
PAPER_RESULTS = [harness.paper_result(
    "abstract", "Experiments on time series forecasting tasks show that the"
    " regularization improves predictive accuracy. No numbers are given in"
    " the abstract."), harness.paper_result(
        "our expectation (reconstruction, not the paper's)", "TF + L_JVP beats"
        " TF at long horizons at similar one-step error, for about one extra"
        " JVP per step.")]
# "Similar one-step error": the penalty may cost at most this factor.
ONE_STEP_TOLERANCE = 1.10


def grid_of(config) -> dict[str, tuple[str, str, models.ForecasterGroup]]:
  """``(series, model, group)``: penalty family (lambda = 0: TF), unroll-k."""
  seeds, lams = tuple(config.seeds), (0.0,) + tuple(config.lams)
  groups = {"penalty": models.ForecasterGroup(
      "penalty", 0, tuple(lam for lam in lams for _ in range(len(seeds))),
      seeds * len(lams))} | {f"unroll{k}": models.ForecasterGroup(
          "unroll", k, (0.0,) * len(seeds), seeds) for k in config.unroll_ks}
  return {f"{d}_{m}_{g}": (d, m, group) for d in config.datasets
          for m in config.models for g, group in groups.items()}


def train_cell(one: harness.Run, task, config, workdir) -> dict[str, Any]:
  """Trains (or resumes) one cell's group; returns its final record."""
  (_, model, group), train = one.settings, config.train
  tx = models.forecaster_optimizer(train.learning_rate, clip_norm=train.
                                   clip_norm, weight_decay=train.weight_decay)
  graphdef, state, data_keys = models.init_group(group, functools.partial(
      models.make_forecaster, model, task.lookback, task.channels,
      **config.model), tx)
  train_chunk = models.make_train_chunk(
      group, graphdef, tx, batch_size=train.batch_size,
      num_steps=config.log_every)
  lams = jnp.asarray(group.lams, jnp.float32)
  windows, val, test = (tuple(map(jnp.asarray, x)) for x in task[4:])

  def chunk(state, step):
    state, stats = train_chunk(state, lams, data_keys, windows)
    step, record = int(state.step), jax.device_get(stats)
    if step >= train.num_steps:
      record.update(models.evaluate_members(
          graphdef, state.params, val, test,
          vpt_threshold=config.vpt_threshold))
    return harness.Chunk(state, step, record)

  return workdir.train(one.name, state, chunk, num_steps=train.num_steps,
                       checkpoint_every=config.checkpoint_every).records[-1]


def summarize(cell, record: dict[str, Any], task) -> list[dict]:
  """Per lambda of the cell's group: mean and s.e. over seeds of each metric."""
  (dataset, model, group), lams = cell, np.asarray(cell[2].lams)
  mse = np.asarray(record["test_mse"], np.float64)
  runs = [{k: record[k][i] for k in ("val_mse", "vpt")} | {
      f"test_{k}_h{h}": record[f"test_{k}"][i][h - 1] for h in task.horizons
      for k in ("mse", "mae")} for i in range(len(lams))]
  return [{"dataset": dataset, "model": model, "method": (
      f"unroll{group.unroll_k}" if group.method == "unroll" else "tf"
      if lam == 0 else f"jvp{lam:g}"), "lam": float(lam),
           "num_seeds": len(members),
           "mse_curve": harness.mean_se_curve(mse[members])[0]}
          | harness.over_seeds([runs[i] for i in members])
          # Seed order is the group's: runs of one seed pair up across methods.
          | {"test_mse_longest_per_seed": mse[members, -1].tolist()}
          for lam in dict.fromkeys(group.lams)
          for members in [np.flatnonzero(lams == lam)]]


def setting_of(dataset: str, task, summaries: list[dict]) -> dict:
  """TF, the TF + JVP of least val MSE (middle horizon), sweep, metrics."""
  of = lambda prefix: [x for x in summaries if x["method"].startswith(prefix)]
  tf, jvp = of("tf")[0], min(of("jvp"), key=lambda x: x["val_mse"], default={})
  return {"dataset": dataset, "model": summaries[0]["model"],
          "summaries": summaries, "longest": max(task.horizons), "tf": tf,
          "jvp": jvp, "sweep": sorted(of("jvp"), key=lambda x: x["lam"]),
          "headline": [tf, jvp] + of("unroll"),
          "metrics": [f"test_mse_h{h}" for h in task.horizons]
                     + (["vpt"] if dataset == "lorenz96" else [])}


def evaluate_claim(settings: list[dict]) -> list[dict]:
  """Per (series, model), with the paired difference over seeds; overall."""
  pm = lambda mean, se, digits=4: f"{mean:.{digits}g}" + (
      f" +- {se:.2g}" if se is not None else "")
  checks = []
  for s in settings:
    h, tf, jvp = s["longest"], s["tf"], s["jvp"]
    key = f"test_mse_h{h}"
    paired = harness.paired_difference(jvp["test_mse_longest_per_seed"],
                                       tf["test_mse_longest_per_seed"])
    checks.append(harness.check(
        f"jvp_beats_tf_{s['dataset']}_{s['model']}",
        f"{s['dataset']}/{s['model']}: TF+JVP (lambda={jvp['lam']:g}, chosen"
        f" on val) < TF, test MSE at h={h}", jvp[key] < tf[key],
        f"{pm(jvp[key], jvp.get(key + '_se'))} vs TF"
        f" {pm(tf[key], tf.get(key + '_se'))}; paired difference"
        f" {pm(*paired, digits=3)}", measure=harness.measure(
            paired[0], se=paired[1], bound=0.0, higher_is_better=False,
            label=f"test MSE at h={h}, JVP - TF (paired)")))
  n, wins = len(settings), sum(c["passed"] for c in checks)
  ratios = [s["jvp"]["test_mse_h1"] / s["tf"]["test_mse_h1"] for s in settings]
  similar = sum(r <= ONE_STEP_TOLERANCE for r in ratios)
  return checks + [
      harness.check("jvp_beats_tf_in_majority", "overall: the penalty lowers"
                    " longest-horizon error in a majority of (series, model)"
                    " settings", wins > n / 2, f"{wins} of {n} settings"),
      harness.check("one_step_error_similar", "overall: one-step test MSE"
                    f" within {ONE_STEP_TOLERANCE:g}x of TF in every setting",
                    similar == n, f"{similar} of {n} settings (ratios: "
                    + ", ".join(f"{r:.2f}" for r in ratios) + ")", measure=harness.measure(
                        max(ratios), bound=ONE_STEP_TOLERANCE, higher_is_better=False,
                        label="largest one-step MSE ratio, TF+JVP / TF"))]


def plot_figures(workdir, settings) -> None:
  """Test MSE vs horizon, and vs lambda; series down, models across."""
  rows, cols = (list(dict.fromkeys(s[k] for s in settings))
                for k in ("dataset", "model"))

  def error_vs_horizon(ax, s):
    for i, x in enumerate(s["headline"]):
      ax.plot(np.arange(1, len(x["mse_curve"]) + 1), x["mse_curve"], lw=1.2,
              color=f"C{i}", label="TF + JVP ($\\lambda$ chosen on val)"
              if x is s["jvp"] else x["method"])
    ax.set(title=f"{s['dataset']} / {s['model']} ($\\lambda$ ="
           f" {s['jvp']['lam']:g})", yscale="log", xlabel="horizon (steps)",
           ylabel="test MSE (z-units$^2$)")

  def lambda_sweep(ax, s):
    key = f"test_mse_h{s['longest']}"
    ax.errorbar([x["lam"] for x in s["sweep"]], [x[key] for x in s["sweep"]],
                yerr=[x.get(key + "_se") or 0.0 for x in s["sweep"]],
                fmt="o-", label="TF + JVP (mean $\\pm$ s.e. over seeds)")
    ax.axhline(s["tf"][key], color="k", ls="--", lw=1, label="TF")
    ax.set(title=f"{s['dataset']} / {s['model']}", xscale="log",
           xlabel="$\\lambda$ (penalty weight, no unit)",
           ylabel=f"test MSE at h={s['longest']}\n(z-units$^2$)")

  for name, title, size, draw in [
      ("error_vs_horizon", "Free-running test MSE vs horizon per method (mean over"
       " seeds),\na panel per dataset and model", (3.8, 2.8), error_vs_horizon),
      ("lambda_sweep", "Test MSE at the longest horizon vs penalty weight, mean +-"
       " s.e. over\nseeds (dashed: TF), a panel per dataset and model", (3.4, 2.5),
       lambda_sweep)]:
    with workdir.figure(name, title=title, rows=len(rows), cols=len(cols), size=size) as axes:
      for s in settings:
        draw(axes[rows.index(s["dataset"]), cols.index(s["model"])], s)


def main(config, workdir: harness.Workdir):
  tasks = {d: models.forecast_task(
      data_lib.lorenz96(**config.lorenz96) if d == "lorenz96"
      else data_lib.load_series(d), **config.tasks[d],
      train_horizon=max(config.unroll_ks, default=1)) for d in config.datasets}
  grid = grid_of(config)
  sweep = workdir.sweep(grid, None, lambda one: train_cell(
      one, tasks[one.settings[0]], config, workdir))
  settings = [setting_of(d, tasks[d], [
      x for name, cell in grid.items() if cell[:2] == (d, m)
      for x in summarize(cell, sweep.values[name][0], tasks[d])])
              for d in config.datasets for m in config.models]
  summaries = [x for s in settings for x in s["summaries"]]
  results = [row for s in settings for x in s["headline"] for row in harness.results_of(
      f"{s['dataset']}/{s['model']}/{x['method']}", x, s["metrics"], num_samples=x["num_seeds"],
      higher_is_better=("vpt",), units={m: "z-units^2" for m in s["metrics"]} | {"vpt": "steps"})]
  plot_figures(workdir, settings)
  m, t = config.model, config.train
  workdir.write_report(
      dataset={"name": ", ".join(config.datasets),
               "provenance": " | ".join(x.provenance for x in tasks.values())},
      model={"architectures": {
          "dlinear": "DLinear-style: moving-average trend / remainder split,"
                     f" one linear map each (kernel {m.moving_average}, capped"
                     " at L), window relative to its newest row",
          "mlp": f"MLP {'-'.join(map(str, m.hidden))} GELU on the flattened"
                 " window relative to its newest row"},
             "output": "one-step (P_out = P = 1)", "optimizer": "clip_by_"
             f"global_norm({t.clip_norm}) + adamw({t.learning_rate:g},"
             f" weight_decay={t.weight_decay:g}), batch {t.batch_size},"
             f" {t.num_steps} steps", "loss": "MSE on z-normalised one-step"
             " targets (+ lambda * mean L_JVP); unroll-k: MSE over k"
             " free-running steps"}, results=results, checks=evaluate_claim(settings),
      notes=notes_of(config, settings, summaries),
      extra_run_data={"summaries": summaries})


def notes_of(config, settings, summaries) -> list[str]:
  """Lambda selection, where the cost is measured, budget cuts, divergences."""
  top = max(config.lams, default=0.0)
  at_top = [f"{s['dataset']}/{s['model']}" for s in settings
            if s["jvp"]["lam"] == top]
  return [
      "lambda is selected per (series, model) on validation free-running MSE"
      " at the middle horizon, among lambda > 0; every lambda's numbers are in"
      " report.json run_data.summaries and lambda_sweep.png.",
      "Training cost per step is measured by `python -m benchmarks.rollout`"
      " (TF + JVP vs TF vs k-step unrolling).",
      "Cuts against our reconstructed protocol (docs/rollout_consistency.md)"
      f" for the CPU budget: {config.train.num_steps} steps (protocol: 3000),"
      f" MLP {'x'.join(map(str, config.model.hidden))} (protocol: 128x128),"
      " no early stopping, no GRU; gradients clipped at global norm"
      f" {config.train.clip_norm:g} for every method; k-step unrolling with"
      f" k in {tuple(config.unroll_ks)} (protocol: k = 2)."] + [
          f"Validation chose the largest lambda of the sweep ({top:g}) in"
          f" {len(at_top)} of {len(settings)} settings ({', '.join(at_top)});"
          " larger values were not tried." for _ in at_top[:1]] + [
          f"{x['dataset']}/{x['model']}/{x['method']}: non-finite test error"
          " (diverged)" for x in summaries if not np.isfinite(x["test_mse_h1"])]


if __name__ == "__main__":
  harness.run(main, name="rollout")
