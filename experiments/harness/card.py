"""A report as an Evaluation Card: EEE run records, a benchmark card and the four signals.

Our numbers become one ``first_party`` ``evaluation_run`` record (with a
``jaxpapers_repro`` block); the paper's numbers, where the paper gives one,
one ``third_party`` ``documentation`` record with the same evaluation and
metric names, so the cross-party divergence between the paper and us is
computed by :func:`jaxpapers.evalcards.analyze`, not written by hand.
"""

import math
from typing import Any, Mapping

from jaxpapers import evalcards

ORGANIZATION = "jaxpapers"
# The benchmark-card fields we fill (our selection; Evaluation Cards' own
# list of 28 fields is not public). Sub-items count as fractions.
BENCHMARK_CARD_FIELDS = {
    "benchmark_details": ("name", "paper", "claim"),
    "purpose_and_intended_users": ("goal", "audience"),
    "data": ("source", "provenance", "license"),
    "methodology": ("metrics", "checks", "seeds", "baselines"),
    "ethical_and_legal_considerations": ("risks",),
}
COST_KINDS = (("seconds", "cost_time"), ("ms_per", "cost_time"),
              ("tokens_per_s", "cost_throughput"), ("bytes", "cost_memory"),
              ("memory", "cost_memory"))


def metric_kind(metric: str) -> str:
  """``cost_time`` / ``cost_memory`` / ``cost_throughput`` for costs, else ``score``."""
  for marker, kind in COST_KINDS:
    if marker in metric:
      return kind
  return "score"


def build(report: Mapping[str, Any], timestamp: str) -> dict[str, Any]:
  """The Evaluation Card of a report (see the module docstring)."""
  bench, run, model = (report["benchmark_metadata"], report["run_data"],
                       report["model_metadata"])
  experiment, dataset = bench["experiment"], bench["dataset"].get("name", "")
  model_info = {"name": f"{experiment} (jaxpapers reproduction)",
                "id": f"jaxpapers/{experiment}",
                "additional_details": {k: str(v) for k, v in model.items()}}
  ours, skipped = [], []
  for r in run["results"]:
    if not _finite(r["score"]):
      skipped.append(f"{r['evaluation_name']} / {r['metric']}: {r['score']}")
      continue
    ours.append(_entry(r["evaluation_name"], r["metric"], r["score"],
                       r["lower_is_better"], dataset, unit=r.get("unit"),
                       kind=r.get("kind"),
                       standard_error=r.get("standard_error"),
                       num_samples=r.get("num_samples")))
  records = [evalcards.run_record(
      evaluation_id=f"jaxpapers/{experiment}/{run['config_hash']}",
      source_type="evaluation_run", organization=ORGANIZATION,
      relationship="first_party", model_info=model_info,
      eval_library={"name": "jaxpapers",
                    "version": run["versions"].get("jaxpapers", "unknown")},
      results=ours, source_name=f"python -m experiments.{experiment}",
      repro={"seeds": run["seeds"], "versions": run["versions"],
             "platform": run["platform"], "x64": run["platform"]["x64"],
             "git_commit": run["git_commit"],
             "config_hash": run["config_hash"]},
      retrieved_timestamp=timestamp)]
  by_metric = {(r["evaluation_name"], r["metric"]): r for r in run["results"]}
  numbers = [p for p in run["paper_results"] if p.get("score") is not None]
  if numbers:
    paper = bench["paper"]
    records.append(evalcards.run_record(
        evaluation_id=f"paper/{experiment}", source_type="documentation",
        organization=f"{paper.get('authors', 'the authors')} (paper)",
        relationship="third_party", model_info=model_info,
        eval_library={"name": "paper", "version": "unknown"},
        source_name=paper.get("url", ""), retrieved_timestamp=timestamp,
        results=[_entry(
            p["evaluation_name"], p["metric"], p["score"],
            by_metric.get((p["evaluation_name"], p["metric"]),
                          {"lower_is_better": True})["lower_is_better"],
            dataset, unit=p.get("unit"), description=p["statement"])
                 for p in numbers]))
  benchmark_card = {
      "benchmark_details": {"name": experiment, "paper": bench["paper"],
                            "claim": bench["claim"]},
      "purpose_and_intended_users": {
          "goal": "reproduce the paper's central claim at small scale",
          "audience": "ML researchers and engineers"},
      "data": {"source": dataset,
               "provenance": bench["dataset"].get("provenance"),
               "license": bench["dataset"].get("license")},
      "methodology": {"metrics": sorted({r["metric"] for r in run["results"]}),
                      "checks": [c["id"] for c in run["checks"]],
                      "seeds": run["seeds"],
                      "baselines": model.get("baselines")},
      "ethical_and_legal_considerations": {"risks": bench.get("risks")},
  }
  analysis = evalcards.analyze(records)
  completeness = evalcards.completeness(benchmark_card, BENCHMARK_CARD_FIELDS)
  return {"records": records, "benchmark_card": benchmark_card,
          "signals": analysis, "completeness": completeness,
          "summary": evalcards.summary(analysis, completeness,
                                       reproducibility_sources=("first_party",)),
          "skipped_results": skipped}


def verdict(report: Mapping[str, Any]) -> str:
  """One line: checks passed, and what the signals say."""
  run, summary = report["run_data"], report["evaluation_card"]["summary"]
  checks = run["checks"]
  unclear = sum(c["passed"] is None for c in checks)
  parts = [f"{run['checks_passed']}/{len(checks)} checks pass"
           + (f" ({unclear} inconclusive)" if unclear else "")]
  parts.append("reproducible" if not summary["reproducibility_flagged"]
               else f"reproducibility gap ({', '.join(summary['reproducibility_missing'])})")
  parts.append(f"completeness {summary['completeness']:.2f}")
  if summary["compared_groups"]:
    parts.append(f"{len(summary['divergent_groups'])}/{summary['compared_groups']}"
                 " numbers diverge from the paper's")
  else:
    parts.append("no paper number to compare")
  return "; ".join(parts)


def _entry(evaluation_name, metric, score, lower_is_better, dataset, *,
           unit=None, kind=None, standard_error=None, num_samples=None,
           description=None):
  return evalcards.result_entry(
      evaluation_name, float(score), lower_is_better=bool(lower_is_better),
      dataset_name=dataset, metric_id=metric,
      metric_kind=kind or metric_kind(metric), metric_unit=unit,
      standard_error=standard_error if _finite(standard_error) else None,
      num_samples=num_samples if num_samples else None,
      description=description)


def _finite(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) \
      and math.isfinite(value)
