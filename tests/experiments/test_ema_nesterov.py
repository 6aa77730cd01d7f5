"""The EMA-Nesterov LM experiment: resume, divergence, config checks, claims."""

import math

import jax.numpy as jnp
import pytest

from experiments import ema_nesterov
from experiments import harness
from jaxpapers import models
from jaxpapers.models import _language_model as language_model
from tests import binaries
from experiments.configs import ema_nesterov as ema_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, ema_config.FIELDS, ema_config.validate)


def _tiny_config():
  config = ema_config.get_config("smoke")
  config.model.update(d_model=16, num_heads=2, d_ff=32, length=16)
  config.batch_size = 4
  config.data.valid_windows = 8
  config.num_steps = 20
  config.eval_every = 5
  config.checkpoint_every = 10
  return config


def _tiny_data(config):
  corpus = models.load_corpus(source_files=2, valid_fraction=0.2)
  return corpus.arrays(8, config.model.length)


def _train(path, config, data):
  workdir = harness.Workdir(str(path), config, "ema_nesterov")
  try:
    return ema_nesterov.train_run(config, workdir, data, harness.Run(
        "adamw+ema", ("adamw+ema", 0.7, 0.5), seed=1))
  finally:
    workdir.close()


class _Crash(Exception):
  pass


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
@pytest.mark.usefixtures("standard_dtype_promotion")  # optax.adamw
def test_a_diverged_run_stops_and_is_not_continued(tmp_path, monkeypatch):
  config = _tiny_config()
  data = _tiny_data(config)
  mean_loss = language_model.mean_loss
  calls = []

  def nan_from_step_10(*args, **kwargs):
    calls.append(1)
    loss = mean_loss(*args, **kwargs)
    return loss * jnp.nan if len(calls) > 4 else loss  # two calls per step

  # models.LMTrainer.validate calls the module's mean_loss.
  monkeypatch.setattr(language_model, "mean_loss", nan_from_step_10)
  records = _train(tmp_path / "wd", config, data)
  assert [r["step"] for r in records] == [0, 5, 10]
  assert math.isnan(records[-1]["valid_bpb"])
  num_calls = len(calls)
  assert _train(tmp_path / "wd", config, data) == records
  assert len(calls) == num_calls  # the rerun returned the stopped run as is


def test_validate_rejects_evaluations_off_the_checkpoints():
  for arg in (None, "smoke"):
    _refuses(ema_config.get_config(arg))
  config = ema_config.get_config("smoke")
  config.checkpoint_every = 15
  with pytest.raises(ValueError, match="checkpoint_every=15"):
    _refuses(config)
  config = ema_config.get_config("smoke")
  config.data.valid_windows = 12
  with pytest.raises(ValueError, match="valid_windows=12"):
    _refuses(config)


def test_invalid_config_is_refused_before_anything_is_written(tmp_path):
  out = binaries.run("ema_nesterov", [
      "--config", "experiments/configs/ema_nesterov.py:smoke",
      "--config.num_steps=45"], tmp_path / "wd")
  assert out.returncode == 2
  assert "num_steps=45 must be a multiple of eval_every=10" in out.stderr
  assert not (tmp_path / "wd").exists()


def _records(finals, steps=(0, 50, 100)):
  """Curves (one per seed) that fall linearly from 4 bpb to each final value."""
  return [[{"step": s, "valid_bpb": 4 + (f - 4) * s / steps[-1],
            "valid_bpb_at_gradient_point": f} for s in steps] for f in finals]


def _summary(ema_final):
  by_method = {
      "adamw": _records([2.0, 2.0]), "adamw+ema": _records([ema_final] * 2),
      "muon": _records([1.8, 1.8]), "muon+ema": _records([1.7, 1.7]),
      "lookahead": _records([2.2, 2.2]), "schedule_free": _records([1.95, 1.95]),
  }
  return ema_nesterov.summarize(by_method)


_GRID = [{"beta": 0.5, "gamma": 0.0, "final_bpb": 2.0},
         {"beta": 0.5, "gamma": 0.9, "final_bpb": 1.9}]


@pytest.mark.parametrize("ema_final,passes", [(1.9, True), (2.1, False)])
def test_claim_checks_follow_the_numbers(ema_final, passes):
  summary, grid = _summary(ema_final), _GRID
  checks = {c["id"]: c["passed"]
            for c in ema_nesterov.evaluate_claim(summary, grid, 2)}
  assert checks["adamw_ema_lowers_final_loss"] is passes
  assert checks["adamw_ema_fewer_steps"] is passes
  assert checks["adamw_ema_beats_schedule_free"] is passes
  assert checks["muon_ema_lowers_final_loss"] is True
  assert checks["muon_ema_fewer_steps"] is True
  assert checks["adamw_ema_beats_lookahead"] is True
  assert checks["grid_long_horizon_beats_gamma0"] is True
  # Linear curves from 4 to 1.7 reach muon's final 1.8 at 100 * 2.2 / 2.3.
  assert summary["muon+ema"]["steps_ratio"] == pytest.approx(2.2 / 2.3)
  assert summary["adamw+ema"]["final_minus_reference"] == pytest.approx(
      ema_final - 2.0)
  assert summary["lookahead"]["reached_in"] == 0


def test_the_failing_checks_carry_their_measure_and_a_one_sided_grid_is_inconclusive():
  # A study fixes phase 2's cell with a grid of gamma > 0 only: no gamma = 0 to compare.
  checks = {c["id"]: c for c in ema_nesterov.evaluate_claim(_summary(2.1), _GRID[1:], 2)}
  assert checks["grid_long_horizon_beats_gamma0"]["passed"] is None
  gap = checks["adamw_ema_lowers_final_loss"]["measure"]
  assert gap["value"] == pytest.approx(0.1) and gap["bound"] == 0.0
  assert not gap["higher_is_better"] and checks["adamw_ema_lowers_final_loss"]["passed"] is False
  ratio = checks["muon_ema_fewer_steps"]["measure"]
  assert ratio["value"] == pytest.approx(2.2 / 2.3) and ratio["bound"] == 1.0


def test_paper_numbers_are_compared_with_our_muon_steps_ratio():
  rows = ema_nesterov.result_rows(_summary(1.9), _GRID, 2.0, 2)
  ours = {(r["evaluation_name"], r["metric"]): r for r in rows}
  numbers = [p for p in ema_nesterov.PAPER_RESULTS if "score" in p]
  # modded-nanogpt records #39 and #40: Muon's steps with / without it.
  assert [p["score"] for p in numbers] == [3125 / 3325, 2890 / 2930]
  for paper in numbers:
    row = ours[(paper["evaluation_name"], paper["metric"])]
    assert row["metric"] == "steps to muon's final loss / muon's"
    assert row["unit"] == paper["unit"] == "ratio"
    assert "Not our byte-level CPU scale" in paper["statement"]
  # The harness gives a row without a unit its metric's from UNITS.
  assert {r.get("unit", ema_nesterov.UNITS.get(r["metric"])) for r in rows
          if r["metric"] == "final valid bpb"} == {"bits/byte"}


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("ema_nesterov", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["valid_loss_vs_step.png", "grid_beta_gamma.png"]
  assert {c["id"] for c in run_data["checks"]} == {
      "adamw_ema_lowers_final_loss", "adamw_ema_fewer_steps",
      "muon_ema_lowers_final_loss", "muon_ema_fewer_steps",
      "adamw_ema_beats_lookahead", "adamw_ema_beats_schedule_free",
      "grid_long_horizon_beats_gamma0"}
  assert set(run_data["summary"]) == set(ema_nesterov.METHODS)
  # 40 steps of training take every method well below the uniform 8 bits/byte.
  for s in run_data["summary"].values():
    assert 3.0 < s["final_bpb"] < 7.0
  # Every run was measured at step 0 and after each of its 4 chunks.
  metrics = binaries.read_metrics(tmp_path / "smoke")
  assert len(metrics) == 1 + 2 + len(ema_nesterov.METHODS)
  assert all([r["step"] for r in m] == [0, 10, 20, 30, 40]
             for m in metrics.values())
