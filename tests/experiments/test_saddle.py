"""The saddle binary: two processes give the single-process numbers; claims."""

import contextlib
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from experiments import harness
from experiments.harness import cli
from experiments import saddle as saddle_experiment
from tests import binaries
from experiments.configs import saddle as saddle_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, saddle_config.FIELDS, saddle_config.validate)


# The smallest sweep that still has two ratios and a method of each kind;
# games of tests/saddle's shape and its trace length (5000) let the
# in-process reference reuse programs compiled there.
TINY = {"dim": 4, "ratios": (1.0, 4.0), "rtol": 1e-3,
        "methods": ("dm_sp", "extragradient"), "step_multipliers": (1.0,),
        "max_rounds": 2000, "steps_per_chunk": 5000}


def _flags(overrides):
  return [f"--config.{k}={v!r}" if isinstance(v, tuple) else f"--config.{k}={v}"
          for k, v in overrides.items()]


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _read(workdir):
  return binaries.read_report(workdir), binaries.read_metrics(workdir)


def _assert_same_numbers(got, expected):
  (report, metrics), (ref_report, ref_metrics) = got, expected
  runs, ref_runs = report["run_data"]["runs"], ref_report["run_data"]["runs"]
  assert [r["run"] for r in runs] == [r["run"] for r in ref_runs]
  for run, ref in zip(runs, ref_runs):
    for key in ("status", "steps", "rounds", "scalar_allreduces",
                "oracle_calls", "oracle_calls_total"):
      assert run[key] == ref[key], (run["run"], key)
    np.testing.assert_allclose(run["relative_residual"],
                               ref["relative_residual"], rtol=1e-9)
  assert metrics.keys() == ref_metrics.keys()
  for name, records in metrics.items():
    ref_records = ref_metrics[name]
    assert [r["step"] for r in records] == [r["step"] for r in ref_records]
    assert ([r["rounds"] for r in records]
            == [r["rounds"] for r in ref_records])
    assert ([r["oracle_calls"] for r in records]
            == [r["oracle_calls"] for r in ref_records])
    np.testing.assert_allclose([r["residual"] for r in records],
                               [r["residual"] for r in ref_records], rtol=1e-9)


# A whole binary run end to end (minutes): in the slow suite, which CI runs too.
@pytest.mark.slow
def test_two_processes_give_the_single_process_numbers(tmp_path):
  port = _free_port()
  two = tmp_path / "two_processes"
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS="--xla_force_host_platform_device_count=1")
  command = [sys.executable, "-m", "experiments.saddle", "--config",
             "experiments/configs/saddle.py:smoke", *_flags(TINY),
             f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
             "--workdir", str(two)]
  # The context closes the children's pipes and waits for them even when the
  # reference run below fails.
  with contextlib.ExitStack() as children:
    procs = [children.enter_context(subprocess.Popen(
        command + [f"--process_id={i}"], cwd=binaries.ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
             for i in range(2)]
    # Meanwhile, the reference: one process, all players on one device.
    config = saddle_config.get_config("smoke")
    config.update(TINY)
    config.execution = "single"
    single = tmp_path / "single"
    workdir = harness.Workdir(str(single), config, "saddle")
    # What harness.run gives the workdir: the binary's PAPER, CLAIM, UNITS.
    workdir.metadata = cli.report_metadata(saddle_experiment.main)
    try:
      saddle_experiment.main(config, workdir)
    finally:
      workdir.close()
    for proc in procs:
      _, stderr = proc.communicate(timeout=600)
      assert proc.returncode == 0, stderr[-3000:]
  got, expected = _read(two), _read(single)
  platform = got[0]["run_data"]["platform"]
  assert (platform["process_count"], platform["device_count"]) == (2, 2)
  assert any("one device per player" in n for n in got[0]["run_data"]["notes"])
  assert any("all players on one device" in n
             for n in expected[0]["run_data"]["notes"])
  _assert_same_numbers(got, expected)
  # Communication is what the method needs, whatever carries it.
  dm = [r for r in got[0]["run_data"]["runs"] if r["method"] == "dm_sp"]
  assert all(r["converged"] and r["rounds"] == r["scalar_allreduces"]
             for r in dm)


def _best(ratio, method, rounds, oracle_calls, converged=True):
  return {(method, ratio): {
      "ratio": ratio, "method": method, "rounds": rounds,
      "oracle_calls": oracle_calls, "scalar_allreduces": rounds,
      "converged": converged, "run": f"{ratio}_{method}"}}


class _Config:
  methods = ("dm_sp", "extragradient")
  ratios = (1.0, 10.0, 100.0)
  l_xy = 1.0


@pytest.mark.parametrize("dm_rounds,flat", [((300, 310, 320), True),
                                            ((300, 30000, 3000000), False)])
def test_claim_checks_follow_the_numbers(dm_rounds, flat):
  best = {}
  for ratio, rounds in zip(_Config.ratios, dm_rounds):
    best.update(_best(ratio, "dm_sp", rounds,
                      int(100 * (1 + np.sqrt(ratio)))))
    best.update(_best(ratio, "extragradient", int(600 * (1 + ratio)),
                      int(600 * (1 + ratio))))
  _, checks, statement = saddle_experiment.evaluate_claim(best, _Config)
  # DM-SP / EG rounds at the worst ratio, against 1.
  worst = {c["id"]: c for c in checks}["dm_sp_fewer_rounds_than_eg"]["measure"]
  assert worst["bound"] == 1.0 and worst["higher_is_better"] is False
  assert (worst["value"] < 1.0) is flat
  checks = {c["id"]: c["passed"] for c in checks}
  assert checks["dm_sp_rounds_slope"] is flat
  assert checks["dm_sp_oracle_calls_slope"] is True
  assert checks["extragradient_rounds_slope"] is True
  assert checks["dm_sp_fewer_rounds_than_eg"] is flat
  assert checks["dm_sp_fewer_oracle_calls_than_eg"] is True
  assert ("It does not agree for: DM-SP (reconstruction) rounds"
          in statement) is not flat
  # A method that misses the tolerance somewhere gets no slope, and fails.
  best[("extragradient", 100.0)]["converged"] = False
  table, checks, _ = saddle_experiment.evaluate_claim(best, _Config)
  (row,) = [r for r in table
            if r["method"] == "extragradient" and r["cost"] == "rounds"]
  assert row["measured_slope"] is None and row["agrees"] is None
  checks = {c["id"]: c for c in checks}
  assert checks["extragradient_rounds_slope"]["passed"] is False
  assert "did not reach the tolerance" in (
      checks["extragradient_rounds_slope"]["detail"])


def test_validate_rejects_what_the_binary_cannot_run():
  config = saddle_config.get_config("smoke")
  _refuses(config)
  config.execution = "gpu"
  with pytest.raises(ValueError, match="execution"):
    _refuses(config)
  config.execution = "auto"
  config.methods = ("dm_sp", "adam")
  with pytest.raises(ValueError, match="adam"):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("saddle", tmp_path)
  run_data = report["run_data"]
  with open(tmp_path / "smoke" / "report.md") as f:
    assert "## Scaling against our reconstructed bounds" in f.read()
  best = {(b["method"], b["ratio"]): b for b in run_data["best"]}
  # Even the smoke games show the reconstruction's shape: DM-SP's rounds do
  # not grow with L_xx / L_xy while EG's grow about linearly.
  assert best[("dm_sp", 100.0)]["rounds"] <= 1.5 * best[("dm_sp", 1.0)]["rounds"]
  assert (best[("extragradient", 100.0)]["rounds"]
          >= 20 * best[("extragradient", 1.0)]["rounds"])
