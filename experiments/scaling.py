r"""Scaling study: does a check that fails at CPU scale move toward its claim with size?

::

  python -m experiments.scaling --config experiments/configs/scaling.py:daf

runs one experiment's binary at three or more sizes (the study named in
``experiments/diagnoses/<experiment>.py``), each in ``<workdir>/sizes/<k>``
and cached as a stage once done, so a killed study resumes where it stopped.
For each followed check it reports the check's measure (the number its
verdict compares with a bound, +- its s.e.) at every size, draws it against
the size with its bound, and fits the trend ``measure = a + b log(size)``
(weighted by the s.e. where every size has one): the size at which the
trend reaches the bound, when it moves toward it, is the study's prediction
of where the claim would hold. The diagnoses that cite a study
(``experiments/diagnoses/``) copy its report and figure into
``experiments/results/<experiment>/scaling_<study>/``.
"""

import importlib
import json
import math
import os
from typing import Any

import ml_collections
import numpy as np

from experiments import harness
from experiments.configs import scaling as scaling_config
from experiments.harness import cli
from experiments.harness import report as report_lib
from experiments.harness import stats

PAPER = {"title": "scaling studies of the experiments' checks", "authors": "",
         "url": ""}  # replaced by the studied experiment's own paper
CLAIM = "A check's measure moves toward its bound as the experiment grows."


def run_size(module: Any, config: ml_collections.ConfigDict, path: str,
             scale: str) -> dict[str, Any]:
  """The experiment's binary at one size, in its own workdir: its checks."""
  name = module.__name__.rsplit(".", 1)[1]
  workdir = harness.Workdir(path, config, name)
  workdir.metadata = cli.report_metadata(module.main, name)
  workdir.scale = scale
  harness.call_main(module.main, config, workdir)
  with open(os.path.join(path, "report.json")) as f:
    report = json.load(f)
  return {"checks": report["run_data"]["checks"],
          "wall_time_s": report["run_data"]["wall_time_s"],
          "dataset": report["benchmark_metadata"]["dataset"],
          "model": report["model_metadata"]}


def axis_value(config: ml_collections.ConfigDict, field: str) -> float:
  value = config
  for part in field.split("."):
    value = value[part]
  return float(len(value) if isinstance(value, (tuple, list)) else value)


def trend(x: list[float], value: list[float | None], se: list[float | None],
          bound: float, higher_is_better: bool) -> dict[str, Any]:
  """The fit ``value = a + b log(x)``, its slope's s.e., and where it meets ``bound``."""
  keep = [i for i, v in enumerate(value) if v is not None and math.isfinite(v)]
  if len(keep) < 3 or len({x[i] for i in keep}) < 2:
    return {"slope": None, "slope_se": None, "predicted_size": None,
            "toward_claim": None}
  log_x = np.log([x[i] for i in keep])
  y = np.asarray([value[i] for i in keep])
  weighted = all(se[i] for i in keep)
  w = (1 / np.asarray([se[i] for i in keep]) ** 2 if weighted
       else np.ones_like(y))
  design = np.stack([np.ones_like(log_x), log_x], 1)
  cov = np.linalg.inv(design.T @ (design * w[:, None]))
  a, b = cov @ design.T @ (w * y)
  if not weighted:  # residual variance in place of known errors
    cov = cov * float(np.sum((y - a - b * log_x) ** 2) / (len(y) - 2))
  slope_se = float(math.sqrt(cov[1, 1]))
  toward = (b > 0) == higher_is_better and b != 0
  holds_at_largest = (y[-1] > bound) == higher_is_better
  predicted = (math.exp((bound - a) / b) if toward and not holds_at_largest
               else None)
  return {"slope": float(b), "slope_se": slope_se, "toward_claim": bool(toward),
          "significant": abs(b) > stats.EFFECT_STANDARD_ERRORS * slope_se,
          "predicted_size": predicted}


def follow(check_id: str, xs: list[float], runs: list[dict[str, Any]]
           ) -> dict[str, Any]:
  """One check's measure at every size, and its trend."""
  checks = [{c["id"]: c for c in run["checks"]}.get(check_id) for run in runs]
  if any(c is None or "measure" not in c for c in checks):
    raise ValueError(f"check {check_id!r} is missing or has no measure at some"
                     " size: give its harness.check a measure=.")
  measures = [c["measure"] for c in checks]
  values = [m["value"] for m in measures]
  ses = [m["se"] for m in measures]
  first = measures[0]
  return {"name": checks[0]["name"], "x": xs, "value": values, "se": ses,
          "verdicts": [report_lib.VERDICTS[c["passed"]] for c in checks],
          "bound": first["bound"], "higher_is_better": first["higher_is_better"],
          "label": first["label"],
          **trend(xs, values, ses, first["bound"], first["higher_is_better"])}


def trend_text(f: dict[str, Any], what: str) -> str:
  if f["slope"] is None:
    return "fewer than three finite measures: no trend"
  per = (f"{f['slope']:+.3g} per e-fold of {what} (s.e. {f['slope_se']:.2g}"
         + (", more than 2 s.e." if f["significant"] else ", within 2 s.e.")
         + ")")
  if not f["toward_claim"]:
    return f"moves away from the bound: {per}"
  if f["predicted_size"] is None:
    return f"toward the bound, already past it at the largest size: {per}"
  return (f"toward the bound: {per}; the trend reaches {f['bound']:g} at"
          f" {what} = {f['predicted_size']:.3g}")


def draw(workdir: harness.Workdir, config: ml_collections.ConfigDict,
         followed: dict[str, dict[str, Any]]) -> None:
  with workdir.figure(f"scaling_{config.study}", cols=len(followed),
                      title=f"{config.experiment}: each check's measure"
                      f" (+- s.e.) vs {config.what}", size=(4.2, 3.4)) as axes:
    for ax, (check_id, f) in zip(axes[0], followed.items()):
      ax.errorbar(f["x"], [np.nan if v is None else v for v in f["value"]],
                  yerr=[s or 0 for s in f["se"]], fmt="o-", capsize=3,
                  label="measured (+- s.e.)")
      ax.axhline(f["bound"], color="k", ls="--", lw=1,
                 label="the claim's bound")
      ax.set(xscale="log", xlabel=config.what, ylabel=f["label"] or "measure")
      ax.set_xticks(f["x"], [f"{x:g}" for x in f["x"]], minor=False)
      ax.minorticks_off()
      ax.set_title(check_id, fontsize=8)


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir) -> None:
  module = importlib.import_module(f"experiments.{config.experiment}")
  metadata = cli.report_metadata(module.main)
  workdir.metadata = {**metadata, "diagnoses": {}, "claim": (
      f"{metadata['claim']} (scaling study {config.study!r}: the checks"
      f" {', '.join(config.checks)} against {config.what})")}
  sized = scaling_config.sized_configs(config)
  xs = [axis_value(c, config.axis) for c in sized]
  runs = [workdir.stage(f"size_{k}", lambda k=k, c=c: run_size(
      module, c, os.path.join(workdir.path, "sizes", str(k)),
      f"scaling {config.study}: {config.axis} = {xs[k]:g}"))
          for k, c in enumerate(sized)]
  followed = {i: follow(i, xs, runs) for i in config.checks}
  draw(workdir, config, followed)
  workdir.write_report(
      dataset=runs[-1]["dataset"], model=runs[-1]["model"],
      seeds=list(sized[-1].get("seeds", ())),
      paper_results=[], checks=[], results=[
          harness.result(f"{i} at {config.what} = {x:g}", f["label"] or "measure",
                         v, standard_error=s, num_samples=len(c.get("seeds", (0,))),
                         lower_is_better=not f["higher_is_better"])
          for i, f in followed.items()
          for x, v, s, c in zip(f["x"], f["value"], f["se"], sized)],
      notes=[f"{i}: {trend_text(f, config.what)}; verdicts by size:"
             f" {', '.join(f'{x:g}: {v}' for x, v in zip(f['x'], f['verdicts']))}"
             for i, f in followed.items()],
      extra_run_data={"study": config.study, "followed": followed,
                      "sizes_wall_time_s": [r["wall_time_s"] for r in runs]})


if __name__ == "__main__":
  harness.run(main, name="scaling")
