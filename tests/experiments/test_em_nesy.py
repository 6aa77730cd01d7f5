"""The EM-NeSy experiment: claim checks, summaries, config validation, the smoke run."""

import pytest

from experiments import em_nesy
from experiments import harness
from tests import binaries
from experiments.configs import em_nesy as em_nesy_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, em_nesy_config.FIELDS, em_nesy_config.validate)


def _run(sum_curve, digit=0.9, weight=1.0, log_z=(-2.0, -1.0)):
  return {"sum_curve": list(sum_curve), "log_z_curve": list(log_z),
          "sum_accuracy": sum_curve[-1], "digit_accuracy": digit,
          "final_weight": weight}


def _method(*per_seed):
  first = per_seed[0]
  return {**first, "per_seed": list(per_seed)}


def _spread(ratio, spread=0.05):
  return {"ratio": ratio, "low": ratio * (1 - spread),
          "high": ratio * (1 + spread), "rounds": 7}


def _costs(em_seconds, enum_seconds=(1e-4, 5e-3), ratio=(0.3, 0.35),
           memory=(1.0, 2.0), spread=0.05):
  chain = {str(n): {"em_exact_seconds": s, "semantic_seconds": 2 * s,
                    "ratio": sum(ratio) / 2, "low": ratio[0], "high": ratio[1],
                    "rounds": 7, "em_exact_peak_bytes": memory[0],
                    "semantic_peak_bytes": memory[1]}
           for n, s in em_seconds.items()}
  enum = {str(n): {"seconds": s, "peak_bytes": 1.0, "num_worlds": 100**n}
          for n, s in zip((1, 2), enum_seconds)}
  first, last = min(em_seconds), max(em_seconds)
  paired = {"em_per_digit": {"n": [first, last], **_spread(
      em_seconds[last] / last / (em_seconds[first] / first), spread)},
            "enumeration_2_over_1": _spread(
                enum_seconds[1] / enum_seconds[0], spread)}
  if {1, 2} <= set(em_seconds):
    paired["em_exact_2_over_1"] = _spread(em_seconds[2] / em_seconds[1],
                                          spread)
  return {"chain": chain, "enumeration": enum, "paired": paired,
          "load_average": 1.5, "cpu_count": 2}


def _checks(summary, costs):
  return {c["id"]: c for c in em_nesy.evaluate_claim(summary, costs)}


def test_claim_checks_follow_the_numbers():
  summary = {
      "1": {"em_exact": _method(_run([0.1, 0.8], digit=0.9)),
            "semantic": _method(_run([0.1, 0.805], digit=0.9)),
            "em_rejection": _method(_run([0.1, 0.79], digit=0.88))},
      "4": {"em_exact": _method(_run([0.0, 0.7], digit=0.9)),
            "em_hard": _method(_run([0.0, 0.6], digit=0.7)),
            "em_stochastic": _method(_run([0.0, 0.7], digit=0.89))},
      "15": {"em_exact": _method(_run([0.0, 0.3], digit=0.9)),
             "em_rejection": _method(_run([0.0, 0.0], digit=0.1,
                                          weight=0.0))}}
  costs = _costs({1: 1e-3, 2: 1.2e-3, 100: 5e-2})
  checks = _checks(summary, costs)
  assert checks["exact_em_equals_semantic_loss"]["passed"] is True
  assert checks["rejection_collapses_at_15"]["passed"] is True
  assert checks["rejection_works_at_1"]["passed"] is True
  assert checks["em_hard_trains_at_4"]["passed"] is False
  assert checks["em_stochastic_trains_at_4"]["passed"] is True
  assert checks["em_cost_flat_in_n"]["passed"] is True  # 0.5 ms/digit at 100
  assert checks["enumeration_explodes"]["passed"] is True  # x50 vs EM x1.2
  assert "em_faster_than_semantic_at_15" not in checks

  summary["1"]["semantic"] = _method(_run([0.1, 0.75]))
  summary["15"]["em_rejection"] = _method(_run([0.0, 0.0], digit=0.5,
                                               weight=0.0))
  costs = _costs({1: 1e-3, 2: 1e-2, 15: 0.1}, enum_seconds=(1e-3, 5e-3),
                 ratio=(0.9, 1.0), memory=(2.0, 2.0))
  checks = _checks(summary, costs)
  assert checks["exact_em_equals_semantic_loss"]["passed"] is False
  assert "0.0500 (N = 1)" in checks["exact_em_equals_semantic_loss"]["detail"]
  assert checks["rejection_collapses_at_15"]["passed"] is False
  assert checks["em_cost_flat_in_n"]["passed"] is False  # 6.7 vs 1 ms/digit
  assert checks["enumeration_explodes"]["passed"] is False
  assert checks["em_faster_than_semantic_at_15"]["passed"] is False
  assert checks["em_memory_vs_semantic_at_15"]["passed"] is False


def test_time_check_is_inconclusive_inside_the_spread():
  costs = _costs({1: 1e-3, 15: 1e-2}, ratio=(0.3, 0.5))
  check = _checks({}, costs)["em_faster_than_semantic_at_15"]
  # The detail shows the median and its 10-90% spread against the bound.
  assert check["passed"] is None and "(10-90%: 0.3-0.5, 7 rounds)" in check["detail"]


def test_every_time_check_uses_paired_rounds_and_is_machine_dependent():
  # Per digit: 15 ms / 15 over 1 ms = 1.0 x, spread +-60% straddles 1.5;
  # enumeration x10 +-60% straddles 10.
  costs = _costs({1: 1e-3, 2: 2e-3, 15: 1.5e-2}, enum_seconds=(1e-4, 1e-3),
                 ratio=(0.3, 0.5), spread=0.6)
  checks = _checks({}, costs)
  timed = ("em_cost_flat_in_n", "enumeration_explodes",
           "em_faster_than_semantic_at_15")
  for check_id in timed:
    assert checks[check_id]["passed"] is None, check_id
    assert "10-90%" in checks[check_id]["detail"], check_id
    assert checks[check_id]["machine_dependent"] is True
  assert "machine_dependent" not in checks["em_memory_vs_semantic_at_15"]
  # The same medians with a tight spread decide: flat passes, x10 >= 10.
  checks = _checks({}, _costs({1: 1e-3, 2: 2e-3, 15: 1.5e-2},
                              enum_seconds=(1e-4, 1.2e-3), spread=0.05))
  assert checks["em_cost_flat_in_n"]["passed"] is True
  assert checks["enumeration_explodes"]["passed"] is True


def test_summary_of_records():
  records = [{"step": 0, "sum_accuracy": 0.0, "digit_accuracy": 0.1}] + [
      {"step": i, "sum_accuracy": 0.1 * i, "digit_accuracy": 0.2 * i,
       "train_log_z": -1.0 / i, "train_weight": 1.0, "epoch_seconds": s,
       "peak_bytes": 100, "temp_bytes": 10}
      for i, s in ((1, 9.0), (2, 1.0), (3, 2.0))]
  s = em_nesy.summarize(records)
  assert s["sum_curve"] == [0.0, 0.1, 0.2, pytest.approx(0.3)]
  assert s["epoch_seconds"] == 1.5  # the first (compiling) epoch is left out
  assert s["digit_accuracy"] == pytest.approx(0.6)
  both = em_nesy.aggregate([s, {**s, "sum_accuracy": s["sum_accuracy"] + 0.2}])
  assert both["sum_accuracy"] == pytest.approx(0.4)
  assert both["sum_accuracy_se"] == pytest.approx(0.1)
  assert len(both["per_seed"]) == 2


@pytest.mark.parametrize("field,value", [
    ("methods", ("em_exact", "em_gibbs")), ("train_sums", 8), ("m_steps", 0),
    ("enumeration_num_digits", (1, 3))])
def test_validate_rejects_configs_it_cannot_run(field, value):
  config = em_nesy_config.get_config("smoke")
  _refuses(config)
  config[field] = value
  with pytest.raises(ValueError):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("em_nesy", tmp_path)
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 2
  summary = run_data["summary"]
  assert set(summary) == {"1", "15", "100"}
  assert set(summary["100"]) == {"em_exact"}
  # No sample of 256 ever adds up to a 15-digit sum at these accuracies.
  assert summary["15"]["em_rejection"]["final_weight"] == 0.0
  assert summary["1"]["em_rejection"]["final_weight"] > 0.5
  checks = {c["id"]: c for c in run_data["checks"]}
  assert set(checks) == {"exact_em_equals_semantic_loss",
                         "rejection_collapses_at_15", "rejection_works_at_1",
                         "em_cost_flat_in_n", "enumeration_explodes"}
  # The same init, batches and gradients (to float32 rounding).
  assert checks["exact_em_equals_semantic_loss"]["passed"] is True
  costs = run_data["costs"]
  assert set(costs["enumeration"]) == {"1", "2"}
  # Every time check reads paired rounds and is marked machine-dependent.
  assert set(costs["paired"]) == {"em_per_digit", "em_exact_2_over_1",
                                  "enumeration_2_over_1"}
  assert costs["paired"]["em_per_digit"]["rounds"] == 2
  assert all(checks[c]["machine_dependent"] for c in (
      "em_cost_flat_in_n", "enumeration_explodes"))
  assert (costs["enumeration"]["2"]["peak_bytes"]
          > 10 * costs["enumeration"]["1"]["peak_bytes"])
