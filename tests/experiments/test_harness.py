"""The experiment harness in-process: metrics, checkpoints, the loop, stages, report, stats."""

import json
import os
import sys
import types
from unittest import mock

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.harness import checkpointing
from experiments import harness
from experiments.harness import plots
from experiments.harness import workdir as workdir_lib


@pytest.fixture
def workdir(tmp_path):
  config = ml_collections.ConfigDict({"seed": 3, "lr": 0.1})
  wd = harness.Workdir(str(tmp_path / "wd"), config, "toy")
  yield wd
  wd.close()


def test_metrics_roundtrip_truncate_and_torn_last_line(workdir):
  writer = workdir.metrics("run")
  for step in range(0, 50, 10):
    writer.write(step, loss=jnp.float32(step / 10), nan=float("nan"))
  writer.truncate_after(20)
  records = writer.read()
  assert [r["step"] for r in records] == [0, 10, 20]
  assert records[2]["loss"] == pytest.approx(2.0)
  assert np.isnan(records[0]["nan"])  # NaN stays visible, not dropped
  with open(writer.path, "a") as f:
    f.write('{"step": 30, "lo')  # a kill in the middle of a write
  assert [r["step"] for r in writer.read()] == [0, 10, 20]
  writer.truncate_after(100)
  with open(writer.path) as f:
    assert f.read().count("\n") == 3  # the torn line is gone from the file
  writer.truncate_after(-1)
  assert writer.read() == []


def test_metrics_damaged_in_the_middle_is_an_error(workdir):
  writer = workdir.metrics("run")
  writer.write(0, loss=1.0)
  with open(writer.path, "a") as f:
    f.write("garbage\n")
  writer.write(1, loss=2.0)
  with pytest.raises(harness.WorkdirError, match="line 2 is not JSON"):
    writer.read()


def test_checkpoint_restores_into_abstract_target_with_new_sharding(tmp_path):
  mesh = jax.make_mesh((8,), ("d",), axis_types=(jax.sharding.AxisType.Explicit,))
  sharded = jax.device_put(jnp.arange(16.0), jax.NamedSharding(mesh, jax.P("d")))
  state = {"w": sharded, "step": jnp.int32(7)}
  ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
  assert ckpt.latest_step() is None
  ckpt.save(7, state)
  ckpt.save(9, state)
  assert ckpt.latest_step() == 9
  one_device = jax.NamedSharding(
      jax.make_mesh((1,), ("one",), devices=jax.devices()[:1]), jax.P())
  target = {"w": jax.ShapeDtypeStruct((16,), jnp.float32, sharding=one_device),
            "step": jax.ShapeDtypeStruct((), jnp.int32, sharding=one_device)}
  restored, step, finished = ckpt.restore_verified(target)
  ckpt.close()
  assert step == 9 and not finished
  np.testing.assert_array_equal(restored["w"], np.arange(16.0))
  assert restored["w"].sharding == one_device
  assert int(restored["step"]) == 7


def test_restore_without_checkpoint_is_a_named_error(tmp_path):
  ckpt = checkpointing.Checkpointer(str(tmp_path / "empty"))
  with pytest.raises(FileNotFoundError, match="no checkpoint to restore"):
    ckpt.restore({"w": jax.ShapeDtypeStruct((2,), jnp.float32)})
  assert ckpt.restore_verified({"w": jax.ShapeDtypeStruct((2,), jnp.float32)}) is None


def test_restore_verified_skips_another_configs_and_unacceptable_steps(tmp_path):
  directory = str(tmp_path / "ckpt")
  target = {"w": jax.ShapeDtypeStruct((3,), jnp.float32)}
  ckpt = checkpointing.Checkpointer(directory, max_to_keep=5, config_hash="a")
  for step in (1, 2):
    ckpt.save(step, {"w": jnp.full(3, float(step))})
  ckpt.close()
  other = checkpointing.Checkpointer(directory, max_to_keep=5, config_hash="b")
  other.save(3, {"w": jnp.full(3, 3.0)}, finished=True)
  other.close()
  ckpt = checkpointing.Checkpointer(directory, max_to_keep=5, config_hash="a")
  state, step, _ = ckpt.restore_verified(target, acceptable=lambda s: s != 2)
  assert step == 1 and float(state["w"][0]) == 1.0
  assert ckpt.all_steps() == [1]  # the foreign and the unacceptable are gone
  ckpt.close()


def _counting_chunk(calls, stop_at=None):
  def chunk(state, step):
    calls.append(step)
    state = {"w": state["w"] + 1.0}
    return harness.Chunk(state, step + 10, {"w": float(state["w"][0])},
                         stop=stop_at is not None and step + 10 >= stop_at)
  return chunk


def test_train_resumes_state_and_drops_later_metrics(workdir):
  init = {"w": jnp.zeros(3)}
  calls = []
  result = workdir.train("r", init, _counting_chunk(calls), num_steps=50,
                         checkpoint_every=20)
  assert calls == [0, 10, 20, 30, 40]
  assert [r["step"] for r in result.records] == [10, 20, 30, 40, 50]
  # A kill after step 50's record but before its checkpoint: resume at 40.
  ckpt = workdir.checkpointer("r")
  ckpt._manager.delete(50)  # pylint: disable=protected-access
  ckpt.close()
  calls.clear()
  again = workdir.train("r", init, _counting_chunk(calls), num_steps=50,
                        checkpoint_every=20)
  assert calls == [40]
  assert again.records == result.records
  np.testing.assert_array_equal(again.state["w"], np.full(3, 5.0))


def test_finished_and_stopped_runs_are_not_continued(workdir):
  init = {"w": jnp.zeros(2)}
  calls = []
  first = workdir.train("s", init, _counting_chunk(calls, stop_at=20),
                        num_steps=100, checkpoint_every=50,
                        initial=lambda s: (s, {"w": 0.0}))
  assert calls == [0, 10]
  assert [r["step"] for r in first.records] == [0, 10, 20]
  calls.clear()
  again = workdir.train("s", init, _counting_chunk(calls), num_steps=100,
                        checkpoint_every=50)
  assert calls == []  # stopped at 20: a rerun does not train past it
  assert again.records == first.records
  np.testing.assert_array_equal(again.state["w"], np.full(2, 2.0))


def test_stage_caches_and_recomputes_damaged_or_foreign(workdir, tmp_path):
  calls = []

  def compute():
    calls.append(1)
    return {"x": np.float32(1.5), "v": np.arange(3)}

  assert workdir.stage("e", compute) == {"x": 1.5, "v": [0, 1, 2]}
  assert workdir.stage("e", compute) == {"x": 1.5, "v": [0, 1, 2]}
  assert len(calls) == 1
  path = os.path.join(workdir.path, "stages", "e.json")
  with open(path) as f:
    stored = json.load(f)
  stored["value"]["x"] = 9.0  # damaged: the digest no longer matches
  with open(path, "w") as f:
    json.dump(stored, f)
  assert workdir.stage("e", compute)["x"] == 1.5 and len(calls) == 2
  with open(path, "w") as f:
    f.write('{"config_hash": ')  # torn
  assert workdir.stage("e", compute)["x"] == 1.5 and len(calls) == 3
  workdir.close()
  other = harness.Workdir(workdir.path, workdir.config, "toy")
  other.config_hash = "another"  # as a stage made by another config
  assert other.stage("e", compute)["x"] == 1.5 and len(calls) == 4
  other.close()


def test_one_run_per_workdir(workdir):
  with pytest.raises(harness.WorkdirError, match=f"in use by pid {os.getpid()}"):
    harness.Workdir(workdir.path, workdir.config, "toy")
  workdir.close()
  harness.Workdir(workdir.path, workdir.config, "toy").close()


def test_recorded_config_mismatch_lists_fields(workdir):
  workdir.metrics("run").write(0, loss=1.0)
  workdir.close()
  changed = ml_collections.ConfigDict({"seed": 3, "lr": 0.2, "new": 1})
  with pytest.raises(harness.WorkdirError) as error:
    harness.Workdir(workdir.path, changed, "toy")
  assert "lr: 0.1 -> 0.2" in str(error.value)
  assert 'new: "<absent>" -> 1' in str(error.value)
  harness.Workdir(workdir.path, changed, "toy", overwrite=True).close()
  assert not os.path.exists(os.path.join(workdir.path, "metrics"))


def test_config_differences_of_nested_fields():
  old = {"a": 1, "m": {"b": [1, 2], "c": "x"}}
  new = {"a": 1, "m": {"b": [1, 3], "d": 0}}
  assert workdir_lib.config_differences(old, new) == [
      "m.b: [1, 2] -> [1, 3]", 'm.c: "x" -> "<absent>"', 'm.d: "<absent>" -> 0']


def test_report_has_the_three_blocks_and_renders(workdir):
  report = workdir.write_report(
      paper={"title": "T", "authors": "A", "url": "u"},
      claim="c",
      dataset={"name": "d", "provenance": "p"},
      model={"num_params": 3},
      seeds=[0, 1],
      results=[harness.result("e", "m", 1.5, standard_error=0.1,
                              num_samples=2)],
      paper_results=[harness.paper_result("e", "s")],
      checks=[harness.check("x_ok", "x", True, "ok"),
              harness.check("y_bad", "y", False, "no"),
              harness.check("z_noise", "z", None, "inside the spread")],
      figures=["f.png", None],
  )
  assert set(report) >= {"benchmark_metadata", "run_data", "model_metadata"}
  run_data = report["run_data"]
  assert run_data["config"] == {"lr": 0.1, "seed": 3}
  assert run_data["config_hash"] == harness.config_hash(workdir.config)
  assert run_data["all_checks_passed"] is False
  assert run_data["checks_passed"] == 1
  assert run_data["figures"] == ["f.png"]
  assert run_data["platform"]["device_count"] == jax.device_count()
  assert "jax" in run_data["versions"]
  with open(os.path.join(workdir.path, "report.json")) as f:
    assert json.load(f) == json.loads(json.dumps(report))
  with open(os.path.join(workdir.path, "report.md")) as f:
    text = f.read()
  assert "| `y_bad` | y | FAIL | no |" in text
  assert "| `x_ok` | x | PASS | ok |" in text
  assert "| `z_noise` | z | INCONCLUSIVE |" in text
  assert "## Checks (1/3 passed)" in text


def _minimal_report(workdir):
  return workdir.write_report(
      paper={"title": "T", "authors": "A", "url": "u"}, claim="c",
      dataset={"name": "d", "provenance": "p"}, model={"num_params": 3},
      seeds=[0], results=[harness.result("e", "m", 1.5)], paper_results=[],
      checks=[harness.check("x_ok", "x", True, "ok")], figures=[])


def test_a_report_names_every_invocation_that_computed_it(workdir):
  first = _minimal_report(workdir)["run_data"]
  assert [i["git_commit"] for i in first["invocations"]] == [
      first["git_commit"]]
  assert first["invocations"][0]["wall_time_s"] == first["wall_time_s"]
  with open(os.path.join(workdir.path, "report.md")) as f:
    assert "invocations of this workdir" not in f.read()
  workdir.close()
  # An invocation that stops before its report, then one that finishes.
  harness.Workdir(workdir.path, workdir.config, "toy").close()
  resumed = harness.Workdir(workdir.path, workdir.config, "toy")
  invocations = _minimal_report(resumed)["run_data"]["invocations"]
  resumed.close()
  assert len(invocations) == 3
  assert [i["wall_time_s"] is None for i in invocations] == [False, True, False]
  with open(os.path.join(workdir.path, "report.md")) as f:
    text = f.read()
  assert "built by 3 invocations of this workdir" in text
  assert "(no report: stopped early)" in text
  with open(os.path.join(workdir.path, "invocations.json")) as f:
    assert json.load(f) == invocations


def test_a_workdir_from_before_invocations_credits_its_report(workdir):
  old = _minimal_report(workdir)["run_data"]
  workdir.close()
  os.remove(os.path.join(workdir.path, "invocations.json"))
  resumed = harness.Workdir(workdir.path, workdir.config, "toy")
  invocations = _minimal_report(resumed)["run_data"]["invocations"]
  resumed.close()
  assert invocations[0] == {"git_commit": old["git_commit"], "started": None,
                            "wall_time_s": old["wall_time_s"]}
  assert len(invocations) == 2


def test_a_damaged_invocation_record_is_refused(workdir):
  workdir.close()
  with open(os.path.join(workdir.path, "invocations.json"), "w") as f:
    f.write('[{"git_commit": ')
  with pytest.raises(harness.WorkdirError, match="invocations.json is damaged"):
    harness.Workdir(workdir.path, workdir.config, "toy")
  # The refusal released the lock.
  harness.Workdir(workdir.path, workdir.config, "toy", overwrite=True).close()


def test_duplicate_check_ids_are_an_error(workdir):
  with pytest.raises(ValueError, match="check ids must be unique"):
    workdir.write_report(
        paper={}, claim="c", dataset={}, model={}, seeds=[], results=[],
        paper_results=[], figures=[],
        checks=[harness.check("a", "x", True, ""),
                harness.check("a", "y", True, "")])


def test_config_hash_changes_with_any_field():
  a = ml_collections.ConfigDict({"lr": 0.1, "b": (1, 2)})
  b = ml_collections.ConfigDict({"lr": 0.1, "b": (1, 3)})
  assert harness.config_hash(a) != harness.config_hash(b)
  assert harness.config_hash(a) == harness.config_hash(a.copy_and_resolve_references())
  assert hash(harness.StaticConfig(a)) == hash(harness.StaticConfig(a.copy_and_resolve_references()))
  assert harness.StaticConfig(a) != harness.StaticConfig(b)


def test_mean_se_matches_numpy():
  values = [1.0, 2.0, 4.5, None]
  mean, se = harness.mean_se(values)
  assert mean == pytest.approx(np.mean([1, 2, 4.5]))
  assert se == pytest.approx(np.std([1, 2, 4.5], ddof=1) / np.sqrt(3))
  assert harness.mean_se([2.0]) == (2.0, None)
  assert harness.mean_se([None]) == (None, None)
  mean_curve, se_curve = harness.mean_se_curve([[1, 2], [3, 6]])
  assert mean_curve == [2.0, 4.0] and se_curve == pytest.approx([1.0, 2.0])


def test_over_seeds_averages_numbers_and_ors_flags():
  out = harness.over_seeds([{"name": "a", "x": 1.0, "bad": False},
                            {"name": "a", "x": 3.0, "bad": True}])
  assert out["x"] == 2.0 and out["x_se"] == pytest.approx(1.0)
  assert out["bad"] is True and out["name"] == "a"


def test_paired_ratio_is_inconclusive_inside_its_spread():
  tight = harness.paired_ratio([1.0, 1.1, 0.9], [10.0, 11.0, 9.0])
  assert tight["ratio"] == pytest.approx(0.1)
  assert harness.at_most(tight, 0.126) is True
  assert harness.at_most(tight, 0.05) is False
  noisy = harness.paired_ratio([1.0, 1.5, 0.8, 1.4], [10.0, 10.0, 10.0, 10.0])
  assert noisy["low"] < 0.126 < noisy["high"]
  assert harness.at_most(noisy, 0.126) is None


@pytest.mark.parametrize("effect,se,verdict", [
    (0.05, 0.01, True),      # beyond 2 s.e. in the claimed direction
    (0.05, 0.04, None),      # inside 2 s.e.
    (-0.05, 0.04, None),     # the wrong way, but inside 2 s.e.
    (-0.05, 0.01, False),    # the wrong way beyond 2 s.e.
    (0.0, 0.0, False),       # measured and absent: no spread, no effect
    (0.0, None, False),      # one seed, no effect
    (0.001, None, True),     # one seed: the sign decides
    (0.0, 0.01, None),       # zero inside a spread
])
def test_effect_verdict_needs_two_standard_errors_either_way(effect, se, verdict):
  assert harness.effect_verdict(effect, se) is verdict


def test_paired_difference_pairs_seeds_and_refuses_unequal_counts():
  mean, se = harness.paired_difference([1.0, 2.0, 4.0], [0.5, 1.0, 2.5])
  # differences 0.5, 1.0, 1.5: mean 1, std (ddof 1) 0.5, s.e. 0.5 / sqrt(3)
  assert mean == pytest.approx(1.0) and se == pytest.approx(0.5 / np.sqrt(3))
  with pytest.raises(ValueError, match="one per seed"):
    harness.paired_difference([1.0, 2.0], [1.0])


def _tensorboard_scalars(directory):
  """(tag, step, value) of every scalar in the event files of ``directory``."""
  return [(tag, step, value) for tag, step, value, plugin
          in _tensorboard_values(directory) if plugin == "scalar"]


def _tensorboard_values(directory):
  """(tag, step, simple value or None, plugin) of every summary value."""
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  out = []
  for name in sorted(os.listdir(directory)):
    with open(os.path.join(directory, name), "rb") as f:
      data = f.read()
    offset = 0
    while offset < len(data):  # TFRecord framing: length, crc, payload, crc
      length = int.from_bytes(data[offset:offset + 8], "little")
      event = event_pb2.Event.FromString(data[offset + 12:offset + 12 + length])
      offset += 16 + length
      out += [(v.tag, event.step, v.simple_value,
               "scalar" if v.WhichOneof("value") == "simple_value"
               else v.metadata.plugin_data.plugin_name)
              for v in event.summary.value]
  return out


def test_metrics_also_go_to_tensorboard_and_resume_purges(workdir):
  init = {"w": jnp.zeros(1)}
  workdir.train("tb", init, _counting_chunk([]), num_steps=30,
                checkpoint_every=10)
  directory = os.path.join(workdir.path, "tensorboard", "tb")
  assert _tensorboard_scalars(directory) == [("w", 10, 1.0), ("w", 20, 2.0),
                                             ("w", 30, 3.0)]


def test_tensorboard_gets_the_config_and_counts_instead_of_nan_scalars(
    workdir):
  writer = workdir.metrics("nan")
  writer.write(1, loss=1.5, se=float("nan"), grad=float("inf"))
  writer.write(2, loss=1.0, se=0.1)
  writer.close()
  values = _tensorboard_values(os.path.join(workdir.path, "tensorboard", "nan"))
  assert [(t, s, v) for t, s, v, p in values if p == "scalar"] == [
      ("loss", 1, 1.5), ("nonfinite_values", 1, 2.0), ("loss", 2, 1.0),
      ("se", 2, pytest.approx(0.1))]
  assert {(t, p) for t, _, _, p in values if p != "scalar"} >= {
      ("config/text_summary", "text"), ("_hparams_/experiment", "hparams"),
      ("_hparams_/session_start_info", "hparams")}
  assert [r["se"] for r in writer.read()][0] != [r["se"] for r in
                                                 writer.read()][0]  # NaN kept


def test_overwrite_never_empties_a_folder_that_is_not_a_workdir(tmp_path):
  (tmp_path / "precious.txt").write_text("keep me")
  config = ml_collections.ConfigDict({"lr": 0.1})
  with pytest.raises(harness.WorkdirError, match="not a workdir"):
    harness.Workdir(str(tmp_path), config, "toy", overwrite=True)
  assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_results_of_takes_one_count_or_a_count_per_metric():
  summary = {"recall": 0.9, "recall_se": 0.01, "sparse_recall": 0.95}
  rows = harness.results_of("rule", summary, ["recall", "sparse_recall"],
                            num_samples={"recall": 200, "sparse_recall": 150},
                            higher_is_better=["recall", "sparse_recall"])
  by_metric = {row["metric"]: row for row in rows}
  assert by_metric["recall"]["num_samples"] == 200
  assert by_metric["sparse_recall"]["num_samples"] == 150
  assert by_metric["recall"]["standard_error"] == 0.01
  same = harness.results_of("rule", summary, ["recall", "sparse_recall"],
                            num_samples=7)
  assert [row["num_samples"] for row in same] == [7, 7]


def test_a_workdir_that_is_a_file_or_not_writable_is_a_workdir_error(
    tmp_path, monkeypatch):
  config = ml_collections.ConfigDict({"seed": 3})
  (tmp_path / "file").write_text("x")
  with pytest.raises(harness.WorkdirError, match="is a file, not a directory"):
    harness.Workdir(str(tmp_path / "file"), config, "toy")
  with pytest.raises(harness.WorkdirError, match="Not a directory"):
    harness.Workdir(str(tmp_path / "file" / "wd"), config, "toy")
  # A read-only workdir (root writes through file modes, so the refusal the
  # kernel gives is simulated where the lock file is opened).
  def read_only(self):
    raise PermissionError(13, "Permission denied",
                          os.path.join(self.path, ".lock"))
  monkeypatch.setattr(workdir_lib.Workdir, "_lock", read_only)
  with pytest.raises(harness.WorkdirError,
                     match="cannot use .* Permission denied .*/.lock"):
    harness.Workdir(str(tmp_path / "ro"), config, "toy")


def test_a_workdir_error_raised_inside_main_is_one_error_line(tmp_path,
                                                               capsys):
  config = ml_collections.ConfigDict({"seed": 3})
  wd = harness.Workdir(str(tmp_path / "wd"), config, "toy")
  writer = wd.metrics("run")
  writer.write(0, loss=1.0)
  with open(writer.path, "a") as f:
    f.write("garbage\n")
  writer.write(1, loss=2.0)

  def main(config, workdir):  # a resumed run reads its metrics
    workdir.train("run", {"w": jnp.zeros(2)}, None, num_steps=2,
                  checkpoint_every=1)

  with pytest.raises(SystemExit) as exit_:
    harness.call_main(main, config, wd)
  assert exit_.value.code == 1
  err = capsys.readouterr().err
  assert err.startswith("error: ") and err.count("\n") == 1
  assert "line 2 is not JSON" in err and "Traceback" not in err
  harness.Workdir(str(tmp_path / "wd"), config, "toy").close()  # unlocked


@pytest.mark.parametrize("detail,values,passed", [
    ("b=16: nan", None, False),         # the "b=16: nan" PASS
    ("BS = NaN x 2/eta", None, False),
    ("gap -nan", None, False),
    ("ok", {"a": 1.0, "b": [2.0, float("nan")]}, False),
    ("ok", np.array([1.0, np.nan]), False),
    ("ok", float("nan"), False),
    ("ratio inf", None, True),           # an unbounded ratio is a number
    ("12 ns (nanoseconds), finance", None, True),  # nan inside a word
    ("ok", {"a": 1.0, "b": [2.0, float("inf")], "c": None, "d": "x"}, True),
])
def test_a_check_on_nan_never_passes(detail, values, passed):
  check = harness.check("c", "claim", True, detail, values=values)
  assert check["passed"] is passed
  if not passed:
    assert "a check on NaN never passes" in check["detail"]
  # FAIL and INCONCLUSIVE are left as they are.
  for verdict in (False, None):
    assert harness.check("c", "x", verdict, detail,
                         values=values)["passed"] is verdict


def test_the_report_writer_refuses_pass_on_nan_and_marks_timed_checks(
    workdir):
  hand_built = {"id": "h", "name": "h", "passed": True, "detail": "x = nan"}
  report = workdir.write_report(
      paper={"title": "T", "authors": "A", "url": "u"}, claim="c",
      dataset={"name": "d", "provenance": "p"}, model={"num_params": 3},
      seeds=[0], results=[harness.result("e", "m", 1.5)], paper_results=[],
      checks=[hand_built,
              harness.check("t", "time", True, "ratio 0.05 [0.04, 0.06]",
                            machine_dependent=True)], figures=[])
  checks = {c["id"]: c for c in report["run_data"]["checks"]}
  assert checks["h"]["passed"] is False
  assert report["run_data"]["checks_passed"] == 1
  assert checks["t"]["machine_dependent"] is True
  with open(os.path.join(workdir.path, "report.md")) as f:
    text = f.read()
  assert "| `t` | time | PASS (machine-dependent) |" in text
  assert "| `h` | h | FAIL |" in text
  assert "Machine-dependent checks are decided by wall-clock timings" in text


def test_at_least_is_inconclusive_inside_the_spread():
  ratio = harness.paired_ratio([10.0, 12.0, 8.0, 11.0], [1.0, 1.0, 1.0, 1.0])
  assert harness.at_least(ratio, 7.0) is True
  assert harness.at_least(ratio, 13.0) is False
  assert harness.at_least(ratio, 10.0) is None


def test_the_verdict_rules_never_pass_on_nan():
  nan = float("nan")
  spread = {"ratio": nan, "low": nan, "high": nan, "rounds": 3}
  assert harness.at_most(spread, 1.0) is None
  assert harness.at_least(spread, 1.0) is None
  assert harness.at_most(harness.paired_ratio([1.0, nan], [1.0, 1.0]),
                         10.0) is not True
  for effect, se in ((nan, 0.1), (nan, None), (0.1, nan)):
    assert harness.effect_verdict(effect, se) is None


def test_an_os_error_inside_the_workdir_during_main_is_one_error_line(
    tmp_path, capsys):
  config = ml_collections.ConfigDict({"seed": 3})
  wd = harness.Workdir(str(tmp_path / "wd"), config, "toy")

  def main(config, workdir):  # the disk filled up, or the folder went read-only
    raise OSError(28, "No space left on device",
                  os.path.join(workdir.path, "metrics", "run.jsonl"))

  with pytest.raises(SystemExit) as exit_:
    harness.call_main(main, config, wd)
  assert exit_.value.code == 1
  assert "No space left on device" in capsys.readouterr().err

  def elsewhere(config, workdir):  # not the workdir's: a real traceback
    raise FileNotFoundError(2, "No such file", str(tmp_path / "data.npz"))

  with pytest.raises(FileNotFoundError):
    harness.call_main(elsewhere, config,
                      harness.Workdir(str(tmp_path / "wd"), config, "toy"))


def test_a_sweep_runs_every_cell_and_seed_and_summarises_over_seeds(workdir):
  grid = {"slow": 1.0, "fast": 3.0}
  calls = []

  def run(one):
    calls.append(one.name)
    return {"loss": one.settings * (one.seed + 1), "diverged": one.seed == 2}

  sweep = workdir.sweep(grid, (0, 1, 2), run, keys=("loss",))
  assert calls == [f"{c}_seed{s}" for c in grid for s in (0, 1, 2)]
  assert list(sweep.values) == ["slow", "fast"]
  fast = np.array([3.0, 6.0, 9.0])
  summary = sweep.summaries["fast"]
  assert summary["loss"] == pytest.approx(fast.mean())
  assert summary["loss_se"] == pytest.approx(fast.std(ddof=1) / np.sqrt(3))
  assert summary["diverged"] is True  # a flag is "any seed"
  mean, se = sweep.paired("loss", "fast", "slow")
  differences = fast - np.array([1.0, 2.0, 3.0])
  assert mean == pytest.approx(differences.mean())
  assert se == pytest.approx(differences.std(ddof=1) / np.sqrt(3))
  rows = sweep.results(["loss"], higher_is_better=["loss"])
  assert [(r["evaluation_name"], r["num_samples"], r["lower_is_better"])
          for r in rows] == [("slow", 3, False), ("fast", 3, False)]


def test_a_cached_sweep_reads_finished_runs_back_instead_of_running_them(
    workdir):
  calls = []

  def run(one):
    calls.append(one.name)
    return {"value": [one.settings, one.seed]}

  first = workdir.sweep({"a": 1, "b": 2}, (5,), run, cache=True)
  again = workdir.sweep({"a": 1, "b": 2}, (5,), run, cache=True)
  assert calls == ["a_seed5", "b_seed5"]
  assert again.values == first.values == {"a": [{"value": [1, 5]}],
                                          "b": [{"value": [2, 5]}]}
  assert os.path.exists(os.path.join(workdir.path, "stages", "sweep",
                                     "a_seed5.json"))


def test_a_sweep_without_seeds_runs_each_cell_once_under_its_own_name(
    workdir):
  names = []
  sweep = workdir.sweep({"x": 1}, None, lambda one: names.append(
      (one.name, one.seed)) or {"v": 2.0}, summarize=lambda v, s: {
          "v": v["v"] * s})
  assert names == [("x", None)] and sweep.seeds == (None,)
  assert sweep.per_seed == {"x": [{"v": 2.0}]}


@pytest.mark.parametrize("grid, seeds, message", [
    ({}, (0,), "at least one cell"),
    ({"a": 1}, (0, 0), "seeds must be distinct"),
    ({"a": 1}, (), "seeds must be distinct and at least one"),
])
def test_a_sweep_refuses_an_empty_grid_and_repeated_seeds(
    workdir, grid, seeds, message):
  with pytest.raises(ValueError, match=message):
    workdir.sweep(grid, seeds, lambda one: 0)


def test_the_report_takes_paper_claim_and_units_from_the_binary(workdir):
  workdir.metadata = {"paper": {"title": "T", "authors": "A", "url": "u"},
                      "claim": "c", "units": {"m": "percent"}}
  report = workdir.write_report(
      dataset={"name": "d", "provenance": "p"}, model={"num_params": 3},
      seeds=[0], results=[harness.result("e", "m", 1.5),
                          harness.result("e", "n", 2.0)], paper_results=[],
      checks=[harness.check("x_ok", "x", True, "ok")], figures=[])
  assert report["benchmark_metadata"]["claim"] == "c"
  assert report["benchmark_metadata"]["paper"]["title"] == "T"
  assert [r.get("unit") for r in report["run_data"]["results"]] == [
      "percent", None]


def test_a_binary_without_paper_or_claim_is_refused_at_start():
  from experiments.harness import cli  # pylint: disable=g-import-not-at-top
  with pytest.raises(TypeError, match="must define PAPER and CLAIM"):
    cli.report_metadata(test_a_sweep_runs_every_cell_and_seed_and_summarises_over_seeds)


def test_a_diagnosis_is_attached_to_its_failing_check_and_rendered(workdir):
  why = harness.diagnosis("scale", "the gap shrinks with steps.", ["s.png"])
  report = workdir.write_report(
      paper={"title": "T", "authors": "A", "url": "u"}, claim="c",
      dataset={"name": "d", "provenance": "p"}, model={"num_params": 3},
      seeds=[0], results=[], paper_results=[],
      checks=[harness.check("gap", "gap", False, "0.1"),
              harness.check("ok", "ok", True, "fine")], figures=[],
      diagnoses={"gap": why, "ok": why, "gone": why})
  checks = {c["id"]: c for c in report["run_data"]["checks"]}
  assert checks["gap"]["diagnosis"] == why
  assert "diagnosis" not in checks["ok"]
  assert report["run_data"]["notes"] == [
      "diagnosis 'gone' names no check of this run",
      "ok passed: its diagnosis (scale) is not shown"]
  with open(os.path.join(workdir.path, "report.md")) as f:
    text = f.read()
  assert "| `gap` | gap | FAIL (scale) | 0.1 |" in text
  assert ("- `gap` (FAIL), **scale**: the gap shrinks with steps. Evidence"
          " (in this report's folder): `s.png`.") in text


@pytest.mark.parametrize("kwargs, error, message", [
    ({"kind": "luck", "evidence": "x"}, ValueError, "kind must be one of"),
    ({"kind": "scale", "evidence": " "}, ValueError, "evidence must be"),
    ({"kind": "bug", "evidence": "x", "artefacts": [3]}, TypeError,
     "artefacts must be file names"),
])
def test_a_diagnosis_names_a_known_kind_and_its_evidence(kwargs, error,
                                                         message):
  with pytest.raises(error, match=message):
    harness.diagnosis(**kwargs)


def test_a_figure_block_saves_and_lists_its_figure_with_bands_and_bars(
    workdir):
  with workdir.figure("curves", title="t", cols=2) as axes:
    line = harness.band(axes[0, 0], [1, 2, 3], [1.0, 2.0, 3.0],
                        [0.1, None, 0.3], label="a")
    harness.bars(axes[0, 1], ["x", "y"], [1.0, 2.0], [0.5, None], ylabel="v")
    band = np.concatenate([p.vertices for p in
                           axes[0, 0].collections[0].get_paths()])
  assert line.get_label() == "a"
  assert band[:, 1].max() == pytest.approx(3.3)  # mean + se at the last point
  assert band[:, 1].min() == pytest.approx(0.9)
  path = os.path.join(workdir.path, "curves.png")
  assert workdir.figures == [path]
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  report = workdir.write_report(
      paper={"title": "T", "authors": "A", "url": "u"}, claim="c",
      dataset={"name": "d", "provenance": "p"}, model={}, results=[],
      paper_results=[], checks=[harness.check("x", "x", True, "ok")])
  assert report["run_data"]["figures"] == ["curves.png"]
  assert report["run_data"]["seeds"] == []  # the toy config has no seeds


def test_overlapping_texts_names_the_labels_printed_over_one_another():
  fig, axes = harness.panels(cols=2)
  axes[0, 0].set_xticks([0.5, 0.52], ["left label", "right label"])
  axes[0, 0].plot([0, 1], [0, 1], label="a line")
  axes[0, 0].legend()
  fig.suptitle("a title")
  assert plots.overlapping_texts(fig) == [("left label", "right label")]
  # Slanted side by side: their window extents overlap, the texts do not.
  labels = axes[0, 1].set_xticks([0.4, 0.55], ["a slanted label",
                                               "another slanted one"],
                                 rotation=45, ha="right")
  fig.canvas.draw()
  assert labels[0].get_window_extent().overlaps(labels[1].get_window_extent())
  assert plots.overlapping_texts(fig) == [("left label", "right label")]
  axes[0, 0].set_xticks([0.2, 0.8], ["left label", "right label"])  # apart
  assert plots.overlapping_texts(fig) == []


def test_saving_a_figure_warns_of_overlapping_texts_and_still_saves(workdir):
  with mock.patch.object(workdir_lib.logging, "warning") as warning:
    with workdir.figure("clean", title="t") as axes:
      axes[0, 0].set_xticks([0.2, 0.8], ["a", "b"])
    warning.assert_not_called()
    with workdir.figure("crowded", title="t") as axes:
      axes[0, 0].set_xticks([0.5, 0.51], ["one", "two"])
  message, *args = warning.call_args.args
  assert "overlapping texts, 1 pair(s): 'one' / 'two'" in message % tuple(args)
  assert os.path.exists(os.path.join(workdir.path, "crowded.png"))


@pytest.mark.parametrize("bounds, passed, shown", [
    ({"at_most": 2.0}, True, "vs bound <= 2"),
    ({"at_most": 1.2}, None, "vs bound <= 1.2"),
    ({"at_least": 1.5}, False, "vs bound >= 1.5"),
])
def test_a_timing_check_is_machine_dependent_and_judged_on_its_spread(
    bounds, passed, shown):
  ratio = {"ratio": 1.2, "low": 1.1, "high": 1.3, "rounds": 9}
  got = harness.timing_check("t", "t", ratio, what="a/b = ", **bounds)
  assert got["passed"] is passed and got["machine_dependent"] is True
  assert got["detail"] == f"a/b = 1.2x (10-90%: 1.1-1.3, 9 rounds) {shown}"


def test_a_timing_check_needs_exactly_one_bound():
  with pytest.raises(ValueError, match="exactly one of at_most, at_least"):
    harness.timing_check("t", "t", {}, at_most=1.0, at_least=1.0)


def test_a_markdown_table_formats_numbers_and_keeps_text():
  assert harness.markdown_table(["a", "b"], [["x", 1.234567], ["y", None]]) == [
      "| a | b |", "|---|---|", "| x | 1.235 |", "| y |  |"]


def test_a_smoke_run_names_its_declared_checks_and_any_other_failure():
  from experiments.harness import cli  # pylint: disable=g-import-not-at-top
  checks = [harness.check("bs_at_threshold_eta0.25_b32", "x", False, ""),
            harness.check("new_check", "y", None, ""),
            harness.check("lambda_max_below_bs_eta0.25_b32", "z", True, ""),
            harness.check("lambda_max_grows_with_batch_eta0.25", "w", True, "")]
  assert cli.scale_note("eoss", checks, ["lambda_max_grows_with_batch_eta0.25"]) == (
      "smoke scale: this run checks that the code runs end to end, not the"
      " claim; the binary declares these checks too small for it (they need"
      " the default scale): lambda_max_grows_with_batch_eta0.25 (passed here"
      " anyway: lambda_max_grows_with_batch_eta0.25); not passed here though"
      " not declared: bs_at_threshold_eta0.25_b32 (passes at the default"
      " scale), new_check (not in the default report).")
  daf = [harness.check("single_beta_beats_uniform_merge", "x", False, "")]
  assert cli.scale_note("daf", daf).endswith(
      "single_beta_beats_uniform_merge (does not pass at the default scale"
      " either).")
  assert cli.scale_note("daf", daf, ["single_beta_beats_uniform_merge"]) == (
      "smoke scale: this run checks that the code runs end to end, not the"
      " claim; the binary declares these checks too small for it (they need"
      " the default scale): single_beta_beats_uniform_merge.")


def test_a_binary_declares_its_smoke_scale_checks_as_a_tuple_of_prefixes():
  from experiments.harness import cli  # pylint: disable=g-import-not-at-top
  module = types.ModuleType("fake_binary")
  module.PAPER, module.CLAIM = {"title": "t"}, "c"
  module.main = lambda config, workdir: None
  module.main.__module__ = "fake_binary"
  sys.modules["fake_binary"] = module
  try:
    assert cli.report_metadata(module.main)["not_at_smoke_scale"] == ()
    module.NOT_AT_SMOKE_SCALE = ("lambda_max_grows",)
    assert cli.report_metadata(module.main)["not_at_smoke_scale"] == (
        "lambda_max_grows",)
    module.NOT_AT_SMOKE_SCALE = "lambda_max_grows"
    with pytest.raises(TypeError, match="NOT_AT_SMOKE_SCALE of fake_binary"
                       " must be a tuple of check id prefixes"):
      cli.report_metadata(module.main)
  finally:
    del sys.modules["fake_binary"]


def test_a_smoke_report_is_marked_as_smoke_with_its_declared_checks(workdir):
  workdir.scale = "smoke"
  workdir.metadata["not_at_smoke_scale"] = ("x_", "absent")
  report = _minimal_report(workdir)
  assert report["run_data"]["scale"] == "smoke"
  assert report["run_data"]["not_at_smoke_scale"] == ["x_ok"]
  assert workdir.not_at_smoke_scale == ["x_ok"]
  with open(os.path.join(workdir.path, "report.md")) as f:
    assert ("**Scale: `smoke`.** A reduced config: its checks test that the"
            " code runs end to end, not the claim; the default config's report"
            " is the one that tests the claim. The binary declares these checks"
            " too small for it: `x_ok`.") in f.read()
