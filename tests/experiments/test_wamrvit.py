"""The WAMRViT binary: claim checks, seed summaries, config refusal, smoke run, resume."""

import os

import pytest

from experiments import harness
from experiments.harness import sweep as harness_sweep
from tests import binaries
from experiments import wamrvit
from experiments.configs import wamrvit as wamrvit_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, wamrvit_config.FIELDS, wamrvit_config.validate)


SMOKE = ["--config", "experiments/configs/wamrvit.py:smoke"]
TIMING = ("tokens_per_s", "ms_per_step")


def _summary(roi, tokens, roi_mean=1.0, step1=0.1):
  return {"vrmse_roi_short": roi, "vrmse_roi_step1": roi,
          "vrmse_roi_mean": roi_mean, "vrmse_roi_last": roi_mean,
          "vrmse_step1": step1, "tokens_mean": tokens, "tokens_last": tokens,
          "tokens_mean_se": None, "finite": True}


def _one_seed(summary):
  """A sweep of one seed whose per-seed summaries are ``summary``'s cells."""
  return harness_sweep.SweepResult({v: None for v in summary}, (0,), {},
                                   {v: [s] for v, s in summary.items()}, None)


def _passed(summary):
  return {c["id"]: c["passed"]
          for c in wamrvit.evaluate_claim(summary, 10, _one_seed(summary))}


def test_failing_checks_carry_the_numbers_they_compare():
  cells = {"wamrvit_regrid": (0.6, 0.8), "wamrvit_frozen": (0.7, 0.7),
           "wamrvit_native": (0.5, 0.5), "vit_p4": (0.7, 0.7), "vit_p8": (0.4, 0.5)}
  tokens = {"wamrvit_regrid": (240.0, 250.0), "vit_p8": (64.0, 64.0)}
  per_seed = {v: [_summary(roi, tokens.get(v, (256.0, 256.0))[k])
                  for k, roi in enumerate(rois)] for v, rois in cells.items()}
  sweep = harness_sweep.SweepResult({v: None for v in cells}, (0, 1), {}, per_seed, None)
  summary = {v: {**harness.over_seeds(rows), "finite": True} for v, rows in per_seed.items()}
  checks = {c["id"]: c for c in wamrvit.evaluate_claim(summary, 10, sweep)}
  tokens_measure = checks["token_fraction"]["measure"]
  assert tokens_measure["value"] == pytest.approx(245.0 / 256.0)
  assert tokens_measure["se"] == pytest.approx(5.0 / 256.0)
  assert tokens_measure["bound"] == wamrvit.TOKEN_FRACTION
  assert not tokens_measure["higher_is_better"] and not checks["token_fraction"]["passed"]
  roi_measure = checks["roi_below_coarser_patch"]["measure"]
  assert roi_measure["value"] == pytest.approx(0.25)  # paired: (0.2 + 0.3) / 2
  assert roi_measure["se"] == pytest.approx(0.05)
  assert roi_measure["bound"] == 0.0 and not roi_measure["higher_is_better"]
  assert checks["roi_below_coarser_patch"]["passed"] is False


def test_claim_checks_follow_the_numbers():
  summary = {
      "wamrvit_regrid": _summary(0.11, 120.0, roi_mean=0.5, step1=0.2),
      "wamrvit_frozen": _summary(0.3, 120.0, roi_mean=0.9),
      "wamrvit_native": _summary(0.12, 120.0, step1=0.15),
      "vit_p4": _summary(0.10, 256.0),
      "vit_p8": _summary(0.2, 64.0),
  }
  assert _passed(summary) == {
      "roi_near_finest_patch": True, "roi_at_most_finest_patch": False,
      "token_fraction": True, "roi_below_coarser_patch": True,
      "regrid_beats_frozen_mesh": True,
      "uniform_storage_interpolation_cost": True,
      "native_removes_interpolation_cost": True}
  summary["wamrvit_regrid"].update(vrmse_roi_short=0.2, tokens_mean=200.0,
                                   vrmse_roi_mean=1.0, vrmse_step1=0.05)
  assert not any(_passed(summary).values())
  summary["wamrvit_native"]["vrmse_step1"] = 0.01
  assert _passed(summary)["native_removes_interpolation_cost"] is True
  summary["wamrvit_native"]["finite"] = False  # non-finite never passes
  assert _passed(summary)["native_removes_interpolation_cost"] is False


@pytest.mark.parametrize("field,value,message", [
    ("checkpoint_every", 15, "multiple of log_every"),
    ("rollout.num_steps", 9, "exceeds the trajectories"),
    ("rollout.short_horizon", 7, "short_horizon"),
    ("train.pushforward_steps", 0, "pushforward_steps"),
    ("models", ("wamrvit", "unet"), r"entry \[1\]='unet': expected one of"),
    ("tree.token_bucket", 0, "token_bucket"),
    ("tree.max_level", 5, "too deep"),
])
def test_validate_rejects_configs_the_binary_cannot_run(field, value, message):
  _refuses(wamrvit_config.get_config())
  config = wamrvit_config.get_config("smoke")
  _refuses(config)
  node = config
  *path, last = field.split(".")
  for part in path:
    node = node[part]
  node[last] = value
  with pytest.raises(ValueError, match=message):
    _refuses(config)


def test_a_refused_config_writes_nothing(tmp_path):
  out = binaries.run("wamrvit", [*SMOKE, "--config.checkpoint_every=15"],
                    tmp_path / "wd")
  assert out.returncode != 0
  assert "multiple of log_every" in out.stderr
  assert not os.path.exists(tmp_path / "wd" / "metrics")


def test_summaries_are_finite_only_if_every_seed_is():
  a = {"vrmse_mean": 1.0, "finite": True}
  b = {"vrmse_mean": 3.0, "finite": False}
  sweep = lambda rows: harness_sweep.SweepResult(
      {"v": None}, (0, 1), {"v": rows}, {"v": rows}, None)
  summary = wamrvit.summaries(sweep([a, b]))["v"]
  assert summary["vrmse_mean"] == 2.0 and summary["vrmse_mean_se"] == 1.0
  assert summary["finite"] is False
  assert wamrvit.summaries(sweep([a, a]))["v"]["finite"] is True


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("wamrvit", tmp_path)
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 2
  assert {c["id"] for c in run_data["checks"]} == {
      "roi_near_finest_patch", "roi_at_most_finest_patch", "token_fraction",
      "roi_below_coarser_patch", "regrid_beats_frozen_mesh",
      "uniform_storage_interpolation_cost",
      "native_removes_interpolation_cost"}
  params = report["model_metadata"]["num_params"]
  assert params["wamrvit"] == params["vit_p4"] < params["vit_p8"]
  # Native mode adds per-level maps and Shrink/Expand blocks to the backbone.
  assert params["wamrvit"] < params["wamrvit_native"]
  summary = run_data["summary"]
  assert set(summary) == set(wamrvit.VARIANTS)
  assert summary["vit_p4"]["tokens_mean"] == 256
  assert summary["vit_p8"]["tokens_mean"] == 64
  metrics = binaries.read_metrics(tmp_path / "smoke")
  # One training record per log_every steps; the quadtree runs log tokens.
  assert [r["step"] for r in metrics["wamrvit_seed0.jsonl"]] == [10, 20]
  assert "train_tokens" in metrics["wamrvit_native_seed1.jsonl"][0]
  assert "train_tokens" not in metrics["vit_p8_seed0.jsonl"][0]
  # The frozen mesh keeps the initial leaf count; regridding changes it.
  frozen = [r["tokens"] for r in metrics["rollout_wamrvit_frozen_seed0.jsonl"]]
  regrid = [r["tokens"] for r in metrics["rollout_wamrvit_regrid_seed0.jsonl"]]
  assert len(set(frozen)) == 1 and frozen[0] < 256
  assert regrid[0] == frozen[0] and len(set(regrid)) > 1
  # Native storage starts from the same mesh, then regrids its own field.
  native = [r["tokens"] for r in metrics["rollout_wamrvit_native_seed0.jsonl"]]
  assert native[0] == frozen[0]


