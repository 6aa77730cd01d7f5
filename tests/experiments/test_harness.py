"""The experiment harness: metrics, checkpoints, reports."""

import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments import checkpointing
from experiments import harness


def _workdir(tmp_path):
  config = ml_collections.ConfigDict({"seed": 3, "lr": 0.1})
  return harness.Workdir(str(tmp_path / "wd"), config, "toy")


def test_metrics_roundtrip_and_truncate_after(tmp_path):
  writer = _workdir(tmp_path).metrics("run")
  for step in range(0, 50, 10):
    writer.write(step, loss=jnp.float32(step / 10), nan=float("nan"))
  writer.truncate_after(20)
  records = writer.read()
  assert [r["step"] for r in records] == [0, 10, 20]
  assert records[2]["loss"] == pytest.approx(2.0)
  assert np.isnan(records[0]["nan"])  # NaN stays visible, not dropped
  writer.truncate_after(-1)
  assert writer.read() == []


def test_checkpoint_restores_into_abstract_target_with_new_sharding(tmp_path):
  mesh = jax.make_mesh((8,), ("d",), axis_types=(jax.sharding.AxisType.Explicit,))
  sharded = jax.device_put(jnp.arange(16.0), jax.NamedSharding(mesh, jax.P("d")))
  state = {"w": sharded, "step": jnp.int32(7)}
  ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
  assert ckpt.latest_step() is None
  ckpt.save(7, state)
  ckpt.save(9, state)
  assert ckpt.latest_step() == 9
  # Restore onto a single device: the target carries the new sharding.
  one_device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  target = {"w": jax.ShapeDtypeStruct((16,), jnp.float32, sharding=one_device),
            "step": jax.ShapeDtypeStruct((), jnp.int32, sharding=one_device)}
  restored = ckpt.restore(target)
  ckpt.close()
  np.testing.assert_array_equal(restored["w"], np.arange(16.0))
  assert restored["w"].sharding == one_device
  assert int(restored["step"]) == 7


def test_restore_without_checkpoint_is_a_named_error(tmp_path):
  ckpt = checkpointing.Checkpointer(str(tmp_path / "empty"))
  with pytest.raises(FileNotFoundError, match="no checkpoint to restore"):
    ckpt.restore({"w": jax.ShapeDtypeStruct((2,), jnp.float32)})


def test_report_has_the_three_blocks_and_renders(tmp_path):
  workdir = _workdir(tmp_path)
  report = harness.make_report(
      workdir,
      paper={"title": "T", "authors": "A", "url": "u"},
      claim="c",
      dataset={"name": "d", "provenance": "p"},
      model={"num_params": 3},
      seeds=[0, 1],
      results=[{"evaluation_name": "e", "metric": "m", "score": 1.5,
                "standard_error": 0.1, "num_samples": 2,
                "lower_is_better": True}],
      paper_results=[{"evaluation_name": "e", "statement": "s"}],
      checks=[{"name": "x", "passed": True, "detail": "ok"},
              {"name": "y", "passed": False, "detail": "no"}],
      figures=["f.png"],
  )
  assert set(report) >= {"benchmark_metadata", "run_data", "model_metadata"}
  run_data = report["run_data"]
  assert run_data["config"] == {"lr": 0.1, "seed": 3}
  assert run_data["config_hash"] == harness.config_hash(workdir.config)
  assert run_data["all_checks_passed"] is False
  assert run_data["platform"]["device_count"] == jax.device_count()
  assert "jax" in run_data["versions"]
  workdir.write_report(report)
  with open(os.path.join(workdir.path, "report.json")) as f:
    assert json.load(f) == json.loads(json.dumps(report))
  with open(os.path.join(workdir.path, "report.md")) as f:
    text = f.read()
  assert "| y | FAIL | no |" in text and "| x | PASS | ok |" in text


def test_config_hash_changes_with_any_field():
  a = ml_collections.ConfigDict({"lr": 0.1, "b": (1, 2)})
  b = ml_collections.ConfigDict({"lr": 0.1, "b": (1, 3)})
  assert harness.config_hash(a) != harness.config_hash(b)
  assert harness.config_hash(a) == harness.config_hash(a.copy_and_resolve_references())


def test_open_run_resumes_state_and_drops_later_metrics(tmp_path):
  workdir = _workdir(tmp_path)
  initial = {"w": jnp.zeros(3), "step": jnp.int32(0)}
  state, step, ckpt, metrics = workdir.open_run("r", initial)
  assert step is None and state is initial
  for s in (10, 20, 30):
    metrics.write(s, loss=float(s))
  ckpt.save(20, {"w": jnp.ones(3), "step": jnp.int32(20)})
  ckpt.close()
  state, step, ckpt, metrics = workdir.open_run("r", initial)
  ckpt.close()
  assert step == 20 and int(state["step"]) == 20
  np.testing.assert_array_equal(state["w"], np.ones(3))
  assert [r["step"] for r in metrics.read()] == [10, 20]
