"""The EMO binary: claim checks, summaries, resume after SIGKILL, smoke run."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments import emo
from experiments.configs import emo as emo_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOKE = ["--config", "experiments/configs/emo.py:smoke"]


def _records(full, delta_25, delta_125, usage):
  return [{"domain": domain, "full_bpb": full,
           "subset_bpb_0.25": full + delta_25,
           "subset_bpb_0.125": full + delta_125,
           "random_bpb_0.25": full + 2 * delta_25,
           "random_bpb_0.125": full + 2 * delta_125,
           "usage": usage[i]} for i, domain in enumerate(("code", "csv"))]


def _config():
  config = emo_config.get_config()
  config.seeds = (0, 1)
  return config


def test_mutual_information_of_usage_is_zero_to_one():
  uniform = np.full((2, 1, 4), 0.25)
  disjoint = np.array([[[0.5, 0.5, 0.0, 0.0]], [[0.0, 0.0, 0.5, 0.5]]])
  assert emo.domain_mutual_information(uniform) == pytest.approx(0.0, abs=1e-12)
  assert emo.domain_mutual_information(disjoint) == pytest.approx(1.0)
  half = np.array([[[0.5, 0.25, 0.25]], [[0.0, 0.25, 0.75]]])
  joint = half[:, 0] / 2
  px, py = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
  nz = joint > 0
  expected = np.sum(joint[nz] * np.log(joint[nz] / (px @ py)[nz])) / math.log(2)
  assert emo.domain_mutual_information(half) == pytest.approx(expected)


@pytest.mark.parametrize("emo_deltas,std_deltas,expected", [
    ((0.01, 0.05), (0.2, 0.5), [True, True, True, True, True]),
    ((0.1, 0.3), (0.15, 0.5), [True, False, False, False, True]),
])
def test_claim_checks_follow_the_numbers(emo_deltas, std_deltas, expected):
  specific = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
  mixed = np.full((2, 1, 2), 0.5)
  evals = {"standard": [_records(1.0, *std_deltas, mixed)] * 2,
           "emo": [_records(1.02, *emo_deltas, specific)] * 2}
  summary = emo.summarize(evals, _config())
  assert summary["emo"]["mean"]["delta_0.25"] == (pytest.approx(emo_deltas[0]),
                                                 pytest.approx(0.0))
  assert summary["standard"]["code"]["random_delta_0.125"][0] == pytest.approx(
      2 * std_deltas[1])
  checks = emo.evaluate_claim(summary, _config())
  assert [c["passed"] for c in checks] == expected


def _command(workdir, *extra):
  return [sys.executable, "-m", "experiments.emo", *SMOKE, *extra,
          "--workdir", str(workdir)]


def _metrics(workdir):
  out = {}
  for name in sorted(os.listdir(os.path.join(workdir, "metrics"))):
    with open(os.path.join(workdir, "metrics", name)) as f:
      out[name] = [json.loads(line) for line in f]
  return out


@pytest.mark.slow
def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
  straight = tmp_path / "straight"
  done = subprocess.run(_command(straight), cwd=ROOT, capture_output=True,
                        text=True, timeout=900, check=False)
  assert done.returncode == 0, done.stderr[-3000:]

  resumed = tmp_path / "resumed"
  target = resumed / "metrics" / "standard_seed0.jsonl"
  with subprocess.Popen(_command(resumed), cwd=ROOT, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True) as proc:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
      if target.exists() and any(json.loads(line)["step"] >= 30
                                 for line in target.read_text().splitlines()):
        break
      time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
  again = subprocess.run(_command(resumed), cwd=ROOT, capture_output=True,
                         text=True, timeout=900, check=False)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "resumed at step 20" in again.stderr
  assert _metrics(resumed) == _metrics(straight)
  with open(straight / "report.json") as f:
    expected = json.load(f)["run_data"]
  with open(resumed / "report.json") as f:
    got = json.load(f)["run_data"]
  assert got["results"] == expected["results"]
  assert got["checks"] == expected["checks"]


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  workdir = tmp_path / "smoke"
  out = subprocess.run(_command(workdir), cwd=ROOT, capture_output=True,
                       text=True, timeout=600, check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  with open(workdir / "report.json") as f:
    report = json.load(f)
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 2
  for figure in run_data["figures"]:
    with open(workdir / figure, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert len(run_data["checks"]) == 5
  summary = run_data["summary"]
  for kind in ("standard", "emo"):
    full = summary[kind]["mean"]["full_bpb"][0]
    assert 1.0 < full < 8.0  # trained below the 8 bits of a uniform byte
    # Keeping fewer experts never helps much: 12.5% costs more than 25%.
    assert (summary[kind]["mean"]["delta_0.125"][0]
            > summary[kind]["mean"]["delta_0.25"][0])
  with open(workdir / "metrics" / "emo_seed0_eval.jsonl") as f:
    evals = [json.loads(line) for line in f]
  assert [r["domain"] for r in evals] == ["code", "prose", "arithmetic", "csv"]
  for r in evals:
    usage = np.asarray(r["usage"])
    assert usage.shape == (2, 15)
    np.testing.assert_allclose(usage.sum(-1), 1.0, rtol=1e-5)
    assert all(len(layer) == 3 for layer in r["kept_0.25"])
    assert all(len(layer) == 1 for layer in r["kept_0.125"])
