"""The rollout-consistency binary: resume after SIGKILL, claim checks, smoke."""


import numpy as np
import pytest

from experiments import rollout
from experiments import testing
from experiments.configs import rollout as rollout_config

TINY = ["--config", "experiments/configs/rollout.py:smoke",
        "--config.datasets=('lorenz96',)", "--config.models=('mlp',)",
        "--config.seeds=(0,)", "--config.lams=(0.1,)", "--config.unroll_ks=()",
        "--config.lorenz96.num_samples=400", "--config.train.num_steps=100",
        "--config.log_every=25", "--config.checkpoint_every=50"]


def _run(workdir, *extra):
  return testing.run("rollout", [*TINY, *extra], workdir)


def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
  # Step 75 is past the step-50 checkpoint.
  straight, _ = testing.assert_resume_matches(
      "rollout", TINY, tmp_path, "lorenz96_mlp_penalty.jsonl", 75)
  # TF (lambda = 0) and the penalty run share init and batches, so they
  # differ only through the penalty, which they must.
  penalty_log = testing.read_metrics(straight)["lorenz96_mlp_penalty.jsonl"]
  tf_loss, jvp_loss = penalty_log[0]["task_loss"]
  assert tf_loss != jvp_loss
  assert penalty_log[0]["penalty"][1] > 0


def _summary(method, lam, mse_h1, mse_long, val=1.0):
  return {"method": method, "lam": lam, "val_mse": val, "test_mse_h1": mse_h1,
          "test_mse_h1_se": 0.01, "test_mse_h20": mse_long,
          "test_mse_h20_se": 0.1,
          "test_mse_longest_per_seed": [mse_long - 0.1, mse_long + 0.1]}


def test_lambda_is_chosen_on_validation_among_penalized_runs():
  summaries = [_summary("tf", 0.0, 1, 1, val=0.1),
               _summary("jvp0.01", 0.01, 1, 1, val=0.5),
               _summary("jvp1", 1.0, 1, 1, val=0.3),
               _summary("unroll4", 0.0, 1, 1, val=0.01)]
  assert rollout.select_lambda(summaries)["lam"] == 1.0


@pytest.mark.parametrize("jvp_long,jvp_h1,wins,similar", [
    (1.5, 0.10, True, True),   # better far out, same one-step error
    (2.5, 0.10, False, True),  # worse far out
    (1.5, 0.12, True, False),  # better far out, but 20% worse one step ahead
])
def test_claim_checks_follow_the_numbers(jvp_long, jvp_h1, wins, similar):
  settings = [{"dataset": "lorenz96", "model": "mlp", "longest": 20,
               "tf": _summary("tf", 0.0, 0.10, 2.0),
               "jvp": _summary("jvp1", 1.0, jvp_h1, jvp_long)}]
  checks = rollout.evaluate_claim(settings)
  assert [c["passed"] for c in checks] == [wins, wins, similar]
  assert "lambda=1, chosen on val" in checks[0]["name"]
  assert f"paired difference {jvp_long - 2.0:.3g} +- 0" in checks[0]["detail"]


def test_summaries_average_members_of_each_lambda_over_seeds():
  config = rollout_config.get_config("smoke")
  group = rollout.groups_for("sunspots", "mlp", config)[0]
  assert group.lams == (0.0, 0.0, 0.01, 0.01, 1.0, 1.0)
  assert group.seeds == (0, 1, 0, 1, 0, 1)  # paired with TF, seed by seed
  horizon = 22
  test_mse = np.arange(6 * horizon, dtype=np.float64).reshape(6, horizon)
  record = {"test_mse": test_mse, "test_mae": test_mse / 2,
            "val_mse": np.arange(6.0), "vpt": np.zeros(6)}
  task = rollout.Task("sunspots", "", 24, 1, (1, 11, 22), None, None, None)
  summaries = rollout.summarize(group, record, task)
  assert [s["method"] for s in summaries] == ["tf", "jvp0.01", "jvp1"]
  tf = summaries[0]
  assert tf["test_mse_h22"] == np.mean(test_mse[:2, 21])
  np.testing.assert_allclose(tf["test_mse_h22_se"],
                             np.std(test_mse[:2, 21], ddof=1) / np.sqrt(2))
  assert summaries[2]["val_mse"] == 4.5 and summaries[2]["num_seeds"] == 2
  assert summaries[1]["test_mse_longest_per_seed"] == [65.0, 87.0]


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = testing.run_smoke("rollout", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["error_vs_horizon.png", "lambda_sweep.png"]
  # 2 series x 2 models: one check each, plus the two overall checks.
  assert len(run_data["checks"]) == 6
  summaries = run_data["summaries"]
  assert {s["method"] for s in summaries} == {"tf", "jvp0.01", "jvp1",
                                              "unroll4"}
  for s in summaries:
    assert np.isfinite(s["test_mse_h1"])
    curve = s["mse_curve"]
    # Free-running error grows from one step ahead to the longest horizon
    # (sunspots' cycle makes the middle of the curve non-monotone).
    assert curve[0] < curve[-1]
