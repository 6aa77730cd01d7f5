"""The EMC experiment: claim checks, metrics, resume and the smoke run."""

import os
import shutil

import numpy as np
import pytest

from experiments import emc
from experiments import testing


def _method(ap, forgetting=0.0, seconds=1.0, peak=100.0):
  return {"average_performance": ap, "forgetting": forgetting,
          "seconds_per_domain": seconds, "peak_bytes": peak}


def test_claim_checks_follow_the_numbers():
  summary = {"csbm": {
      "frozen": _method(0.70), "direct": _method(0.75), "tent": _method(0.80),
      "gcal": _method(0.78, seconds=1.0, peak=100.0),
      "emc": _method(0.795, forgetting=0.01, seconds=0.1, peak=5.0)}}
  checks = {c["name"]: c["passed"] for c in emc.evaluate_claim(summary)}
  assert checks["csbm: EMC final AP >= tent - 0.01"]  # within the tolerance
  assert checks["csbm: EMC final AP >= direct - 0.01"]
  assert checks["csbm: EMC forgetting within +-0.02"]
  assert checks["csbm: EMC per-domain time cut vs GCAL-style >= 87.4% (paper)"]
  assert checks["csbm: EMC peak-memory cut vs GCAL-style >= 92.4% (paper)"]
  summary["csbm"]["emc"] = _method(0.78, forgetting=-0.05, seconds=0.2, peak=8.0)
  checks = {c["name"]: c["passed"] for c in emc.evaluate_claim(summary)}
  assert not checks["csbm: EMC final AP >= tent - 0.01"]
  assert checks["csbm: EMC final AP >= gcal - 0.01"]
  assert not checks["csbm: EMC forgetting within +-0.02"]
  assert not checks["csbm: EMC per-domain time cut vs GCAL-style >= 87.4% (paper)"]
  assert not checks["csbm: EMC peak-memory cut vs GCAL-style >= 92.4% (paper)"]


def test_summary_of_records():
  records = [{"step": 0, "row": [0.9]},
             {"step": 1, "row": [0.8, 0.6], "update_seconds": 0.1,
              "peak_bytes": 10, "temp_bytes": 4},
             {"step": 2, "row": [0.7, 0.65, 0.5], "update_seconds": 0.3,
              "peak_bytes": 12, "temp_bytes": 5}]
  s = emc.summarize(records)
  assert np.isnan(s["R"][0][1])
  assert s["diagonal"] == [0.9, 0.6, 0.5]
  assert np.isclose(s["average_performance"], (0.7 + 0.65 + 0.5) / 3)
  assert np.isclose(s["forgetting"], (0.2 - 0.05) / 2)
  assert np.isclose(s["seconds_per_domain"], 0.2)
  assert s["peak_bytes"] == 12
  both = emc.aggregate([s, {**s, "average_performance": s["average_performance"] + 0.1}])
  assert np.isclose(both["average_performance_se"], 0.05)


def _run(workdir, *extra):
  return testing.run(
      "emc", ["--config", "experiments/configs/emc.py:smoke", *extra], workdir)


def _rows(workdir):
  return {name: [r["row"] for r in records]
          for name, records in testing.read_metrics(workdir).items()}


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = testing.run_smoke("emc", tmp_path)
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 3
  for name in ("csbm", "digits"):
    summary = run_data["summary"][name]
    assert set(summary) == {"frozen", "tent", "gcal", "emc"}
    r = np.array(summary["emc"]["R"], dtype=float)
    assert r.shape == (4, 4) and np.all(np.isnan(r[np.triu_indices(4, 1)]))
    # The frozen model never changes, so its forgetting is exactly 0.
    assert summary["frozen"]["forgetting"] == 0.0
    assert summary["gcal"]["peak_bytes"] > summary["emc"]["peak_bytes"]
  assert len(run_data["checks"]) == 2 * 6


@pytest.mark.slow
def test_resumed_run_gives_the_same_numbers(tmp_path):
  """A run cut short (a truncated metrics file, a missing method) finishes identically."""
  extra = ("--config.sequences=('csbm',)", "--config.methods=('frozen','emc')")
  straight = tmp_path / "straight"
  assert _run(straight, *extra).returncode == 0
  resumed = tmp_path / "resumed"
  shutil.copytree(straight, resumed)
  os.remove(resumed / "report.json")
  os.remove(resumed / "metrics" / "csbm_seed0_frozen.jsonl")
  partial = resumed / "metrics" / "csbm_seed0_emc.jsonl"
  with open(partial) as f:
    lines = f.readlines()
  with open(partial, "w") as f:
    f.writelines(lines[:2])
  again = _run(resumed, *extra)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "source GCN" not in again.stderr  # restored from its checkpoint
  assert _rows(resumed) == _rows(straight)
