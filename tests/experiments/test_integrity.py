"""What a workdir reports is what its config computed: every fault, through a real binary.

One uninterrupted EoSS smoke run is the reference; each test copies its
workdir, damages it the way a user or a kill would, reruns the binary and
asserts that the damage is refused or recovered, visibly, with the numbers
of the uninterrupted run.
"""

import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from tests import binaries

TINY = ["--config", "experiments/configs/eoss.py:smoke",
        "--config.num_steps=400", "--config.full_batch_num_steps=200"]
RUN = "lr0.25_b16_seed0"

# Each test reruns a real binary (minutes in all): the slow suite, which CI runs too.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("straight") / "wd"
  out = binaries.run("eoss", TINY, workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  return workdir


def _copy(straight, tmp_path):
  target = tmp_path / "wd"
  shutil.copytree(straight, target)
  os.remove(target / "report.json")
  return target


def _rerun(workdir, *extra):
  return binaries.run("eoss", [*TINY, *extra], workdir)


def _assert_same_numbers(workdir, straight):
  assert binaries.read_metrics(workdir) == binaries.read_metrics(straight)
  got, expected = (binaries.read_report(w)["run_data"] for w in (workdir, straight))
  assert got["results"] == expected["results"]
  assert got["checks"] == expected["checks"]


def _checkpoint_steps(workdir, run=RUN):
  return sorted(int(os.path.basename(p))
                for p in glob.glob(str(workdir / "checkpoints" / run / "*"))
                if os.path.basename(p).isdigit())


def test_changed_config_is_refused_with_the_fields_and_overwrite_discards(
    straight, tmp_path):
  workdir = _copy(straight, tmp_path)
  before = binaries.read_metrics(workdir)
  out = _rerun(workdir, "--config.data.label_noise=0.0")
  assert out.returncode == 1
  assert "data.label_noise: 0.2 -> 0.0" in out.stderr
  assert "--overwrite" in out.stderr and "--workdir" in out.stderr
  assert binaries.read_metrics(workdir) == before
  assert not os.path.exists(workdir / "report.json")
  with open(workdir / "config.json") as f:
    assert json.load(f)["data"]["label_noise"] == 0.2

  out = _rerun(workdir, "--config.data.label_noise=0.0", "--overwrite")
  assert out.returncode == 0, out.stderr[-3000:]
  assert "resumed" not in out.stderr
  report = binaries.read_report(workdir)
  assert report["run_data"]["config"]["data"]["label_noise"] == 0.0
  assert binaries.read_metrics(workdir) != binaries.read_metrics(straight)


def test_second_run_on_a_workdir_is_refused_naming_the_holder(tmp_path):
  workdir = tmp_path / "wd"
  with subprocess.Popen(binaries.command("eoss", TINY, workdir),
                        cwd=binaries.ROOT, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True) as first:
    binaries.wait_for_step(str(workdir / "metrics" / f"{RUN}.jsonl"), 0, first)
    second = _rerun(workdir)
    assert first.poll() is None, "the first run ended before the second began"
    first_stderr = first.communicate()[1]
  assert second.returncode == 1
  assert f"in use by pid {first.pid}" in second.stderr
  assert first.returncode == 0, first_stderr[-3000:]
  steps = [r["step"] for r in binaries.read_metrics(workdir)[f"{RUN}.jsonl"]]
  assert steps == sorted(set(steps))  # no duplicate records


def test_lock_of_a_killed_run_is_taken_over(straight, tmp_path):
  workdir = _copy(straight, tmp_path)
  with open(workdir / ".lock", "w") as f:
    f.write("pid 999999 on a-dead-host, started 2026-01-01T00:00:00")
  out = _rerun(workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "took over the lock" in out.stderr and "999999" in out.stderr
  _assert_same_numbers(workdir, straight)


def test_damaged_checkpoint_falls_back_to_the_previous_step(straight, tmp_path):
  workdir = _copy(straight, tmp_path)
  previous, latest = _checkpoint_steps(workdir)[-2:]
  data_files = [p for p in glob.glob(
      str(workdir / "checkpoints" / RUN / str(latest) / "**" / "*"),
      recursive=True) if os.path.isfile(p) and f"{os.sep}d{os.sep}" in p]
  target = max(data_files, key=os.path.getsize)
  with open(target, "r+b") as f:  # flip bytes in the middle of the array data
    f.seek(os.path.getsize(target) // 2)
    chunk = f.read(8)
    f.seek(os.path.getsize(target) // 2)
    f.write(bytes(b ^ 0xFF for b in chunk))
  out = _rerun(workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  assert f"step {latest} is unusable" in out.stderr
  assert "do not match their digest" in out.stderr
  assert f"falling back to step {previous}" in out.stderr
  assert f"[{RUN}] resumed at step {previous}" in out.stderr
  _assert_same_numbers(workdir, straight)


def test_every_checkpoint_damaged_starts_the_run_over(straight, tmp_path):
  workdir = _copy(straight, tmp_path)
  for step in _checkpoint_steps(workdir):
    os.remove(workdir / "checkpoints" / RUN / str(step) /
              "jaxpapers_digest.json")
  out = _rerun(workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "no readable digest" in out.stderr
  assert "no older step: starting the run over" in out.stderr
  _assert_same_numbers(workdir, straight)


def test_torn_last_metrics_record_is_dropped_with_a_warning(straight, tmp_path):
  # A kill in the middle of writing step 400's record, before its checkpoint.
  workdir = _copy(straight, tmp_path)
  latest = _checkpoint_steps(workdir)[-1]
  shutil.rmtree(workdir / "checkpoints" / RUN / str(latest))
  path = workdir / "metrics" / f"{RUN}.jsonl"
  text = path.read_text()
  path.write_text(text[:len(text) - len(text.splitlines()[-1]) // 2 - 1])
  out = _rerun(workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "dropped a torn last record" in out.stderr
  _assert_same_numbers(workdir, straight)


def test_deleted_metrics_with_checkpoints_kept_redo_the_run(straight, tmp_path):
  workdir = _copy(straight, tmp_path)
  os.remove(workdir / "metrics" / f"{RUN}.jsonl")
  out = _rerun(workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "no metrics record at this step" in out.stderr
  _assert_same_numbers(workdir, straight)


@pytest.mark.parametrize("bad", [
    ["--config.num_stepz=3"],
    ["--config", "experiments/configs/eoss_typo.py:smoke"],
])
def test_mistyped_config_writes_nothing(straight, tmp_path, bad):
  workdir = _copy(straight, tmp_path)
  before = (workdir / "config.json").read_bytes()
  mtime = os.path.getmtime(workdir / "config.json")
  time.sleep(0.01)
  out = binaries.run("eoss", [*TINY, *bad], workdir)
  assert out.returncode == 2
  assert "usage error" in out.stderr and "Traceback" not in out.stderr
  assert (workdir / "config.json").read_bytes() == before
  assert os.path.getmtime(workdir / "config.json") == mtime


def test_mistyped_field_names_the_close_match(tmp_path):
  out = binaries.run("eoss", [*TINY, "--config.measure.bs_drawz=3"],
                    tmp_path / "wd")
  assert out.returncode == 2
  assert "did you mean --config.measure.bs_draws" in out.stderr
  assert not os.path.exists(tmp_path / "wd")


def test_invalid_config_is_refused_before_the_workdir_exists(tmp_path):
  out = binaries.run("eoss", [*TINY, "--config.checkpoint_every=75"],
                    tmp_path / "wd")
  assert out.returncode == 2
  assert "checkpoint_every=75 must be a multiple of measure_every=50" in out.stderr
  assert not os.path.exists(tmp_path / "wd")


@pytest.mark.parametrize("bad,message", [
    ("--config.num_steps=-5", "num_steps=-5: expected an int in [1, inf]"),
    ("--config.model.init_scale=nan",
     "model.init_scale=nan: expected a finite number in (0, inf)"),
    ("--config.learning_rates=()",
     "learning_rates=(): expected a sequence of 1 or more entries"),
])
def test_out_of_range_value_is_a_usage_error_before_the_workdir_exists(
    tmp_path, bad, message):
  out = binaries.run("eoss", [*TINY, bad], tmp_path / "wd")
  assert out.returncode == 2
  assert message in out.stderr and "Traceback" not in out.stderr
  assert not os.path.exists(tmp_path / "wd")


def test_a_workdir_that_is_a_file_is_one_error_line(tmp_path):
  (tmp_path / "file").write_text("x")
  out = binaries.run("eoss", TINY, tmp_path / "file")
  assert out.returncode == 1
  assert "is a file, not a directory" in out.stderr
  assert "Traceback" not in out.stderr
  assert (tmp_path / "file").read_text() == "x"


def test_a_metrics_line_damaged_in_the_middle_is_one_error_line(straight,
                                                                tmp_path):
  workdir = _copy(straight, tmp_path)
  path = workdir / "metrics" / f"{RUN}.jsonl"
  lines = path.read_text().splitlines(keepends=True)
  lines[1] = "garbage\n"
  path.write_text("".join(lines))
  out = _rerun(workdir)
  assert out.returncode == 1
  assert "line 2 is not JSON" in out.stderr and "Traceback" not in out.stderr


def test_help_lists_flags_and_config_fields_with_defaults(tmp_path):
  out = binaries.run("eoss", ["--help"], tmp_path / "wd")
  assert out.returncode == 0
  for text in ("--config", "--workdir", "--overwrite", ":smoke",
               "learning_rates = (0.25, 0.4)", "measure.bs_draws = 100",
               "num_steps = 6000  (an int in [1, inf])",
               "about 7 min on 2 CPU cores"):
    assert text in out.stdout, text
  assert not os.path.exists(tmp_path / "wd")


def test_final_lines_count_checks_name_the_report_and_the_scale(straight, tmp_path):
  workdir = _copy(straight, tmp_path)
  out = _rerun(workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  report = binaries.read_report(workdir)["run_data"]
  *_, last, scale = out.stdout.strip().splitlines()
  assert last.startswith(f"{report['checks_passed']}/{len(report['checks'])}"
                         " checks passed; wall time ")
  assert scale.startswith("smoke scale: this run checks that the code runs end"
                          " to end, not the claim; the binary declares these"
                          " checks too small for it (they need the default"
                          " scale): bs_at_threshold_eta0.25_b16,")
  assert report["scale"] == "smoke"
  assert report["not_at_smoke_scale"] == [
      "bs_at_threshold_eta0.25_b16", "lambda_max_below_bs_eta0.25_b16"]
  assert str(workdir / "report.md") in last
  assert str(workdir / "sharpness_vs_step.png") in last
