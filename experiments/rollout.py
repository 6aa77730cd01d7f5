r"""Rollout consistency at CPU scale: does the JVP penalty tame free running?

The method is our reconstruction from the abstract of a 2026 preprint whose
text was not located; ``docs/rollout_consistency.md`` says what is whose.
For every series and forecaster of the config, trains one-step models with
teacher forcing (TF, lambda = 0), with TF + lambda * L_JVP
(:func:`jaxpapers.losses.rollout_consistency`) for each lambda of the sweep,
and with k-step unrolling (backpropagation through
:func:`jaxpapers.losses.free_running_rollout`, the expensive baseline), then
measures free-running error on the last 20% of each series at several
horizons. Runs of one (series, model, method) train together under
``jax.vmap`` over (lambda, seed); runs of one seed share their initialisation
and every mini-batch, so TF and penalty runs are paired. lambda is chosen per
(series, model) on validation MSE at the middle horizon; the report checks
that the penalty lowers TF's longest-horizon test error at a similar one-step
error. ``python -m benchmarks.rollout`` measures the cost side of the claim."""

import functools
from typing import Any, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from jaxpapers import data as data_lib
from jaxpapers import losses
from jaxpapers.models.forecasters import DLinear
from jaxpapers.models.forecasters import MLPForecaster

PAPER = {"title": "Local rollout consistency for time-series forecasters (2026"
                  " preprint; paper text not located, method reconstructed"
                  " from the abstract)",
         "authors": "unknown", "url": "docs/rollout_consistency.md"}
CLAIM = (
    "Adding lambda * ||J_f(s+) delta||^2 (the Jacobian of the forecaster along"
    " its own fed-back residual) to teacher-forced training lowers"
    " long-horizon free-running error relative to teacher forcing, at similar"
    " one-step error and a fraction of k-step unrolled training's cost."
)
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

  name: str
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
  windows = functools.partial(data_lib.sliding_windows, split.values, lookback)
  train = windows(max(config.unroll_ks, default=1), stop=split.train_end)
  val = windows(horizons[len(horizons) // 2], start=split.train_end,
                stop=split.val_end)
  test = windows(max(horizons), start=split.val_end,
                 stride=task_config.test_stride)
  provenance = (f"{series.provenance}; split 70/10/20 in time, z-normalised"
                f" with training statistics; lookback {lookback}; windows"
                f" train/val/test = {len(train[0])}/{len(val[0])}/{len(test[0])}")
  return Task(name, provenance, lookback, split.values.shape[1], horizons,
              train, val, test)


def make_model(name: str, task: Task, config, rngs: nnx.Rngs) -> nnx.Module:
  if name == "dlinear":
    return DLinear(task.lookback, task.channels, 1,
                   moving_average=config.model.moving_average, rngs=rngs)
  if name == "mlp":
    return MLPForecaster(task.lookback, task.channels, 1,
                         hidden=tuple(config.model.hidden), rngs=rngs)
  raise ValueError(f"unknown model {name!r}; expected 'dlinear' or 'mlp'.")


def groups_for(dataset: str, model: str, config) -> list[Group]:
  seeds = tuple(config.seeds)
  lams = (0.0,) + tuple(config.lams)
  groups = [Group(f"{dataset}_{model}_penalty", dataset, model, "penalty", 0,
                  tuple(lam for lam in lams for _ in seeds), seeds * len(lams))]
  for k in config.unroll_ks:
    groups.append(Group(f"{dataset}_{model}_unroll{k}", dataset, model,
                        "unroll", k, (0.0,) * len(seeds), seeds))
  return groups


def _optimizer(config):
  return optax.chain(
      optax.clip_by_global_norm(config.train.clip_norm),
      optax.adamw(config.train.learning_rate,
                  weight_decay=config.train.weight_decay),
  )


def init_group(group: Group, task: Task, config):
  """``(graphdef, state, data_keys)``: the fresh state of the group's members.

  ``state`` (a :class:`TrainState`) holds parameters and optimizer states
  stacked over the members; each member's initialisation and its data key
  (for :func:`make_train_chunk`) are pure functions of its seed.
  """
  keys = [jax.random.split(jax.random.key(s)) for s in group.seeds]
  init_keys, data_keys = (jnp.stack([k[0] for k in keys]),
                          jnp.stack([k[1] for k in keys]))
  make = lambda key: make_model(group.model, task, config,
                                nnx.Rngs(params=key))
  graphdef = nnx.graphdef(nnx.eval_shape(lambda: make(init_keys[0])))
  params = jax.vmap(lambda key: nnx.state(make(key), nnx.Param))(init_keys)
  state = TrainState(jnp.int32(0), params,
                     jax.vmap(_optimizer(config).init)(params))
  return graphdef, state, data_keys


def _predict_fn(graphdef):
  return lambda params, window: nnx.merge(graphdef, params)(window)


def _loss_fn(group: Group, predict):
  """``loss(params, lam, contexts, truths) -> (loss, (task, penalty))`` of one run."""
  if group.method == "penalty":
    def loss(params, lam, contexts, truths):
      targets = truths[:, :1]
      predictions = jax.vmap(predict, (None, 0))(params, contexts)
      task_loss = jnp.mean(jnp.square(predictions - targets))
      penalty = jnp.mean(jax.vmap(
          lambda c, t: losses.rollout_consistency(predict, params, c, t)
      )(contexts, targets))
      return task_loss + lam * penalty, (task_loss, penalty)
    return loss

  k = group.unroll_k

  def unrolled(params, lam, contexts, truths):
    del lam
    rollouts = jax.vmap(
        lambda c: losses.free_running_rollout(predict, params, c, k))(contexts)
    task_loss = jnp.mean(jnp.square(rollouts - truths[:, :k]))
    return task_loss, (task_loss, jnp.zeros_like(task_loss))
  return unrolled


def make_train_chunk(group: Group, graphdef, config):
  """Jitted ``log_every`` steps of every member; batch t = f(data key, t)."""
  loss_fn = _loss_fn(group, _predict_fn(graphdef))
  tx = _optimizer(config)
  batch_size, num_steps = config.train.batch_size, config.log_every

  def one_step(params, opt_state, lam, data_key, step, windows):
    num_windows = windows[0].shape[0]
    indices = data_lib.minibatch_indices(jax.random.fold_in(data_key, step),
                                         num_windows, batch_size)
    contexts, truths = data_lib.take(windows, indices)
    (loss, (task_loss, penalty)), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(params, lam, contexts, truths)
    updates, opt_state = tx.update(grads, opt_state, params)
    stats = {"loss": loss, "task_loss": task_loss, "penalty": penalty}
    return optax.apply_updates(params, updates), opt_state, stats

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

  def rollouts(contexts, horizon):
    return jax.vmap(lambda c: losses.free_running_rollout(
        predict, params, c, horizon))(contexts)

  test_rollouts = rollouts(test[0], test[1].shape[1])
  test_errors = losses.horizon_errors(test_rollouts, test[1])
  val_errors = losses.horizon_errors(rollouts(val[0], val[1].shape[1]), val[1])
  # Valid prediction time: steps until the channel-RMS error of a window
  # first exceeds the threshold (in units of the training std).
  rms_NxH = jnp.sqrt(jnp.mean(jnp.square(test_rollouts - test[1]), axis=-1))
  exceeded = rms_NxH > vpt_threshold
  vpt = jnp.where(jnp.any(exceeded, axis=1), jnp.argmax(exceeded, axis=1),
                  exceeded.shape[1])
  return {"test_mse": test_errors.mse, "test_mae": test_errors.mae,
          "val_mse": val_errors.mse[-1],
          "vpt": jnp.mean(vpt.astype(jnp.float32))}


def evaluate(params, task: Task, graphdef, config) -> dict[str, np.ndarray]:
  """:func:`evaluate_run` of every member, stacked along the first axis.

  One run at a time, so all groups of a (series, model) share one compilation.
  """
  val, test = (tuple(map(jnp.asarray, x)) for x in (task.val, task.test))
  num_members = jax.tree.leaves(params)[0].shape[0]
  records = [jax.device_get(evaluate_run(
      jax.tree.map(lambda x, i=i: x[i], params), val, test, graphdef=graphdef,
      vpt_threshold=config.vpt_threshold)) for i in range(num_members)]
  return jax.tree.map(lambda *xs: np.stack(xs), *records)


def train_group(group: Group, task: Task, config, workdir) -> dict[str, Any]:
  """Trains (or resumes) one group; returns its final evaluation record."""
  graphdef, state, data_keys = init_group(group, task, config)
  lams = jnp.asarray(group.lams, jnp.float32)
  windows = tuple(jnp.asarray(x) for x in task.train)
  train_chunk = make_train_chunk(group, graphdef, config)

  def chunk(state, step):
    state, stats = train_chunk(state, lams, data_keys, windows)
    step, record = int(state.step), jax.device_get(stats)
    if step >= config.train.num_steps:
      record.update(evaluate(state.params, task, graphdef, config))
    return harness.Chunk(state, step, record)

  return workdir.train(group.name, state, chunk,
                       num_steps=config.train.num_steps,
                       checkpoint_every=config.checkpoint_every).records[-1]


def summarize(group: Group, record: dict[str, Any], task: Task) -> list[dict]:
  """Per method of the group: mean and s.e. over seeds of every metric."""
  lams, out = np.asarray(group.lams), []
  for lam in dict.fromkeys(group.lams):
    members = np.flatnonzero(lams == lam)
    test_mse = np.asarray(record["test_mse"], np.float64)[members]
    test_mae = np.asarray(record["test_mae"], np.float64)[members]
    method = (f"unroll{group.unroll_k}" if group.method == "unroll"
              else "tf" if lam == 0 else f"jvp{lam:g}")
    summary = {"dataset": group.dataset, "model": group.model,
               "method": method, "lam": float(lam), "num_seeds": len(members),
               "mse_curve": test_mse.mean(0).tolist()}
    per_metric = {"val_mse": np.asarray(record["val_mse"])[members],
                  "vpt": np.asarray(record["vpt"])[members]}
    for h in task.horizons:
      per_metric[f"test_mse_h{h}"] = test_mse[:, h - 1]
      per_metric[f"test_mae_h{h}"] = test_mae[:, h - 1]
    for name, values in per_metric.items():
      summary[name], summary[name + "_se"] = harness.mean_se(values)
    # Seed order is the group's, so runs of one seed pair up across methods.
    summary["test_mse_longest_per_seed"] = test_mse[:, -1].tolist()
    out.append(summary)
  return out


def select_lambda(summaries: list[dict]) -> dict[str, Any]:
  """The penalty run with the lowest validation MSE at the middle horizon."""
  penalized = [s for s in summaries if s["method"].startswith("jvp")]
  return min(penalized, key=lambda s: s["val_mse"]) if penalized else {}


def evaluate_claim(settings: list[dict]) -> list[dict]:
  """Checks per (series, model) and overall.

  ``settings`` (from :func:`main`) hold ``dataset, model, longest`` and the
  summaries ``tf`` and ``jvp`` (lambda chosen on validation); the detail
  adds the difference over seeds, which pair up (same init and batches).
  """
  checks, wins, similar = [], 0, 0
  for s in settings:
    h, tf, jvp = s["longest"], s["tf"], s["jvp"]
    key = f"test_mse_h{h}"
    won = bool(jvp[key] < tf[key])
    wins += won
    checks.append(harness.check(
        f"jvp_beats_tf_{s['dataset']}_{s['model']}",
        f"{s['dataset']}/{s['model']}: TF+JVP (lambda={jvp['lam']:g}, chosen"
        f" on val) < TF, test MSE at h={h}", won,
        f"{_pm(jvp, key)} vs TF {_pm(tf, key)}; paired difference"
        f" {_paired_difference(jvp, tf)}"))
    similar += bool(jvp["test_mse_h1"] <= ONE_STEP_TOLERANCE * tf["test_mse_h1"])
  n = len(settings)
  checks.append(harness.check(
      "jvp_beats_tf_in_majority", "overall: the penalty lowers longest-horizon"
      " error in a majority of (series, model) settings", wins > n / 2,
      f"{wins} of {n} settings"))
  checks.append(harness.check(
      "one_step_error_similar", f"overall: one-step test MSE within"
      f" {ONE_STEP_TOLERANCE:g}x of TF in every setting", similar == n,
      f"{similar} of {n} settings"))
  return checks


def _paired_difference(a, b):
  mean, se = harness.mean_se(np.asarray(a["test_mse_longest_per_seed"])
                             - np.asarray(b["test_mse_longest_per_seed"]))
  return f"{mean:.3g}" + (f" +- {se:.2g}" if se is not None else "")


def _pm(summary, key):
  se = summary.get(key + "_se")
  return f"{summary[key]:.4g}" + (f" +- {se:.2g}" if se is not None else "")


def _of_setting(summaries, setting, prefix):
  return [x for x in summaries if x["dataset"] == setting["dataset"]
          and x["model"] == setting["model"] and x["method"].startswith(prefix)]


def _headline(setting, summaries):
  """TF, TF + JVP at the chosen lambda, and every unrolled baseline."""
  return [setting["tf"], setting["jvp"]] + _of_setting(summaries, setting,
                                                       "unroll")


def _plot_panels(workdir, name, title, settings, size, draw):
  """Panels ``draw(ax, setting)`` (series down, models across), one legend.

  Every panel draws the same methods, so the legend is the first panel's.
  """
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  datasets = list(dict.fromkeys(s["dataset"] for s in settings))
  models = list(dict.fromkeys(s["model"] for s in settings))
  fig, axes = plt.subplots(len(datasets), len(models), squeeze=False,
                           figsize=(size[0] * len(models),
                                    size[1] * len(datasets) + 0.5))
  for s in settings:
    ax = axes[datasets.index(s["dataset"]), models.index(s["model"])]
    ax.set_title(f"{s['dataset']} / {s['model']}", fontsize=9)
    draw(ax, s)
  fig.suptitle(title, fontsize=10)
  handles, labels = axes[0, 0].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
  fig.tight_layout(rect=(0, 0.3 / fig.get_figheight(), 1, 1))
  return workdir.save_figure(fig, name)


def plot_error_vs_horizon(workdir, settings, summaries):
  """F1: free-running test MSE vs horizon, one panel per (series, model)."""
  def draw(ax, s):
    for i, summary in enumerate(_headline(s, summaries)):
      curve = summary["mse_curve"]
      ax.plot(np.arange(1, len(curve) + 1), curve, color=f"C{i}", lw=1.2,
              label="TF + JVP ($\\lambda$ chosen on val)"
              if summary is s["jvp"] else summary["method"])
    ax.set_title(f"{s['dataset']} / {s['model']} ($\\lambda$ ="
                 f" {s['jvp']['lam']:g})", fontsize=9)
    ax.set(yscale="log", xlabel="horizon (steps)",
           ylabel="test MSE (z-units)")

  return _plot_panels(
      workdir, "error_vs_horizon", "Free-running test error: the JVP penalty"
      " should lower TF's long-horizon error", settings, (3.8, 2.8), draw)


def plot_lambda_sweep(workdir, settings, summaries):
  """F2: longest-horizon test MSE vs lambda (TF as the dashed line)."""
  def draw(ax, s):
    key = f"test_mse_h{s['longest']}"
    sweep = sorted(_of_setting(summaries, s, "jvp"), key=lambda x: x["lam"])
    ax.errorbar([x["lam"] for x in sweep], [x[key] for x in sweep],
                yerr=[x.get(key + "_se") or 0.0 for x in sweep], fmt="o-",
                label="TF + JVP (mean $\\pm$ s.e. over seeds)")
    ax.axhline(s["tf"][key], color="k", ls="--", lw=1, label="TF")
    ax.set(xscale="log", xlabel="$\\lambda$ (penalty weight, no unit)",
           ylabel=f"test MSE at h={s['longest']}\n(z-units)")

  return _plot_panels(
      workdir, "lambda_sweep", "Longest-horizon test error vs penalty weight:"
      " below the TF line, the penalty helps", settings, (3.4, 2.5), draw)


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  workdir.plan(len(config.datasets) * len(config.models)
               * (1 + len(config.unroll_ks)))
  summaries, settings, provenance = [], [], []
  for dataset in config.datasets:
    task = load_task(dataset, config)
    provenance.append(task.provenance)
    for model in config.models:
      setting_summaries = []
      for group in groups_for(dataset, model, config):
        record = train_group(group, task, config, workdir)
        setting_summaries += summarize(group, record, task)
      summaries += setting_summaries
      settings.append({
          "dataset": dataset, "model": model, "longest": max(task.horizons),
          "tf": next(s for s in setting_summaries if s["method"] == "tf"),
          "jvp": select_lambda(setting_summaries),
      })

  results = []
  for s in settings:
    metrics = [f"test_mse_h{h}" for h in config.tasks[s["dataset"]].horizons]
    metrics += ["vpt"] if s["dataset"] == "lorenz96" else []
    for summary in _headline(s, summaries):
      results += harness.results_of(
          f"{s['dataset']}/{s['model']}/{summary['method']}", summary, metrics,
          num_samples=summary["num_seeds"], higher_is_better=("vpt",))
  workdir.write_report(
      paper=PAPER, claim=CLAIM,
      dataset={"name": ", ".join(config.datasets),
               "provenance": " | ".join(provenance)},
      model=model_metadata(config), seeds=list(config.seeds), results=results,
      paper_results=PAPER_RESULTS, checks=evaluate_claim(settings),
      figures=[plot_error_vs_horizon(workdir, settings, summaries),
               plot_lambda_sweep(workdir, settings, summaries)],
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
    notes.append(
        f"Validation chose the largest lambda of the sweep ({top:g}) in"
        f" {len(at_top)} of {len(settings)} settings ({', '.join(at_top)});"
        " larger values were not tried.")
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
  harness.run(main, name="rollout", validate=validate)
