r"""Distributed saddle problems: rounds and oracle calls, DM-SP vs GDA/EG/OGDA.

For each L_xx / L_xy of the config, builds a random quadratic game (our
CPU-scale protocol, docs/saddle_decoupled.md) and runs every method until
||F(z)|| <= rtol * ||F(z_0)||, recording the residual against communication
rounds and against oracle calls per player. Each player lives on its own
device when there are at least two (one process per player under
``jax.distributed``), else all players share one device; the numbers are
the same either way.

The Decoupled Method is our reconstruction from the abstract of Luo,
Rodomanov & Stich, "Efficient Gradient Methods for Distributed Saddle
Problems" (https://arxiv.org/abs/2605.18604). The report compares the
measured growth in L_xx / L_xy with our reconstructed bounds (``BOUNDS``)
and says where they agree.
"""

import itertools

from absl import logging
import jax
import ml_collections
import numpy as np

from experiments import harness
from experiments.configs import saddle as saddle_config
from jaxpapers import saddle

PAPER = {"title": "Efficient Gradient Methods for Distributed Saddle Problems",
         "authors": "Luo, Rodomanov & Stich",
         "url": "https://arxiv.org/abs/2605.18604"}
CLAIM = (
    "On distributed saddle problems whose players own their variable blocks,"
    " the Decoupled Method's communication rounds are governed by the"
    " coupling L_xy alone (flat in L_xx / L_xy), and its oracle calls grow"
    " like L_xy + sqrt(L_xy L_xx), beating Extragradient (whose rounds and"
    " oracle calls grow like max L) once self-curvature dominates.")
PAPER_RESULTS = [
    harness.paper_result(
        "communication", "The Decoupled Method matches the communication"
        " lower bound of gradient-span algorithms (abstract)."),
    harness.paper_result(
        "oracle calls", "It yields the first strict improvement over"
        " Extragradient's oracle cost for general SPs (abstract)."),
    harness.paper_result("numbers", "None available (abstract only)."),
]
ROUNDS_PER_STEP = {"dm_sp": 1, "extragradient": 2, "optimistic_gda": 1,
                   "gda": 1}  # DM-SP: at least one per stage
LABELS = {"dm_sp": "DM-SP (reconstruction)", "extragradient": "EG",
          "optimistic_gda": "OGDA", "gda": "GDA"}
STYLES = {"dm_sp": ("-", "o"), "extragradient": ("--", "s"),
          "optimistic_gda": (":", "^"), "gda": ("-.", "v")}  # line, marker
SLOPE_TOLERANCE = 0.25  # |measured - predicted| log-log slope that "agrees"
COSTS = {"rounds": "communication rounds",
         "oracle_calls": "oracle calls per player"}
UNITS = {"rounds": "rounds", "oracle_calls": "oracle calls",
         "scalar_allreduces": "scalar all-reduces"}
# Our reconstructed bounds (docs/saddle_decoupled.md) up to a constant, as
# (L_xx, L_xy) -> cost (EG's and OGDA's: max L); we have none for GDA.
BOUNDS = {
    ("dm_sp", "rounds"): lambda l_xx, l_xy: l_xy,
    ("dm_sp", "oracle_calls"): lambda l_xx, l_xy: l_xy + np.sqrt(l_xy * l_xx),
    **{(name, kind): lambda l_xx, l_xy: l_xx + l_xy
       for name in ("extragradient", "optimistic_gda") for kind in COSTS},
}
FEWER_THAN_EG = (  # cost, smallest L_xx / L_xy where DM-SP must win, check
    ("rounds", 0, "DM-SP needs fewer rounds than EG at every ratio"),
    ("oracle_calls", 10, "DM-SP needs fewer oracle calls per player than EG"
     " when L_xx >= 10 L_xy"))
RESIDUAL_TITLES = {  # what each residual figure shows of the claim
    "rounds": "DM-SP's rounds to tolerance stay flat as $L_{xx}/L_{xy}$"
              " grows; EG's and OGDA's grow",
    "oracle_calls": "DM-SP needs fewer oracle calls than EG once"
                    " $L_{xx} \\gg L_{xy}$"}


def multipliers_of(name, config):
  return (tuple(config.step_multipliers)
          if name in ("extragradient", "optimistic_gda") else (1.0,))


def _carry(state, residual, mesh):
  # Every process holds the residual: it decides convergence, hence the
  # budgets of the later runs, which must be the same on every process.
  return {"state": state,
          "residual": saddle.replicated(np.float64(residual), mesh)}


def record_of(residual, initial_residual, rounds, scalar_allreduces,
              oracle_calls):
  """The costs so far; ``oracle_calls`` holds every player's count."""
  return {"residual": float(residual),
          "relative_residual": float(residual) / initial_residual,
          "rounds": int(rounds), "scalar_allreduces": int(scalar_allreduces),
          "oracle_calls": int(oracle_calls.max()),
          "oracle_calls_total": int(oracle_calls.sum())}


def train_run(config, workdir, game, initial_residual, ratio, name,
              multiplier, budget_rounds, mesh):
  """Runs (or resumes) one method on one game; returns summary and records."""
  run = f"ratio{ratio:g}_{name}_x{multiplier:g}"
  # DM-SP with its defaults, a baseline with its textbook step x multiplier.
  method = (saddle.dm_sp() if name == "dm_sp"
            else saddle.textbook_baseline(name, game, multiplier))
  max_steps = max(budget_rounds // ROUNDS_PER_STEP[name], 1)
  stop_residual = config.rtol * initial_residual
  max_residual = config.divergence_factor * initial_residual
  record_steps = set(np.round(np.geomspace(
      1, max_steps, config.num_records)).astype(np.int64).tolist())

  def chunk(carry, step):
    state, trace = saddle.run(
        method, game, carry["state"], num_steps=config.steps_per_chunk,
        stop_residual=stop_residual, max_residual=max_residual,
        step_limit=max_steps - step, mesh=mesh)
    trace = saddle.gather_to_host(trace)
    taken = int(trace.num_steps_taken)
    if taken == 0:
      raise RuntimeError(f"[{run}] a running chunk took no step.")
    records = [(step + i + 1, record_of(
        trace.residual[i], initial_residual, trace.rounds[i],
        trace.scalar_allreduces[i], trace.oracle_calls[i]))
               for i in range(taken)
               if step + i + 1 in record_steps or i == taken - 1]
    residual = float(trace.residual[taken - 1])
    return harness.Chunk(_carry(state, residual, mesh), step + taken, records,
                         stop=not stop_residual < residual <= max_residual)

  result = workdir.train(
      run, _carry(saddle.init(method, game, game.zeros(), mesh=mesh),
                  initial_residual, mesh), chunk,
      num_steps=max_steps, checkpoint_every=config.steps_per_chunk,
      initial=lambda carry: (carry, record_of(
          initial_residual, initial_residual, 0, 0, np.zeros(1, int))))
  final = saddle.gather_to_host(result.state)
  counters, residual = final["state"].counters, float(final["residual"])
  status = ("converged" if residual <= stop_residual else
            "diverged" if not residual <= max_residual else "out of budget")
  return {
      "run": run, "ratio": ratio, "method": name, "multiplier": multiplier,
      "step_size": None if name == "dm_sp" else float(method.step_size),
      "status": status, "converged": status == "converged",
      "steps": result.records[-1]["step"], "budget_rounds": int(budget_rounds),
      **record_of(residual, initial_residual, counters.rounds[0],
                  counters.scalar_allreduces[0], counters.oracle_calls),
  }, result.records


def sweep(config, workdir, mesh):
  """Every run's summary and records; the best step size per (method, ratio)."""
  runs, best, records = [], {}, {}
  for ratio in config.ratios:
    game = saddle.random_saddle_game(
        jax.random.key(config.seed), config.dim, l_xx=ratio * config.l_xy,
        l_xy=config.l_xy, mu=config.mu,
        dtype=np.float64 if config.x64 else np.float32)
    if jax.process_count() > 1:
      # Identical numpy copies on every process enter jit as replicated.
      game = jax.device_get(game)
    initial_residual = float(saddle.residual_norm(game, game.zeros()))
    logging.info("ratio %g: L_xx=%g L_xy=%g mu=%g ||F(z0)||=%.4g", ratio,
                 float(game.self_smoothness[0]), float(game.coupling),
                 float(game.monotonicity), initial_residual)
    for name in config.methods:
      budget = config.gda_max_rounds if name == "gda" else config.max_rounds
      candidates = []
      for multiplier in multipliers_of(name, config):
        # A smaller step cannot win once it has used the best one's rounds.
        reached = [c["rounds"] for c in candidates if c["converged"]]
        summary, run_records = train_run(
            config, workdir, game, initial_residual, ratio, name, multiplier,
            min([budget] + reached), mesh)
        records[summary["run"]] = run_records
        candidates.append(summary)
        runs.append(summary)
      converged = [c for c in candidates if c["converged"]]
      best[(name, ratio)] = (min(converged, key=lambda c: c["rounds"])
                             if converged
                             else max(candidates, key=lambda c: c["rounds"]))
  return runs, best, records


def scaling_table(best, config):
  """Measured vs predicted (BOUNDS) growth in L_xx / L_xy, per method, cost."""
  rows = []
  for name, kind in itertools.product(config.methods, COSTS):
    mine = [best[(name, r)] for r in sorted(config.ratios)]
    ratios = np.array([b["ratio"] for b in mine])
    measured = np.array([b[kind] for b in mine], np.float64)
    reached = all(b["converged"] for b in mine)
    bound = BOUNDS.get((name, kind))
    rows.append({
        "method": name, "cost": kind, "ratios": ratios.tolist(),
        "measured": measured.tolist(), "all_reached": reached,
        **saddle.growth_against_bound(
            ratios, measured, None if bound is None else
            [bound(r * config.l_xy, config.l_xy) for r in ratios],
            tolerance=SLOPE_TOLERANCE, measured_complete=reached)})
  return rows


def _label(row):
  return f"{LABELS[row['method']]} {UNITS[row['cost']]}"


def dm_sp_vs_eg(best, config):
  """By ratio: DM-SP's and EG's best runs, {cost: DM-SP needed less}; or []."""
  if not {"dm_sp", "extragradient"} <= set(config.methods):
    return []
  return [(d, e, {kind: d["converged"] and d[kind] < e[kind] for kind in COSTS})
          for d, e in ((best[("dm_sp", r)], best[("extragradient", r)])
                       for r in sorted(config.ratios))]


def evaluate_claim(best, table, config):
  """Slopes as the bounds predict; DM-SP beats EG on rounds and oracle calls."""
  checks = [harness.check(
      f"{row['method']}_{row['cost']}_slope",
      f"{_label(row)}: log-log slope in L_xx/L_xy within {SLOPE_TOLERANCE}"
      " of the bound's", bool(row["agrees"]),
      "did not reach the tolerance at every ratio"
      if row["measured_slope"] is None else
      f"measured {row['measured_slope']:.2f}, predicted"
      f" {row['predicted_slope']:.2f}")
            for row in table if row["predicted_slope"] is not None]
  pairs = dm_sp_vs_eg(best, config)
  for kind, min_ratio, name in FEWER_THAN_EG if pairs else ():
    compared = [(d, e, w) for d, e, w in pairs if d["ratio"] >= min_ratio]
    checks.append(harness.check(
        f"dm_sp_fewer_{kind}_than_eg", name,
        bool(compared) and all(w[kind] for _, _, w in compared),
        ", ".join(f"{d['ratio']:g}: {d[kind]} vs {e[kind]}"
                  for d, e, _ in compared)))
  return checks


def table_markdown(best, table, config):
  """The scaling table and a plain statement of agreement, as markdown."""
  cells = lambda values: "| " + " | ".join(values) + " |"
  relative = lambda xs: "—" if xs is None else ", ".join(f"{x:.3g}" for x in xs)
  slope = lambda x: "—" if x is None else f"{x:.2f}"
  lines = [
      "## Scaling against our reconstructed bounds", "",
      f"Cost to reach ||F|| <= {config.rtol:g} ||F(z0)|| on d = {config.dim}"
      f" quadratic games (L_xy = {config.l_xy:g}, mu = {config.mu:g}); oracle"
      " calls are per player (the largest over the two players). Relative ="
      f" cost / cost at L_xx/L_xy = {config.ratios[0]:g}. '>' marks a method"
      " that did not reach the tolerance within its budget. The bounds are"
      " our reconstruction (docs/saddle_decoupled.md).", "",
      cells(["method", "cost", *(f"ratio {r:g}" for r in config.ratios),
             "measured relative", "bound relative", "slope measured / bound",
             "agrees"]),
      cells(["---"] * (len(config.ratios) + 6)),
  ]
  for row in table:
    lines.append(cells([
        LABELS[row["method"]], UNITS[row["cost"]],
        *(("" if b["converged"] else ">") + str(b[row["cost"]])
          for b in (best[(row["method"], r)] for r in config.ratios)),
        relative(row["measured_relative"]), relative(row["predicted_relative"]),
        f"{slope(row['measured_slope'])} / {slope(row['predicted_slope'])}",
        {None: "—", True: "yes", False: "no"}[row["agrees"]]]))
  if "dm_sp" in config.methods:
    lines += ["", "DM-SP's HPE test also costs one scalar all-reduce per"
              " Jacobi round (not counted as a round in our reconstruction): "
              + ", ".join(f"{r:g}: {best[('dm_sp', r)]['scalar_allreduces']}"
                          for r in sorted(config.ratios)) + "."]
  # Where DM-SP beat EG's best step size, in plain words.
  pairs, comparison = dm_sp_vs_eg(best, config), []
  for kind, words in COSTS.items():
    fewer = [f"{d['ratio']:g}" for d, _, w in pairs if w[kind]]
    more = [f"{d['ratio']:g} ({d[kind]} vs {e[kind]})"
            for d, e, w in pairs if not w[kind]]
    comparison.append(
        f"DM-SP needed fewer {words} than EG at L_xx/L_xy ="
        f" {', '.join(fewer) or 'none'}"
        + (f", and not at {'; '.join(more)}." if more else "."))
  lines += ["", statement_of_agreement(table), "",
            " ".join(comparison) if pairs else "", ""]
  return "\n".join(lines)


def statement_of_agreement(table):
  """Where the measured growth agrees with our reconstructed bounds (words)."""
  rows = lambda agrees: [r for r in table if r["agrees"] is agrees
                         and r["predicted_slope"] is not None]
  parts = [
      ("The measured growth agrees with our reconstructed bound (log-log"
       f" slope within {SLOPE_TOLERANCE}) for: ",
       [_label(r) for r in rows(True)], "."),
      ("It does not agree for: ",
       [f"{_label(r)} (slope {r['measured_slope']:.2f} vs"
        f" {r['predicted_slope']:.2f})" for r in rows(False)], "."),
      ("No slope could be measured for: ", [_label(r) for r in rows(None)],
       " (tolerance not reached at every ratio)."),
  ]
  return " ".join(head + "; ".join(items) + tail
                  for head, items, tail in parts if items)


def plot_residuals(workdir, records, best, config, kind):
  """Relative residual vs ``kind`` (a cost), one panel per ratio."""
  fig, axes = harness.panels(1, len(config.ratios), size=(3.6, 3.4))
  for ax, ratio in zip(axes[0], config.ratios):
    for k, method in enumerate(config.methods):
      rs = records[best[(method, ratio)]["run"]]
      ax.plot(np.maximum([r[kind] for r in rs], 1),
              [r["relative_residual"] for r in rs], color=f"C{k}", lw=1.2,
              ls=STYLES[method][0], label=LABELS[method])
    ax.axhline(config.rtol, color="k", ls=":", lw=1, label="tolerance")
    ax.set(title=f"$L_{{xx}}/L_{{xy}}$ = {ratio:g}", xscale="log",
           yscale="log", xlabel=COSTS[kind])
  axes[0, 0].set_ylabel("$\\|F(z)\\| / \\|F(z_0)\\|$")
  return workdir.save_figure(fig, f"residual_vs_{kind}",
                             title=RESIDUAL_TITLES[kind])


def plot_costs(workdir, best, table):
  """Rounds and oracle calls to tolerance vs L_xx / L_xy, with the bounds."""
  fig, axes = harness.panels(1, 2, size=(4.25, 3.8))
  for ax, (kind, label) in zip(axes[0], COSTS.items()):
    for k, row in enumerate(r for r in table if r["cost"] == kind):
      method, ratios, values = row["method"], row["ratios"], row["measured"]
      marker = STYLES[method][1]
      ax.plot(ratios, values, "-", marker=marker, color=f"C{k}", lw=1,
              label=LABELS[method])
      missed = [not best[(method, r)]["converged"] for r in ratios]
      ax.plot(np.array(ratios)[missed], np.array(values)[missed], marker,
              color=f"C{k}", mfc="white")  # hollow: budget hit
      if row["predicted_relative"] is not None:
        ax.plot(ratios, np.array(row["predicted_relative"]) * values[0], "--",
                color=f"C{k}", lw=0.8, alpha=0.7)
    ax.plot([], [], "--", color="gray", lw=0.8,
            label="our reconstructed bound")
    ax.plot([], [], "o", color="gray", mfc="white", label="budget hit")
    ax.set(xscale="log", yscale="log", xlabel="$L_{xx} / L_{xy}$",
           ylabel=f"{label} to tolerance")
  return workdir.save_figure(
      fig, "cost_vs_ratio", title="DM-SP's rounds stay flat in"
      " $L_{xx}/L_{xy}$ and its oracle calls grow more slowly than EG's")


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  with jax.enable_x64(config.x64):
    on_mesh = config.execution == "mesh" or (config.execution == "auto"
                                             and jax.device_count() >= 2)
    mesh = saddle.player_mesh(2) if on_mesh else None  # needs two devices
    execution = ("one device per player" if on_mesh
                 else "all players on one device")
    logging.info("execution: %s", execution)
    workdir.plan(len(config.ratios) * sum(
        len(multipliers_of(m, config)) for m in config.methods))
    runs, best, records = sweep(config, workdir, mesh)
    table = scaling_table(best, config)
    figures = [plot_residuals(workdir, records, best, config, kind)
               for kind in COSTS] + [plot_costs(workdir, best, table)]
  workdir.write_report(
      paper=PAPER, claim=CLAIM, **metadata_of(config), seeds=[config.seed],
      results=[harness.result(
          f"ratio{b['ratio']:g}_{b['method']}",
          metric + ("" if b["converged"] else " (budget hit)"), b[metric],
          unit=unit) for b in best.values() for metric, unit in UNITS.items()],
      paper_results=PAPER_RESULTS, checks=evaluate_claim(best, table, config),
      figures=figures, notes=notes_of(best, records, config, execution),
      extra_run_data={
          "best": list(best.values()), "runs": runs, "scaling_table": table,
          "statement_of_agreement": statement_of_agreement(table),
      },
      markdown_appendix=table_markdown(best, table, config))


def notes_of(best, records, config, execution):
  notes = [
      "The Decoupled Method is our reconstruction from the abstract (HPE"
      " outer loop, Jacobi rounds of per-player prox problems, local AGD;"
      " docs/saddle_decoupled.md); the paper's own algorithm and rates were"
      " not available.",
      "The paper reports no numbers; the 'bounds' are our reconstructed"
      " rates (docs/saddle_decoupled.md), compared through their growth in"
      " L_xx/L_xy (log-log slopes), not their constants.",
      f"Execution: {execution} ({jax.process_count()} process(es)).",
      "GDA uses the textbook step mu/L^2 and a budget of"
      f" {config.gda_max_rounds} rounds; it is not expected to reach the"
      " tolerance on these ill-conditioned games.",
  ]
  notes += [f"{b['run']}: {b['status']} (relative residual"
            f" {b['relative_residual']:.3g})"
            for b in best.values() if not b["converged"]]
  peaks = {b["run"]: max(r["relative_residual"] for r in records[b["run"]])
           for b in best.values()}
  return notes + [f"{run}: ||F|| of the last iterate first rises to"
                  f" {peak:.3g} x ||F(z0)|| before it decays (the residual"
                  " is not monotone along the iterates)."
                  for run, peak in peaks.items() if peak > 1.0]


def metadata_of(config):
  """The report's dataset and model blocks."""
  return {
      "dataset": {"name": f"random quadratic saddle games, d={config.dim}",
                  "provenance": "generated from config.seed: P, Q with"
                  " spectra log-spaced in [mu, L_xx], B with singular values"
                  " uniform in [0, L_xy] (docs/saddle_decoupled.md)"},
      "model": {"problem": "min_x max_y 0.5 x'Px + x'By - 0.5 y'Qy + a'x"
                " - b'y", "players": 2, "block_size": config.dim,
                "methods": [LABELS[m] for m in config.methods]},
  }


def validate(config):
  unknown = sorted(set(config.methods) - set(LABELS))
  if unknown:
    raise ValueError(f"unknown methods {unknown}; known: {sorted(LABELS)}.")


if __name__ == "__main__":
  harness.run(main, name="saddle", fields=saddle_config.FIELDS,
              validate=validate)
