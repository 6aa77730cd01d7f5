"""The DAF experiment: claim checks, summaries, validation and the smoke run."""

import numpy as np
import pytest

from experiments import daf
from experiments import harness
from jaxpapers import continual
from tests import binaries
from experiments.configs import daf as daf_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, daf_config.FIELDS, daf_config.validate)


def _method(per_run_aia):
  return {"per_run_aia": list(per_run_aia),
          "average_incremental_accuracy": float(np.mean(per_run_aia))}


def _checks(summary, cost=None):
  return {c["id"]: c for c in daf.evaluate_claim(summary, cost)}


def test_claim_checks_follow_the_paired_differences():
  base = [0.50, 0.60, 0.55]
  summary = {"uniform_merge": _method(base),
             "last_adapter": _method([0.52, 0.61, 0.56]),
             "two_coef": _method(np.add(base, [0.05, 0.04, 0.06])),
             "single_beta": _method(np.add(base, [0.05, -0.04, 0.0])),
             "per_layer": _method(np.add(base, [-0.01, 0.0, -0.02]))}
  checks = _checks(summary)
  assert checks["two_coef_beats_uniform_merge"]["passed"] is True
  assert checks["two_coef_beats_last_adapter"]["passed"] is True
  assert checks["single_beta_beats_uniform_merge"]["passed"] is None
  assert checks["per_layer_beats_uniform_merge"]["passed"] is False
  # A variant that is not run has no check.
  assert "two_coef_first_task_beats_uniform_merge" not in checks
  assert "+0.0500" in checks["two_coef_beats_uniform_merge"]["detail"]


def test_inference_cost_check_compares_fused_and_single():
  summary = {"uniform_merge": _method([0.5, 0.6])}
  same = {"parameters": 10, "peak_bytes": 100}
  cost = {"fused": same, "single": dict(same), "num_tasks": 5}
  assert _checks(summary, cost)["one_adapter_inference_cost"]["passed"] is True
  cost["fused"] = {"parameters": 50, "peak_bytes": 100}
  assert _checks(summary, cost)["one_adapter_inference_cost"]["passed"] is False


def test_aggregate_over_order_x_seed_runs():
  s = continual.sequence_metrics([
      {"seen_accuracy": 1.0, "task_accuracy": [1.0], "beta": 1.0,
       "alpha": 0.0, "num_clipped": 0},
      {"seen_accuracy": 0.7, "task_accuracy": [0.6, 0.8], "beta": 0.4,
       "alpha": 0.5, "num_clipped": 2}])
  assert np.isclose(s["average_incremental_accuracy"], 0.85)
  both = daf.aggregate([s, {**s, "average_incremental_accuracy": 0.95}])
  assert np.isclose(both["average_incremental_accuracy"], 0.9)
  assert np.isclose(both["average_incremental_accuracy_se"], 0.05)
  assert both["per_run_aia"] == [0.85, 0.95]
  assert both["beta"] == [1.0, 0.4] and both["beta_se"] == [0.0, 0.0]


def test_tasks_are_padded_to_whole_batches_of_their_classes():
  config = daf_config.get_config("smoke")
  data = daf.TaskData(config)
  position = continual.class_order(1, 10)
  rows = continual.TaskRows(data.x_train, position[data.original_train],
                            classes_per_task=2,
                            batch_size=config.training.batch_size)
  x, labels, weights = rows(2, 2)
  assert x.shape[0] == rows.task_size and rows.task_size % 16 == 0
  assert set(np.asarray(labels)) == {4, 5}
  expected = np.sum(np.isin(position[data.original_train], [4, 5]))
  assert float(np.sum(weights)) == expected
  np.testing.assert_allclose(np.asarray(data.x_train).mean(0), 0, atol=1e-4)


@pytest.mark.parametrize("field,value", [("methods", ("two_coef", "typo")),
                                         ("rho", -1.0),
                                         ("training.epochs", 0)])
def test_validate_rejects_configs_it_cannot_run(field, value):
  config = daf_config.get_config("smoke")
  _refuses(config)
  section, _, name = field.rpartition(".")
  (config[section] if section else config)[name] = value
  with pytest.raises(ValueError, match=name):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("daf", tmp_path)
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 2
  summary = run_data["summary"]
  assert set(summary) == set(daf_config.METHODS)
  assert np.allclose(summary["uniform_merge"]["beta"],
                     [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], rtol=1e-5)
  assert summary["two_coef"]["alpha"][0] == 0.0
  for method, s in summary.items():
    assert len(s["accuracy_curve"]) == 5, method
    assert 0 <= s["final_accuracy"] <= 1, method
  checks = {c["id"]: c for c in run_data["checks"]}
  assert set(checks) == {
      "single_beta_beats_uniform_merge", "two_coef_beats_uniform_merge",
      "per_layer_beats_uniform_merge",
      "two_coef_first_task_beats_uniform_merge",
      "two_coef_beats_last_adapter", "one_adapter_inference_cost"}
  assert checks["one_adapter_inference_cost"]["passed"] is True
  assert run_data["inference_cost"]["fused"]["parameters"] == 2 * 256 * 16
