r"""EMO at CPU scale: do expert subsets per domain keep the loss?

Wang et al., "EMO: Pretraining Mixture of Experts for Emergent Modularity",
arXiv:2605.06663 (code: https://github.com/allenai/EMO). A standard top-k MoE
and an EMO MoE (same transformer, initialisation and batches) train on four
byte-level domains, for several seeds. Per domain, the greedy layerwise
selector keeps 25% and 12.5% of each layer's experts (shared one included),
chosen on a few calibration documents of the domain; held-out bits per byte of
the pruned model are compared with the full model's (and random subsets').
Expert usage by domain is a heat map and a normalised mutual information.

Reconstruction: routing, losses, loss weights and the greedy selector follow
the authors' code; the CPU-scale study (data, sizes, budgets, checks) is ours
(docs/emo.md).
"""

import functools
import itertools
import math

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
from jaxpapers.data import multidomain
from jaxpapers.data import text

PAPER = {"title": "EMO: Pretraining Mixture of Experts for Emergent Modularity",
         "authors": "Wang et al. (AllenAI)",
         "url": "https://arxiv.org/abs/2605.06663"}
CLAIM = ("Restricting each document's tokens to a sampled pool of experts"
         " during pretraining makes per-domain expert subsets usable on their"
         " own: keeping 25% (12.5%) of the experts costs EMO little, while a"
         " standard MoE degrades much more; as full models the two are on par.")
# Benchmark-accuracy points: not comparable with our bits per byte.
PAPER_RESULTS = [harness.paper_result(name, statement) for name, statement in [
    ("1B-active / 14B-total, 1T tokens",
     "as full models EMO matches a standard MoE (abstract)"),
    ("keep 25% (12.5%) of experts", "EMO loses about 1 (3) points absolute on"
     " benchmark accuracy; standard MoEs 'break' (abstract)."),
    ("secondary summaries (unverified)",
     "standard MoE drops about 10 and 15 points."),
]]
# The checks follow the abstract's claim, thresholds decided before the first
# run. Full models "about equal": bits per byte within 5%. EMO "barely moves":
# its mean increase at 25% is at most 5% of its full loss. The standard MoE
# "degrades much more": its mean increase is at least twice EMO's (at 25% and
# 12.5%). And EMO's experts are more domain-specific (a higher NMI).
FULL_MODEL_TOLERANCE = 0.05
BARELY_MOVES = 0.05
MUCH_MORE = 2.0


def moe_config(config, kind: str) -> moe.MoEConfig:
  """The MoE layer's config (refuses bad hyperparameters by name)."""
  m = config.model
  return moe.MoEConfig(
      num_experts=m.num_experts, k=m.k, d_hidden=m.d_hidden,
      routing="emo" if kind == "emo" else "topk",
      pool_size=(m.pool_low, m.num_experts),
      grouped_matmul=m.grouped_matmul, block_size=m.block_size)


def build_model(config, kind: str, seed: int) -> models.Transformer:
  m = config.model
  model_config = models.TransformerConfig(
      vocab_size=text.VOCAB_SIZE, max_len=m.context, d_model=m.d_model,
      num_heads=m.num_heads, num_layers=m.num_layers, d_ff=m.d_hidden)
  return models.Transformer(
      model_config, rngs=nnx.Rngs(seed),
      ffn_factory=moe.moe_ffn_factory(moe_config(config, kind)))


def optimizer(config) -> optax.GradientTransformation:
  t = config.train
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, t.learning_rate, t.warmup_steps, t.num_steps)
  no_decay_on_embeddings = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: not any("embed" in str(p) for p in path), params)
  return optax.chain(
      optax.clip_by_global_norm(t.clip_norm),
      optax.adamw(schedule, b1=0.9, b2=0.95, weight_decay=t.weight_decay,
                  mask=no_decay_on_embeddings))


@functools.partial(jax.jit, static_argnames=("graphdef", "config", "num_steps"))
def train_chunk(state, first_step, rest, tokens, data_key, pool_key, *,
                graphdef, config, num_steps):
  """``num_steps`` AdamW steps; batch and pools are pure functions of the step."""
  config = config.value
  t, tx = config.train, optimizer(config)

  def step_fn(state, step):
    params, opt_state = state
    windows = text.sample_windows(jax.random.fold_in(data_key, step), tokens,
                                  t.batch_size, config.model.context)
    inputs, targets = windows[:, :-1], windows[:, 1:]

    def loss(params):
      model = nnx.merge(graphdef, params, rest, copy=True)
      nnx.reseed(model, pool=jax.random.fold_in(pool_key, step))
      logits, aux = model(inputs, text.segment_ids(inputs))
      return moe.training_loss(
          logits, targets, aux, num_layers=config.model.num_layers,
          lm_z_weight=t.lm_z_weight, load_balance_weight=t.load_balance_weight,
          router_z_weight=t.router_z_weight)

    (_, parts), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), parts

  steps = first_step + jnp.arange(num_steps)
  state, parts = jax.lax.scan(step_fn, state, steps)
  return state, jax.tree.map(jnp.mean, parts)


def train_run(config, workdir, tokens, kind, seed) -> models.Transformer:
  """Trains (or resumes, or restores) the ``kind`` model of ``seed``."""
  graphdef, params, rest = nnx.split(build_model(config, kind, seed),
                                     nnx.Param, ...)
  key = jax.random.key(seed)
  data_key, pool_key = jax.random.fold_in(key, 1), jax.random.fold_in(key, 2)
  static, num_steps = harness.StaticConfig(config), config.train.num_steps

  def chunk(state, step):
    length = min(config.log_every, num_steps - step)
    state, parts = train_chunk(
        state, jnp.int32(step), rest, tokens, data_key, pool_key,
        graphdef=graphdef, config=static, num_steps=length)
    parts = {k: float(v) for k, v in jax.device_get(parts).items()}
    return harness.Chunk(state, step + length, parts)

  state = (params, optimizer(config).init(params))
  params, _ = workdir.train(
      f"{kind}_seed{seed}", state, chunk, num_steps=num_steps,
      checkpoint_every=config.checkpoint_every).state
  return nnx.merge(graphdef, params, rest)


def evaluate(model, windows_NxL1):
  """Held-out bits per byte and per-layer routing statistics at evaluation."""
  inputs, targets = windows_NxL1[:, :-1], windows_NxL1[:, 1:]
  (logits, _), stats = moe.run_with_statistics(
      nnx.view(model, deterministic=True), inputs, text.segment_ids(inputs))
  bpb = float(models.next_token_loss(logits, targets)) / math.log(2)
  return bpb, np.stack([np.asarray(s["expert_load"]) for s in stats])


def evaluate_run(config, model, domain_data, seed):
  """Per domain: full, greedy-subset and random-subset bits per byte; usage."""
  rng = np.random.default_rng(seed + 1000)
  records = []
  for domain, (valid, calibration) in domain_data.items():
    full_bpb, usage = evaluate(model, valid)
    record = {"domain": domain, "full_bpb": full_bpb, "usage": usage}
    for fraction, tag in zip(config.eval.fractions, tags(config)):
      # Routed experts to keep; + the shared one.
      keep = max(1, round(fraction * (config.model.num_experts + 1)) - 1)
      kept = moe.select_experts(model, calibration,
                                text.segment_ids(calibration), num_experts=keep)
      record[f"subset_bpb_{tag}"] = evaluate(
          moe.prune_experts(model, kept), valid)[0]
      record[f"kept_{tag}"] = [k.tolist() for k in kept]
      if config.eval.random_subsets:
        random_kept = [np.sort(rng.choice(config.model.num_experts, keep,
                                          replace=False)) for _ in kept]
        record[f"random_bpb_{tag}"] = evaluate(
            moe.prune_experts(model, random_kept), valid)[0]
    records.append(record)
  return records


def tags(config) -> list[str]:  # 0.125 -> "0.125", the fields' suffix
  return [f"{f:g}" for f in config.eval.fractions]


def percent(tag: str) -> str:  # "0.125" -> "12.5%"
  return f"{100 * float(tag):g}%"


def seed_metrics(records, config):
  """Full bits per byte and subset increases, averaged over ``records``."""
  mean = lambda field: np.mean([r[field] for r in records])
  full = mean("full_bpb")
  metrics = {"full_bpb": full}
  for tag in tags(config):
    sub = mean(f"subset_bpb_{tag}")
    metrics[f"delta_{tag}"] = sub - full
    metrics[f"relative_delta_{tag}"] = (sub - full) / full
    if config.eval.random_subsets:
      metrics[f"random_delta_{tag}"] = mean(f"random_bpb_{tag}") - full
  return metrics


def summarize(evals, config):
  """(mean, s.e.) over seeds, per (model, domain) and averaged over domains."""
  summary = {}
  for kind in config.models:
    domains = [r["domain"] for r in evals[kind][0]]
    rows = {}
    for i, domain in enumerate(domains + ["mean"]):
      part = slice(None) if domain == "mean" else slice(i, i + 1)
      per_seed = [seed_metrics(records[part], config)
                  for records in evals[kind]]
      rows[domain] = {k: harness.mean_se([m[k] for m in per_seed])
                      for k in per_seed[0]}
    rows["mean"]["domain_nmi"] = harness.mean_se(
        moe.domain_mutual_information([r["usage"] for r in records])
        for records in evals[kind])
    summary[kind] = rows
  return summary


def unit(metric: str) -> str:
  ratio = metric.startswith(("relative_delta", "domain_nmi"))
  return "proportion" if ratio else "bits/byte"


def evaluate_claim(summary, config):
  """The checks of the claim, on means over domains and seeds."""
  std, emo = ({metric: mean for metric, (mean, _) in
               summary[kind]["mean"].items()} for kind in ("standard", "emo"))
  gap = (emo["full_bpb"] - std["full_bpb"]) / std["full_bpb"]
  checks = [harness.check(
      "full_models_about_equal",
      f"full models about equal (|relative gap| <= {FULL_MODEL_TOLERANCE:.0%})",
      abs(gap) <= FULL_MODEL_TOLERANCE,
      f"EMO {emo['full_bpb']:.4f} vs standard {std['full_bpb']:.4f} bits/byte"
      f" ({gap:+.1%})")]
  ids = {tag: percent(tag).replace(".", "_").replace("%", "pct")
         for tag in tags(config)}  # "12_5pct": ids are snake_case
  for tag in tags(config):
    d_emo, d_std = emo[f"delta_{tag}"], std[f"delta_{tag}"]
    checks.append(harness.check(
        f"standard_degrades_more_at_{ids[tag]}",
        f"{percent(tag)} of experts: standard MoE degrades >= {MUCH_MORE:g}x"
        " more than EMO",
        d_std >= MUCH_MORE * max(d_emo, 0.0) and d_std > 0,
        f"delta bits/byte: EMO {d_emo:+.4f}, standard {d_std:+.4f}"
        f" (ratio {d_std / d_emo if d_emo > 0 else float('inf'):.2f})"))
  first = tags(config)[0]
  rel, rel_std = emo[f"relative_delta_{first}"], std[f"relative_delta_{first}"]
  checks.append(harness.check(
      f"emo_barely_moves_at_{ids[first]}",
      f"EMO barely moves at {percent(first)} of experts (mean increase <="
      f" {BARELY_MOVES:.0%})",
      rel <= BARELY_MOVES, f"EMO {rel:+.1%}, standard {rel_std:+.1%}"))
  checks.append(harness.check(
      "emo_usage_more_domain_specific",
      "EMO's expert usage is more domain-specific (NMI)",
      emo["domain_nmi"] > std["domain_nmi"],
      f"NMI(domain; expert): EMO {emo['domain_nmi']:.3f}, standard"
      f" {std['domain_nmi']:.3f}"))
  return checks


def plot_usage(workdir, evals, config):
  """Heat maps of expert usage by domain, per model and layer (first seed)."""
  usage = {kind: np.asarray([r["usage"] for r in evals[kind][0]])
           for kind in config.models}  # D x L x E
  domains = [r["domain"] for r in evals["emo"][0]]
  layers = range(config.model.num_layers)
  # One colour scale for all panels, read on one colour bar in a last column.
  fig, axes = harness.panels(len(usage), len(layers) + 1, size=(3.2, 1.8),
                             width_ratios=[1] * len(layers) + [0.04])
  vmax = max(u.max() for u in usage.values())
  for ax, (kind, layer) in zip(axes[:, :-1].flat,
                               itertools.product(usage, layers)):
    image = ax.imshow(usage[kind][:, layer], aspect="auto", cmap="viridis",
                      vmin=0, vmax=vmax)
    ax.set_yticks(range(len(domains)), domains, fontsize=7)
    ax.set_xticks(range(0, config.model.num_experts, 5))
    ax.set(title=f"{kind}, layer {layer}", xlabel="routed expert (index)",
           ylabel="held-out domain")
  for ax in axes[:, -1]:
    ax.remove()
  fig.colorbar(image, cax=fig.add_subplot(axes[0, 0].get_gridspec()[:, -1]),
               label="fraction of the domain's\n(token, slot) pairs")
  return workdir.save_figure(
      fig, "expert_usage_by_domain", legend=False,
      title="Expert usage by held-out domain: EMO's experts are more"
      " domain-specific")


def plot_deltas(workdir, summary, config):
  """Increase of held-out bits per byte with expert subsets, per domain."""
  domains = list(summary["emo"])
  fig, axes = harness.panels(1, len(config.eval.fractions), size=(4.5, 3.4))
  width = 0.8 / len(config.models)
  for ax, tag in zip(axes[0], tags(config)):
    for i, kind in enumerate(config.models):
      means, errors = zip(*(summary[kind][d][f"delta_{tag}"] for d in domains))
      ax.bar(np.arange(len(domains)) + i * width, means, width, label=kind,
             yerr=[e or 0 for e in errors], color=f"C{i}")
    ax.set_xticks(np.arange(len(domains)) + width / 2, domains, fontsize=8)
    ax.set(title=f"keep {percent(tag)} of experts (greedy)",
           xlabel="held-out domain", ylabel="subset - full model (bits/byte)")
    ax.axhline(0, color="k", lw=0.5)
  return workdir.save_figure(
      fig, "subset_loss_increase",
      title="Per-domain expert subsets cost EMO less than a standard MoE")


def load_data(config):
  """The corpus, its training stream, and per domain (valid, calibration)."""
  corpus = multidomain.load_multidomain(**config.data)
  tokens = jnp.asarray(multidomain.interleaved_tokens(corpus.train,
                                                      config.data.seed))
  context = config.model.context
  domain_data = {}
  for domain, train, valid in zip(corpus.domains, corpus.train, corpus.valid):
    valid_windows = multidomain.consecutive_windows(
        text.encode_documents(valid), context, config.eval.max_windows)
    # As many calibration tokens as evaluation inputs (the documents repeat
    # if they are shorter), so both share one compiled forward pass.
    calibration = np.resize(
        text.encode_documents(train[:config.eval.calibration_docs]),
        valid_windows.shape[0] * context).reshape(-1, context)
    domain_data[domain] = (jnp.asarray(valid_windows), jnp.asarray(calibration))
  return corpus, tokens, domain_data


def model_metadata(config):
  m = config.model
  params = nnx.state(build_model(config, "emo", 0), nnx.Param)
  return {"architecture": f"{m.num_layers}-layer decoder, d={m.d_model},"
                          f" {m.num_heads} heads, context {m.context}; MoE"
                          f" FFN: {m.num_experts} routed SwiGLU experts (hidden"
                          f" {m.d_hidden}) + 1 shared, k={m.k}",
          "num_params": int(sum(x.size for x in jax.tree.leaves(params))),
          "emo_pool": f"U{{{m.pool_low}..{m.num_experts}}} per document and"
                      " layer (training); per-token routing at evaluation",
          "optimizer": "AdamW + warmup-cosine + clip, as in the authors' code",
          "tokens_per_run": config.train.num_steps * config.train.batch_size
                            * m.context}


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  corpus, tokens, domain_data = load_data(config)
  workdir.plan(2 * len(config.models) * len(config.seeds))  # train + evaluate
  evals = {kind: [] for kind in config.models}
  for kind in config.models:
    for seed in config.seeds:
      model = train_run(config, workdir, tokens, kind, seed)
      evals[kind].append(workdir.stage(
          f"{kind}_seed{seed}_eval",
          functools.partial(evaluate_run, config, model, domain_data, seed)))

  summary = summarize(evals, config)
  results = [harness.result(f"{kind}/{domain}", metric, mean,
                            standard_error=se, num_samples=len(config.seeds),
                            lower_is_better=metric != "domain_nmi",
                            unit=unit(metric))
             for kind, rows in summary.items()
             for domain, values in rows.items()
             for metric, (mean, se) in values.items()]
  metadata = model_metadata(config)
  workdir.write_report(
      paper=PAPER, claim=CLAIM,
      dataset={"name": "four byte-level domains (code, prose, arithmetic,"
                       " csv)", "provenance": corpus.provenance},
      model=metadata, seeds=list(config.seeds), results=results,
      paper_results=PAPER_RESULTS, checks=evaluate_claim(summary, config),
      figures=[plot_usage(workdir, evals, config),
               plot_deltas(workdir, summary, config)],
      extra_run_data={"summary": summary},
      notes=[
          "Units differ from the paper: held-out bits per byte of a byte-level"
          f" LM trained on {metadata['tokens_per_run']:,} bytes, not benchmark"
          " accuracy.",
          "Subsets are chosen per domain from"
          f" {config.eval.calibration_docs} calibration documents of that"
          " domain's training split; evaluation is on held-out documents.",
      ])


def validate(config):
  if sorted(config.models) != ["emo", "standard"]:
    raise ValueError(f"models={config.models}: the claim compares exactly"
                     " 'standard' and 'emo'.")
  if config.checkpoint_every % config.log_every:
    raise ValueError(f"checkpoint_every={config.checkpoint_every} must be a"
                     f" multiple of log_every={config.log_every}.")
  if config.data.min_chars > config.data.max_chars:
    raise ValueError(f"data.min_chars={config.data.min_chars} exceeds"
                     f" data.max_chars={config.data.max_chars}.")
  for kind in config.models:
    moe_config(config, kind)  # k, the EMO pool and the matmul, by name


if __name__ == "__main__":
  harness.run(main, name="emo", fields=emo_config.FIELDS, validate=validate)
