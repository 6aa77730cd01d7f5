r"""Neural routing solvers at CPU scale: decoder depth vs width at matched parameters.

Heavy decoders (:mod:`jaxpapers.routing._lehd`) imitate optimal TSP10 tours on
random partial paths (:mod:`jaxpapers.routing._imitation`): a depth series (D
fixed) and a width series (L fixed), the grid of
``experiments.configs.routing.model_grid``. The greedy optimality gap after
each block count in ``eval_blocks`` gives gap vs instances seen and vs training
FLOPs. The claim (Luo et al., 2026): at equal parameters the deeper decoder
reaches the lower gap. Protocol and numbers: ``docs/routing.md``."""

import math
from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from experiments import harness
from experiments.configs import routing as routing_config
from jaxpapers import routing

PAPER = {"title": "Efficient Decoder Scaling Strategy for Neural Routing Solvers",
         "authors": "Q. Luo, F. Luo, K. Li, Z. Wang", "url": "https://arxiv.org/abs/2603.00430"}
CLAIM = ("At matched parameter counts, scaling a construction-based routing solver's decoder in"
         " depth (layers) yields lower optimality gaps than scaling it in width (embedding"
         " dimension), in parameter, compute and data efficiency; the parameter count alone does"
         " not predict performance.")
NOT_AT_SMOKE_SCALE = ("params_D16xL2", "compute_D16xL2", "data_D16xL2", "beats_nearest_neighbour")
UNITS = {"greedy_gap": "percent", "parameters": "count", "train_gflops": "GFLOP"}
SEED_OFFSET_TEST = 10_000  # the test instances' seed: data_seed + this
PAPER_RESULTS = [harness.paper_result(
    "depth vs width", "scaling depth yields superior performance gains to scaling width;"
    " parameter count is insufficient to predict performance (abstract; 12 configurations"
    " from 1M to ~150M parameters, numbers not available to us).")]
NOTES = [
    "Reconstruction at CPU scale (docs/routing.md): TSP10 instead of TSP100, 1e4-1e5"
    " parameters instead of 1M-150M, a few epochs; the partial-path sampling is our"
    " restatement of LEHD's.",
    "Verdicts of the parameter checks: PASS when the deeper model's gap is lower by more than"
    " two standard errors of the difference over the seeds, FAIL when higher by that much,"
    " INCONCLUSIVE in between.",
    "train_gflops: XLA's FLOP count of one compiled training step times the steps (padding of"
    " the partial paths to N cities included).",
]


def make_data(config, workdir) -> dict[str, np.ndarray]:
  """Train/test instances (regenerated from the seed) and labels (a cached stage)."""
  train, test = (routing.random_instances(config.data_seed + offset, count, config.num_cities)
                 for offset, count in ((0, config.num_train),
                                       (SEED_OFFSET_TEST, config.num_test)))
  label = ((lambda coords: routing.held_karp(coords)[0])
           if config.num_cities <= routing.MAX_CITIES else routing.lkh_tours)

  def compute():
    test_tours, nearest = label(test), routing.nearest_neighbour(test)
    return {"train_tours": label(train), "test_tours": test_tours,
            "nearest_neighbour": nearest, "two_opt": routing.two_opt(test, nearest)}

  labels = {k: np.asarray(v, np.int32) for k, v in workdir.stage("labels", compute).items()}
  optimal = np.asarray(routing.tour_length(test, labels["test_tours"]))
  return {"train": train, "test": test, "optimal": optimal, **labels}


def train_model(one: harness.Run, config, workdir, data, tx):
  """One model and seed: a record per ``eval_blocks`` entry (``tx`` is shared
  by every run, so that the compiled steps are too)."""
  graphdef, params = nnx.split(
      routing.HeavyDecoder(one.settings, rngs=nnx.Rngs(one.seed)), nnx.Param)
  train, test = (tuple(jnp.asarray(data[k]) for k in keys)
                 for keys in (("train", "train_tours"), ("test", "optimal")))
  state = routing.TrainState(params, tx.init(params))
  kwargs = dict(graphdef=graphdef, tx=tx, batch_size=config.batch_size)
  step_flops = routing.train_step_flops(state, *train, **kwargs)
  eval_steps = [config.block_steps * b for b in config.eval_blocks]

  def chunk(state, step):
    end = min(s for s in eval_steps if s > step)
    state, losses = routing.train_blocks(state, *train, jax.random.key(one.seed), step,
                                           end - step, block_steps=config.block_steps, **kwargs)
    loss = float(np.mean(jax.device_get(losses)))
    if not math.isfinite(loss):
      raise FloatingPointError(f"[{one.name}] loss {loss} at {end}.")
    gaps = routing.greedy_gaps(state.params, *test, graphdef=graphdef)
    return harness.Chunk(state, end, {
        "train_loss": loss, "greedy_gap": 100 * float(jnp.mean(gaps)),
        "instances_seen": end * config.batch_size, "train_gflops": end * step_flops / 1e9})

  return workdir.train(one.name, state, chunk, num_steps=eval_steps[-1],
                       checkpoint_every=eval_steps[-1]).records


def summarize(records_by_seed, model_config, num_params) -> dict[str, Any]:
  """Final gap (mean +- s.e. over seeds), curves, parameter counts."""
  first, final = records_by_seed[0], [r[-1] for r in records_by_seed]
  gap, gap_se = harness.mean_se([r["greedy_gap"] for r in final])
  curve, curve_se = harness.mean_se_curve(
      [[r["greedy_gap"] for r in records] for records in records_by_seed])
  return {"width": model_config.width, "layers": model_config.decoder_layers,
          "encoder_layers": model_config.encoder_layers, "parameters": num_params,
          "decoder_parameters": routing.decoder_parameter_count(model_config),
          "train_gflops": final[0]["train_gflops"], "greedy_gap": gap,
          "greedy_gap_se": gap_se, "curve_gap": curve, "curve_gap_se": curve_se,
          "instances_seen": [r["instances_seen"] for r in first],
          "curve_gflops": [r["train_gflops"] for r in first]}


def deeper_first(pair, summary) -> tuple[str, str]:
  """A matched pair as (deeper and narrower model, shallower and wider model)."""
  return tuple(sorted(pair, key=lambda n: -summary[n]["layers"]))


def pair_checks(deep: str, wide: str, d, w) -> list[dict[str, Any]]:
  """Parameter, compute and data efficiency of ``deep`` against ``wide``."""
  # The wider model's gap minus the deeper's; its s.e. combines the two
  # models' seed spreads.
  difference = w["greedy_gap"] - d["greedy_gap"]
  se = math.hypot(d["greedy_gap_se"] or 0.0, w["greedy_gap_se"] or 0.0)
  # Both curves log-interpolated at the smaller of the two FLOP budgets.
  budget = min(d["train_gflops"], w["train_gflops"])
  at = lambda s: float(np.interp(np.log(budget), np.log(s["curve_gflops"]), s["curve_gap"]))
  wins = [a < b for a, b in zip(d["curve_gap"], w["curve_gap"])]
  measure = harness.measure(difference, se=se, bound=0.0, label="gap difference, wider"
                            " - deeper (pp; PASS beyond 2 s.e.)")
  return [harness.check(*row, measure=None if k else measure) for k, row in enumerate([
      (f"params_{deep}_vs_{wide}",
       f"the deeper {deep} ({d['parameters']:,} params) reaches a lower greedy gap than the"
       f" wider {wide} ({w['parameters']:,}), by > 2 s.e.", harness.effect_verdict(difference, se),
       f"gap {d['greedy_gap']:.2f}% vs {w['greedy_gap']:.2f}% (difference {difference:+.2f} pp,"
       f" s.e. {se:.2f} pp over seeds)"),
      (f"compute_{deep}_vs_{wide}", f"{deep} reaches a lower gap than {wide} at equal training"
       " FLOPs", at(d) < at(w), f"at {budget:.1f} GFLOP: {at(d):.2f}% vs {at(w):.2f}% (totals"
       f" {d['train_gflops']:.1f} and {w['train_gflops']:.1f} GFLOP)"),
      (f"data_{deep}_vs_{wide}", f"{deep} has the lower gap than {wide} at most numbers of"
       " instances seen", sum(wins) > len(wins) / 2,
       f"lower at {sum(wins)} of {len(wins)} evaluation points (" + ", ".join(
           f"{n / 1000:g}k: {a:.1f}/{b:.1f}%" for n, a, b in zip(
               d["instances_seen"], d["curve_gap"], w["curve_gap"])) + ")")])]


def evaluate_claim(summary, baselines, matched_pairs, depth_width) -> list[dict[str, Any]]:
  """Per matched pair (:func:`pair_checks`); depth series; the heuristics."""
  checks = [c for pair in matched_pairs for deep, wide in [deeper_first(pair, summary)]
            for c in pair_checks(deep, wide, summary[deep], summary[wide])]
  depth = sorted((s["layers"], name) for name, s in summary.items()
                 if s["width"] == depth_width and s["encoder_layers"] == 0)
  gaps = [summary[name]["greedy_gap"] for _, name in depth]
  best = min(summary, key=lambda n: summary[n]["greedy_gap"])
  return checks + [harness.check(
      "deeper_is_better", "the greedy gap falls with every added depth step of the depth"
      f" series (D = {depth_width})", all(a > b for a, b in zip(gaps, gaps[1:])),
      ", ".join(f"{name} {g:.2f}%" for (_, name), g in zip(depth, gaps))), harness.check(
          "beats_nearest_neighbour", "the best model's greedy gap is below the"
          " nearest-neighbour heuristic's",
          summary[best]["greedy_gap"] < baselines["nearest_neighbour"],
          f"{best} {summary[best]['greedy_gap']:.2f}% vs nearest neighbour"
          f" {baselines['nearest_neighbour']:.2f}% (2-opt from it: {baselines['two_opt']:.2f}%)")]


def plot_scaling(workdir, summary, baselines, config) -> None:
  """Gap vs parameters, vs training FLOPs and vs instances seen, both series."""
  deep = {deeper_first(p, summary)[0] for p in config.matched_pairs}
  plain = {n: s for n, s in summary.items() if not s["encoder_layers"]}
  series = {f"depth series (D = {config.depth_width})": ("width", config.depth_width),
            f"width series (L = {config.width_layers})": ("layers", config.width_layers)}
  with workdir.figure("gap_scaling", title="Test greedy gap vs parameters (final), training"
                      " GFLOPs and instances seen (curves),\nmean (+- s.e.) over seeds; thick: the"
                      " deeper model of each matched pair; solid: depth series", cols=3,
                      size=(4.4, 3.4)) as axes:
    for k, (label, (field, value)) in enumerate(series.items()):
      names = sorted((n for n, s in plain.items() if s[field] == value),
                     key=lambda n: summary[n]["parameters"])
      x, y = ([summary[n][k] for n in names] for k in ("parameters", "greedy_gap"))
      axes[0, 0].errorbar(x, y, yerr=[summary[n]["greedy_gap_se"] or 0.0 for n in names],
                          marker="os"[k], color=f"C{k}", label=label, capsize=3)
      for n, *xy in zip(names, x, y):
        axes[0, 0].annotate(n, xy, fontsize=6, xytext=(3, 3), textcoords="offset points")
    for i, (name, s) in enumerate(summary.items()):
      style = dict(color=f"C{2 + i}", marker=".", lw=2 if name in deep else 1, label=name,
                   ls="-" if name in plain and s["width"] == config.depth_width else "--")
      axes[0, 1].plot(s["curve_gflops"], s["curve_gap"], **style)
      axes[0, 2].plot(s["instances_seen"], s["curve_gap"], **style)
    for ax, xlabel in zip(axes[0], ("parameters", "training GFLOPs (XLA count)",
                                    "training instances seen")):
      ax.set(xscale="log", yscale="log", xlabel=xlabel)
      ax.axhline(baselines["nearest_neighbour"], color="gray", ls=":", lw=1,
                 label="nearest neighbour")
      ax.axhline(baselines["two_opt"], color="k", ls=":", lw=1, label="2-opt (from NN)")
    axes[0, 0].set_ylabel("greedy optimality gap (%), test")


def main(config, workdir: harness.Workdir):
  grid = routing_config.model_grid(config)
  data = make_data(config, workdir)
  baselines = {k: 100 * float(np.mean(np.asarray(routing.tour_length(
      data["test"], data[k])) / data["optimal"] - 1)) for k in ("nearest_neighbour", "two_opt")}
  tx = routing.optimizer(config.learning_rate, decay=config.decay_per_epoch,
                           steps_per_epoch=max(config.num_train // config.batch_size, 1))
  sweep = workdir.sweep(grid, config.seeds, lambda one: train_model(
      one, config, workdir, data, tx))
  summary = {name: summarize(sweep.values[name], model_config, routing.parameter_count(
      routing.HeavyDecoder(model_config, rngs=nnx.Rngs(0)))) for name, model_config in grid.items()}
  cities, (dataset, model) = f"TSP{config.num_cities}", metadata(config, grid)
  plot_scaling(workdir, summary, baselines, config)
  workdir.write_report(
      dataset=dataset, model=model,
      results=[row for name, s in summary.items() for row in harness.results_of(
          f"{cities}/{name}", s, UNITS, num_samples=len(config.seeds))]
      + [harness.result(f"{cities}/{k}", "greedy_gap", v) for k, v in baselines.items()],
      checks=evaluate_claim(summary, baselines, config.matched_pairs, config.depth_width),
      extra_run_data={"summary": summary, "baselines": baselines})


def metadata(config, grid) -> tuple[dict[str, Any], dict[str, Any]]:
  """The report's dataset and model descriptions."""
  labels = ("Held-Karp (exact)" if config.num_cities <= routing.MAX_CITIES else "LKH-3 (elkai)")
  return {"name": f"TSP{config.num_cities}, uniform in the unit square",
          "provenance": f"generated (seed {config.data_seed}): {config.num_train} training and"
                        f" {config.num_test} test instances, labels by {labels}",
          "license": "generated here"}, {
      "architecture": "heavy decoder (LEHD-style), decoder-only, ReZero, no normalisation,"
                      f" head width {config.head_width}",
      "training": f"imitation of optimal tours, Adam {config.learning_rate:g}"
                  f" x{config.decay_per_epoch} per epoch, batch {config.batch_size},"
                  f" {config.block_steps * config.eval_blocks[-1]} steps",
      "models": list(grid),
      "baselines": ["nearest_neighbour", "two_opt"] + ["LEHD"] * config.lehd_baseline}


if __name__ == "__main__":
  harness.run(main, name="routing")
