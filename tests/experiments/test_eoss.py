"""The EoSS binary end to end: resume after SIGKILL, config locking, claims."""

import os

import pytest

from experiments import eoss
from experiments import testing

TINY = ["--config", "experiments/configs/eoss.py:smoke",
        "--config.num_steps=400", "--config.full_batch_num_steps=200"]


def _run(workdir, *extra):
  return testing.run("eoss", [*TINY, *extra], workdir)


def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
  # Step 150 is past the step-100 checkpoint.
  testing.assert_resume_matches(
      "eoss", TINY, tmp_path, "lr0.25_b16_seed0.jsonl", 150)


def test_mistyped_config_field_is_a_clear_error(tmp_path):
  out = _run(tmp_path / "wd", "--config.num_stepz=3")
  assert out.returncode != 0
  assert "num_stepz" in out.stderr
  assert not os.path.exists(tmp_path / "wd" / "metrics")


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
  checks = {c["name"]: c["passed"] for c in eoss.evaluate_claim(summaries, _Config)}
  assert checks["eta=0.5: lambda_max plateau grows with batch size"] is plateau_passes
  assert checks["eta=0.5 b=8: median BS in [0.75, 1.15]x2/eta"]
  assert checks["eta=0.5 b=8: lambda_max < BS"]
  assert checks["eta=0.5 full batch: curvature along the gradient = 2/eta within 5%"]
  assert checks["eta=0.5 full batch: lambda_max at or just above 2/eta ([0.95, 1.25]x)"]
  summaries[0]["bs_over_threshold"] = 0.5
  checks = {c["name"]: c["passed"] for c in eoss.evaluate_claim(summaries, _Config)}
  assert not checks["eta=0.5 b=8: median BS in [0.75, 1.15]x2/eta"]


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = testing.run_smoke("eoss", tmp_path)
  run_data = report["run_data"]
  summaries = {(s["learning_rate"], s["batch_size"]): s
               for s in run_data["summaries"]}
  # Even the smoke run's full-batch GD sits at the edge of stability.
  assert 0.9 <= summaries[(0.25, 0)]["lambda_max_over_threshold"] <= 1.3
  assert len(run_data["checks"]) == 5
  assert report["model_metadata"]["num_params"] == 64 * 32 + 32 + 32 * 32 + 32 + 330
