"""The DynamAuction binary: claim checks follow the numbers; the smoke run."""

import numpy as np
import pytest

from experiments import dynamauction
from tests import binaries


def _stage(setting, **returns):
  return {"setting": setting,
          "returns": {k: list(v) for k, v in returns.items()}}


def test_claim_checks_follow_the_numbers():
  base = np.linspace(10, 11, 8)
  good = _stage("second_count", myopic=base, mpc=base + 1, oracle=base + 1.5,
                ppo=base + 0.2, best_fixed=base)
  bad = _stage("first_saturation", myopic=base, mpc=base - 1, ppo=base,
               best_fixed=base)
  off = _stage("second_none", myopic=base, mpc=base, ppo=base - 0.5,
               oracle=base, best_fixed=base)
  checks = {c["id"]: c["passed"]
            for c in dynamauction.evaluate_claim([good, bad, off])}
  assert checks == {
      "myopic_le_mpc_second_count": True,
      "mpc_le_oracle_second_count": True,
      "mpc_beats_ppo_second_count": True,
      "myopic_le_mpc_first_saturation": False,
      "mpc_beats_ppo_first_saturation": False,
      "mpc_equals_myopic_second_none": True,
      "mpc_le_oracle_second_none": True,
      "mpc_beats_ppo_second_none": True,
  }
  above_oracle = _stage("second_count", myopic=base, mpc=base + 2,
                        oracle=base + 1, ppo=base, best_fixed=base)
  checks = {c["id"]: c["passed"]
            for c in dynamauction.evaluate_claim([above_oracle])}
  assert checks["mpc_le_oracle_second_count"] is False
  summary = dynamauction.summarize(good)
  assert summary["mpc_gain"] == pytest.approx(np.mean(1 / base))
  assert summary["mpc_oracle_gap"] == pytest.approx(np.mean(0.5 / (base + 1.5)))


def test_settings_name_their_environment():
  class Config:
    class env:  # pylint: disable=invalid-name
      horizon, base_intensity = 24.0, 40.0
  params = dynamauction.env_params("second_count", Config)
  assert dynamauction.oracle_defined(params)
  assert not dynamauction.oracle_defined(
      dynamauction.env_params("second_saturation", Config))
  with pytest.raises(ValueError, match="unknown effect"):
    dynamauction.env_params("second_magic", Config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("dynamauction", tmp_path)
  run_data = report["run_data"]
  assert [c["id"] for c in run_data["checks"]] == [
      "myopic_le_mpc_second_count", "mpc_le_oracle_second_count",
      "mpc_beats_ppo_second_count"]
  summary, = run_data["summaries"]
  assert summary["myopic_return"] <= summary["oracle_return"]
  assert run_data["figures"] == ["gain_over_myopic.png", "ppo_training.png"]
