r"""ECHO at CPU scale: does an environment cross-entropy help GRPO on a toy shell?

ECHO (Shrivastava et al., 2026) adds ``lambda`` times the cross-entropy of the
observation tokens to GRPO's PPO-clip loss, in the same forward pass. Our
CPU protocol (``docs/echo.md``): a byte GPT warm started on random-command
transcripts of the key-value shell (:mod:`jaxpapers.rl.shell`), then GRPO
with lambda in {0, 0.005, 0.05} and lambda = 0.05 with ``world_model_only``
(no verifier), 3 seeds, all runs vmapped in one jitted step
(:func:`jaxpapers.rl.training.rl_step`). Every ``eval.every`` steps: held-out
pass@1 and the environment cross-entropy of a fixed probe set. The claim:
lambda > 0 raises pass@1 and lowers the environment cross-entropy, and the
environment-only mode improves without a verifier.
"""

import functools
from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments import harness
from experiments.configs import echo as echo_config
from jaxpapers import models
from jaxpapers.rl import echo
from jaxpapers.rl import shell
from jaxpapers.rl import training

PAPER = {
    "title": "ECHO: Environment Cross-entropy Hybrid Objective",
    "authors": "Shrivastava, Kauffmann, Awadallah, Papailiopoulos (2026)",
    "url": "https://arxiv.org/abs/2605.24517",
}
CLAIM = ("Adding lambda times the environment-token cross-entropy to GRPO"
         " (ECHO) raises the solve rate (pass@1) and lowers the environment"
         " cross-entropy, and the environment loss alone (no verifier)"
         " improves the policy (TerminalBench 2 pass@1: Qwen3-8B 2.70% ->"
         " 5.17%, Qwen3-14B 5.17% -> 10.79%; GRPO's peak reached up to about"
         " 2.3x faster).")
# variant: (lambda, world_model_only)
VARIANTS = {"grpo": (0.0, False), "echo_0.005": (0.005, False),
            "echo_0.05": (0.05, False), "world_model_only": (0.05, True)}
ECHO_VARIANTS = ("echo_0.005", "echo_0.05")
UNITS = {"pass_at_1": "proportion", "env_ce": "nats", "reward": "proportion"}
LICENSE = "generated here (a deterministic toy shell), no third-party data"


def layout_of(config) -> shell.Layout:
  return shell.Layout(num_turns=config.env.num_turns,
                      command_len=config.env.command_len,
                      format_warnings=config.env.format_warnings)


def build_model(config, layout, seed: int) -> models.Transformer:
  m = config.model
  return models.Transformer(
      models.TransformerConfig(vocab_size=shell.VOCAB_SIZE,
                               max_len=layout.length, d_model=m.d_model,
                               num_heads=m.num_heads, num_layers=m.num_layers,
                               d_ff=m.d_ff), rngs=nnx.Rngs(seed))


def task_pools(config, layout):
  """Held-out and training tasks: disjoint (every generated task is unique)."""
  e = config.env
  tasks, _ = shell.make_tasks(config.seed, e.num_held_out + e.num_train_tasks,
                              layout, e.min_commands, e.max_commands)
  held_out = jax.tree.map(lambda x: x[:e.num_held_out], tasks)
  train = jax.tree.map(lambda x: x[e.num_held_out:], tasks)
  probe = jax.jit(training.random_transcripts, static_argnums=(2, 3))(
      jax.random.key(config.seed + 7), held_out, config.eval.probe_size, layout)
  return train, held_out, probe


def rl_optimizer(config):
  r = config.rl
  return training.optimizer(r.learning_rate, r.warmup_steps, r.clip_norm,
                            r.weight_decay)


def warm_start(config, workdir, layout, graphdef, params, train):
  """Next-token pretraining on random-command transcripts (one model)."""
  w = config.warm_start
  tx = training.optimizer(w.learning_rate, 10, 1.0, 0.0)
  every = max(1, w.steps // 10)

  @functools.partial(jax.jit, static_argnames="length")
  def run(state, first, length):
    def body(state, step):
      params, opt_state = state
      key = jax.random.fold_in(jax.random.key(config.seed + 1), step)
      params, opt_state, loss = training.warm_start_step(
          graphdef, params, opt_state, key, train, tx, layout, w.batch_size)
      return (params, opt_state), loss
    return jax.lax.scan(body, state, first + jnp.arange(length))

  def chunk(state, step):
    length = min(every, w.steps - step)
    state, losses = run(state, jnp.int32(step), length)
    return harness.Chunk(state, step + length, {"loss": float(losses[-1])})

  result = workdir.train("warm_start", (params, tx.init(params)), chunk,
                         num_steps=w.steps, checkpoint_every=every)
  return result.state[0], result.records


def run_rl(config, workdir, layout, graphdef, warm_params, train, held_out,
           probe):
  """All (variant, seed) runs in one vmapped state; one record per evaluation."""
  runs = [(v, s) for v in config.variants for s in config.seeds]
  lam = jnp.asarray([VARIANTS[v][0] for v, _ in runs], jnp.float32)
  world_only = jnp.asarray([VARIANTS[v][1] for v, _ in runs])
  seed_keys = jnp.stack([jax.random.key_data(jax.random.key(s))
                         for _, s in runs])
  schedule_scale = echo.lambda_schedule(config.rl.lambda_schedule, 1.0,
                                        decay_steps=config.rl.steps)
  rl_config = training.RLConfig(
      tasks_per_step=config.rl.tasks_per_step,
      group_size=config.rl.group_size, temperature=config.rl.temperature,
      mask_mode=config.rl.mask_mode)
  tx = rl_optimizer(config)
  params = jax.tree.map(lambda x: jnp.stack([x] * len(runs)), warm_params)

  @jax.jit
  def evaluate(params, step):
    def one(p, key_data):
      key = jax.random.fold_in(jax.random.wrap_key_data(key_data), 10_000 + step)
      return training.evaluate(graphdef, p, key, held_out, probe, layout,
                               temperature=config.eval.temperature,
                               samples=config.eval.samples)
    return jax.vmap(one)(params, seed_keys)

  @functools.partial(jax.jit, static_argnames="length")
  def run(state, first, length):
    def body(state, step):
      def one(p, o, key_data, lam_r, world_r):
        key = jax.random.fold_in(jax.random.wrap_key_data(key_data), step)
        return training.rl_step(graphdef, p, o, key, train,
                                lam_r * schedule_scale(step), world_r, tx,
                                layout, rl_config)
      params, opt_state, metrics = jax.vmap(one)(*state, seed_keys, lam,
                                                 world_only)
      return (params, opt_state), metrics
    state, metrics = jax.lax.scan(body, state, first + jnp.arange(length))
    return state, jax.tree.map(lambda m: jnp.mean(m, 0), metrics)

  def record(evaluation, metrics=None):
    out = {k: np.asarray(v).tolist() for k, v in evaluation.items()}
    for k, v in (metrics or {}).items():
      out[f"train_{k}"] = np.asarray(v).tolist()
    return out

  def initial(state):
    return state, record(evaluate(state[0], jnp.int32(0)))

  def chunk(state, step):
    length = min(config.eval.every, config.rl.steps - step)
    state, metrics = run(state, jnp.int32(step), length)
    evaluation = evaluate(state[0], jnp.int32(step + length))
    return harness.Chunk(state, step + length, record(evaluation, metrics))

  records = workdir.train(
      "rl", (params, jax.vmap(tx.init)(params)), chunk,
      num_steps=config.rl.steps, checkpoint_every=config.eval.every,
      initial=initial).records
  return runs, records


def summarize(config, runs, records) -> dict[str, Any]:
  """Per variant: mean +- s.e. curves over seeds, final values, per-seed finals."""
  steps = [r["step"] for r in records]
  k = config.eval.final_points
  summary = {}
  for variant in config.variants:
    index = [i for i, (v, _) in enumerate(runs) if v == variant]
    out = {"steps": steps}
    for metric in UNITS:
      curves = [[r[metric][i] for r in records] for i in index]
      out[metric + "_curve"], out[metric + "_curve_se"] = harness.mean_se_curve(
          curves)
      out[metric + "_per_seed"] = [float(np.mean(c[-k:])) for c in curves]
      out[metric + "_initial_per_seed"] = [c[0] for c in curves]
      out[metric], out[metric + "_se"] = harness.mean_se(out[metric + "_per_seed"])
    summary[variant] = out
  if "grpo" in summary:
    curve = np.asarray(summary["grpo"]["pass_at_1_curve"])
    peak, peak_step = float(curve.max()), steps[int(curve.argmax())]
    for out in summary.values():
      reached = np.flatnonzero(np.asarray(out["pass_at_1_curve"]) >= peak)
      out["steps_to_grpo_peak"] = steps[int(reached[0])] if reached.size else None
    summary["grpo_peak"] = {"pass_at_1": peak, "step": peak_step}
  return summary


def evaluate_claim(summary) -> list[dict[str, Any]]:
  checks = []
  if "grpo" not in summary:
    return checks
  grpo = summary["grpo"]
  for variant in ECHO_VARIANTS:
    if variant not in summary:
      continue
    for metric, higher, word in (("pass_at_1", True, "raises"),
                                 ("env_ce", False, "lowers")):
      mean, se = harness.paired_difference(
          summary[variant][metric + "_per_seed"], grpo[metric + "_per_seed"])
      checks.append(harness.check(
          f"{variant}_{word}_{metric}",
          f"lambda = {variant.split('_')[1]} {word} final {metric} vs GRPO"
          " (paired over seeds, by > 2 s.e.)",
          harness.effect_verdict(mean if higher else -mean, se),
          f"{summary[variant][metric]:.3f} vs {grpo[metric]:.3f}:"
          f" difference {mean:+.3f}" + (f" +- {se:.3f}" if se else "")))
  if "world_model_only" in summary:
    out = summary["world_model_only"]
    for metric, higher, word in (("pass_at_1", True, "raises"),
                                 ("env_ce", False, "lowers")):
      mean, se = harness.paired_difference(
          out[metric + "_per_seed"], out[metric + "_initial_per_seed"])
      checks.append(harness.check(
          f"world_model_only_{word}_{metric}",
          f"world_model_only (no verifier) {word} {metric} over its warm"
          " start (paired over seeds, by > 2 s.e.)",
          harness.effect_verdict(mean if higher else -mean, se),
          f"{np.mean(out[metric + '_initial_per_seed']):.3f} ->"
          f" {out[metric]:.3f}: difference {mean:+.3f}"
          + (f" +- {se:.3f}" if se else "")))
  if "echo_0.05" in summary:
    peak = summary["grpo_peak"]
    ours = summary["echo_0.05"]["steps_to_grpo_peak"]
    faster = None if ours is None else ours < peak["step"]
    checks.append(harness.check(
        "echo_0.05_reaches_grpo_peak_sooner",
        "lambda = 0.05 reaches GRPO's peak pass@1 in fewer steps (paper: up"
        " to about 2.3x faster)", faster if ours is not None else False,
        f"GRPO peak {peak['pass_at_1']:.3f} at step {peak['step']};"
        f" ECHO 0.05 reaches it at step {ours}" if ours is not None else
        f"GRPO peak {peak['pass_at_1']:.3f} at step {peak['step']};"
        " ECHO 0.05 never reaches it"))
  return checks


def plot_curves(workdir, summary, variants):
  """F1: held-out pass@1 and probe environment CE vs RL step, mean +- s.e."""
  fig, axes = harness.panels(1, 2, size=(5, 3.5))
  for ax, metric, label in ((axes[0, 0], "pass_at_1", "held-out pass@1"),
                            (axes[0, 1], "env_ce",
                             "environment CE (nats / token), probe set")):
    for k, variant in enumerate(variants):
      s = summary[variant]
      mean = np.asarray(s[metric + "_curve"])
      ax.plot(s["steps"], mean, color=f"C{k}", marker="o", ms=3, label=variant)
      if s[metric + "_curve_se"] is not None:
        se = np.asarray(s[metric + "_curve_se"])
        ax.fill_between(s["steps"], mean - se, mean + se, color=f"C{k}",
                        alpha=0.15)
    ax.set_xlabel("RL step")
    ax.set_ylabel(label)
  return workdir.save_figure(
      fig, "pass_and_env_ce", title="ECHO (lambda > 0) should raise pass@1"
      " and lower the environment CE vs GRPO (mean +- s.e. over seeds)")


def result_rows(summary, variants, num_seeds):
  rows = []
  for variant in variants:
    rows += harness.results_of(variant, summary[variant], UNITS,
                               num_samples=num_seeds, units=UNITS,
                               higher_is_better=("pass_at_1", "reward"))
    if summary[variant].get("steps_to_grpo_peak") is not None:
      rows.append(harness.result(variant, "steps_to_grpo_peak",
                                 summary[variant]["steps_to_grpo_peak"],
                                 unit="steps"))
  return rows


def paper_results():
  return [harness.paper_result(
      "TerminalBench 2", "pass@1: Qwen3-8B GRPO 2.70% vs ECHO 5.17%;"
      " Qwen3-14B GRPO 5.17% vs ECHO 10.79% (abstract).")] + [
      harness.paper_result(
          "training speed", "ECHO reaches GRPO's peak up to about 2.3x faster"
          " (paper).")]


def notes(config):
  return [
      "The shell, its messages, transcripts, tasks and the byte GPT are our"
      " reconstruction at CPU scale (jaxpapers.rl docstrings, docs/echo.md);"
      " the objective, masks, normalisation and PPO settings follow the paper.",
      f"Budget cuts vs the paper's CPU protocol: d = {config.model.d_model},"
      f" {config.rl.tasks_per_step} tasks x {config.rl.group_size} samples per"
      f" step, {config.rl.steps} RL steps (warm-up {config.rl.warmup_steps}),"
      " one shared warm-start model; format warnings"
      f" {'on' if config.env.format_warnings else 'off'}.",
      "pass@1: mean success of held-out rollouts at temperature"
      f" {config.eval.temperature}, {config.eval.samples} sample(s) per task;"
      " env CE: per-trajectory normalised cross-entropy (temperature 1) of"
      f" {config.eval.probe_size} fixed random-command transcripts on held-out"
      " tasks, the same for every policy. 'Final' = mean of the last"
      f" {config.eval.final_points} evaluations.",
      "Reward: fraction of keys matching the goal store; solved (pass) when"
      " all match.",
  ]


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  workdir.plan(2)
  layout = layout_of(config)
  train, held_out, probe = task_pools(config, layout)
  graphdef, params = nnx.split(build_model(config, layout, config.seed))
  warm_params, warm_records = warm_start(config, workdir, layout, graphdef,
                                         params, train)
  runs, records = run_rl(config, workdir, layout, graphdef, warm_params, train,
                         held_out, probe)
  summary = summarize(config, runs, records)
  variants = list(config.variants)
  workdir.write_report(
      paper=PAPER, claim=CLAIM,
      dataset={"name": "key-value shell (jaxpapers.rl.shell)",
               "provenance": f"{config.env.num_train_tasks} training and"
                             f" {config.env.num_held_out} held-out tasks"
                             f" generated with seed {config.seed}",
               "license": LICENSE},
      model={"architecture": f"byte GPT (jaxpapers.models.Transformer):"
                             f" {config.model.num_layers} layers, d ="
                             f" {config.model.d_model}",
             "parameters": int(sum(x.size for x in jax.tree.leaves(params))),
             "warm_start": f"{config.warm_start.steps} steps of next-token"
                           " loss on random-command transcripts",
             "variants": {v: {"lambda": VARIANTS[v][0],
                              "world_model_only": VARIANTS[v][1]}
                          for v in variants}},
      seeds=list(config.seeds),
      results=result_rows(summary, variants, len(config.seeds)),
      paper_results=paper_results(), checks=evaluate_claim(summary),
      figures=[plot_curves(workdir, summary, variants)],
      notes=notes(config),
      extra_run_data={"summary": summary,
                      "warm_start_loss": [r["loss"] for r in warm_records]})


def validate(config):
  unknown = set(config.variants) - set(VARIANTS)
  if unknown:
    raise ValueError(f"variants {sorted(unknown)} unknown; known are"
                     f" {sorted(VARIANTS)}.")
  if config.rl.steps % config.eval.every:
    raise ValueError(f"rl.steps={config.rl.steps} must be a multiple of"
                     f" eval.every={config.eval.every}.")
  env = config.env
  if not env.min_commands <= env.max_commands <= env.num_turns:
    raise ValueError(
        "env needs min_commands <= max_commands <= num_turns; got"
        f" {env.min_commands}, {env.max_commands}, {env.num_turns}.")


if __name__ == "__main__":
  harness.run(main, name="echo", fields=echo_config.FIELDS, validate=validate)
