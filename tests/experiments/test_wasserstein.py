"""The dynamic W_p matching experiment: summaries, checks, config, smoke run."""

import numpy as np
import pytest

from experiments import harness
from tests import binaries
from experiments import wasserstein
from experiments.configs import wasserstein as wasserstein_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, wasserstein_config.FIELDS,
                       wasserstein_config.validate)


def _config(**overrides):
  config = wasserstein_config.get_config("smoke")
  for key, value in overrides.items():
    config[key] = value
  return config


def _stream(opt, greedy, tree, update=1e-6, hungarian=1e-2):
  """A replay (``matching.Replay._asdict()``) of one p, len(opt) checkpoints."""
  return {"opt": [[o] for o in opt], "greedy": [[g] for g in greedy],
          "tree": [[t] for t in tree],
          "update_seconds": [[update] * len(greedy[0])] * len(opt),
          "hungarian_seconds": [[hungarian]] * len(opt),
          "matches_rebuild": [True] * len(greedy[0]),
          "rebuild_seconds": [1e-3] * len(greedy[0])}


def test_summary_averages_each_shift_over_checkpoints_then_over_shifts():
  stream = _stream([1.0, 2.0], [[1.5, 2.0], [3.0, 2.0]],
                   [[10.0, 20.0], [20.0, 30.0]])
  s = wasserstein.summarize(stream, 0)
  # Shift 0: (1.5 + 1.5) / 2, shift 1: (2 + 1) / 2.
  assert np.isclose(s["greedy_over_opt"], 1.5 / 2 + 0.75)
  assert np.isclose(s["greedy_over_opt_se"], 0.0)
  assert np.isclose(s["tree_over_opt"], (10 + 10 + 20 + 15) / 4)
  assert s["bound_violations"] == 0 and s["num_comparisons"] == 4
  bad = wasserstein.summarize(_stream([2.0], [[1.0, 3.0]], [[5.0, 2.0]]), 0)
  assert bad["bound_violations"] == 2  # greedy < OPT, then greedy > W_T


def test_claim_checks_follow_the_numbers():
  config = _config(dims=(2, 8), sizes=(64,), ps=(1,),
                   distributions=("uniform",))
  streams = {("uniform", 2, 64): _stream([1.0], [[1.5]], [[9.0]]),
             ("uniform", 8, 64): _stream([1.0], [[3.0]], [[9.0]])}
  summary = {(*k, 1): wasserstein.summarize(s, 0) for k, s in streams.items()}
  checks = {c["id"]: c for c in wasserstein.evaluate_claim(config, summary,
                                                           streams)}
  assert checks["bound_holds"]["passed"] is True
  assert checks["matches_rebuild"]["passed"] is True
  assert checks["greedy_ratio_at_most_linear_in_d"]["passed"] is True
  assert checks["greedy_ratio_2d_as_earlier_check"]["passed"] is True
  assert checks["update_speedup_vs_hungarian"]["passed"] is True  # 10^4 x
  assert checks["update_speedup_vs_hungarian"]["machine_dependent"] is True
  assert "machine_dependent" not in checks["bound_holds"]
  measure = checks["update_speedup_vs_hungarian"]["measure"]
  assert measure["bound"] == wasserstein.SPEEDUP_GOAL
  assert measure["higher_is_better"] is True and measure["value"] > 1000
  streams[("uniform", 8, 64)] = _stream([1.0], [[7.0]], [[6.0]], update=1e-4)
  streams[("uniform", 8, 64)]["matches_rebuild"] = [False]
  summary = {(*k, 1): wasserstein.summarize(s, 0) for k, s in streams.items()}
  checks = {c["id"]: c for c in wasserstein.evaluate_claim(config, summary,
                                                           streams)}
  assert checks["bound_holds"]["passed"] is False
  assert checks["matches_rebuild"]["passed"] is False
  assert checks["greedy_ratio_at_most_linear_in_d"]["passed"] is False  # 4.7
  # Speedups 10^4 and 100: the 10% quantile of the ratios (1.1e-3) is
  # already above the bound 1e-3.
  assert checks["update_speedup_vs_hungarian"]["passed"] is False


def test_the_speedup_check_is_judged_at_speedup_size():
  config = _config(dims=(2,), sizes=(64, 128), ps=(1,),
                   distributions=("uniform",))
  streams = {("uniform", 2, 64): _stream([1.0], [[1.5]], [[9.0]], update=1e-4),
             ("uniform", 2, 128): _stream([1.0], [[1.5]], [[9.0]])}
  summary = {(*k, 1): wasserstein.summarize(s, 0) for k, s in streams.items()}
  largest = {c["id"]: c for c in wasserstein.evaluate_claim(config, summary,
                                                            streams)}
  config.speedup_size = 64
  at_64 = {c["id"]: c for c in wasserstein.evaluate_claim(config, summary,
                                                          streams)}
  assert largest["update_speedup_vs_hungarian"]["passed"] is True
  assert at_64["update_speedup_vs_hungarian"]["passed"] is False
  assert at_64["update_speedup_vs_hungarian"]["name"].startswith("n = 64:")


@pytest.mark.parametrize("field,value", [
    ("distributions", ("gaussian",)), ("checkpoint_every", 30),
    ("num_ops", 1100), ("sizes", (1, 64)), ("speedup_size", 100)])
def test_validate_rejects_configs_it_cannot_run(field, value):
  config = _config()
  _refuses(config)
  config[field] = value
  with pytest.raises(ValueError, match=field):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("wasserstein", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["ratios.png", "update_vs_recompute.png"]
  checks = {c["id"]: c for c in run_data["checks"]}
  assert set(checks) == {
      "bound_holds", "matches_rebuild", "greedy_ratio_at_most_linear_in_d",
      "greedy_ratio_2d_as_earlier_check", "update_speedup_vs_hungarian"}
  # Deterministic parts of the run: the bound and the rebuild always hold.
  assert checks["bound_holds"]["passed"] is True
  assert checks["matches_rebuild"]["passed"] is True
  assert "8/8 streams equal" in checks["matches_rebuild"]["detail"]
  summary = run_data["summary"]
  assert len(summary) == 2 * 2 * 2 * 2  # distributions x dims x sizes x ps
  for s in summary.values():
    assert 1.0 <= s["greedy_over_opt"] <= s["tree_over_opt"]
    assert s["bound_violations"] == 0 and s["num_comparisons"] == 2 * 2
