"""The EoSS binary end to end: resume after SIGKILL, claims, the smoke run.

Config refusal, locks, damaged checkpoints and metrics: test_integrity.py.
"""

import pytest

from experiments import eoss
from experiments import harness
from tests import binaries
from experiments.configs import eoss as eoss_config

TINY = ["--config", "experiments/configs/eoss.py:smoke",
        "--config.num_steps=400", "--config.full_batch_num_steps=200"]


# A whole binary run end to end (minutes): in the slow suite, which CI runs too.
@pytest.mark.slow
def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
  # Step 150 is past the step-100 checkpoint.
  binaries.assert_resume_matches(
      "eoss", TINY, tmp_path, "lr0.25_b16_seed0.jsonl", 150)


def _summary(lr, b, bs, lam):
  return {"learning_rate": lr, "batch_size": b, "threshold": 2 / lr,
          "bs_median": bs, "lambda_max_median": lam, "diverged": False,
          "bs_over_threshold": bs * lr / 2, "lambda_max_over_threshold": lam * lr / 2}


class _Config:
  learning_rates = (0.5,)


@pytest.mark.parametrize(
    "lams,plateau_passes", [((1.0, 2.0, 3.0), True), ((1.0, 3.0, 2.0), False)])
def test_claim_checks_follow_the_numbers(lams, plateau_passes):
  summaries = [_summary(0.5, b, 4.0, lam) for b, lam in zip((8, 16, 32), lams)]
  summaries.append(_summary(0.5, 0, 4.0, 4.6))
  checks = {c["id"]: c["passed"] for c in eoss.evaluate_claim(summaries, _Config)}
  assert checks["lambda_max_grows_with_batch_eta0.5"] is plateau_passes
  assert checks["bs_at_threshold_eta0.5_b8"] is True
  assert checks["lambda_max_below_bs_eta0.5_b8"] is True
  assert checks["full_batch_gradient_curvature_eta0.5"] is True
  assert checks["full_batch_lambda_max_eta0.5"] is True
  summaries[0]["bs_over_threshold"] = 0.5
  summaries[-1]["lambda_max_over_threshold"] = 1.3
  checks = {c["id"]: c["passed"] for c in eoss.evaluate_claim(summaries, _Config)}
  assert checks["bs_at_threshold_eta0.5_b8"] is False
  assert checks["full_batch_lambda_max_eta0.5"] is False


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("eoss", tmp_path)
  run_data = report["run_data"]
  summaries = {(s["learning_rate"], s["batch_size"]): s
               for s in run_data["summaries"]}
  # Even the smoke run's full-batch GD sits at the edge of stability.
  assert 0.9 <= summaries[(0.25, 0)]["lambda_max_over_threshold"] <= 1.3
  assert [c["id"] for c in run_data["checks"]] == [
      "bs_at_threshold_eta0.25_b16", "lambda_max_below_bs_eta0.25_b16",
      "lambda_max_grows_with_batch_eta0.25",
      "full_batch_gradient_curvature_eta0.25", "full_batch_lambda_max_eta0.25"]
  assert report["model_metadata"]["num_params"] == 64 * 32 + 32 + 32 * 32 + 32 + 330


def test_a_batch_larger_than_the_data_is_refused_before_compute():
  config = eoss_config.get_config("smoke")
  harness.check_config(config, eoss_config.FIELDS, eoss_config.validate)
  config.batch_sizes = (16, 512)
  with pytest.raises(ValueError, match=r"batch_sizes=\(16, 512\) must not"
                     r" exceed data.num_examples=256"):
    harness.check_config(config, eoss_config.FIELDS, eoss_config.validate)
