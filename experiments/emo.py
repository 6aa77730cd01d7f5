r"""EMO at CPU scale: do expert subsets per domain keep the loss?

Wang et al., arXiv:2605.06663 (code: https://github.com/allenai/EMO). A standard top-k MoE and an
EMO MoE (same transformer, initialisation and batches) train on four byte-level domains, for
several seeds. Per domain, the greedy layerwise selector keeps 25% and 12.5% of each layer's
experts (shared one included), chosen on a few calibration documents of the domain; held-out bits
per byte of the pruned model are compared with the full model's (and random subsets'). Expert
usage by domain: a heat map and a normalised mutual information. Routing, losses and the selector
follow the authors' code; the CPU-scale study is ours (docs/emo.md).
"""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from experiments.configs import emo as emo_config
from jaxpapers import models
from jaxpapers import moe
from jaxpapers import data

PAPER = {"title": "EMO: Pretraining Mixture of Experts for Emergent Modularity",
         "authors": "Wang et al. (AllenAI)", "url": "https://arxiv.org/abs/2605.06663"}
CLAIM = ("Restricting each document's tokens to a sampled pool of experts during pretraining"
         " makes per-domain expert subsets usable on their own: keeping 25% (12.5%) of the experts"
         " costs EMO little, while a standard MoE degrades much more; as full models the two are"
         " on par.")
# Benchmark-accuracy points: not comparable with our bits per byte.
PAPER_RESULTS = [harness.paper_result(name, statement) for name, statement in [
    ("1B-active / 14B-total, 1T tokens", "as full models EMO matches a standard MoE (abstract)"),
    ("keep 25% (12.5%) of experts", "EMO loses about 1 (3) points absolute on benchmark accuracy;"
     " standard MoEs 'break' (abstract)."),
    ("secondary summaries (unverified)", "standard MoE drops about 10 and 15 points.")]]
# The checks follow the abstract's claim, thresholds decided before the first run. Full models
# "about equal": bits per byte within 5%. EMO "barely moves": its mean increase at 25% is at most
# 5% of its full loss. The standard MoE "degrades much more": its mean increase is at least twice
# EMO's (at 25% and 12.5%). And EMO's experts are more domain-specific (a higher NMI).
FULL_MODEL_TOLERANCE, BARELY_MOVES, MUCH_MORE = 0.05, 0.05, 2.0


def load_data(config):
  """The corpus, its training stream, and per domain (valid, calibration)."""
  context, e = config.model.context, config.eval
  corpus = data.load_multidomain(**config.data)
  tokens = jnp.asarray(data.interleaved_tokens(corpus.train, config.data.seed))
  domain_data = {}
  for domain, train, valid in zip(corpus.domains, corpus.train, corpus.valid):
    windows = data.consecutive_windows(data.encode_documents(valid), context, e.max_windows)
    # As many calibration tokens as evaluation inputs (documents repeat): one compiled forward.
    calibration = np.resize(data.encode_documents(train[:e.calibration_docs]),
                            windows.shape[0] * context).reshape(-1, context)
    domain_data[domain] = (jnp.asarray(windows), jnp.asarray(calibration))
  return corpus, tokens, domain_data


def build_model(config, kind: str, seed: int) -> models.Transformer:
  m = config.model
  return models.Transformer(models.TransformerConfig(
      vocab_size=data.VOCAB_SIZE, max_len=m.context, d_model=m.d_model, num_heads=m.num_heads,
      num_layers=m.num_layers, d_ff=m.d_hidden), rngs=nnx.Rngs(seed),
      ffn_factory=moe.moe_ffn_factory(emo_config.moe_config(config, kind)))


@functools.lru_cache(maxsize=None)  # one optimizer object: one compile
def optimizer(static: harness.StaticConfig) -> optax.GradientTransformation:
  t = static.value.train
  schedule = optax.warmup_cosine_decay_schedule(0.0, t.learning_rate, t.warmup_steps, t.num_steps)
  no_decay_on_embeddings = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: not any("embed" in str(p) for p in path), params)
  return optax.chain(optax.clip_by_global_norm(t.clip_norm), optax.adamw(
      schedule, b1=0.9, b2=0.95, weight_decay=t.weight_decay, mask=no_decay_on_embeddings))


def run_model(config, workdir, tokens, domain_data, one: harness.Run):
  """Trains (or resumes) ``one.cell``'s model of ``one.seed``; evaluates it on every domain."""
  graphdef, params, rest = nnx.split(build_model(config, one.cell, one.seed), nnx.Param, ...)
  key, t = jax.random.key(one.seed), config.train
  keys = {"data_key": jax.random.fold_in(key, 1), "pool_key": jax.random.fold_in(key, 2)}
  tx = optimizer(harness.StaticConfig(config))

  def chunk(state, step):  # batches and pools are pure functions of the step
    length = min(config.log_every, t.num_steps - step)
    state, parts = moe.train_steps(
        state, rest, tokens, graphdef=graphdef, tx=tx, first_step=jnp.int32(step),
        num_steps=length, batch_size=t.batch_size, context=config.model.context,
        lm_z_weight=t.lm_z_weight, load_balance_weight=t.load_balance_weight,
        router_z_weight=t.router_z_weight, **keys)
    return harness.Chunk(state, step + length, {k: float(v) for k, v in parts.items()})

  params, _ = workdir.train(one.name, (params, tx.init(params)), chunk, num_steps=t.num_steps,
                            checkpoint_every=config.checkpoint_every).state
  # Per domain: full, greedy- and random-subset bits per byte (``keep`` routed + shared); usage.
  model, records = nnx.merge(graphdef, params, rest), []
  rng = np.random.default_rng(one.seed + 1000) if config.eval.random_subsets else None
  keep = [max(1, round(f * (config.model.num_experts + 1)) - 1) for f in config.eval.fractions]
  for domain, (valid, calibration) in domain_data.items():
    out = moe.subset_bits_per_byte(model, valid, calibration, keep, rng=rng)
    records.append({"domain": domain, "full_bpb": out["full_bpb"], "usage": out["usage"], **{
        f"{field}_{tag}": subset[key] for tag, subset in zip(tags(config), out["subsets"])
        for field, key in [("subset_bpb", "bpb"), ("kept", "kept"), ("random_bpb", "random_bpb")]
        if key in subset}})
  return records


def tags(config) -> list[str]:  # 0.125 -> "0.125", the fields' suffix
  return [f"{f:g}" for f in config.eval.fractions]


def summarize(evals, config):
  """(mean, s.e.) over seeds, per (model, domain) and averaged over domains."""
  def seed_metrics(records):  # full bits per byte and subset increases, mean over ``records``
    mean = lambda field: harness.mean_se([r[field] for r in records])[0]
    metrics = {"full_bpb": (full := mean("full_bpb"))}
    for tag in tags(config):
      sub = mean(f"subset_bpb_{tag}")
      metrics.update({f"delta_{tag}": sub - full, f"relative_delta_{tag}": (sub - full) / full})
      if config.eval.random_subsets:
        metrics[f"random_delta_{tag}"] = mean(f"random_bpb_{tag}") - full
    return metrics

  summary = {}
  for kind in config.models:  # per seed: each domain's records, then all of them
    domains = [r["domain"] for r in evals[kind][0]] + ["mean"]
    per_seed = [{d: seed_metrics(part) for d, part in zip(
        domains, [[r] for r in records] + [records])} for records in evals[kind]]
    summary[kind] = {d: {k: harness.mean_se([m[d][k] for m in per_seed]) for k in per_seed[0][d]}
                     for d in domains}
    summary[kind]["mean"]["domain_nmi"] = harness.mean_se(
        moe.domain_mutual_information([r["usage"] for r in records]) for records in evals[kind])
  return summary


def evaluate_claim(summary, config):
  """The checks of the claim, on means over domains and seeds."""
  std, emo = ({metric: mean for metric, (mean, _) in summary[kind]["mean"].items()}
              for kind in ("standard", "emo"))
  gap = (emo["full_bpb"] - std["full_bpb"]) / std["full_bpb"]
  pct = {tag: f"{100 * float(tag):g}%" for tag in tags(config)}  # "0.125" -> "12.5%"
  ids = {tag: p.replace(".", "_").replace("%", "pct") for tag, p in pct.items()}  # "12_5pct"
  first = tags(config)[0]
  rel, rel_std = emo[f"relative_delta_{first}"], std[f"relative_delta_{first}"]
  rel_se = summary["emo"]["mean"][f"relative_delta_{first}"][1]  # over seeds
  barely = harness.measure(rel, bound=BARELY_MOVES, higher_is_better=False, se=rel_se,
                           label=f"EMO's relative increase at {pct[first]}")
  return [harness.check(*row, measure=barely if row[0].startswith("emo_barely") else None)
          for row in [
      ("full_models_about_equal", "full models about equal (|relative gap| <="
       f" {FULL_MODEL_TOLERANCE:.0%})", abs(gap) <= FULL_MODEL_TOLERANCE,
       f"EMO {emo['full_bpb']:.4f} vs standard {std['full_bpb']:.4f} bits/byte ({gap:+.1%})"),
      *[(f"standard_degrades_more_at_{ids[tag]}", f"{pct[tag]} of experts: standard MoE"
         f" degrades >= {MUCH_MORE:g}x more than EMO", d_std >= MUCH_MORE * max(d_emo, 0.0)
         and d_std > 0, f"delta bits/byte: EMO {d_emo:+.4f}, standard {d_std:+.4f} (ratio"
         f" {d_std / d_emo if d_emo > 0 else float('inf'):.2f})")
        for tag in pct for d_emo, d_std in [(emo[f"delta_{tag}"], std[f"delta_{tag}"])]],
      (f"emo_barely_moves_at_{ids[first]}", f"EMO barely moves at {pct[first]} of experts (mean"
       f" increase <= {BARELY_MOVES:.0%})", rel <= BARELY_MOVES,
       f"EMO {rel:+.1%}, standard {rel_std:+.1%}"),
      ("emo_usage_more_domain_specific", "EMO's expert usage is more domain-specific (NMI)",
       emo["domain_nmi"] > std["domain_nmi"], f"NMI(domain; expert): EMO"
       f" {emo['domain_nmi']:.3f}, standard {std['domain_nmi']:.3f}")]]


def plot_usage(workdir, evals, config):
  """Heat maps of expert usage by domain, per model and layer (first seed)."""
  usage = {k: np.asarray([r["usage"] for r in evals[k][0]]) for k in config.models}  # D x L x E
  domains, layers = [r["domain"] for r in evals["emo"][0]], range(config.model.num_layers)
  vmax = max(u.max() for u in usage.values())
  # One colour scale for all panels, read on one colour bar in a last column.
  with workdir.figure("expert_usage_by_domain", legend=False, title="Expert usage by held-out"
                      " domain (first seed), a panel per model and layer", rows=len(usage),
                      cols=len(layers) + 1, size=(3.2, 1.8),
                      width_ratios=[1] * len(layers) + [0.04]) as axes:
    for ax, (kind, layer) in zip(axes[:, :-1].flat, [(k, l) for k in usage for l in layers]):
      image = ax.imshow(usage[kind][:, layer], aspect="auto", cmap="viridis", vmin=0, vmax=vmax)
      ax.set_yticks(range(len(domains)), domains, fontsize=7)
      ax.set_xticks(range(0, config.model.num_experts, 5))
      ax.set(title=f"{kind}, layer {layer}", xlabel="routed expert (index)",
             ylabel="held-out domain")
    for ax in axes[:, -1]:
      ax.remove()
    axes[0, 0].figure.colorbar(image, cax=axes[0, 0].figure.add_subplot(axes[0, 0].get_gridspec()[
        :, -1]), label="fraction of the domain's\n(token, slot) pairs")


def plot_deltas(workdir, summary, config):
  """Increase of held-out bits per byte with expert subsets, per domain."""
  domains, width = list(summary["emo"]), 0.8 / len(config.models)
  with workdir.figure("subset_loss_increase", title="Held-out loss of per-domain"
                      " expert subsets minus the full model's, per domain and model\n(mean +- s.e."
                      " over seeds)", cols=len(config.eval.fractions), size=(4.5, 3.4)) as axes:
    for ax, tag in zip(axes[0], tags(config)):
      for i, kind in enumerate(config.models):
        means, errors = zip(*(summary[kind][d][f"delta_{tag}"] for d in domains))
        ax.bar(np.arange(len(domains)) + i * width, means, width, label=kind,
               yerr=[e or 0 for e in errors], color=f"C{i}")
      ax.set_xticks(np.arange(len(domains)) + width / 2, domains, fontsize=8)
      ax.set(title=f"keep {100 * float(tag):g}% of experts (greedy)", xlabel="held-out domain",
             ylabel="subset - full model (bits/byte)")
      ax.axhline(0, color="k", lw=0.5)


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  corpus, tokens, domain_data = load_data(config)
  sweep = workdir.sweep({kind: kind for kind in config.models}, config.seeds,
                        functools.partial(run_model, config, workdir, tokens, domain_data),
                        cache=True)  # a finished run's evaluation is read back
  summary, m = summarize(sweep.values, config), config.model
  params = jax.tree.leaves(nnx.state(build_model(config, "emo", 0), nnx.Param))
  tokens_per_run = config.train.num_steps * config.train.batch_size * m.context
  plot_usage(workdir, sweep.values, config)
  plot_deltas(workdir, summary, config)
  workdir.write_report(
      dataset={"name": "four byte-level domains (code, prose, arithmetic, csv)",
               "provenance": corpus.provenance},
      model={"architecture": f"{m.num_layers}-layer decoder, d={m.d_model}, {m.num_heads} heads,"
             f" context {m.context}; MoE FFN: {m.num_experts} routed SwiGLU experts (hidden"
             f" {m.d_hidden}) + 1 shared, k={m.k}", "num_params": int(sum(x.size for x in params)),
             "emo_pool": f"U{{{m.pool_low}..{m.num_experts}}} per document and layer (training);"
             " per-token routing at evaluation", "optimizer": "AdamW + warmup-cosine + clip, as in"
             " the authors' code", "tokens_per_run": tokens_per_run},
      results=[harness.result(
          f"{kind}/{domain}", metric, mean, standard_error=se, num_samples=len(config.seeds),
          lower_is_better=metric != "domain_nmi", unit="proportion" if metric.startswith(
              ("relative_delta", "domain_nmi")) else "bits/byte") for kind, rows in summary.items()
          for domain, values in rows.items() for metric, (mean, se) in values.items()],
      checks=evaluate_claim(summary, config), extra_run_data={"summary": summary}, notes=[
          "Units differ from the paper: held-out bits per byte of a byte-level LM trained on"
          f" {tokens_per_run:,} bytes, not benchmark accuracy.",
          f"Subsets are chosen per domain from {config.eval.calibration_docs} calibration"
          " documents of that domain's training split; evaluation is on held-out documents."])


if __name__ == "__main__":
  harness.run(main, name="emo")
