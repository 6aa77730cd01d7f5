r"""EMA-Nesterov at CPU scale: byte-level LM pre-training on Python's own text.

Phase 1 picks beta_max x gamma of :func:`jaxpapers.optim.ema_nesterov` on AdamW (one seed;
gamma = 0 is one-step Nesterov lookahead); phase 2 runs AdamW and Muon with and without the
best cell, ``optax.lookahead`` and schedule-free AdamW over seeds, validated (bits per byte)
at the anchor, the slow weights or x. Protocol: ``docs/ema_nesterov.md``.
"""

import functools
import math

import jax
import optax

from experiments import harness
from experiments.harness import report
from jaxpapers import models
from jaxpapers import optim

PAPER = {"title": "EMA-Nesterov (arXiv 2605.25395)", "url": "https://arxiv.org/abs/2605.25395",
         "authors": "Yau, Li, Glentis, Boreiko, Wai & Hong (2026)"}
CLAIM = (
    "EMA-Nesterov on top of a base optimizer (AdamW, Muon) lowers language-model pre-training"
    " loss and reaches the base optimizer's final loss in fewer steps, and it beats"
    " short-horizon (gamma=0) and multi-step (lookahead) lookahead.")
NOT_AT_SMOKE_SCALE = ("grid_long_horizon_beats_gamma0",)
STEPS_RATIO = "steps to {0}'s final loss / {0}'s"  # of a method vs its reference's final loss
# modded-nanogpt records: Muon's steps to 3.28 valid loss without / with EMA-Nesterov, recipe.
NANOGPT_RECORDS = {"#39": (3325, 3125, "gamma 0.99, beta 0.6 lr/max_lr, n = 20"),
                   "#40": (2930, 2890, "gamma 0.99, beta 0.3 lr/max_lr, n = 16")}
PAPER_RESULTS = [harness.paper_result(
    "LM pre-training (abstract)", "EMA-Nesterov consistently improves Adam, SOAP and Muon and"
    " beats short- and multi-step lookahead; the paper's tables were not available to us.")] + [
        harness.paper_result("muon+ema", f"modded-nanogpt record {record} (Muon, GPT-2 small):"
                             f" {muon} -> {ema} steps to 3.28 validation loss ({recipe}). Not our"
                             " byte-level CPU scale: only the ratio of steps compares.",
                             metric=STEPS_RATIO.format("muon"), score=ema / muon, unit="ratio")
        for record, (muon, ema, recipe) in NANOGPT_RECORDS.items()]
METHODS = ("adamw", "adamw+ema", "muon", "muon+ema", "lookahead", "schedule_free")
REFERENCE = {"adamw+ema": "adamw", "muon+ema": "muon"}  # else AdamW
SUMMARY_KEYS = ("final_bpb", "final_minus_reference", "steps_ratio", "final_bpb_at_gradient_point")
UNITS = {"final valid bpb": "bits/byte"}
BITS_PER_NAT = 1 / math.log(2)


def phases(config) -> tuple[int, int, int, int]:
  """LR warm-up length, decay start, and the EMA-Nesterov lookahead's on/off steps."""
  n = config.num_steps
  return (max(1, round(config.warmup_fraction * n)), n - round(config.decay_fraction * n),
          round(config.ema.on_fraction * n), round(config.ema.rest_fraction * n))


def build_method(name: str, config, beta, gamma) -> models.Optimizer:
  """The optimizer of ``name``; beta, gamma (+ema only) may be traced (shared compiles)."""
  warmup, decay_start, ema_on, ema_rest = phases(config)
  wsd = functools.partial(models.wsd_schedule, num_steps=config.num_steps,
                          warmup_steps=warmup, decay_start=decay_start)
  lr, b1, b2 = config.adamw.learning_rate, config.adamw.b1, config.adamw.b2
  adamw = optax.adamw(wsd(lr), b1=b1, b2=b2, weight_decay=0.0)
  if name == "lookahead":
    return models.lookahead(adamw, config.lookahead.sync_period, config.lookahead.slow_step_size)
  if name == "schedule_free":
    return models.schedule_free(optax.contrib.schedule_free_adamw(
        lr, warmup_steps=warmup, b1=b1, b2=b2, weight_decay=0.0))
  tx = adamw if name.startswith("adamw") else optax.contrib.muon(
      wsd(config.muon.learning_rate), beta=config.muon.beta, adam_learning_rate=wsd(lr),
      adam_b1=b1, adam_b2=b2, muon_weight_dimension_numbers=models.muon_dimension_numbers)
  return models.Optimizer(tx) if not name.endswith("+ema") else models.Optimizer(
      optim.ema_nesterov(tx, beta_max=beta, gamma=gamma, lr_ratio=wsd(1.0), warmup_steps=ema_on,
                         rest_start=ema_rest, m_init=config.ema.m_init),
      optim.ema_nesterov_eval_params)


@functools.lru_cache(maxsize=None)
def _model(config: harness.StaticConfig) -> models.LanguageModel:
  m = config.value.model
  return models.LanguageModel(models.TransformerConfig(max_len=m.length, d_model=m.d_model,
      num_heads=m.num_heads, num_layers=m.num_layers, d_ff=m.d_ff))


@functools.lru_cache(maxsize=None)
def _trainer(name: str, config: harness.StaticConfig) -> models.LMTrainer:
  # One compiled chunk per method (beta, gamma traced); one validation for all.
  c = config.value
  return models.LMTrainer(_model(config), functools.partial(build_method, name, c),
                          chunk_steps=c.eval_every, batch_size=c.batch_size, length=c.model.length)


def train_run(config, workdir, data, one: harness.Run) -> list[dict]:
  """Trains (or resumes) one cell at one seed; returns its metric records."""
  (name, *hyper), (tokens, windows) = one.settings, data
  trainer, data_key = (_trainer(name, harness.StaticConfig(config)),
                       jax.random.fold_in(jax.random.key(one.seed), 1))

  def measure(state, **extra):
    at_eval, at_grad = (BITS_PER_NAT * float(loss) for loss in trainer.validate(
        state, hyper, windows, config.batch_size))
    return state, {"valid_bpb": at_eval, "valid_bpb_at_gradient_point": at_grad, **extra}

  def chunk(state, step):
    state, train_loss = trainer.chunk(state, hyper, tokens, data_key, step)
    state, record = measure(state, train_bpb=BITS_PER_NAT * float(train_loss))
    # A diverged run stops (the progress log shows its nan); notes list it.
    return harness.Chunk(state, step + config.eval_every, record,
                         stop=not math.isfinite(record["valid_bpb"]))

  return workdir.train(one.name, trainer.init(one.seed, *hyper), chunk,
                       num_steps=config.num_steps, checkpoint_every=config.checkpoint_every,
                       initial=measure).records


def summarize(values) -> dict[str, dict]:
  """Per method (records per seed): SUMMARY_KEYS (mean, s.e.), e.g. steps to its reference."""
  def one_seed(records, ref):
    final, target = records[-1], ref[-1]["valid_bpb"]
    reached = models.steps_to_reach(records, target)
    return {"final_bpb": final["valid_bpb"], "final_minus_reference": final["valid_bpb"] - target,
            "steps_ratio": reached and reached / models.steps_to_reach(ref, target),
            "final_bpb_at_gradient_point": final["valid_bpb_at_gradient_point"]}
  rows = {name: [one_seed(r, ref) for r, ref in zip(runs, values[REFERENCE.get(name, "adamw")])]
          for name, runs in values.items()}
  return {name: {"reference": REFERENCE.get(name, "adamw"),
                 **harness.over_seeds(per_seed, SUMMARY_KEYS),
                 "reached_in": sum(r["steps_ratio"] is not None for r in per_seed)}
          for name, per_seed in rows.items()}


def evaluate_claim(summary, grid, n):
  """The checks of each part of the claim (``n`` seeds)."""
  rows, ema, na = [], summary["adamw+ema"]["final_bpb"], lambda v: report.fmt(v) or "n/a"
  measures = {}  # the numbers the verdicts compare with their bounds (scaling studies follow them)
  for b, s in ((b, summary[f"{b}+ema"]) for b in ("adamw", "muon")):
    gap, ratio, reached = s["final_minus_reference"], s["steps_ratio"], s["reached_in"]
    measures |= {
        f"{b}_ema_lowers_final_loss": harness.measure(gap, bound=0.0, higher_is_better=False,
            se=s["final_minus_reference_se"], label=f"final bpb minus {b}'s"),
        f"{b}_ema_fewer_steps": harness.measure(ratio if reached == n else None, bound=1.0,
            higher_is_better=False, se=s["steps_ratio_se"], label=STEPS_RATIO.format(b))}
    rows += [(f"{b}_ema_lowers_final_loss", f"{b}+EMA-Nesterov: lower final validation loss"
              f" than {b}", gap < 0, f"{gap:+.4f} bpb (s.e."
              f" {na(s['final_minus_reference_se'])}, paired over {n} seeds)"),
             (f"{b}_ema_fewer_steps", f"{b}+EMA-Nesterov: reaches {b}'s final loss in fewer"
              " steps", ratio is not None and ratio < 1 and reached == n, f"steps ratio"
              f" {na(ratio)} (s.e. {na(s['steps_ratio_se'])}; reached in {reached}/{n} seeds)")]
  rows += [(f"adamw_ema_beats_{o}", f"adamw+EMA-Nesterov beats {label}",
            ema < summary[o]["final_bpb"], f"{ema:.4f} vs {summary[o]['final_bpb']:.4f} bpb")
           for o, label in (("lookahead", "multi-step lookahead (optax.lookahead)"),
                            ("schedule_free", "schedule-free AdamW"))]
  # A grid without gamma = 0 (or without gamma > 0) leaves the last check inconclusive.
  short, long_ = (min((c["final_bpb"] for c in grid if test(c["gamma"])), default=math.nan)
                  for test in ((lambda g: g == 0), (lambda g: g > 0)))
  return [harness.check(*row, measure=measures.get(row[0])) for row in rows + [(
      "grid_long_horizon_beats_gamma0", "grid: the best gamma>0 beats the best short-horizon"
      " gamma=0", long_ < short if math.isfinite(long_ + short) else None,
      f"{long_:.4f} vs {short:.4f} bpb (one seed)")]]


def result_rows(summary, grid, grid_base_bpb, n):
  """Final loss and steps ratio per method (``n`` seeds), then the grid (one seed)."""
  return [row for name, s in summary.items() for row in (
      harness.result(name, "final valid bpb", s["final_bpb"], standard_error=s["final_bpb_se"],
                     num_samples=n),
      harness.result(name, STEPS_RATIO.format(s["reference"]), s["steps_ratio"], unit="ratio",
                     standard_error=s["steps_ratio_se"], num_samples=s["reached_in"]))] + [
      harness.result(label, "final valid bpb", bpb) for label, bpb in [
          (f"grid adamw+ema beta={c['beta']:g} gamma={c['gamma']:g}", c["final_bpb"])
          for c in grid] + [("grid adamw", grid_base_bpb)]]


def plot(workdir, values, grid, base_final, config):
  """Validation bpb vs step (mean over seeds; right: the last 40%); the grid minus AdamW."""
  start, (_, _, ema_on, ema_rest) = 0.6 * config.num_steps, phases(config)
  with workdir.figure("valid_loss_vs_step", cols=2, size=(5.0, 3.8), title="Validation loss"
                      f" (bits/byte) vs step, mean +- s.e. over {len(config.seeds)} seeds\n(solid:"
                      " with EMA-Nesterov, dashed: the base optimizer alone)") as ((left, right),):
    for ax, title in ((left, "all steps (grey: EMA-Nesterov lookahead on)"),
                      (right, "the last 40% of training")):
      ax.axvspan(ema_on, ema_rest, color="0.92", zorder=0)
      ax.set(title=title, xlabel="training step", ylabel="validation loss (bits per byte)")
      for k, (name, runs) in enumerate(values.items()):
        n = min(map(len, runs))  # a diverged seed stops early
        mean, se = harness.mean_se_curve([[r["valid_bpb"] for r in rs[:n]] for rs in runs])
        harness.band(ax, [r["step"] for r in runs[0][:n]], mean, se, color=f"C{k}", lw=1.3,
                     fmt="-" if "+ema" in name else "--", label=name)
    tail = [r["valid_bpb"] for runs in values.values() for rs in runs for r in rs
            if r["step"] >= start]
    right.set(xlim=(start, config.num_steps), ylim=(min(tail) - 0.01, max(tail) + 0.01))
  with workdir.figure("grid_beta_gamma", size=(5.2, 3.8), title="Final validation loss minus"
                      " AdamW's vs beta_max, a line per gamma\n(AdamW + EMA-Nesterov, seed"
                      f" {config.grid_seed})") as ((ax,),):
    for gamma in config.ema.gammas:
      cells = [c for c in grid if c["gamma"] == gamma]
      ax.plot([c["beta"] for c in cells], [c["final_bpb"] - base_final for c in cells],
              marker="o", label=f"gamma = {gamma:g}" + (" (one step)" if gamma == 0 else ""))
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set(xlabel="beta_max (lookahead at the peak LR)", ylabel="final loss minus AdamW's (bpb)")


def main(config, workdir: harness.Workdir):
  d, length = config.data, config.model.length
  corpus = models.load_corpus(source_files=d.source_files, valid_fraction=d.valid_fraction,
                              seed=d.split_seed)
  run = functools.partial(train_run, config, workdir, corpus.arrays(d.valid_windows, length))
  # Phase 1: beta x gamma on AdamW, one seed. Settings: (method, beta_max, gamma).
  cells = {"adamw": ("adamw", 0.0, 0.0)} | {f"adamw+ema_b{b:g}_g{g:g}": ("adamw+ema", b, g)
                                            for g in config.ema.gammas for b in config.ema.betas}
  phase1 = workdir.sweep(cells, [config.grid_seed], run, summarize=lambda records, _: {
      "final_bpb": records[-1]["valid_bpb"]})
  grid = [{"beta": b, "gamma": g, "final_bpb": phase1.summaries[c]["final_bpb"]}
          for c, (m, b, g) in cells.items() if m == "adamw+ema"]
  best = min(grid, key=lambda c: c["final_bpb"])
  # Phase 2: the best cell and the baselines, several seeds.
  values = workdir.sweep({m: (m, best["beta"], best["gamma"]) for m in METHODS},
                         config.seeds, run).values
  summary, base_bpb = summarize(values), phase1.summaries["adamw"]["final_bpb"]
  plot(workdir, values, grid, base_bpb, config)
  workdir.write_report(
      dataset={"name": "Python's own text (byte level)", "provenance": corpus.provenance},
      model={**_model(harness.StaticConfig(config)).metadata(),
             "schedule": "WSD: warm-up {}, decay from {} to {}".format(
                 *phases(config)[:2], config.num_steps),
             "batch": f"{config.batch_size} x {config.model.length} tokens"},
      results=result_rows(summary, grid, base_bpb, len(config.seeds)),
      checks=evaluate_claim(summary, grid, len(config.seeds)),
      notes=notes(config, best, summary, values),
      extra_run_data={"summary": summary, "grid": grid})


def notes(config, best, summary, values):
  _, _, ema_on, ema_rest = phases(config)
  at_gradient = summary["adamw+ema"]["final_bpb_at_gradient_point"]
  return [f"EMA-Nesterov cell used in phase 2: beta_max={best['beta']:g}, gamma={best['gamma']:g}"
          f" (lowest final loss of the grid, seed {config.grid_seed}); lookahead on steps"
          f" [{ema_on}, {ema_rest}).", "Loss is cross-entropy per byte token in bits (EOS"
          " counted as a byte), on fixed validation windows shared by all runs.",
          "Validation at the gradient point instead of the evaluation point (adamw+ema):"
          f" {report.fmt(at_gradient) or 'n/a'} bpb (equal to the anchor's when the rest window"
          " switches beta off)."] + [
              f"{name} seed {s}: diverged" for name, runs in values.items() for s, records in
              zip(config.seeds, runs) if not math.isfinite(records[-1]["valid_bpb"])]


if __name__ == "__main__":
  harness.run(main, name="ema_nesterov")
