r"""Rollout consistency at CPU scale: does the JVP penalty tame free running?

Method and protocol are our reconstruction from the abstract of a 2026
preprint whose text was not located (``docs/rollout_consistency.md``).
Forecasters train with teacher forcing (TF), TF + lambda * L_JVP and k-step
unrolling (:mod:`jaxpapers.losses`); free-running errors on the last 20% of
each series decide the claim. Runs of one (series, model, method) train
together under ``jax.vmap``; runs of one seed share their initialisation and
mini-batches, so TF and penalty runs pair up. ``python -m benchmarks.rollout``
measures the cost side."""

import functools
from typing import Any, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from experiments.configs import rollout as rollout_config
from jaxpapers import data as data_lib
from jaxpapers import losses
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
PAPER_RESULTS = [
    harness.paper_result(
        "abstract", "Experiments on time series forecasting tasks show that"
        " the regularization improves predictive accuracy. No numbers are"
        " given in the abstract."),
    harness.paper_result(
        "our expectation (reconstruction, not the paper's)", "TF + L_JVP beats"
        " TF at long horizons at similar one-step error, for about one extra"
        " JVP per step."),
]
# "Similar one-step error": the penalty may cost at most this factor.
ONE_STEP_TOLERANCE = 1.10


class TrainState(NamedTuple):
  step: jax.Array
  params: Any  # nnx.State, leaves stacked over the group's members
  opt_state: Any


class Task(NamedTuple):
  """One series, cut into train / validation / test windows."""

  provenance: str
  lookback: int
  channels: int
  horizons: tuple[int, ...]
  train: tuple[np.ndarray, np.ndarray]  # contexts (N, L, C), truths (N, k_max, C)
  val: tuple[np.ndarray, np.ndarray]  # truths of the middle horizon
  test: tuple[np.ndarray, np.ndarray]  # truths of the longest horizon


class Group(NamedTuple):
  """Runs of one (series, model, method) that train together under vmap."""

  name: str
  dataset: str
  model: str
  method: str  # "penalty" (lambda = 0 is teacher forcing) or "unroll"
  unroll_k: int  # 0 for the penalty family
  lams: tuple[float, ...]  # per member
  seeds: tuple[int, ...]  # per member


def load_task(name: str, config: ml_collections.ConfigDict) -> Task:
  task_config = config.tasks[name]
  series = (data_lib.lorenz96(**config.lorenz96) if name == "lorenz96"
            else data_lib.load_series(name))
  split = data_lib.chronological_split(series.values)
  horizons, lookback = tuple(task_config.horizons), task_config.lookback
  train = split.windows("train", lookback, max(config.unroll_ks, default=1))
  val = split.windows("val", lookback, horizons[len(horizons) // 2])
  test = split.windows("test", lookback, max(horizons),
                       stride=task_config.test_stride)
  provenance = (f"{series.provenance}; split 70/10/20 in time, z-normalised"
                f" with training statistics; lookback {lookback}; windows"
                f" train/val/test = {len(train[0])}/{len(val[0])}/{len(test[0])}")
  return Task(provenance, lookback, split.values.shape[1], horizons,
              train, val, test)


def make_model(name: str, task: Task, config, key: jax.Array) -> nnx.Module:
  rngs = nnx.Rngs(params=key)
  if name == "dlinear":
    return models.DLinear(task.lookback, task.channels, 1,
                          moving_average=config.model.moving_average,
                          rngs=rngs)
  if name == "mlp":
    return models.MLPForecaster(task.lookback, task.channels, 1,
                                hidden=tuple(config.model.hidden), rngs=rngs)
  raise ValueError(f"unknown model {name!r}; expected 'dlinear' or 'mlp'.")


def groups_for(dataset: str, model: str, config) -> list[Group]:
  seeds, lams = tuple(config.seeds), (0.0,) + tuple(config.lams)
  return [Group(f"{dataset}_{model}_penalty", dataset, model, "penalty", 0,
                tuple(lam for lam in lams for _ in seeds), seeds * len(lams))
          ] + [Group(f"{dataset}_{model}_unroll{k}", dataset, model, "unroll",
                     k, (0.0,) * len(seeds), seeds) for k in config.unroll_ks]


def _optimizer(config):
  return optax.chain(optax.clip_by_global_norm(config.train.clip_norm),
                     optax.adamw(config.train.learning_rate,
                                 weight_decay=config.train.weight_decay))


def init_group(group: Group, task: Task, config):
  """``(graphdef, state, data_keys)``: the members' fresh stacked TrainState.

  Each member's initialisation and data key are pure functions of its seed.
  """
  init_keys, data_keys = jnp.stack(
      [jax.random.split(jax.random.key(s)) for s in group.seeds], axis=1)
  make = lambda key: make_model(group.model, task, config, key)
  graphdef = nnx.graphdef(nnx.eval_shape(lambda: make(init_keys[0])))
  params = jax.vmap(lambda key: nnx.state(make(key), nnx.Param))(init_keys)
  opt_state = jax.vmap(_optimizer(config).init)(params)
  return graphdef, TrainState(jnp.int32(0), params, opt_state), data_keys


def _predict_fn(graphdef):
  return lambda params, window: nnx.merge(graphdef, params)(window)


def make_train_chunk(group: Group, graphdef, config):
  """Jitted ``log_every`` steps of every member; batch t = f(data key, t)."""
  predict, tx = _predict_fn(graphdef), _optimizer(config)
  batch_size, num_steps = config.train.batch_size, config.log_every

  def loss_fn(params, lam, contexts, truths):
    """``(loss, (task_loss, penalty))``; unrolled runs ignore ``lam``."""
    if group.method == "penalty":
      return losses.teacher_forcing_loss(predict, params, contexts,
                                         truths[:, :1], lam)
    task_loss = losses.unrolled_loss(predict, params, contexts,
                                     truths[:, :group.unroll_k])
    return task_loss, (task_loss, jnp.zeros_like(task_loss))

  def one_step(params, opt_state, lam, data_key, step, windows):
    indices = data_lib.minibatch_indices(jax.random.fold_in(data_key, step),
                                         windows[0].shape[0], batch_size)
    (loss, (task_loss, penalty)), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(params, lam, *data_lib.take(windows, indices))
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, {
        "loss": loss, "task_loss": task_loss, "penalty": penalty}

  @jax.jit
  def train_chunk(state, lams, data_keys, windows):
    def body(carry, step):
      params, opt_state = carry
      params, opt_state, stats = jax.vmap(
          one_step, in_axes=(0, 0, 0, 0, None, None)
      )(params, opt_state, lams, data_keys, step, windows)
      return (params, opt_state), stats

    steps = state.step + jnp.arange(num_steps, dtype=jnp.int32)
    (params, opt_state), stats = jax.lax.scan(
        body, (state.params, state.opt_state), steps)
    stats = jax.tree.map(lambda x: jnp.mean(x, axis=0), stats)
    return TrainState(state.step + num_steps, params, opt_state), stats

  return train_chunk


@functools.partial(jax.jit, static_argnames=("graphdef", "vpt_threshold"))
def evaluate_run(params, val, test, *, graphdef, vpt_threshold: float):
  """Free-running errors of one run: per-step test MSE/MAE, val MSE, VPT."""
  predict = _predict_fn(graphdef)
  test_errors = losses.free_running_errors(predict, params, *test,
                                           vpt_threshold=vpt_threshold)
  return {"test_mse": test_errors.mse, "test_mae": test_errors.mae,
          "val_mse": losses.free_running_errors(predict, params, *val).mse[-1],
          "vpt": jnp.mean(test_errors.valid_steps.astype(jnp.float32))}


def train_group(group: Group, task: Task, config, workdir) -> dict[str, Any]:
  """Trains (or resumes) one group; returns its final evaluation record."""
  graphdef, state, data_keys = init_group(group, task, config)
  lams = jnp.asarray(group.lams, jnp.float32)
  windows, val, test = (tuple(map(jnp.asarray, x))
                        for x in (task.train, task.val, task.test))
  train_chunk = make_train_chunk(group, graphdef, config)

  def evaluate(params):
    # One member at a time: all groups of a (series, model) compile once.
    records = [jax.device_get(evaluate_run(
        jax.tree.map(lambda x, i=i: x[i], params), val, test,
        graphdef=graphdef, vpt_threshold=config.vpt_threshold))
               for i in range(len(group.seeds))]
    return jax.tree.map(lambda *xs: np.stack(xs), *records)

  def chunk(state, step):
    state, stats = train_chunk(state, lams, data_keys, windows)
    step, record = int(state.step), jax.device_get(stats)
    if step >= config.train.num_steps:
      record.update(evaluate(state.params))
    return harness.Chunk(state, step, record)

  return workdir.train(group.name, state, chunk,
                       num_steps=config.train.num_steps,
                       checkpoint_every=config.checkpoint_every).records[-1]


def summarize(group: Group, record: dict[str, Any], task: Task) -> list[dict]:
  """Per method of the group: mean and s.e. over seeds of every metric."""
  errors = {k: np.asarray(record[f"test_{k}"], np.float64)
            for k in ("mse", "mae")}
  out = []
  for lam in dict.fromkeys(group.lams):
    members = np.flatnonzero(np.asarray(group.lams) == lam)
    mse = errors["mse"][members]
    summary = {"dataset": group.dataset, "model": group.model,
               "method": (f"unroll{group.unroll_k}" if group.method == "unroll"
                          else "tf" if lam == 0 else f"jvp{lam:g}"),
               "lam": float(lam), "num_seeds": len(members),
               "mse_curve": mse.mean(0).tolist()}
    per_metric = {k: np.asarray(record[k])[members] for k in ("val_mse", "vpt")}
    per_metric.update({f"test_{k}_h{h}": errors[k][members, h - 1]
                       for h in task.horizons for k in ("mse", "mae")})
    for name, values in per_metric.items():
      summary[name], summary[name + "_se"] = harness.mean_se(values)
    # Seed order is the group's, so runs of one seed pair up across methods.
    summary["test_mse_longest_per_seed"] = mse[:, -1].tolist()
    out.append(summary)
  return out


def evaluate_claim(settings: list[dict]) -> list[dict]:
  """Checks per (series, model) of :func:`setting_of`, and overall.

  Details add the paired difference over seeds (same init and batches).
  """
  pm = lambda mean, se, digits=4: f"{mean:.{digits}g}" + (
      f" +- {se:.2g}" if se is not None else "")
  checks = []
  for s in settings:
    h, tf, jvp = s["longest"], s["tf"], s["jvp"]
    key = f"test_mse_h{h}"
    paired = harness.mean_se(np.asarray(jvp["test_mse_longest_per_seed"])
                             - np.asarray(tf["test_mse_longest_per_seed"]))
    checks.append(harness.check(
        f"jvp_beats_tf_{s['dataset']}_{s['model']}",
        f"{s['dataset']}/{s['model']}: TF+JVP (lambda={jvp['lam']:g}, chosen"
        f" on val) < TF, test MSE at h={h}", jvp[key] < tf[key],
        f"{pm(jvp[key], jvp.get(key + '_se'))} vs TF"
        f" {pm(tf[key], tf.get(key + '_se'))}; paired difference"
        f" {pm(*paired, digits=3)}"))
  n, wins = len(settings), sum(c["passed"] for c in checks)
  similar = sum(s["jvp"]["test_mse_h1"] <= ONE_STEP_TOLERANCE
                * s["tf"]["test_mse_h1"] for s in settings)
  return checks + [
      harness.check("jvp_beats_tf_in_majority", "overall: the penalty lowers"
                    " longest-horizon error in a majority of (series, model)"
                    " settings", wins > n / 2, f"{wins} of {n} settings"),
      harness.check("one_step_error_similar", "overall: one-step test MSE"
                    f" within {ONE_STEP_TOLERANCE:g}x of TF in every setting",
                    similar == n, f"{similar} of {n} settings")]


def plot_figures(workdir, settings) -> list[str]:
  """F1: test MSE vs horizon; F2: longest-horizon test MSE vs lambda."""
  datasets = list(dict.fromkeys(s["dataset"] for s in settings))
  model_names = list(dict.fromkeys(s["model"] for s in settings))

  def plot_panels(name, title, size, draw):
    """Panels ``draw(ax, setting)``: series down, models across."""
    fig, axes = harness.panels(len(datasets), len(model_names), size=size)
    for s in settings:
      draw(axes[datasets.index(s["dataset"]), model_names.index(s["model"])], s)
    return workdir.save_figure(fig, name, title=title)

  def error_vs_horizon(ax, s):
    for i, summary in enumerate(s["headline"]):
      curve = summary["mse_curve"]
      ax.plot(np.arange(1, len(curve) + 1), curve, color=f"C{i}", lw=1.2,
              label="TF + JVP ($\\lambda$ chosen on val)"
              if summary is s["jvp"] else summary["method"])
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

  return [
      plot_panels("error_vs_horizon", "Free-running test error: the JVP"
                  " penalty should lower TF's long-horizon error", (3.8, 2.8),
                  error_vs_horizon),
      plot_panels("lambda_sweep", "Longest-horizon test error vs penalty"
                  " weight: below the TF line, the penalty helps", (3.4, 2.5),
                  lambda_sweep)]


def setting_of(dataset: str, task: Task, summaries: list[dict]) -> dict:
  """One (series, model): TF, the chosen TF + JVP, the sweep, result rows.

  lambda is chosen among lambda > 0 on validation MSE at the middle horizon.
  """
  of = lambda prefix: [x for x in summaries if x["method"].startswith(prefix)]
  tf = of("tf")[0]
  jvp = min(of("jvp"), key=lambda x: x["val_mse"], default={})
  return {"dataset": dataset, "model": summaries[0]["model"],
          "summaries": summaries, "longest": max(task.horizons), "tf": tf,
          "jvp": jvp, "sweep": sorted(of("jvp"), key=lambda x: x["lam"]),
          "headline": [tf, jvp] + of("unroll"),
          "metrics": [f"test_mse_h{h}" for h in task.horizons]
                     + (["vpt"] if dataset == "lorenz96" else [])}


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  workdir.plan(len(config.datasets) * len(config.models)
               * (1 + len(config.unroll_ks)))
  settings, provenance = [], []
  for dataset in config.datasets:
    task = load_task(dataset, config)
    provenance.append(task.provenance)
    for model in config.models:
      settings.append(setting_of(dataset, task, [
          summary for group in groups_for(dataset, model, config)
          for summary in summarize(
              group, train_group(group, task, config, workdir), task)]))
  summaries = [x for s in settings for x in s["summaries"]]
  results = [row for s in settings for x in s["headline"]
             for row in harness.results_of(
                 f"{s['dataset']}/{s['model']}/{x['method']}", x, s["metrics"],
                 num_samples=x["num_seeds"], higher_is_better=("vpt",),
                 units={m: "steps" if m == "vpt" else "z-units^2"
                        for m in s["metrics"]})]
  workdir.write_report(
      paper=PAPER, claim=CLAIM,
      dataset={"name": ", ".join(config.datasets),
               "provenance": " | ".join(provenance)},
      model=model_metadata(config), seeds=list(config.seeds), results=results,
      paper_results=PAPER_RESULTS, checks=evaluate_claim(settings),
      figures=plot_figures(workdir, settings),
      notes=notes_of(config, settings, summaries),
      extra_run_data={"summaries": summaries})


def notes_of(config, settings, summaries) -> list[str]:
  """Lambda selection, where the cost is measured, budget cuts, divergences."""
  notes = [
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
      f" k in {tuple(config.unroll_ks)} (protocol: k = 2).",
  ]
  top = max(config.lams, default=0.0)
  at_top = [f"{s['dataset']}/{s['model']}" for s in settings
            if s["jvp"]["lam"] == top]
  if at_top:
    notes.append(f"Validation chose the largest lambda of the sweep ({top:g})"
                 f" in {len(at_top)} of {len(settings)} settings"
                 f" ({', '.join(at_top)}); larger values were not tried.")
  return notes + [f"{x['dataset']}/{x['model']}/{x['method']}: non-finite"
                  " test error (diverged)" for x in summaries
                  if not np.isfinite(x["test_mse_h1"])]


def model_metadata(config) -> dict[str, Any]:
  model, train = config.model, config.train
  return {
      "architectures": {
          "dlinear": "DLinear-style: moving-average trend / remainder split,"
                     f" one linear map each (kernel {model.moving_average},"
                     " capped at L), window relative to its newest row",
          "mlp": f"MLP {'-'.join(map(str, model.hidden))} GELU on the"
                 " flattened window relative to its newest row"},
      "output": "one-step (P_out = P = 1)",
      "optimizer": f"clip_by_global_norm({train.clip_norm}) + adamw("
                   f"{train.learning_rate:g}, weight_decay="
                   f"{train.weight_decay:g}), batch {train.batch_size},"
                   f" {train.num_steps} steps",
      "loss": "MSE on z-normalised one-step targets (+ lambda * mean L_JVP);"
              " unroll-k: MSE over k free-running steps"}


def validate(config):
  """Training runs in jitted chunks of ``log_every`` steps."""
  if (config.train.num_steps % config.log_every
      or config.checkpoint_every % config.log_every):
    raise ValueError(
        "train.num_steps and checkpoint_every must be multiples of log_every"
        f" (the training chunk); got {config.train.num_steps},"
        f" {config.checkpoint_every}, {config.log_every}.")


if __name__ == "__main__":
  harness.run(main, name="rollout", fields=rollout_config.FIELDS,
              validate=validate)
