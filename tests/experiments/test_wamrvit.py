"""The WAMRViT binary: claim checks, pure batches, smoke run, resume after SIGKILL."""

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


def test_claim_checks_follow_the_numbers():
  summary = {
      "wamrvit_regrid": _summary(0.11, 120.0, roi_mean=0.5, step1=0.2),
      "wamrvit_frozen": _summary(0.3, 120.0, roi_mean=0.9),
      "wamrvit_native": _summary(0.12, 120.0, step1=0.15),
      "vit_p4": _summary(0.10, 256.0),
      "vit_p8": _summary(0.2, 64.0),
  }
  checks = [c["passed"] for c in wamrvit.evaluate_claim(summary, 10)]
  assert checks == [True, False, True, True, True, True, True]
  summary["wamrvit_regrid"].update(vrmse_roi_short=0.2, tokens_mean=200.0,
                                   vrmse_roi_mean=1.0, vrmse_step1=0.05)
  checks = [c["passed"] for c in wamrvit.evaluate_claim(summary, 10)]
  assert checks == [False, False, False, False, False, False, False]
  summary["wamrvit_native"]["finite"] = False  # non-finite never passes
  summary["wamrvit_native"]["vrmse_step1"] = 0.01
  assert not wamrvit.evaluate_claim(summary, 10)[-1]["passed"]


def test_batches_are_pure_functions_of_seed_and_step():
  a = wamrvit.batch_indices(3, 17, 32, 40, 8)
  np.testing.assert_array_equal(a, wamrvit.batch_indices(3, 17, 32, 40, 8))
  b = wamrvit.batch_indices(3, 18, 32, 40, 8)
  assert not all(np.array_equal(x, y) for x, y in zip(a, b))
  assert a[0].max() < 32 and a[1].max() < 40


def test_token_buckets_round_up_and_cap():
  config = wamrvit_config.get_config()
  assert wamrvit.bucket_size(np.array([97, 12]), config, 256) == 128
  assert wamrvit.bucket_size(np.array([96]), config, 256) == 96
  assert wamrvit.bucket_size(np.array([250]), config, 256) == 256


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


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = testing.run_smoke("wamrvit", tmp_path)
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 2
  assert len(run_data["checks"]) == 7
  params = report["model_metadata"]["num_params"]
  assert params["wamrvit"] == params["vit_p4"] < params["vit_p8"]
  # Native mode adds per-level maps and Shrink/Expand blocks to the backbone.
  assert params["wamrvit"] < params["wamrvit_native"]
  summary = run_data["summary"]
  assert set(summary) == set(wamrvit.VARIANTS)
  assert summary["vit_p4"]["tokens_mean"] == 256
  assert summary["vit_p8"]["tokens_mean"] == 64
  # The frozen mesh keeps the initial leaf count; regridding changes it.
  rollouts = testing.read_metrics(tmp_path / "smoke")
  frozen = [r["tokens"] for r in rollouts["rollout_wamrvit_frozen_seed0.jsonl"]]
  assert len(set(frozen)) == 1 and frozen[0] < 256
  # Native storage starts from the same mesh, then regrids its own field.
  native = [r["tokens"] for r in rollouts["rollout_wamrvit_native_seed0.jsonl"]]
  assert native[0] == frozen[0]


@pytest.mark.slow
def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
  # Killed at the first training record, before the first checkpoint of the
  # next runs; timings differ between any two runs and are not compared.
  testing.assert_resume_matches("wamrvit", SMOKE, tmp_path,
                                "vit_p4_seed0.jsonl", 0,
                                wall_clock_keys=TIMING)


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
