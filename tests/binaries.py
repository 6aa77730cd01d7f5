"""End-to-end test helpers for experiment binaries: run, kill at a step, read back.

Each helper launches ``python -m experiments.<name>`` from the repository
root, as a user would, so tests exercise flag parsing, checkpoints and the
report exactly as a real run does.
"""

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(name: str, args: Sequence[str], workdir: Any) -> list[str]:
  """The command line of ``experiments.<name>`` with ``args`` into ``workdir``."""
  return [sys.executable, "-m", f"experiments.{name}", *args, "--workdir",
          str(workdir)]


def run(name: str, args: Sequence[str], workdir: Any,
        timeout: float = 600) -> subprocess.CompletedProcess:
  """Runs the binary to completion; returns the finished process (no raise)."""
  return subprocess.run(command(name, args, workdir), cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout,
                        check=False)


def read_metrics(workdir: Any) -> dict[str, list[dict[str, Any]]]:
  """Every ``metrics/<run>.jsonl`` of a workdir, by file name."""
  out = {}
  for name in sorted(os.listdir(os.path.join(workdir, "metrics"))):
    with open(os.path.join(workdir, "metrics", name)) as f:
      out[name] = [json.loads(line) for line in f]
  return out


def wait_for_step(path: str, step: int, proc: subprocess.Popen,
                  timeout: float = 300) -> None:
  """Blocks until the JSONL file at ``path`` holds a record at ``step`` or later."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if os.path.exists(path):
      with open(path) as f:
        steps = [json.loads(line)["step"] for line in f if line.strip()]
      if steps and max(steps) >= step:
        return
    if proc.poll() is not None:
      raise AssertionError(f"run ended before step {step}: {proc.stderr.read()}")
    time.sleep(0.02)
  raise AssertionError(f"step {step} not reached in {timeout} s")


def kill_after_step(name: str, args: Sequence[str], workdir: Any,
                    metrics_file: str, step: int) -> None:
  """Starts the binary and SIGKILLs it once ``metrics/<metrics_file>`` reaches ``step``.

  Raises ``AssertionError`` if the run ends before it can be killed, so a
  resume test never silently tests an uninterrupted run.
  """
  with subprocess.Popen(command(name, args, workdir), cwd=ROOT,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True) as proc:
    wait_for_step(os.path.join(str(workdir), "metrics", metrics_file), step, proc)
    if proc.poll() is not None:
      raise AssertionError("the run finished before it could be killed")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
  if proc.returncode != -signal.SIGKILL:
    raise AssertionError(f"expected death by SIGKILL, got {proc.returncode}")


def assert_resume_matches(name: str, args: Sequence[str], tmp_path: Any,
                          metrics_file: str, kill_step: int, *,
                          wall_clock_keys: Sequence[str] = ()):
  """Runs straight through, then killed at ``kill_step`` and resumed: same numbers.

  Compares every metrics file and the report's results and checks, except
  the metric fields named in ``wall_clock_keys`` (timings, which no two runs
  share); returns ``(straight, resumed)`` workdirs for further assertions.
  """
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  done = run(name, args, straight)
  assert done.returncode == 0, done.stderr[-3000:]
  kill_after_step(name, args, resumed, metrics_file, kill_step)
  again = run(name, args, resumed)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "resumed at step" in again.stderr
  deterministic = lambda records: [
      {k: v for k, v in r.items() if k not in wall_clock_keys} for r in records]
  got, expected = read_metrics(resumed), read_metrics(straight)
  assert got.keys() == expected.keys()
  for run_metrics in got:
    assert (deterministic(got[run_metrics])
            == deterministic(expected[run_metrics])), run_metrics
  expected, got = (read_report(w)["run_data"] for w in (straight, resumed))
  results = lambda rows: [r for r in rows if r["metric"] not in wall_clock_keys]
  assert results(got["results"]) == results(expected["results"])
  assert got["checks"] == expected["checks"]
  return straight, resumed


def read_report(workdir: Any) -> dict[str, Any]:
  with open(os.path.join(workdir, "report.json")) as f:
    return json.load(f)


def run_smoke(name: str, tmp_path: Any) -> dict[str, Any]:
  """Runs ``experiments.<name>`` with its ``:smoke`` config; returns its report.

  Asserts a clean exit, that every figure the report lists is a PNG file,
  and that every check the run fails is one its binary declares too small
  for the smoke config (``NOT_AT_SMOKE_SCALE``; timing checks aside, since
  they depend on the machine), as the run's final line says.
  """
  workdir = tmp_path / "smoke"
  out = run(name, ["--config", f"experiments/configs/{name}.py:smoke"], workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  report = read_report(workdir)
  run_data = report["run_data"]
  assert run_data["scale"] == "smoke"
  undeclared = [c["id"] for c in run_data["checks"]
                if c["passed"] is False and not c.get("machine_dependent")
                and c["id"] not in run_data["not_at_smoke_scale"]]
  assert not undeclared, (
      f"the smoke run fails {undeclared}, which experiments/{name}.py does"
      f" not declare in NOT_AT_SMOKE_SCALE: {out.stdout[-1500:]}")
  for figure in report["run_data"]["figures"]:
    with open(os.path.join(workdir, figure), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n", figure
  return report
