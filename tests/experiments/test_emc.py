"""The EMC experiment: claim checks, summaries, resume and the smoke run."""

import json
import os

import numpy as np
import pytest

from experiments import emc
from experiments import harness
from jaxpapers.graph import _tta as tta
from tests import binaries
from experiments.configs import emc as emc_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, emc_config.FIELDS, emc_config.validate)


def _method(ap, forgetting=0.0, peak=100.0):
  return {"average_performance": ap, "forgetting": forgetting,
          "forgetting_se": 0.001, "peak_bytes": peak}


class _Sweep:
  """The sweep's paired differences over seeds, of one seed: no s.e."""

  def __init__(self, summary):
    self.summary = summary

  def paired(self, metric, cell, baseline):
    (name, ours), theirs = cell.split("/"), baseline.split("/")[1]
    return (self.summary[name][ours][metric]
            - self.summary[name][theirs][metric], None)


def _ratio(low, high):
  return {"ratio": (low + high) / 2, "low": low, "high": high, "rounds": 9,
          "seconds_per_domain": {"emc": 0.001, "gcal": 0.01}}


def _checks(summary, time_ratio):
  return {c["id"]: c for c in emc.sequence_checks("csbm", summary["csbm"],
                                                 time_ratio, _Sweep(summary))}


def test_claim_checks_follow_the_numbers():
  summary = {"csbm": {
      "frozen": _method(0.70), "direct": _method(0.75), "tent": _method(0.80),
      "gcal": _method(0.78, peak=100.0),
      "emc": _method(0.795, forgetting=0.01, peak=5.0)}}
  checks = _checks(summary, _ratio(0.08, 0.12))
  assert checks["csbm_ap_vs_tent"]["passed"] is True  # within the tolerance
  assert checks["csbm_ap_vs_direct"]["passed"] is True
  assert checks["csbm_forgetting_near_zero"]["passed"] is True
  assert checks["csbm_time_cut_vs_gcal"]["passed"] is True
  assert checks["csbm_memory_cut_vs_gcal"]["passed"] is True
  summary["csbm"]["emc"] = _method(0.78, forgetting=-0.05, peak=8.0)
  checks = _checks(summary, _ratio(0.15, 0.2))
  assert checks["csbm_ap_vs_tent"]["passed"] is False
  assert checks["csbm_ap_vs_gcal"]["passed"] is True
  assert checks["csbm_forgetting_near_zero"]["passed"] is False
  assert checks["csbm_time_cut_vs_gcal"]["passed"] is False
  assert checks["csbm_memory_cut_vs_gcal"]["passed"] is False


def test_checks_carry_the_number_their_verdict_compares():
  summary = {"csbm": {"tent": _method(0.80), "gcal": _method(0.78, peak=100.0),
                      "emc": _method(0.78, forgetting=-0.05, peak=8.0)}}
  checks = _checks(summary, _ratio(0.08, 0.12))
  ap = checks["csbm_ap_vs_tent"]["measure"]
  assert ap["value"] == pytest.approx(-0.02) and ap["bound"] == -emc.ACCURACY_TOLERANCE
  assert ap["higher_is_better"] is True
  forgetting = checks["csbm_forgetting_near_zero"]["measure"]
  assert forgetting["value"] == 0.05 and forgetting["se"] == 0.001
  assert forgetting["higher_is_better"] is False
  memory = checks["csbm_memory_cut_vs_gcal"]["measure"]
  assert memory["value"] == 0.08 and memory["bound"] == pytest.approx(1 - 0.924)
  assert memory["higher_is_better"] is False


def test_time_check_is_inconclusive_when_the_bound_is_inside_the_spread():
  summary = {"csbm": {"gcal": _method(0.78), "emc": _method(0.79)}}
  # The bound 1 - 0.874 = 0.126 lies between the 10% and 90% quantiles.
  check = _checks(summary, _ratio(0.11, 0.14))["csbm_time_cut_vs_gcal"]
  assert check["passed"] is None
  # The detail shows the spread the verdict rests on, and the bound.
  assert "10-90%: 0.11-0.14, 9 rounds" in check["detail"]
  assert "vs bound <= 0.126" in check["detail"]
  # Decided by wall-clock timings: the report marks it; memory is compiled.
  checks = _checks(summary, {**_ratio(0.11, 0.14), "load_average": 3.25,
                             "cpu_count": 2})
  assert checks["csbm_time_cut_vs_gcal"]["machine_dependent"] is True
  assert "machine_dependent" not in checks["csbm_memory_cut_vs_gcal"]


def test_a_resumed_run_reuses_the_timings_it_measured(tmp_path):
  config = emc_config.get_config("smoke")
  measured = {**_ratio(0.05, 0.07), "load_average": 0.5, "cpu_count": 2}
  first = harness.Workdir(str(tmp_path / "wd"), config, "emc")
  for name in config.sequences:
    first.stage(f"sweep/{name}_time_ratio", lambda: measured)
  first.close()  # killed after the timing runs
  resumed = harness.Workdir(str(tmp_path / "wd"), config, "emc")
  try:
    # No domains, methods or models: timing again would fail.
    again = emc.measure_time_ratios(
        resumed, config, dict.fromkeys(config.sequences))
  finally:
    resumed.close()
  assert again == dict.fromkeys(config.sequences, measured)


def test_aggregate_over_seeds():
  r = np.array([[0.9, np.nan, np.nan], [0.8, 0.6, np.nan],
                [0.7, 0.65, 0.5]])
  s = {"R": r.tolist(), **tta.continual_metrics(r),
       "seconds_per_domain": 0.2, "peak_bytes": 12.0, "temp_bytes": 5.0}
  assert s["diagonal"] == [0.9, 0.6, 0.5]
  assert np.isclose(s["average_performance"], (0.7 + 0.65 + 0.5) / 3)
  assert np.isclose(s["forgetting"], (0.2 - 0.05) / 2)
  both = emc.aggregate(
      [s, {**s, "average_performance": s["average_performance"] + 0.1,
           "ap_curve": [a + 0.2 for a in s["ap_curve"]]}])
  assert np.isclose(both["average_performance_se"], 0.05)
  assert np.allclose(both["ap_curve"], np.asarray(s["ap_curve"]) + 0.1)
  assert np.allclose(both["ap_curve_se"], 0.1)
  assert np.isnan(both["R"][0][1]) and both["R"][2] == [0.7, 0.65, 0.5]
  assert "R_se" not in both and both["peak_bytes"] == 12.0


@pytest.mark.parametrize("field,value", [("methods", ("emc", "emc_typo")),
                                         ("sequences", ("cora",)),
                                         ("timing_rounds", 0)])
def test_validate_rejects_configs_it_cannot_run(field, value):
  config = emc_config.get_config("smoke")
  _refuses(config)
  config[field] = value
  with pytest.raises(ValueError, match=field):
    _refuses(config)


def _stage(workdir, name):
  with open(os.path.join(workdir, "stages", f"{name}.json")) as f:
    return json.load(f)["value"]


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("emc", tmp_path)
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
    ratio = run_data["time_ratio"][name]
    assert ratio["rounds"] == 9 and ratio["low"] <= ratio["ratio"] <= ratio["high"]
  checks = {c["id"]: c for c in run_data["checks"]}
  assert len(checks) == 2 * 6
  # The smoke run's footprints are deterministic: EMC's cut is 87.4%, short
  # of the paper's 92.4%.
  assert checks["csbm_memory_cut_vs_gcal"]["passed"] is False


