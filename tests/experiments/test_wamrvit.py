"""The WAMRViT binary: claim checks, pure batches, config refusal, smoke run, resume."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

from experiments import testing
from experiments import wamrvit
from experiments.configs import wamrvit as wamrvit_config

SMOKE = ["--config", "experiments/configs/wamrvit.py:smoke"]
TIMING = ("tokens_per_s", "ms_per_step")


def _summary(roi, tokens, roi_mean=1.0, step1=0.1):
  return {"vrmse_roi_short": roi, "vrmse_roi_step1": roi,
          "vrmse_roi_mean": roi_mean, "vrmse_roi_last": roi_mean,
          "vrmse_step1": step1, "tokens_mean": tokens, "tokens_last": tokens,
          "finite": True}


def _passed(summary):
  return {c["id"]: c["passed"] for c in wamrvit.evaluate_claim(summary, 10)}


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


def test_batches_are_pure_functions_of_seed_and_step():
  a = wamrvit.batch_indices(3, 17, 32, 40, 8)
  np.testing.assert_array_equal(a, wamrvit.batch_indices(3, 17, 32, 40, 8))
  b = wamrvit.batch_indices(3, 18, 32, 40, 8)
  assert not all(np.array_equal(x, y) for x, y in zip(a, b))
  assert a[0].max() < 32 and a[1].max() < 40


@pytest.mark.parametrize("field,value,message", [
    ("checkpoint_every", 15, "multiple of log_every"),
    ("rollout.num_steps", 9, "exceeds the trajectories"),
    ("rollout.short_horizon", 7, "short_horizon"),
    ("train.pushforward_steps", 0, "pushforward_steps"),
    ("models", ("wamrvit", "unet"), "not among"),
    ("tree.token_bucket", 0, "token_bucket"),
    ("tree.max_level", 5, "too deep"),
])
def test_validate_rejects_configs_the_binary_cannot_run(field, value, message):
  wamrvit.validate(wamrvit_config.get_config())
  config = wamrvit_config.get_config("smoke")
  wamrvit.validate(config)
  node = config
  *path, last = field.split(".")
  for part in path:
    node = node[part]
  node[last] = value
  with pytest.raises(ValueError, match=message):
    wamrvit.validate(config)


def test_a_refused_config_writes_nothing(tmp_path):
  out = testing.run("wamrvit", [*SMOKE, "--config.checkpoint_every=15"],
                    tmp_path / "wd")
  assert out.returncode != 0
  assert "multiple of log_every" in out.stderr
  assert not os.path.exists(tmp_path / "wd" / "metrics")


def test_stage_timer_compiles_outside_the_timing_once_per_shape():
  calls = []

  def fn(x):
    calls.append(x.shape)
    return x + 1

  timer = wamrvit.StageTimer()
  out = timer("model", fn, jnp.zeros(3))
  np.testing.assert_array_equal(out, np.ones(3))
  timer("model", fn, jnp.zeros(3))
  assert calls == [(3,)] * 3  # warm-up + timed, then timed only
  timer("model", fn, jnp.zeros(4))  # a new bucket shape warms up again
  assert calls[3:] == [(4,)] * 2
  assert timer.seconds["model"] > 0 and "regrid" not in timer.seconds


def test_vrmse_closed_form():
  true = np.stack([np.linspace(-1, 1, 16).reshape(4, 4, 1)] * 2)
  pred = true + np.array([0.1, 0.2]).reshape(2, 1, 1, 1)
  std = np.std(true[0])
  np.testing.assert_allclose(wamrvit.vrmse(pred, true), [0.1 / std, 0.2 / std])
  mask = np.zeros((2, 4, 4), bool)
  mask[:, 0, 0] = True
  pred[:, 0, 0] += 1.0
  np.testing.assert_allclose(wamrvit.vrmse(pred, true, mask),
                             [1.1 / std, 1.2 / std])


def test_summary_counts_the_leading_steps_on_track():
  records = [{"vrmse": v, "vrmse_roi": 2 * v, "tokens": 100.0 + k,
              "tokens_per_s": 1.0, "ms_per_step": 1.0, "finite": True}
             for k, v in enumerate([0.1, 0.3, 0.6, 0.2])]
  summary = wamrvit.summarize(records, short=2)
  assert summary["valid_steps"] == 2
  assert summary["vrmse_roi_short"] == pytest.approx(0.4)
  assert summary["vrmse_last"] == 0.2 and summary["tokens_last"] == 103.0
  records[2]["vrmse"] = 0.4
  assert wamrvit.summarize(records, short=2)["valid_steps"] == 4


def test_over_seeds_is_finite_only_if_every_seed_is():
  a = {"vrmse_mean": 1.0, "finite": True}
  b = {"vrmse_mean": 3.0, "finite": False}
  summary = wamrvit.over_seeds([a, b])
  assert summary["vrmse_mean"] == 2.0 and summary["vrmse_mean_se"] == 1.0
  assert summary["finite"] is False
  assert wamrvit.over_seeds([a, a])["finite"] is True


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = testing.run_smoke("wamrvit", tmp_path)
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
  metrics = testing.read_metrics(tmp_path / "smoke")
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


@pytest.mark.slow
def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
  # Killed at the first training record of a later run; timings differ
  # between any two runs and are not compared.
  testing.assert_resume_matches("wamrvit", SMOKE, tmp_path,
                                "vit_p4_seed0.jsonl", 0,
                                wall_clock_keys=TIMING)
