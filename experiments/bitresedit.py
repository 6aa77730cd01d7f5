r"""BitResEdit at CPU scale: per-bit guidance in a KL trust region, masked residual edits.

BitEdit (Zhang et al., 2026, known from its abstract) tilts the post-CFG per-bit log-odds of a
bitwise-residual VAR generator along a source--target contrast inside a Bernoulli-KL trust region;
ResEdit writes the edited bits' code residuals back inside a mask. Equations: our reconstruction
(:mod:`jaxpapers.var`, ``docs/bitresedit.md``); generator: a toy, so this tests the claim's
mechanics, not PIE-Bench. Alignment is the in-mask cosine to the target prompt's expected decode.
"""

import collections
import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments import harness
from jaxpapers import var

PAPER = {"title": "Edit the Bits, Diff the Codes: Bitwise Residual Editing for Visual"
                  " Autoregressive Models (BitResEdit; equations reconstructed from the abstract)",
         "authors": "Zhang, Liao, Tresp, Plank, Schuetze",
         "url": "https://arxiv.org/abs/2606.13558"}
CLAIM = ("BitEdit (source-negative per-bit guidance projected into a Bernoulli-KL trust region)"
         " raises target alignment inside the edit region, bounded by the trust region; ResEdit"
         " (masked code residuals through the sum of scales) preserves the background exactly;"
         " the two are complementary.")
NOT_AT_SMOKE_SCALE = ("saturates_eps0.1",)  # check ids (prefixes) a :smoke config is too small for
ABLATION = ("bitedit_only", "resedit_only", "both", "plain_target_cfg", "no_trust_region")
SATURATION_SHARE = 0.25  # |last lambda step| <= this share of the gain (a fall: over-steering)
RADIUS_GAP = 0.05  # quadratic vs exact radius at epsilon = 1e-3, |l| <= 2
UNITS = {"alignment": "cosine", "outside_max_error": "pixel value",
         "outside_rms_error": "pixel value"}
METRICS = (*UNITS, "kl_max", "kl_mean", "clipped")  # means over the images
PAPER_RESULTS = [harness.paper_result("PIE-Bench, Infinity-2B", "+1.07 CLIP on the edited region"
    " over the strongest prior same-backbone VAR editor (abstract); not reproducible here without"
    " the weights and the benchmark.")]
NOTES = ["BitEdit's tilt, the trust region and ResEdit's composition are our reconstruction"
         " (jaxpapers.var docstrings, docs/bitresedit.md).",
         "Alignment: cosine, over the masked pixels, between the edited decode and the mean decode"
         " of reference_samples clean target samples (the decoder is linear). The sweep runs with"
         " the mask (BitEdit + ResEdit).",
         "Ablation at lambda = 1, eps = 0.1 (quadratic): bitedit_only has no mask; plain_target_cfg"
         " is lambda = 0 without a mask; no_trust_region is eps = inf with the mask."]
Condition = collections.namedtuple(  # a sweep cell; epsilon inf: no trust region; masked: ResEdit
    "Condition", "strength epsilon trust masked", defaults=("quadratic", True))
# The clean sampler of every task, and every task edited in one condition and scored.
sample_images = jax.jit(lambda generator, keys, prompts, cfg_scale: jax.vmap(
    lambda k, p: var.sample(generator, k, p, cfg_scale=cfg_scale))(keys, prompts))
run_condition = jax.jit(lambda generator, batch, strength, epsilon, cfg_scale, trust, masked:
                        var.score_edits(generator, batch, var.bit_edit(
                            strength, epsilon, trust=trust), cfg_scale=cfg_scale, masked=masked),
                        static_argnames=("trust", "masked"))


def conditions(config) -> dict[str, Condition]:
  """The grid: curves ``trust/eps`` over lambda (quadratic adds eps = inf), then the ablation."""
  s, e = config.ablation_strength, config.ablation_epsilon
  arms = (Condition(s, e, masked=False), Condition(0.0, e), Condition(s, e),
          Condition(0.0, e, masked=False), Condition(s, np.inf))
  return {**{f"{trust}/{eps:g}/lambda{lam:g}": Condition(lam, eps, trust)
             for trust in config.trust_modes
             for eps in (*config.epsilons, *([np.inf] * (trust == "quadratic")))
             for lam in config.strengths},
          **{f"ablation/{n}": arm for n, arm in zip(ABLATION, arms)}}


def run_one(config, batch_of, one: harness.Run) -> dict:
  """One condition on one seed: image means; the first seed keeps its edits."""
  (generator, batch), c = batch_of(one.seed), one.settings
  out = run_condition(generator, batch, c.strength, c.epsilon, cfg_scale=config.cfg_scale,
                      trust=c.trust, masked=c.masked)
  value = {m: float(np.mean(getattr(out, m))) for m in METRICS}
  if one.cell == "ablation/plain_target_cfg":  # lambda = 0 without a mask
    clean = sample_images(generator, batch.edit_keys, batch.target_prompts, config.cfg_scale)
    value["clean_mismatches"] = int(sum(  # must match it bit for bit
        np.sum(np.asarray(a) != np.asarray(b)) for a, b in zip(clean.bits, out.bits)))
  if one.cell.startswith("ablation/") and one.seed == config.seeds[0]:
    value["images"] = np.asarray(out.images[:config.num_examples]).tolist()
  return value


def aggregate(config, sweep: harness.SweepResult) -> dict:
  """Mean and s.e. over seeds of every curve over lambda and ablation arm."""
  cells = {c: [f"{c}/lambda{lam:g}" for lam in config.strengths] for c in dict.fromkeys(
      cell.rpartition("/lambda")[0] for cell in sweep.grid if not cell.startswith("ablation/"))}
  curve = lambda c, m: harness.mean_se_curve(  # (mean, s.e.) per strength
      [[sweep.per_seed[x][i][m] for x in cells[c]] for i in range(len(sweep.seeds))])
  return {"sweep": {c: {k: v for m in METRICS for k, v in zip((m, m + "_se"), curve(c, m))}
                    for c in cells},
          "ablation": {n: sweep.summaries[f"ablation/{n}"] for n in ABLATION},
          "clean_mismatches": sum(v["clean_mismatches"] for v in sweep.values[
              "ablation/plain_target_cfg"])}


def gain(sweep, cell, baseline) -> tuple[bool | None, str, dict]:
  """The paired alignment gain over seeds: its verdict (2 s.e.), detail and measure."""
  mean, se = sweep.paired("alignment", cell, baseline)
  return harness.effect_verdict(mean, se), f"{mean:+.4f} " + (
      "(one seed)" if se is None else f"+- {se:.4f} (s.e., {len(sweep.seeds)} seeds)"), (
      harness.measure(mean, se=se, bound=0.0, label="paired in-mask alignment gain"))


def curve_checks(config, sweep, summary) -> list[tuple]:
  """Per budget: alignment rises with lambda, then saturates at the bound (config.checked_trust)."""
  lam, rows, trust = config.strengths, [], config.checked_trust
  for epsilon in config.epsilons:
    e, curve = f"{epsilon:g}", summary["sweep"][f"{trust}/{epsilon:g}"]
    passed, detail, measure = gain(sweep, *(f"{trust}/{e}/lambda{x:g}"
                                            for x in (lam[-1], lam[0])))
    rise, tail = (curve["alignment"][-1] - np.asarray(curve["alignment"])[[0, -2]]).tolist()
    rows += [(f"alignment_rises_eps{e}", f"eps {e} ({trust}): in-mask alignment at lambda ="
              f" {lam[-1]:g} above lambda = 0", passed, f"gain {detail}", measure),
             (f"saturates_eps{e}", f"eps {e} ({trust}): alignment saturates at the trust bound"
              f" (lambda {lam[-2]:g} -> {lam[-1]:g} moves it by <= {SATURATION_SHARE:.0%} of the"
              " sweep's gain)", rise > 0 and abs(tail) <= SATURATION_SHARE * rise, f"gain"
              f" {rise:+.4f}, last step {tail:+.4f}; {curve['clipped'][-1]:.0%} of bits at the"
              f" bound at lambda = {lam[-1]:g}", harness.measure(
                  abs(tail) - SATURATION_SHARE * rise, bound=0.0, higher_is_better=False,
                  label=f"|last step| - {SATURATION_SHARE:.0%} of the gain"))]
  return rows


def evaluate_claim(config, sweep, summary, radius_gaps):
  """The claim's checks (ids stable across configs with the same budgets)."""
  arms, mismatches = summary["ablation"], summary["clean_mismatches"]
  worst = {e: max(s["kl_max"] for lam in config.strengths for s in sweep.per_seed[
      f"exact/{e:g}/lambda{lam:g}"]) for e in config.epsilons}
  exact_zero = [n for n in ("resedit_only", "both") if arms[n]["outside_max_error"] == 0.0]
  adds, detail, adds_measure = gain(sweep, "ablation/both", "ablation/resedit_only")
  return [harness.check(*row[:4], measure=(row + (None,))[4]) for row in [
      ("radius_quadratic_vs_exact", f"quadratic and exact radii within {RADIUS_GAP:.0%} at"
       " epsilon = 1e-3, |l| <= 2", radius_gaps["0.001"] <= RADIUS_GAP, f"max gap"
       f" {radius_gaps['0.001']:.2%} (at epsilon = 0.1: {radius_gaps['0.1']:.1%})"),
      ("zero_strength_is_clean_sampler", "lambda = 0 without a mask reproduces the clean sampler"
       " bit for bit", mismatches == 0, f"{mismatches} differing bits over"
       f" {len(sweep.seeds) * config.num_images} images"),
      ("exact_kl_within_budget", "exact trust region: every realized per-bit KL <= epsilon",
       all(worst[e] <= np.float32(e) for e in worst),
       "; ".join(f"eps {e:g}: max KL {w:.5g}" for e, w in worst.items())),
      *curve_checks(config, sweep, summary),
      ("background_exact", "ResEdit (alone and with BitEdit): out-of-mask error exactly 0",
       len(exact_zero) == 2, ", ".join(f"{n}: max {arms[n]['outside_max_error']:.3g}"
                                       for n in ("resedit_only", "both", "bitedit_only"))),
      ("bitedit_adds_alignment", "both vs ResEdit only: BitEdit raises in-mask alignment", adds,
       f"gain {detail}", adds_measure),
      ("complementary", "neither alone has both: BitEdit only leaks outside the mask, ResEdit"
       " only aligns less than both; both has neither defect",
       arms["bitedit_only"]["outside_max_error"] > 0 and adds is True and len(exact_zero) == 2,
       f"BitEdit only: outside RMS {arms['bitedit_only']['outside_rms_error']:.3f}; alignment"
       f" both {arms['both']['alignment']:.4f} vs ResEdit only"
       f" {arms['resedit_only']['alignment']:.4f}")]]


def plot_sweep(workdir, config, summary):
  """F1: alignment, share of clipped bits and max KL / eps vs lambda; F2: the ablation arms."""
  lam, colors = config.strengths, [f"{e:g}" for e in (*config.epsilons, np.inf)]
  with workdir.figure("alignment_vs_strength", cols=3, size=(4.2, 3.4), title="In-mask"
                      " alignment (mean +- s.e. over seeds), clipped-bit share, max KL / eps\n"
                      "(means) vs lambda; colour: eps; solid: quadratic, dashed: exact") as axes:
    for name, curve in summary["sweep"].items():
      trust, eps = name.split("/")
      kw = dict(fmt="-" if trust == "quadratic" else "--", color=f"C{colors.index(eps)}",
                marker="o", ms=3, label=f"eps {eps} ({trust})")
      harness.band(axes[0, 0], lam, curve["alignment"], curve["alignment_se"], **kw)
      harness.band(axes[0, 1], lam, curve["clipped"], **kw)
      if eps != "inf":
        harness.band(axes[0, 2], lam, np.asarray(curve["kl_max"]) / float(eps), **kw)
    axes[0, 2].axhline(1.0, color="k", lw=0.8)
    for ax, ylabel in zip(axes[0], ("in-mask cosine to the target decode",
                                    "share of bits clipped by the trust region",
                                    "max realized per-bit KL / epsilon")):
      ax.set(xlabel="BitEdit strength lambda", ylabel=ylabel)
  arms = [summary["ablation"][n] for n in ABLATION]
  with workdir.figure("ablation", title="In-mask cosine to the target decode, out-of-mask RMS"
                      " error\nper ablation arm (mean +- s.e. over seeds)", cols=2, size=(4.5, 3.4),
                      legend=False) as axes:
    for ax, key, y in zip(axes[0], ("alignment", "outside_rms_error"), (
        "in-mask cosine to the target decode", "out-of-mask RMS error vs the source")):
      harness.bars(ax, ABLATION, [a[key] for a in arms], [a[key + "_se"] for a in arms], ylabel=y)


def plot_examples(workdir, images):
  """F3: the first seed's sources, masks, target decodes and edits."""
  columns = ("source", "mask", "target", *ABLATION[:3])
  squash = lambda x: 1 / (1 + np.exp(-2 * np.asarray(x)))  # to [0, 1]
  with workdir.figure("edited_examples", title="Toy edits (seed 0), an image per row: source, mask"
                      " (red),\ntarget decode (mean of clean target samples), three arms' edits",
                      rows=len(images["source"]), cols=len(columns), size=(1.7, 1.7),
                      subplot_kw={"xticks": [], "yticks": []}) as axes:
    for (i, j), ax in np.ndenumerate(axes):
      column = columns[j]
      ax.imshow(squash(images["source" if column == "mask" else column][i]))
      if column == "mask":
        mask = np.kron(np.asarray(images["mask"][i]), np.ones((4, 4)))
        ax.imshow(mask, cmap="Reds", alpha=0.45 * mask, vmin=0, vmax=1)
      ax.set_title(column.replace("_", " ") if i == 0 else "", fontsize=8)


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  @functools.cache
  def batch_of(seed):  # one seed's toy generator and editing tasks, built once
    generator = var.toy_generator(jax.random.key(seed), **config.generator)
    return generator, var.edit_batch(
        generator, jax.random.key(10_000 + seed), config.num_images, cfg_scale=config.cfg_scale,
        mask_seed=seed, edit_scale=config.edit_scale, mask_sides=config.mask_sides,
        reference_samples=config.reference_samples)
  sweep = workdir.sweep(conditions(config), config.seeds, functools.partial(
      run_one, config, batch_of), summarize=lambda v, _: {m: v[m] for m in METRICS}, cache=True)
  summary, grid = aggregate(config, sweep), jnp.linspace(-2.0, 2.0, 401)
  radius_gaps = workdir.stage("radius_gaps", lambda: {
      f"{e:g}": float(var.quadratic_radius_error(grid, e).max()) for e in (1e-3, 0.1)})
  examples = workdir.stage("examples", lambda: {  # the first seed's
      n: getattr(batch_of(config.seeds[0])[1], f)[:config.num_examples] for n, f in (
          ("source", "source_images"), ("mask", "masks"), ("target", "reference_images"))})
  examples.update({n: sweep.values[f"ablation/{n}"][0]["images"] for n in ABLATION[:3]})
  plot_sweep(workdir, config, summary)
  plot_examples(workdir, examples)
  workdir.write_report(
      dataset={"name": "toy bitwise-residual VAR generator (generated)",
               "provenance": "jaxpapers.var.toy_generator: fixed random weights per seed; random prompts,"
                             f" targets = source + {config.edit_scale:g} x direction; random"
                             " rectangle masks", "license": "generated here"},
      model={"architecture": f"toy generator: scales 1,2,4,8; d = {config.generator.num_bits}"
                             " bits; linear logits of [prompt; resized running code sum]",
             "cfg_scale": config.cfg_scale, "methods": list(ABLATION)},
      results=sweep.results(UNITS, cells=[f"ablation/{n}" for n in ABLATION],
                            higher_is_better=("alignment",)) + [
          harness.result(f"sweep/{name}", f"alignment_lambda{lam:g}", mean, standard_error=se,
                         num_samples=len(config.seeds), lower_is_better=False, unit="cosine")
          for name, c in summary["sweep"].items() for lam, mean, se in zip(
              config.strengths, c["alignment"], c["alignment_se"] or [None] * len(c["alignment"]))],
      checks=evaluate_claim(config, sweep, summary, radius_gaps),
      extra_run_data={"summary": summary, "radius_gaps": radius_gaps})


if __name__ == "__main__":
  harness.run(main, name="bitresedit")
