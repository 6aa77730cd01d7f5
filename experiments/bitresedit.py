r"""BitResEdit at CPU scale: per-bit guidance in a KL trust region, masked residual edits.

BitResEdit (Zhang et al., 2026, known from its abstract) edits images of a
bitwise-residual VAR generator. BitEdit tilts the post-CFG per-bit log-odds
along a source--target contrast and projects the tilt into a Bernoulli-KL
trust region; ResEdit writes the edited bits' code residuals back through
the sum of scales inside a mask. The equations are our reconstruction
(:mod:`jaxpapers.var`, ``docs/bitresedit.md``) and the generator is a toy
(:mod:`jaxpapers.var.toy`), so this tests the claim's mechanics, not its
PIE-Bench numbers: per seed, source/target prompt pairs with a mask each are
edited for every strength, budget and trust mode (one stage per seed); the
in-mask alignment is the cosine between the edited decode and the target
prompt's expected decode (the mean of clean target samples).
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments import harness
from experiments.configs import bitresedit as bitresedit_config
from jaxpapers.var import bitedit
from jaxpapers.var import editing
from jaxpapers.var import toy

PAPER = {
    "title": "Edit the Bits, Diff the Codes: Bitwise Residual Editing for"
             " Visual Autoregressive Models (BitResEdit; equations"
             " reconstructed from the abstract)",
    "authors": "Zhang, Liao, Tresp, Plank, Schuetze",
    "url": "https://arxiv.org/abs/2606.13558",
}
CLAIM = ("BitEdit (source-negative per-bit guidance projected into a"
         " Bernoulli-KL trust region) raises target alignment inside the edit"
         " region, bounded by the trust region; ResEdit (masked code residuals"
         " through the sum of scales) preserves the background exactly; the"
         " two are complementary.")
ABLATION = ("bitedit_only", "resedit_only", "both", "plain_target_cfg",
            "no_trust_region")
# Saturation: the last step of lambda changes the alignment by at most this
# share of the sweep's gain, either way (a fall is over-steering, no plateau).
SATURATION_SHARE = 0.25
RADIUS_GAP = 0.05  # quadratic vs exact radius at epsilon = 1e-3, |l| <= 2
UNITS = {"alignment": "cosine", "outside_max_error": "pixel value",
         "outside_rms_error": "pixel value"}


class Problem(NamedTuple):
  """One seed's images: prompts, masks, noise keys, sources and references."""

  source_prompts: jax.Array
  target_prompts: jax.Array
  masks: jax.Array
  edit_keys: jax.Array
  sources: editing.Sample
  source_images: jax.Array
  reference_images: jax.Array


def make_problem(config, generator, seed) -> Problem:
  """Prompt pairs, rectangle masks and sources; the target-prompt decodes."""
  n, cfg_scale = config.num_images, config.cfg_scale
  keys = jax.random.split(jax.random.key(10_000 + seed), 5)
  prompt_dim = config.generator.prompt_dim
  source_prompts = jax.random.normal(keys[0], (n, prompt_dim))
  target_prompts = source_prompts + config.edit_scale * jax.random.normal(
      keys[1], (n, prompt_dim))
  rng = np.random.default_rng(seed)
  grid = generator.scales[-1][0]
  masks = np.zeros((n, grid, grid), np.float32)
  for mask in masks:
    h, w = rng.integers(config.mask_sides[0], config.mask_sides[1] + 1, 2)
    top, left = rng.integers(0, grid - h + 1), rng.integers(0, grid - w + 1)
    mask[top:top + h, left:left + w] = 1.0
  sources = sample_images(generator, jax.random.split(keys[2], n),
                          source_prompts, cfg_scale)

  def expected_decode(args):
    sample_keys, prompt = args
    latents = jax.vmap(lambda k: editing.sample(
        generator, k, prompt, cfg_scale=cfg_scale).latent)(sample_keys)
    return generator.decode(latents.mean(0))  # the decoder is linear

  # lax.map over images: a nested vmap compiles several times slower.
  reference_keys = jax.random.split(keys[3], (n, config.reference_samples))
  references = jax.jit(lambda a: jax.lax.map(expected_decode, a))(
      (reference_keys, target_prompts))
  return Problem(source_prompts, target_prompts, jnp.asarray(masks),
                 jax.random.split(keys[4], n), sources,
                 jax.vmap(generator.decode)(sources.latent), references)


@jax.jit
def sample_images(generator, keys, prompts, cfg_scale):
  sample = lambda k, p: editing.sample(generator, k, p, cfg_scale=cfg_scale)
  return jax.vmap(sample)(keys, prompts)


def pixel_mask(mask, image):
  patch = image.shape[0] // mask.shape[0]
  return jnp.repeat(jnp.repeat(mask, patch, 0), patch, 1)[..., None]


def masked_cosine(a, b, weight):
  return jnp.sum(weight * a * b) / jnp.sqrt(
      jnp.sum(weight * a * a) * jnp.sum(weight * b * b))


@functools.partial(jax.jit, static_argnames=("trust", "masked"))
def run_condition(generator, problem, strength, epsilon, cfg_scale, *,
                  trust, masked):
  """Per-image metrics of one condition, vmapped over the seed's images."""
  config = bitedit.bit_edit(strength, epsilon, trust=trust)

  def one(key, source, source_prompt, target_prompt, mask, source_image,
          reference):
    out = editing.edit(generator, key, source, source_prompt, target_prompt,
                       config, cfg_scale=cfg_scale,
                       mask=mask if masked else None)
    image = generator.decode(out.latent)
    inside = pixel_mask(mask, image)
    outside_error = jnp.abs(image - source_image) * (1 - inside)
    kl = jnp.concatenate([k.ravel() for k in out.kl])
    clipped = jnp.concatenate([c.ravel() for c in out.clipped])
    return {"alignment": masked_cosine(image, reference, inside),
            "outside_max_error": outside_error.max(),
            "outside_rms_error": jnp.sqrt(jnp.sum(outside_error**2) / jnp.sum(
                (1 - inside) * jnp.ones_like(image))),
            "kl_max": kl.max(), "kl_mean": kl.mean(),
            "clipped": clipped.mean(), "image": image, "bits": out.bits}

  return jax.vmap(one)(problem.edit_keys, problem.sources,
                       problem.source_prompts, problem.target_prompts,
                       problem.masks, problem.source_images,
                       problem.reference_images)


def clean_mismatches(generator, problem, cfg_scale, unmasked_zero) -> int:
  """Bits where lambda = 0 without a mask differs from the clean target sampler.

  ``unmasked_zero`` is :func:`run_condition`'s output at that setting.
  """
  clean = sample_images(generator, problem.edit_keys, problem.target_prompts,
                        cfg_scale)
  return int(sum(np.sum(np.asarray(a) != np.asarray(b))
                 for a, b in zip(clean.bits, unmasked_zero["bits"])))


def eps_key(epsilon) -> str:
  return "inf" if np.isinf(epsilon) else f"{epsilon:g}"


def run_seed(config, seed) -> dict[str, Any]:
  """One seed: the strength sweep, the ablation, the clean-sampler identity."""
  generator = toy.toy_generator(jax.random.key(seed), **config.generator)
  problem = make_problem(config, generator, seed)
  run = functools.partial(run_condition, generator, problem,
                          cfg_scale=config.cfg_scale)
  mean = lambda out: {k: float(np.mean(v)) for k, v in out.items()
                      if k not in ("image", "bits")}
  sweep = {}
  for trust in config.trust_modes:
    budgets = list(config.epsilons) + ([np.inf] if trust == "quadratic" else [])
    for epsilon in budgets:
      per_strength = [mean(run(s, epsilon, trust=trust, masked=True))
                      for s in config.strengths]
      sweep[f"{trust}/{eps_key(epsilon)}"] = {
          k: [p[k] for p in per_strength] for k in per_strength[0]}
  strength, epsilon = config.ablation_strength, config.ablation_epsilon
  settings = {"bitedit_only": (strength, epsilon, False),
              "resedit_only": (0.0, epsilon, True),
              "both": (strength, epsilon, True),
              "plain_target_cfg": (0.0, epsilon, False),
              "no_trust_region": (strength, np.inf, True)}
  ablation, images, outputs = {}, {}, {}
  for name, (s, e, masked) in settings.items():
    outputs[name] = out = run(s, e, trust="quadratic", masked=masked)
    ablation[name] = mean(out)
    images[name] = np.asarray(out["image"][:config.num_examples]).tolist()
  k = config.num_examples
  images.update(source=np.asarray(problem.source_images[:k]).tolist(),
                target=np.asarray(problem.reference_images[:k]).tolist(),
                mask=np.asarray(problem.masks[:k]).tolist())
  return {"sweep": sweep, "ablation": ablation,
          "clean_mismatches": clean_mismatches(
              generator, problem, config.cfg_scale,
              outputs["plain_target_cfg"]),
          "images": images}


def aggregate(per_seed):
  """Mean and s.e. over seeds of every sweep curve and ablation scalar."""
  sweep = {}
  for condition in per_seed[0]["sweep"]:
    sweep[condition] = {}
    for metric in per_seed[0]["sweep"][condition]:
      curves = [s["sweep"][condition][metric] for s in per_seed]
      sweep[condition][metric], sweep[condition][metric + "_se"] = (
          harness.mean_se_curve(curves))
  ablation = {name: harness.over_seeds([s["ablation"][name] for s in per_seed])
              for name in ABLATION}
  return {"sweep": sweep, "ablation": ablation,
          "clean_mismatches": sum(s["clean_mismatches"] for s in per_seed)}


def paired_verdict(differences) -> tuple[bool | None, str]:
  """Positive over seeds: mean - 2 s.e. > 0 (one seed: the sign)."""
  mean, se = harness.mean_se(differences)
  if se is None:
    return mean > 0, f"{mean:+.4f} (one seed)"
  verdict = True if mean - 2 * se > 0 else False if mean + 2 * se < 0 else None
  return verdict, f"{mean:+.4f} +- {se:.4f} (s.e., {len(differences)} seeds)"


def evaluate_claim(config, per_seed, summary, radius_gaps):
  """The claim's checks (ids stable across configs with the same budgets)."""
  checks = [harness.check(
      "radius_quadratic_vs_exact",
      f"quadratic and exact radii within {RADIUS_GAP:.0%} at epsilon = 1e-3,"
      " |l| <= 2", radius_gaps["0.001"] <= RADIUS_GAP,
      f"max gap {radius_gaps['0.001']:.2%} (at epsilon = 0.1:"
      f" {radius_gaps['0.1']:.1%})")]
  checks.append(harness.check(
      "zero_strength_is_clean_sampler",
      "lambda = 0 without a mask reproduces the clean sampler bit for bit",
      summary["clean_mismatches"] == 0,
      f"{summary['clean_mismatches']} differing bits over"
      f" {len(per_seed) * config.num_images} images"))
  worst = {e: max(max(s["sweep"][f"exact/{eps_key(e)}"]["kl_max"])
                  for s in per_seed) for e in config.epsilons}
  checks.append(harness.check(
      "exact_kl_within_budget", "exact trust region: every realized per-bit"
      " KL <= epsilon", all(worst[e] <= np.float32(e) for e in worst),
      "; ".join(f"eps {e:g}: max KL {w:.5g}" for e, w in worst.items())))
  first, last, before = 0, len(config.strengths) - 1, len(config.strengths) - 2
  for epsilon in config.epsilons:
    name = f"quadratic/{eps_key(epsilon)}"
    curves = [np.asarray(s["sweep"][name]["alignment"]) for s in per_seed]
    passed, detail = paired_verdict([c[last] - c[first] for c in curves])
    checks.append(harness.check(
        f"alignment_rises_eps{eps_key(epsilon)}",
        f"eps {epsilon:g}: in-mask alignment at lambda ="
        f" {config.strengths[last]:g} above lambda = 0", passed,
        f"gain {detail}"))
    curve = np.asarray(summary["sweep"][name]["alignment"])
    gain, tail = curve[last] - curve[first], curve[last] - curve[before]
    clipped = summary["sweep"][name]["clipped"][last]
    checks.append(harness.check(
        f"saturates_eps{eps_key(epsilon)}",
        f"eps {epsilon:g}: alignment saturates at the trust bound (lambda"
        f" {config.strengths[before]:g} -> {config.strengths[last]:g} moves it"
        f" by <= {SATURATION_SHARE:.0%} of the sweep's gain)",
        gain > 0 and abs(tail) <= SATURATION_SHARE * gain,
        f"gain {gain:+.4f}, last step {tail:+.4f}; {clipped:.0%} of bits at"
        f" the bound at lambda = {config.strengths[last]:g}"))
  ablation = summary["ablation"]
  exact_zero = [n for n in ("resedit_only", "both")
                if ablation[n]["outside_max_error"] == 0.0]
  checks.append(harness.check(
      "background_exact", "ResEdit (alone and with BitEdit): out-of-mask error"
      " exactly 0", len(exact_zero) == 2,
      ", ".join(f"{n}: max {ablation[n]['outside_max_error']:.3g}"
                for n in ("resedit_only", "both", "bitedit_only"))))
  passed, detail = paired_verdict(
      [s["ablation"]["both"]["alignment"]
       - s["ablation"]["resedit_only"]["alignment"] for s in per_seed])
  checks.append(harness.check(
      "bitedit_adds_alignment", "both vs ResEdit only: BitEdit raises in-mask"
      " alignment", passed, f"gain {detail}"))
  checks.append(harness.check(
      "complementary", "neither alone has both: BitEdit only leaks outside"
      " the mask, ResEdit only aligns less than both; both has neither"
      " defect", ablation["bitedit_only"]["outside_max_error"] > 0
      and passed is True and len(exact_zero) == 2,
      f"BitEdit only: outside RMS"
      f" {ablation['bitedit_only']['outside_rms_error']:.3f}; alignment"
      f" both {ablation['both']['alignment']:.4f} vs ResEdit only"
      f" {ablation['resedit_only']['alignment']:.4f}"))
  return checks


def plot_sweep(workdir, config, summary):
  """F1: in-mask alignment, share of clipped bits and max KL / eps vs lambda."""
  fig, axes = harness.panels(1, 3, size=(4.2, 3.4))
  lam = np.asarray(config.strengths)
  for name, curves in summary["sweep"].items():
    trust, eps = name.split("/")
    color = f"C{(list(map(eps_key, config.epsilons)) + ['inf']).index(eps)}"
    style = "-" if trust == "quadratic" else "--"
    label = f"eps {eps} ({trust})"
    for ax, key in zip(axes[0], ("alignment", "clipped", "kl_max")):
      values = np.asarray(curves[key])
      if key == "kl_max":
        values = values / (1.0 if eps == "inf" else float(eps))
        if eps == "inf":
          continue
      ax.plot(lam, values, style, color=color, marker="o", ms=3, label=label)
      if key == "alignment" and curves[key + "_se"] is not None:
        se = np.asarray(curves[key + "_se"])
        ax.fill_between(lam, values - se, values + se, color=color, alpha=0.15)
  axes[0, 2].axhline(1.0, color="k", lw=0.8)
  for ax, ylabel in zip(axes[0], ("in-mask cosine to the target decode",
                                  "share of bits clipped by the trust region",
                                  "max realized per-bit KL / epsilon")):
    ax.set_xlabel("BitEdit strength lambda")
    ax.set_ylabel(ylabel)
  return workdir.save_figure(
      fig, "alignment_vs_strength", title="BitEdit raises in-mask alignment"
      " with lambda until the KL trust region binds (mean +- s.e. over seeds;"
      " exact mode keeps KL <= eps, quadratic does not)")


def plot_ablation(workdir, summary):
  """F2: in-mask alignment and out-of-mask error of each ablation arm."""
  fig, axes = harness.panels(1, 2, size=(4.5, 3.4))
  x = np.arange(len(ABLATION))
  for ax, key in zip(axes[0], ("alignment", "outside_rms_error")):
    values = [summary["ablation"][n][key] for n in ABLATION]
    errors = [summary["ablation"][n][key + "_se"] or 0 for n in ABLATION]
    ax.bar(x, values, yerr=errors, color=[f"C{i}" for i in x])
    ax.set_xticks(x, ABLATION, rotation=30, ha="right", fontsize=8)
  axes[0, 0].set_ylabel("in-mask cosine to the target decode")
  axes[0, 1].set_ylabel("out-of-mask RMS error vs the source")
  return workdir.save_figure(
      fig, "ablation", title="BitEdit brings alignment, ResEdit keeps the"
      " background exactly (0 error): both together have both", legend=False)


def plot_examples(workdir, per_seed):
  """F3: the first seed's sources, masks, target decodes and edits."""
  images = per_seed[0]["images"]
  columns = ("source", "mask", "target", "bitedit_only", "resedit_only",
             "both")
  rows = len(images["source"])
  fig, axes = harness.panels(rows, len(columns), size=(1.7, 1.7))
  squash = lambda x: 1 / (1 + np.exp(-2 * np.asarray(x)))  # to [0, 1]
  for i in range(rows):
    mask = np.kron(np.asarray(images["mask"][i]), np.ones((4, 4)))
    for j, column in enumerate(columns):
      ax = axes[i, j]
      if column == "mask":
        ax.imshow(squash(images["source"][i]))
        ax.imshow(mask, cmap="Reds", alpha=0.45 * mask, vmin=0, vmax=1)
      else:
        ax.imshow(squash(images[column][i]))
      ax.set_xticks([])
      ax.set_yticks([])
      if i == 0:
        ax.set_title(column.replace("_", " "), fontsize=8)
  return workdir.save_figure(
      fig, "edited_examples", title="Toy edits (seed 0): the target decode is"
      " the mean of clean target samples", legend=False)


def result_rows(config, summary, num_seeds):
  rows = []
  for name in ABLATION:
    rows += harness.results_of(f"ablation/{name}", summary["ablation"][name],
                               UNITS, num_samples=num_seeds, units=UNITS,
                               higher_is_better=("alignment",))
  for name, curves in summary["sweep"].items():
    se = curves["alignment_se"]
    rows += [harness.result(
        f"sweep/{name}", f"alignment_lambda{lam:g}", curves["alignment"][i],
        standard_error=None if se is None else se[i], num_samples=num_seeds,
        lower_is_better=False, unit="cosine")
             for i, lam in enumerate(config.strengths)]
  return rows


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  workdir.plan(len(config.seeds) + 1)
  per_seed = [workdir.stage(f"seed{seed}",
                            functools.partial(run_seed, config, seed))
              for seed in config.seeds]
  summary = aggregate(per_seed)
  grid = jnp.linspace(-2.0, 2.0, 401)
  radius_gaps = workdir.stage("radius_gaps", lambda: {
      eps_key(e): float(bitedit.quadratic_radius_error(grid, e).max())
      for e in (1e-3, 0.1)})
  workdir.write_report(
      paper=PAPER, claim=CLAIM,
      dataset={"name": "toy bitwise-residual VAR generator (generated)",
               "provenance": "jaxpapers.var.toy: fixed random weights per"
                             " seed; random prompts, targets = source +"
                             f" {config.edit_scale:g} x direction; random"
                             " rectangle masks",
               "license": "generated here"},
      model={"architecture": "toy generator: scales 1,2,4,8; d = "
                             f"{config.generator.num_bits} bits; linear"
                             " logits of [prompt; resized running code sum]",
             "cfg_scale": config.cfg_scale,
             "methods": list(ABLATION)},
      seeds=list(config.seeds),
      results=result_rows(config, summary, len(config.seeds)),
      paper_results=[harness.paper_result(
          "PIE-Bench, Infinity-2B", "+1.07 CLIP on the edited region over the"
          " strongest prior same-backbone VAR editor (abstract); not"
          " reproducible here without the weights and the benchmark.")],
      checks=evaluate_claim(config, per_seed, summary, radius_gaps),
      figures=[plot_sweep(workdir, config, summary),
               plot_ablation(workdir, summary),
               plot_examples(workdir, per_seed)],
      notes=[
          "BitEdit's tilt, the trust region and ResEdit's composition are our"
          " reconstruction (jaxpapers.var docstrings, docs/bitresedit.md).",
          "Alignment: cosine, over the masked pixels, between the edited"
          " decode and the mean decode of reference_samples clean target"
          " samples (the decoder is linear). The sweep runs with the mask"
          " (BitEdit + ResEdit).",
          "Ablation at lambda = 1, eps = 0.1 (quadratic): bitedit_only has no"
          " mask; plain_target_cfg is lambda = 0 without a mask;"
          " no_trust_region is eps = inf with the mask.",
      ],
      extra_run_data={"summary": summary, "radius_gaps": radius_gaps})


def validate(config):
  """Relations between fields; each field's range is in ``FIELDS``."""
  if config.strengths[0] != 0:
    raise ValueError(f"strengths must start at 0; got {config.strengths}.")
  if sorted(config.trust_modes) != sorted(bitedit.TRUST_MODES):
    raise ValueError(f"trust_modes must be {bitedit.TRUST_MODES} (the checks"
                     f" use both); got {config.trust_modes}.")
  if config.num_examples > config.num_images:
    raise ValueError(f"num_examples must be <= num_images"
                     f"={config.num_images}; got {config.num_examples}.")


if __name__ == "__main__":
  harness.run(main, name="bitresedit", fields=bitresedit_config.FIELDS,
              validate=validate)
