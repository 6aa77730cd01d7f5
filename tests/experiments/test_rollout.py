"""The rollout-consistency binary: resume after SIGKILL, claim checks, smoke."""

import os

import numpy as np
import pytest

from experiments import harness
from experiments import rollout
from tests import binaries
from experiments.configs import rollout as rollout_config
from jaxpapers import models


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, rollout_config.FIELDS, rollout_config.validate)


TINY = ["--config", "experiments/configs/rollout.py:smoke",
        "--config.datasets=('lorenz96',)", "--config.models=('mlp',)",
        "--config.seeds=(0,)", "--config.lams=(0.1,)", "--config.unroll_ks=()",
        "--config.lorenz96.num_samples=400", "--config.train.num_steps=100",
        "--config.log_every=25", "--config.checkpoint_every=50"]


def _run(workdir, *extra):
  return binaries.run("rollout", [*TINY, *extra], workdir)


# A whole binary run end to end: in the slow suite, which CI runs too. (Resume
# after a kill is the harness's, tested once on EoSS: tests/experiments/
# test_eoss.py and test_integrity.py.)
@pytest.mark.slow
def test_tiny_run_trains_both_members_and_evaluates_them(tmp_path):
  out = _run(tmp_path / "wd")
  assert out.returncode == 0, out.stderr[-3000:]
  straight = tmp_path / "wd"
  # TF (lambda = 0) and the penalty run share init and batches, so they
  # differ only through the penalty, which they must.
  penalty_log = binaries.read_metrics(straight)["lorenz96_mlp_penalty.jsonl"]
  tf_loss, jvp_loss = penalty_log[0]["task_loss"]
  assert tf_loss != jvp_loss
  assert penalty_log[0]["penalty"][1] > 0
  # The final record carries the evaluation of both members.
  assert len(penalty_log[-1]["test_mse"]) == 2


def test_steps_not_a_multiple_of_the_chunk_are_refused(tmp_path):
  config = rollout_config.get_config("smoke")
  config.checkpoint_every = 75
  with pytest.raises(ValueError, match="multiples of log_every"):
    _refuses(config)
  out = _run(tmp_path / "wd", "--config.train.num_steps=90")
  assert out.returncode != 0
  assert "multiples of log_every" in out.stderr
  assert not os.path.exists(tmp_path / "wd" / "metrics")


def _summary(method, lam, mse_h1, mse_long, val=1.0):
  return {"model": "mlp", "method": method, "lam": lam, "val_mse": val,
          "test_mse_h1": mse_h1,
          "test_mse_h1_se": 0.01, "test_mse_h20": mse_long,
          "test_mse_h20_se": 0.1,
          "test_mse_longest_per_seed": [mse_long - 0.1, mse_long + 0.1]}


def test_lambda_is_chosen_on_validation_among_penalized_runs():
  summaries = [_summary("tf", 0.0, 1, 1, val=0.1),
               _summary("jvp1", 1.0, 1, 1, val=0.3),
               _summary("jvp0.01", 0.01, 1, 1, val=0.5),
               _summary("unroll4", 0.0, 1, 1, val=0.01)]
  task = models.ForecastTask("", 8, 8, (1, 5, 10, 20), None, None, None)
  setting = rollout.setting_of("lorenz96", task, summaries)
  assert setting["jvp"]["lam"] == 1.0
  assert setting["tf"] is summaries[0] and setting["longest"] == 20
  assert [x["lam"] for x in setting["sweep"]] == [0.01, 1.0]
  assert [x["method"] for x in setting["headline"]] == ["tf", "jvp1", "unroll4"]
  assert setting["metrics"] == ["test_mse_h1", "test_mse_h5", "test_mse_h10",
                                "test_mse_h20", "vpt"]


@pytest.mark.parametrize("jvp_long,jvp_h1,wins,similar", [
    (1.5, 0.10, True, True),   # better far out, same one-step error
    (2.5, 0.10, False, True),  # worse far out
    (1.5, 0.12, True, False),  # better far out, but 20% worse one step ahead
])
def test_claim_checks_follow_the_numbers(jvp_long, jvp_h1, wins, similar):
  settings = [{"dataset": "lorenz96", "model": "mlp", "longest": 20,
               "tf": _summary("tf", 0.0, 0.10, 2.0),
               "jvp": _summary("jvp1", 1.0, jvp_h1, jvp_long)}]
  checks = {c["id"]: c for c in rollout.evaluate_claim(settings)}
  assert {i: c["passed"] for i, c in checks.items()} == {
      "jvp_beats_tf_lorenz96_mlp": wins, "jvp_beats_tf_in_majority": wins,
      "one_step_error_similar": similar}
  setting = checks["jvp_beats_tf_lorenz96_mlp"]
  assert "lambda=1, chosen on val" in setting["name"]
  assert f"paired difference {jvp_long - 2.0:.3g} +- 0" in setting["detail"]


def test_summaries_average_members_of_each_lambda_over_seeds():
  config = rollout_config.get_config("smoke")
  cell = rollout.grid_of(config)["sunspots_mlp_penalty"]
  group = cell[2]
  assert group.lams == (0.0, 0.0, 0.01, 0.01, 1.0, 1.0)
  assert group.seeds == (0, 1, 0, 1, 0, 1)  # paired with TF, seed by seed
  horizon = 22
  test_mse = np.arange(6 * horizon, dtype=np.float64).reshape(6, horizon)
  record = {"test_mse": test_mse, "test_mae": test_mse / 2,
            "val_mse": np.arange(6.0), "vpt": np.zeros(6)}
  task = models.ForecastTask("", 24, 1, (1, 11, 22), None, None, None)
  summaries = rollout.summarize(cell, record, task)
  assert [s["method"] for s in summaries] == ["tf", "jvp0.01", "jvp1"]
  tf = summaries[0]
  assert tf["test_mse_h22"] == np.mean(test_mse[:2, 21])
  np.testing.assert_allclose(tf["test_mse_h22_se"],
                             np.std(test_mse[:2, 21], ddof=1) / np.sqrt(2))
  assert summaries[2]["val_mse"] == 4.5 and summaries[2]["num_seeds"] == 2
  assert summaries[1]["test_mse_longest_per_seed"] == [65.0, 87.0]


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("rollout", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["error_vs_horizon.png", "lambda_sweep.png"]
  # 2 series x 2 models: one check each, plus the two overall checks.
  assert [c["id"] for c in run_data["checks"]] == [
      "jvp_beats_tf_sunspots_dlinear", "jvp_beats_tf_sunspots_mlp",
      "jvp_beats_tf_lorenz96_dlinear", "jvp_beats_tf_lorenz96_mlp",
      "jvp_beats_tf_in_majority", "one_step_error_similar"]
  assert "shared/papers" not in report["benchmark_metadata"]["paper"]["url"]
  units = {r["metric"]: r["unit"] for r in run_data["results"]}
  assert units["vpt"] == "steps" and units["test_mse_h22"] == "z-units^2"
  assert any(r["evaluation_name"] == "lorenz96/mlp/unroll4"
             and r["metric"] == "vpt" for r in run_data["results"])
  summaries = run_data["summaries"]
  assert {s["method"] for s in summaries} == {"tf", "jvp0.01", "jvp1",
                                              "unroll4"}
  for s in summaries:
    assert np.isfinite(s["test_mse_h1"])
    curve = s["mse_curve"]
    # Free-running error grows from one step ahead to the longest horizon
    # (sunspots' cycle makes the middle of the curve non-monotone).
    assert curve[0] < curve[-1]
