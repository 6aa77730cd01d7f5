r"""EMA-Nesterov at CPU scale: byte-level LM pre-training on Python's own text.

Trains the shared decoder-only transformer with AdamW and Muon, each with and
without :func:`jaxpapers.optim.ema_nesterov`, against two other ways of
looking ahead or averaging (``optax.lookahead``, schedule-free AdamW). Phase
1 picks beta_max x gamma on AdamW (one seed, gamma = 0 being the
short-horizon Nesterov lookahead); phase 2 reruns the best cell and the
baselines with several seeds. Validation loss is measured at the anchor
(``ema_nesterov_eval_params``), the slow weights (lookahead) or x
(schedule-free), in bits per byte.

The report checks the paper's claim: EMA-Nesterov on top of a base optimizer
lowers the loss, reaches the base's final loss in fewer steps (about 6% at
GPT-2-small scale in modded-nanogpt), and beats short- and multi-step
lookahead.
"""

import dataclasses
import functools
import math
from typing import Any, NamedTuple

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from experiments import lm
from jaxpapers import models
from jaxpapers import optim

PAPER = {
    "title": "EMA-Nesterov (arXiv 2605.25395)",
    "authors": "Yau, Li, Glentis, Boreiko, Wai & Hong (2026)",
    "url": "https://arxiv.org/abs/2605.25395",
}
CLAIM = (
    "EMA-Nesterov on top of a base optimizer (AdamW, Muon) lowers language-"
    "model pre-training loss and reaches the base optimizer's final loss in"
    " fewer steps, and it beats short-horizon (gamma=0) and multi-step"
    " (lookahead) lookahead."
)
BASES = ("adamw", "muon")
METHODS = ("adamw", "adamw+ema", "muon", "muon+ema", "lookahead",
           "schedule_free")
BITS_PER_NAT = 1 / math.log(2)


@dataclasses.dataclass(frozen=True)
class Setup:
  """The static part of the config (hashable: keys the jit caches)."""

  model: models.TransformerConfig
  batch_size: int
  length: int
  num_steps: int
  warmup_steps: int
  decay_start: int
  eval_every: int
  adamw_lr: float
  adamw_b1: float
  adamw_b2: float
  muon_lr: float
  muon_beta: float
  sync_period: int
  slow_step_size: float
  ema_on: int
  ema_rest: int
  m_init: str

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict) -> "Setup":
    n = config.num_steps
    if n % config.eval_every or config.checkpoint_every % config.eval_every:
      raise ValueError(
          f"num_steps={n} and checkpoint_every={config.checkpoint_every} must"
          f" be multiples of eval_every={config.eval_every}.")
    return cls(
        model=models.TransformerConfig(
            max_len=config.model.length, d_model=config.model.d_model,
            num_heads=config.model.num_heads,
            num_layers=config.model.num_layers, d_ff=config.model.d_ff),
        batch_size=config.batch_size, length=config.model.length,
        num_steps=n, warmup_steps=max(1, round(config.warmup_fraction * n)),
        decay_start=n - round(config.decay_fraction * n),
        eval_every=config.eval_every,
        adamw_lr=config.adamw.learning_rate, adamw_b1=config.adamw.b1,
        adamw_b2=config.adamw.b2, muon_lr=config.muon.learning_rate,
        muon_beta=config.muon.beta, sync_period=config.lookahead.sync_period,
        slow_step_size=config.lookahead.slow_step_size,
        ema_on=round(config.ema.on_fraction * n),
        ema_rest=round(config.ema.rest_fraction * n),
        m_init=config.ema.m_init,
    )


def wsd_schedule(peak: float, setup: Setup) -> optax.Schedule:
  """Warmup-stable-decay: linear warm-up, constant, linear decay to 0 at the end."""

  def schedule(step):
    t = jnp.asarray(step).astype(jnp.float32)
    warm = (t + 1) / setup.warmup_steps
    decay = (setup.num_steps - t) / (setup.num_steps - setup.decay_start)
    return peak * jnp.clip(jnp.minimum(warm, decay), 0.0, 1.0)

  return schedule


def _muon_dimension_numbers(params):
  """Muon for the 2-D hidden matrices; embeddings and vectors go to AdamW."""
  def dims(path, x):
    if x.ndim != 2 or "embed" in jax.tree_util.keystr(path):
      return None
    return optax.contrib.MuonDimensionNumbers()
  return jax.tree_util.tree_map_with_path(dims, params)


class Method(NamedTuple):
  tx: optax.GradientTransformation
  wrap_params: Any  # params -> what the optimizer holds
  gradient_point: Any  # held -> params the gradient is taken at
  eval_params: Any  # (held, opt_state) -> params to validate


def build_method(name: str, setup: Setup, beta, gamma) -> Method:
  """The optimizer of ``name``; beta, gamma may be traced (shared compiles)."""
  adamw = optax.adamw(wsd_schedule(setup.adamw_lr, setup), b1=setup.adamw_b1,
                      b2=setup.adamw_b2, weight_decay=0.0)
  identity = lambda p: p
  if name in ("adamw", "adamw+ema"):
    tx = adamw
  elif name in ("muon", "muon+ema"):
    tx = optax.contrib.muon(
        wsd_schedule(setup.muon_lr, setup), beta=setup.muon_beta,
        adam_learning_rate=wsd_schedule(setup.adamw_lr, setup),
        adam_b1=setup.adamw_b1, adam_b2=setup.adamw_b2,
        muon_weight_dimension_numbers=_muon_dimension_numbers)
  elif name == "lookahead":
    return Method(
        optax.lookahead(adamw, setup.sync_period, setup.slow_step_size),
        optax.LookaheadParams.init_synced, lambda p: p.fast,
        lambda p, s: p.slow)
  elif name == "schedule_free":
    tx = optax.contrib.schedule_free_adamw(
        setup.adamw_lr, warmup_steps=setup.warmup_steps, b1=setup.adamw_b1,
        b2=setup.adamw_b2, weight_decay=0.0)
    return Method(tx, identity, identity,
                  lambda p, s: optax.contrib.schedule_free_eval_params(s, p))
  else:
    raise ValueError(f"unknown method {name!r}; expected one of {METHODS}.")
  if name.endswith("+ema"):
    tx = optim.ema_nesterov(
        tx, beta_max=beta, gamma=gamma, lr_ratio=wsd_schedule(1.0, setup),
        warmup_steps=setup.ema_on, rest_start=setup.ema_rest,
        m_init=setup.m_init)
    return Method(tx, identity, identity, optim.ema_nesterov_eval_params)
  return Method(tx, identity, identity, lambda p, s: p)


@functools.lru_cache(maxsize=None)
def _model(config: models.TransformerConfig) -> lm.LanguageModel:
  return lm.LanguageModel(config)


@functools.partial(jax.jit, static_argnames=("name", "setup"))
def _train_chunk(opt_params, opt_state, beta, gamma, tokens, data_key,
                 first_step, *, name: str, setup: Setup):
  method = build_method(name, setup, beta, gamma)
  params, state, loss, _ = lm.train_chunk(
      _model(setup.model).loss, method.tx, opt_params, opt_state, tokens,
      data_key, first_step, num_steps=setup.eval_every,
      batch_size=setup.batch_size, length=setup.length,
      gradient_point=method.gradient_point)
  return params, state, loss


@functools.partial(jax.jit, static_argnames=("name", "setup"))
def _evaluation_points(opt_params, opt_state, *, name: str, setup: Setup):
  """The params to validate and the params the gradient is taken at."""
  method = build_method(name, setup, 0.0, 0.0)
  return (method.eval_params(opt_params, opt_state),
          method.gradient_point(opt_params))


@functools.partial(jax.jit, static_argnames="setup")
def _valid_loss(params, windows, *, setup: Setup):
  return lm.mean_loss(_model(setup.model), params, windows, setup.batch_size)


class TrainState(NamedTuple):
  step: jax.Array
  opt_params: Any
  opt_state: Any


def run_name(name: str, seed: int, beta: float = 0.0, gamma: float = 0.0) -> str:
  suffix = f"_b{beta:g}_g{gamma:g}" if name.endswith("+ema") else ""
  return f"{name}{suffix}_seed{seed}"


def train_run(setup: Setup, workdir: harness.Workdir, corpus, name: str,
              seed: int, beta: float = 0.0, gamma: float = 0.0):
  """Trains (or resumes) one run; returns its metric records."""
  label = run_name(name, seed, beta, gamma)
  tokens, windows = corpus
  method = build_method(name, setup, beta, gamma)
  opt_params = method.wrap_params(_model(setup.model).init(seed))
  state = TrainState(jnp.int32(0), opt_params,
                     jax.jit(method.tx.init)(opt_params))
  data_key = jax.random.fold_in(jax.random.key(seed), 1)
  hyper = (jnp.float32(beta), jnp.float32(gamma))
  state, resumed_step, ckpt, metrics = workdir.open_run(label, state)

  def measure_and_log(state, **extra):
    # One compiled validation serves every method; only the cheap maps to
    # the evaluation points are compiled per method.
    eval_params, gradient_point = _evaluation_points(
        state.opt_params, state.opt_state, name=name, setup=setup)
    at_eval = _valid_loss(eval_params, windows, setup=setup)
    at_grad = _valid_loss(gradient_point, windows, setup=setup)
    scalars = {"valid_bpb": BITS_PER_NAT * float(at_eval),
               "valid_bpb_at_gradient_point": BITS_PER_NAT * float(at_grad),
               **extra}
    metrics.write(int(state.step), **scalars)
    return scalars

  if resumed_step is None:
    measure_and_log(state)
    ckpt.save(0, state)

  progress = workdir.progress(label, setup.num_steps, start_step=int(state.step))
  checkpoint_every = workdir.config.checkpoint_every
  while int(state.step) < setup.num_steps:
    opt_params, opt_state, train_loss = _train_chunk(
        state.opt_params, state.opt_state, *hyper, tokens, data_key,
        state.step, name=name, setup=setup)
    state = TrainState(state.step + setup.eval_every, opt_params, opt_state)
    scalars = measure_and_log(state,
                              train_bpb=BITS_PER_NAT * float(train_loss))
    step = int(state.step)
    diverged = not math.isfinite(scalars["valid_bpb"])
    if step % checkpoint_every == 0 or step >= setup.num_steps or diverged:
      ckpt.save(step, state)
    progress.update(step, valid_bpb=scalars["valid_bpb"])
    if diverged:
      logging.warning("[%s] diverged at step %d", label, step)
      break
  ckpt.close()
  return metrics.read()


def steps_to_reach(records, target: float) -> float | None:
  """First step (linear interpolation between evaluations) with loss <= target."""
  steps = [r["step"] for r in records]
  losses = [r["valid_bpb"] for r in records]
  for i, loss in enumerate(losses):
    if loss <= target:
      if i == 0:
        return float(steps[0])
      frac = (losses[i - 1] - target) / (losses[i - 1] - loss)
      return steps[i - 1] + frac * (steps[i] - steps[i - 1])
  return None


def _mean_se(values):
  values = np.asarray([v for v in values if v is not None], np.float64)
  if values.size == 0:
    return None, None
  se = values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else None
  return float(values.mean()), (None if se is None else float(se))


def summarize(records_by_method, seeds):
  """Per method: final loss and, per seed, steps to reach its base's final loss."""
  summary = {}
  for name, per_seed in records_by_method.items():
    base = name.split("+")[0] if name.endswith("+ema") else "adamw"
    finals = [per_seed[s][-1]["valid_bpb"] for s in seeds]
    ratios = []
    for s in seeds:
      base_records = records_by_method[base][s]
      target = base_records[-1]["valid_bpb"]
      reached = steps_to_reach(per_seed[s], target)
      base_steps = steps_to_reach(base_records, target)
      ratios.append(None if reached is None else reached / base_steps)
    final, final_se = _mean_se(finals)
    ratio, ratio_se = _mean_se(ratios)
    diffs = [f - records_by_method[base][s][-1]["valid_bpb"]
             for f, s in zip(finals, seeds)]
    diff, diff_se = _mean_se(diffs)
    summary[name] = {
        "reference": base, "final_bpb": final, "final_bpb_se": final_se,
        "final_minus_reference": diff, "final_minus_reference_se": diff_se,
        "steps_ratio": ratio, "steps_ratio_se": ratio_se,
        "reached_in": sum(r is not None for r in ratios),
        "final_bpb_at_gradient_point": _mean_se(
            [per_seed[s][-1]["valid_bpb_at_gradient_point"] for s in seeds])[0],
    }
  return summary


def evaluate_claim(summary, grid, num_seeds):
  """Pass/fail checks of each part of the claim."""
  checks = []
  for base in BASES:
    s = summary[f"{base}+ema"]
    checks.append({
        "name": f"{base}+EMA-Nesterov: lower final validation loss than {base}",
        "passed": bool(s["final_minus_reference"] < 0),
        "detail": f"{s['final_minus_reference']:+.4f} bpb"
                  f" (s.e. {_fmt(s['final_minus_reference_se'])}, paired over"
                  f" {num_seeds} seeds)",
    })
    checks.append({
        "name": f"{base}+EMA-Nesterov: reaches {base}'s final loss in fewer"
                " steps",
        "passed": bool(s["steps_ratio"] is not None and s["steps_ratio"] < 1
                       and s["reached_in"] == num_seeds),
        "detail": f"steps ratio {_fmt(s['steps_ratio'])} (s.e."
                  f" {_fmt(s['steps_ratio_se'])}; reached in"
                  f" {s['reached_in']}/{num_seeds} seeds)",
    })
  ema = summary["adamw+ema"]["final_bpb"]
  for other, label in (("lookahead", "multi-step lookahead (optax.lookahead)"),
                       ("schedule_free", "schedule-free AdamW")):
    checks.append({
        "name": f"adamw+EMA-Nesterov beats {label}",
        "passed": bool(ema < summary[other]["final_bpb"]),
        "detail": f"{ema:.4f} vs {summary[other]['final_bpb']:.4f} bpb",
    })
  short = min(c["final_bpb"] for c in grid if c["gamma"] == 0)
  long_ = min(c["final_bpb"] for c in grid if c["gamma"] > 0)
  checks.append({
      "name": "grid: the best gamma>0 beats the best short-horizon gamma=0",
      "passed": bool(long_ < short),
      "detail": f"{long_:.4f} vs {short:.4f} bpb (one seed)",
  })
  return checks


def plot_curves(workdir, records_by_method, seeds, setup):
  """Validation bpb vs step, mean over seeds; right panel: the last 40%."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  for k, (name, per_seed) in enumerate(records_by_method.items()):
    steps = [r["step"] for r in per_seed[seeds[0]]]
    curves = np.array([[r["valid_bpb"] for r in per_seed[s]] for s in seeds])
    for ax in axes:
      ax.plot(steps, curves.mean(0), color=f"C{k}", lw=1.3,
              ls="--" if "+ema" not in name else "-", label=name)
  start = 0.6 * setup.num_steps
  tail = [v for per_seed in records_by_method.values() for s in seeds
          for r in per_seed[s] if r["step"] >= start for v in [r["valid_bpb"]]]
  axes[1].set_xlim(start, setup.num_steps)
  axes[1].set_ylim(min(tail) - 0.01, max(tail) + 0.01)
  for ax in axes:
    ax.axvspan(setup.ema_on, setup.ema_rest, color="0.92", zorder=0)
    ax.set_xlabel("step")
    ax.set_ylabel("validation bits per byte")
  axes[0].set_title("EMA-Nesterov active in the grey window", fontsize=9)
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  return workdir.save_figure(fig, "valid_loss_vs_step")


def plot_grid(workdir, grid, base_final, config):
  """Final bpb of each (gamma, beta) cell minus AdamW's, one seed."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  betas, gammas = list(config.ema.betas), list(config.ema.gammas)
  table = np.full((len(gammas), len(betas)), np.nan)
  for c in grid:
    table[gammas.index(c["gamma"]), betas.index(c["beta"])] = (
        c["final_bpb"] - base_final)
  fig, ax = plt.subplots(figsize=(4, 3.2))
  bound = np.nanmax(np.abs(table)) or 1.0
  image = ax.imshow(table, cmap="RdBu_r", vmin=-bound, vmax=bound)
  for i in range(len(gammas)):
    for j in range(len(betas)):
      ax.text(j, i, f"{table[i, j]:+.3f}", ha="center", va="center", fontsize=8)
  ax.set_xticks(range(len(betas)), [f"{b:g}" for b in betas])
  ax.set_yticks(range(len(gammas)), [f"{g:g}" for g in gammas])
  ax.set_xlabel("beta_max")
  ax.set_ylabel("gamma")
  ax.set_title("final bpb minus AdamW (grid seed)", fontsize=9)
  fig.colorbar(image, ax=ax)
  fig.tight_layout()
  return workdir.save_figure(fig, "grid_beta_gamma")


def main(rng, config: ml_collections.ConfigDict, workdir: harness.Workdir):
  del rng  # each run derives its keys from its own seed
  setup = Setup.from_config(config)
  corpus = lm.load_corpus(source_files=config.data.source_files,
                          valid_fraction=config.data.valid_fraction,
                          seed=config.data.split_seed)
  arrays = (jnp.asarray(corpus.train),
            lm.validation_windows(corpus.valid, config.data.valid_windows,
                                  setup.length))
  # Phase 1: beta x gamma on AdamW, one seed.
  grid_seed = config.grid_seed
  grid_base = train_run(setup, workdir, arrays, "adamw", grid_seed)
  grid = []
  for gamma in config.ema.gammas:
    for beta in config.ema.betas:
      records = train_run(setup, workdir, arrays, "adamw+ema", grid_seed,
                          beta, gamma)
      grid.append({"beta": beta, "gamma": gamma,
                   "final_bpb": records[-1]["valid_bpb"]})
  best = min(grid, key=lambda c: c["final_bpb"])
  logging.info("best grid cell: beta=%g gamma=%g", best["beta"], best["gamma"])

  # Phase 2: the best cell and the baselines, several seeds.
  seeds = list(config.seeds)
  records_by_method = {
      name: {s: train_run(setup, workdir, arrays, name, s, best["beta"],
                          best["gamma"]) for s in seeds}
      for name in METHODS
  }
  summary = summarize(records_by_method, seeds)
  checks = evaluate_claim(summary, grid, len(seeds))
  figures = [plot_curves(workdir, records_by_method, seeds, setup),
             plot_grid(workdir, grid, grid_base[-1]["valid_bpb"], config)]

  results = []
  for name, s in summary.items():
    results.append({"evaluation_name": name, "metric": "final valid bpb",
                    "score": s["final_bpb"], "standard_error": s["final_bpb_se"],
                    "num_samples": len(seeds), "lower_is_better": True})
    results.append({
        "evaluation_name": name,
        "metric": f"steps to {s['reference']}'s final loss / {s['reference']}'s",
        "score": s["steps_ratio"], "standard_error": s["steps_ratio_se"],
        "num_samples": s["reached_in"], "lower_is_better": True})
  for c in grid:
    results.append({
        "evaluation_name": f"grid adamw+ema beta={c['beta']:g} gamma={c['gamma']:g}",
        "metric": "final valid bpb", "score": c["final_bpb"],
        "standard_error": None, "num_samples": 1, "lower_is_better": True})
  results.append({"evaluation_name": "grid adamw", "metric": "final valid bpb",
                  "score": grid_base[-1]["valid_bpb"], "standard_error": None,
                  "num_samples": 1, "lower_is_better": True})
  model = _model(setup.model)
  num_params = sum(x.size for x in jax.tree.leaves(model.init(0)))
  notes = [
      f"EMA-Nesterov cell used in phase 2: beta_max={best['beta']:g},"
      f" gamma={best['gamma']:g} (lowest final loss of the grid, seed"
      f" {grid_seed}); lookahead on steps [{setup.ema_on}, {setup.ema_rest}).",
      "Loss is cross-entropy per byte token in bits (EOS counted as a byte),"
      " on fixed validation windows shared by all runs.",
      f"Validation at the gradient point instead of the evaluation point"
      f" (adamw+ema): {_fmt(summary['adamw+ema']['final_bpb_at_gradient_point'])}"
      " bpb (equal to the anchor's when the rest window switches beta off).",
  ]
  notes += [f"{name} seed {s}: diverged" for name, per_seed in
            records_by_method.items() for s in seeds
            if not math.isfinite(per_seed[s][-1]["valid_bpb"])]
  report = harness.make_report(
      workdir,
      paper=PAPER,
      claim=CLAIM,
      dataset={"name": "Python's own text (byte level)",
               "provenance": corpus.provenance},
      model={"architecture": "decoder-only transformer (jaxpapers.models."
                             "Transformer): pre-norm RMSNorm, learned positions,"
                             " tied embeddings, GELU MLP",
             "config": dataclasses.asdict(setup.model),
             "num_params": int(num_params),
             "schedule": f"WSD: warm-up {setup.warmup_steps}, decay from"
                         f" {setup.decay_start} to {setup.num_steps}",
             "batch": f"{setup.batch_size} x {setup.length} tokens"},
      seeds=seeds,
      results=results,
      paper_results=[
          {"evaluation_name": "LM pre-training (abstract)",
           "statement": "EMA-Nesterov consistently improves Adam, SOAP and Muon"
                        " and beats short- and multi-step lookahead; the"
                        " paper's tables were not available to us."},
          {"evaluation_name": "modded-nanogpt record #39 (GPT-2 small, Muon)",
           "statement": "3325 -> 3125 steps to 3.28 validation loss (about 6%"
                        " fewer; gamma 0.99, beta 0.6 lr/max_lr, n = 20)."},
          {"evaluation_name": "modded-nanogpt record #40",
           "statement": "2930 -> 2890 steps (gamma 0.99, beta 0.3 lr/max_lr,"
                        " n = 16)."},
      ],
      checks=checks,
      figures=figures,
      notes=notes,
      extra_run_data={"summary": summary, "grid": grid},
  )
  workdir.write_report(report)


def _fmt(value) -> str:
  return "n/a" if value is None else f"{value:.4g}"


if __name__ == "__main__":
  harness.run(main, name="ema_nesterov")
