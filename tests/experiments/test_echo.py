"""The ECHO experiment: summaries, claim checks, validation and the smoke run."""

import functools
import itertools
import types

import numpy as np
import pytest

from experiments import echo
from experiments import harness
from experiments.harness import sweep as sweep_lib
from tests import binaries
from experiments.configs import echo as echo_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, echo_config.FIELDS, echo_config.validate)


def _records(curves):
  """Metrics records from ``curves[run] = [(pass, ce, reward) per eval]``."""
  steps = range(len(next(iter(curves))))
  return [{"step": 10 * s,
           "pass_at_1": [c[s][0] for c in curves],
           "env_ce": [c[s][1] for c in curves],
           "reward": [c[s][2] for c in curves]} for s in steps]


def _config(variants):
  config = echo_config.get_config()
  config.seeds = (0, 1)
  config.variants = variants
  config.eval.final_points = 1
  return config


def test_summary_and_checks_follow_the_numbers():
  variants = ("grpo", "echo_0.05", "world_model_only")
  config = _config(variants)
  runs = list(itertools.product(variants, config.seeds))
  curves = [
      [(0.1, 2.0, 0.5), (0.3, 1.9, 0.6), (0.2, 1.8, 0.6)],  # grpo seed 0
      [(0.1, 2.0, 0.5), (0.2, 1.9, 0.6), (0.3, 1.8, 0.6)],  # grpo seed 1
      [(0.1, 2.0, 0.5), (0.3, 1.5, 0.6), (0.5, 1.2, 0.7)],  # echo seed 0
      [(0.1, 2.0, 0.5), (0.4, 1.5, 0.6), (0.6, 1.1, 0.7)],  # echo seed 1
      [(0.1, 2.0, 0.5), (0.1, 1.6, 0.5), (0.1, 1.4, 0.5)],  # world model 0
      [(0.1, 2.0, 0.5), (0.1, 1.7, 0.5), (0.1, 1.5, 0.5)],  # world model 1
  ]
  records = _records(curves)
  workdir = types.SimpleNamespace(sweep=functools.partial(
      sweep_lib.run_sweep, lambda name, compute: compute()))
  sweep = echo.read_runs(workdir, config, runs, records)
  summary = echo.summarize(sweep, [r["step"] for r in records])
  assert summary["grpo"]["pass_at_1_per_seed"] == [0.2, 0.3]
  np.testing.assert_allclose(summary["echo_0.05"]["env_ce_curve"],
                             [2.0, 1.5, 1.15])
  # GRPO's mean curve peaks at 0.25 (step 10 and 20); ECHO reaches it at 10.
  assert summary["grpo_peak"] == {"pass_at_1": 0.25, "step": 10}
  assert summary["echo_0.05"]["steps_to_grpo_peak"] == 10
  assert summary["world_model_only"]["steps_to_grpo_peak"] is None
  checks = {c["id"]: c for c in echo.evaluate_claim(summary)}
  assert checks["echo_0.05_raises_pass_at_1"]["passed"] is True
  assert checks["echo_0.05_lowers_env_ce"]["passed"] is True
  assert checks["world_model_only_raises_pass_at_1"]["passed"] is False
  assert checks["world_model_only_lowers_env_ce"]["passed"] is True
  # Reached at step 10, as GRPO did: not sooner.
  assert checks["echo_0.05_reaches_grpo_peak_sooner"]["passed"] is False


@pytest.mark.parametrize("field,value,message", [
    ("variants", ("grpo", "ppo"), "variants"),
    ("rl.steps", 7, "steps"),
    ("rl.lambda_schedule", "cosine", "lambda_schedule"),
    ("env.min_commands", 5, "min_commands <= max_commands"),
    ("env.max_commands", 9, "max_commands <= num_turns")])
def test_validate_rejects_configs_it_cannot_run(field, value, message):
  config = echo_config.get_config("smoke")
  _refuses(config)
  section, _, name = field.rpartition(".")
  (config[section] if section else config)[name] = value
  with pytest.raises(ValueError, match=message):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figure(tmp_path):
  report = binaries.run_smoke("echo", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["pass_and_env_ce.png"]
  summary = run_data["summary"]
  assert set(summary) == {"grpo", "echo_0.05", "world_model_only", "grpo_peak"}
  for variant in ("grpo", "echo_0.05", "world_model_only"):
    assert summary[variant]["steps"] == [0, 2, 4]
    assert all(0 <= p <= 1 for p in summary[variant]["pass_at_1_curve"])
    assert all(np.isfinite(summary[variant]["env_ce_curve"]))
  # Every run starts from the same warm start: identical step-0 numbers.
  assert len({summary[v]["env_ce_curve"][0] for v in
              ("grpo", "echo_0.05", "world_model_only")}) == 1
  losses = run_data["warm_start_loss"]
  assert losses[-1] < losses[0]
  checks = {c["id"] for c in run_data["checks"]}
  assert checks == {"echo_0.05_raises_pass_at_1", "echo_0.05_lowers_env_ce",
                    "world_model_only_raises_pass_at_1",
                    "world_model_only_lowers_env_ce",
                    "echo_0.05_reaches_grpo_peak_sooner"}
