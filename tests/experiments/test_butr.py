"""The BUTR binary: claim checks follow the numbers, config refusal, the smoke run."""

import numpy as np
import pytest

from experiments import butr
from experiments import harness
from tests import binaries
from experiments.configs import butr as butr_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, butr_config.FIELDS, butr_config.validate)


CHECK_IDS = ["budget_tracks_count", "closer_alignment_than_dq_detr",
             "sparse_recall_matches_fixed_900", "sparse_mean_k_about_half",
             "recall_at_matched_mean_k", "half_the_queries_of_dq_detr",
             "recall_matches_dq_detr"]


def _evaluation(butr_recall_drop):
  """Eight images: four sparse, four dense; BUTR loses recall on sparse ones."""
  counts = [2, 5, 20, 60, 150, 200, 300, 400]
  full = [1.0, 1.0, 0.95, 0.9, 0.9, 0.85, 0.8, 0.8]
  rule = lambda k, recall: {"k": list(k), "recall": list(recall)}
  butr_recall = [r - butr_recall_drop * (n <= 99) for r, n in zip(full, counts)]
  return {
      "counts": counts, "soft_counts": counts,
      butr.BUTR: rule([100, 100, 110, 150, 300, 350, 500, 650], butr_recall),
      "fixed_100": rule([100] * 8, [1.0, 0.9, 0.7, 0.5, 0.3, 0.2, 0.1, 0.1]),
      "fixed_300": rule([300] * 8, [1.0, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.5]),
      "fixed_900": rule([900] * 8, full),
      "dq_detr": rule([300, 300, 500, 500, 900, 900, 900, 900], full),
      butr.DQ_BATCH: rule([500] * 4 + [900] * 4, full),
  }


@pytest.mark.parametrize("drop,sparse_passes", [(0.0, True), (0.05, False)])
def test_claim_checks_follow_the_numbers(drop, sparse_passes):
  config = butr_config.get_config()
  evaluation = _evaluation(drop)
  summary = butr.summarize(evaluation, config)
  checks = {c["id"]: c["passed"]
            for c in butr.evaluate_claim(evaluation, summary, config)}
  assert list(checks) == CHECK_IDS
  assert checks["budget_tracks_count"] is True
  assert checks["closer_alignment_than_dq_detr"] is True
  assert checks["sparse_recall_matches_fixed_900"] is sparse_passes
  assert checks["sparse_mean_k_about_half"] is True  # 115 / 900
  assert checks["half_the_queries_of_dq_detr"] is True  # 282.5 / 700
  assert summary["rules"]["fixed_900"]["spearman"] is None
  np.testing.assert_allclose(summary["rules"][butr.BUTR]["mean_k"], 282.5)


def test_a_constant_budget_makes_the_rank_checks_inconclusive_not_a_crash():
  # A few images can give DQ-DETR's batch-max one bucket (Spearman undefined).
  config = butr_config.get_config()
  evaluation = _evaluation(0.0)
  evaluation[butr.DQ_BATCH]["k"] = [900] * 8
  summary = butr.summarize(evaluation, config)
  checks = {c["id"]: c for c in butr.evaluate_claim(evaluation, summary, config)}
  assert checks["closer_alignment_than_dq_detr"]["passed"] is None
  assert "n/a (constant K" in checks["closer_alignment_than_dq_detr"]["detail"]
  assert checks["budget_tracks_count"]["passed"] is True
  evaluation[butr.BUTR]["k"] = [300] * 8
  summary = butr.summarize(evaluation, config)
  checks = {c["id"]: c for c in butr.evaluate_claim(evaluation, summary, config)}
  assert checks["budget_tracks_count"]["passed"] is None


def test_bad_configs_are_refused_by_name():
  config = butr_config.get_config("smoke")
  config.data.chunk = 50
  with pytest.raises(ValueError, match="multiple of chunk"):
    _refuses(config)
  config = butr_config.get_config("smoke")
  config.butr.rate = 0.5
  with pytest.raises(ValueError, match="rate"):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("butr", tmp_path)
  run_data = report["run_data"]
  assert [c["id"] for c in run_data["checks"]] == CHECK_IDS
  rules = run_data["summary"]["rules"]
  # Fixed K = 900 selects a superset of the queries of every budget <= 900.
  assert all(rules["fixed_900"]["recall"] >= rules[name]["recall"] - 1e-9
             for name in (butr.BUTR, "fixed_100", "fixed_300", "oracle"))
  assert rules[butr.BUTR]["mean_k"] < rules["fixed_900"]["mean_k"]
  assert sorted(run_data["figures"]) == ["budget_vs_count.png",
                                         "recall_vs_budget.png"]
