"""The routing experiment: claim checks, summaries, config validation and the smoke run."""

import numpy as np
import pytest

from experiments import harness
from experiments import routing
from tests import binaries
from experiments.configs import routing as routing_config
from jaxpapers.routing import _lehd as lehd


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, routing_config.FIELDS, routing_config.validate)


def _model(gap, se, width, layers, gflops, curve):
  return {"greedy_gap": gap, "greedy_gap_se": se, "width": width,
          "layers": layers, "encoder_layers": 0, "parameters": 12 * width ** 2 * layers,
          "train_gflops": gflops, "curve_gap": curve,
          "curve_gflops": list(np.linspace(gflops / 4, gflops, len(curve))),
          "instances_seen": [1000 * (k + 1) for k in range(len(curve))]}


def _summary(deep_gap, wide_gap, se=0.1):
  return {"D64xL1": _model(5.0, se, 64, 1, 10.0, [20.0, 10.0, 5.0]),
          "D64xL4": _model(deep_gap, se, 64, 4, 40.0,
                           [deep_gap + 6, deep_gap + 3, deep_gap]),
          "D96xL2": _model(wide_gap, se, 96, 2, 45.0,
                           [wide_gap + 6, wide_gap + 3, wide_gap])}


BASELINES = {"nearest_neighbour": 10.0, "two_opt": 0.5}
PAIRS = (("D64xL4", "D96xL2"),)


def _checks(summary, pairs=PAIRS):
  return {c["id"]: c
          for c in routing.evaluate_claim(summary, BASELINES, pairs, 64)}


def test_claim_checks_follow_the_numbers():
  checks = _checks(_summary(deep_gap=3.0, wide_gap=4.0))
  for check_id in ("params_D64xL4_vs_D96xL2", "compute_D64xL4_vs_D96xL2",
                   "data_D64xL4_vs_D96xL2", "deeper_is_better",
                   "beats_nearest_neighbour"):
    assert checks[check_id]["passed"] is True, checks[check_id]
  checks = _checks(_summary(deep_gap=4.0, wide_gap=3.0))
  assert checks["params_D64xL4_vs_D96xL2"]["passed"] is False
  assert checks["data_D64xL4_vs_D96xL2"]["passed"] is False
  # At the deep model's 40 GFLOP (the smaller budget) the wide curve,
  # log-interpolated between 6.0% at 28.1 and 3.0% at 45 GFLOP, is at 3.75%.
  assert checks["compute_D64xL4_vs_D96xL2"]["passed"] is False
  assert checks["deeper_is_better"]["passed"] is True  # 5.0 > 4.0


def test_pairs_compare_the_deeper_model_whichever_comes_first():
  summary = _summary(deep_gap=3.0, wide_gap=4.0)
  summary["D48xL2"] = _model(4.5, 0.1, 48, 2, 12.0, [21.0, 11.0, 4.5])
  # D48xL2 (L = 2) is the deeper of this pair: it is compared as "deep".
  checks = _checks(summary, (("D64xL1", "D48xL2"),))
  assert checks["params_D48xL2_vs_D64xL1"]["passed"] is True  # 4.5 < 5.0
  # The wide D64xL1 used fewer FLOPs (10 vs 12): both are compared at 10,
  # where the deep curve (3, 7.5 and 12 GFLOP) is at 11 - 6.5 * log(10/7.5)
  # / log(12/7.5) = 7.0%, above 5.0%.
  compute = checks["compute_D48xL2_vs_D64xL1"]
  assert compute["passed"] is False and "at 10.0 GFLOP" in compute["detail"]
  assert "params_D64xL1_vs_D48xL2" not in checks


def test_parameter_check_is_inconclusive_within_two_standard_errors():
  # The difference's s.e. is hypot(0.2, 0.2) = 0.28 pp: 0.40 pp clears one
  # s.e. but not two.
  check = _checks(_summary(deep_gap=3.6, wide_gap=4.0, se=0.2))[
      "params_D64xL4_vs_D96xL2"]
  assert check["passed"] is None
  assert "+0.40 pp" in check["detail"] and "s.e. 0.28 pp" in check["detail"]


def test_summary_averages_seeds():
  config = lehd.HeavyDecoderConfig(width=16, decoder_layers=2)
  records = [[{"greedy_gap": g, "instances_seen": 256 * s,
               "train_gflops": 0.5 * s} for s, g in ((20, 9.0), (40, 5.0))],
             [{"greedy_gap": g, "instances_seen": 256 * s,
               "train_gflops": 0.5 * s} for s, g in ((20, 11.0), (40, 7.0))]]
  s = routing.summarize(records, config, num_params=1234)
  assert s["greedy_gap"] == 6.0 and s["greedy_gap_se"] == pytest.approx(1.0)
  assert s["curve_gap"] == [10.0, 6.0]
  assert s["decoder_parameters"] == 2 * (12 * 256 + 9 * 16 + 2)
  assert s["train_gflops"] == 20.0 and s["instances_seen"] == [5120, 10240]


def test_grid_names_the_spec_series():
  config = routing_config.get_config()
  assert set(routing_config.model_grid(config)) == {
      "D64xL1", "D64xL2", "D64xL4", "D48xL2", "D96xL2"}
  full = routing_config.get_config("full")
  assert {"D64xL8", "D128xL2", "LEHD"} <= set(routing_config.model_grid(full))
  assert routing_config.model_grid(full)["LEHD"].encoder_layers == 1
  with pytest.raises(ValueError, match="unknown config argument"):
    routing_config.get_config("fast")


@pytest.mark.parametrize("field,value,match", [
    ("matched_pairs", (("D64xL1", "D40xL2"),), "D40xL2"),
    ("eval_blocks", (2, 1), "eval_blocks"),
    ("num_cities", 3, "num_cities"),
    ("matched_pairs", (("D32xL2", "D16xL2"),), "equal depths")])
def test_validate_rejects_configs_it_cannot_run(field, value, match):
  config = routing_config.get_config("smoke")
  _refuses(config)
  config[field] = value
  with pytest.raises(ValueError, match=match):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("routing", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["gap_scaling.png"]
  checks = {c["id"]: c for c in run_data["checks"]}
  # D16xL2 is the deeper model of the smoke run's pair.
  assert set(checks) == {"params_D16xL2_vs_D32xL1", "compute_D16xL2_vs_D32xL1",
                         "data_D16xL2_vs_D32xL1", "deeper_is_better",
                         "beats_nearest_neighbour"}
  summary = run_data["summary"]
  assert set(summary) == {"D32xL1", "D32xL2", "D16xL2"}
  for s in summary.values():
    assert len(s["curve_gap"]) == 2 and s["greedy_gap"] > 0
    assert s["instances_seen"] == [640, 1920]
    assert 0 < s["curve_gflops"][0] < s["curve_gflops"][1]
  # Exact Held-Karp labels: 2-opt and nearest neighbour are above optimal.
  baselines = run_data["baselines"]
  assert 0 <= baselines["two_opt"] < baselines["nearest_neighbour"]
