"""A report as an Evaluation Card: EEE run records, a benchmark card and the four signals.

Our numbers become one ``first_party`` ``evaluation_run`` record (our
reproducibility fields in ``source_metadata.additional_details``, see
:mod:`jaxpapers.evalcards._records`); the paper's numbers, where the paper
gives one, one ``third_party`` ``documentation`` record with the same
evaluation and metric names, so the cross-party divergence between the paper
and us is computed by :func:`jaxpapers.evalcards.analyze`, not written by
hand. :func:`write_records` writes a card's records, one EEE file each, for
the harness and for :func:`regenerate` alike.
"""

import json
import math
import os
from typing import Any, Mapping

from experiments.harness import jsonio
from jaxpapers import evalcards

ORGANIZATION = "jaxpapers"
# EEE 0.3.0 requires both axes in model_info.additional_details. Our run
# executed the method on our own machine: self-deployed. Whether its weights
# are available has no fitting answer: a run trains them from the open code
# and the recorded seeds, they are not released, and some methods have none.
OUR_MODEL_AXES = {"deployment_type": "self_deployed",
                  "model_availability": "unknown",
                  "weights": "not released; a run trains them from the open"
                             " code and the recorded seeds (some methods have"
                             " none)"}
# A paper's documented numbers do not say where or how the model was run.
PAPER_MODEL_AXES = {"deployment_type": "unknown",
                    "model_availability": "unknown"}
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
  details = {k: str(v) for k, v in model.items()}
  model_info = {"name": f"{experiment} (jaxpapers reproduction)",
                "id": f"jaxpapers/{experiment}",
                "additional_details": {**details, **OUR_MODEL_AXES}}
  ours, skipped, non_finite = [], [], []
  for r in run["results"]:
    if not _finite(r["score"]):
      skipped.append(f"{r['evaluation_name']} / {r['metric']}: {r['score']}")
      # None is a result the run did not reach (e.g. a loss never attained); a
      # NaN or an infinity is a number the computation broke.
      if r["score"] is not None:
        non_finite.append(skipped[-1])
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
        relationship="third_party",
        model_info={**model_info,
                    "additional_details": {**details, **PAPER_MODEL_AXES}},
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
                                       reproducibility_sources=("first_party",),
                                       non_finite=non_finite),
          "skipped_results": skipped}


def record_files(card: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
  """``(file name, record)`` for each EEE record of a card: ``<evaluation_id>.json``, ``/`` as ``_``."""
  return [(record["evaluation_id"].replace("/", "_") + ".json", record)
          for record in card["records"]]


def write_records(workdir: str, card: Mapping[str, Any]) -> list[str]:
  """Writes a card's records under ``<workdir>/eee/``, each file atomically; returns the paths."""
  directory = os.path.join(workdir, "eee")
  os.makedirs(directory, exist_ok=True)
  paths = []
  for name, record in record_files(card):
    path = os.path.join(directory, name)
    jsonio.write_json_atomic(path, record, indent=2, allow_nan=False)
    paths.append(path)
  return paths


def regenerate(workdir: str) -> list[str]:
  """Rebuilds a workdir's EEE records from its ``report.json`` with :func:`build`.

  The card that ``report.json`` embeds is replaced by the rebuilt one. The records keep the report's original ``retrieved_timestamp``, so the same
  report always gives the same files. Records under ``eee/`` that the card no
  longer names are removed; returns the paths written.

  Raises:
    FileNotFoundError: for a ``workdir`` without a ``report.json``.
  """
  path = os.path.join(workdir, "report.json")
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no report.json in {workdir!r} to regenerate"
                            " records from.")
  with open(path) as f:
    report = json.load(f)
  timestamp = report["evaluation_card"]["records"][0]["retrieved_timestamp"]
  card = build(report, timestamp)
  if card != report["evaluation_card"]:  # the report embeds the same records
    report["evaluation_card"] = card
    jsonio.write_json_atomic(path, report, indent=2)
  keep = {name for name, _ in record_files(card)}
  directory = os.path.join(workdir, "eee")
  if os.path.isdir(directory):
    for stale in sorted(set(os.listdir(directory)) - keep):
      if stale.endswith(".json"):
        os.remove(os.path.join(directory, stale))
  return write_records(workdir, card)


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
