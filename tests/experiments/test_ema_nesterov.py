"""The EMA-Nesterov LM experiment: resume after a crash, step counting, claims."""

import jax.numpy as jnp
import pytest

from experiments import ema_nesterov
from experiments import harness
from experiments import lm
from experiments import testing
from experiments.configs import ema_nesterov as ema_config


def _tiny_config():
  config = ema_config.get_config("smoke")
  config.model.update(d_model=16, num_heads=2, d_ff=32, length=16)
  config.batch_size = 4
  config.data.valid_windows = 8
  config.num_steps = 20
  config.eval_every = 5
  config.checkpoint_every = 10
  return config


class _Crash(Exception):
  pass


@pytest.mark.usefixtures("standard_dtype_promotion")  # optax.adamw
def test_run_resumed_after_a_crash_equals_the_uninterrupted_run(tmp_path,
                                                                monkeypatch):
  config = _tiny_config()
  setup = ema_nesterov.Setup.from_config(config)
  corpus = lm.load_corpus(source_files=2, valid_fraction=0.2)
  arrays = (jnp.asarray(corpus.train),
            lm.validation_windows(corpus.valid, 8, setup.length))
  run = lambda path: ema_nesterov.train_run(
      setup, harness.Workdir(str(path), config, "ema_nesterov"), arrays,
      "adamw+ema", seed=1, beta=0.7, gamma=0.5)
  straight = run(tmp_path / "straight")
  assert [r["step"] for r in straight] == [0, 5, 10, 15, 20]

  chunk = ema_nesterov._train_chunk  # pylint: disable=protected-access
  calls = []

  def crash_on_the_fourth_chunk(*args, **kwargs):
    calls.append(1)
    if len(calls) == 4:  # after step 15 was logged; last checkpoint: step 10
      raise _Crash
    return chunk(*args, **kwargs)

  monkeypatch.setattr(ema_nesterov, "_train_chunk", crash_on_the_fourth_chunk)
  with pytest.raises(_Crash):
    run(tmp_path / "resumed")
  monkeypatch.setattr(ema_nesterov, "_train_chunk", chunk)
  assert run(tmp_path / "resumed") == straight
  # The lookahead was on (anchor != gradient point) while training ran.
  on = [r for r in straight if 0 < r["step"] < 20]
  assert any(r["valid_bpb"] != r["valid_bpb_at_gradient_point"] for r in on)


def test_steps_to_reach_interpolates_between_evaluations():
  records = [{"step": s, "valid_bpb": v}
             for s, v in [(0, 5.0), (10, 3.0), (20, 2.0), (30, 1.5)]]
  assert ema_nesterov.steps_to_reach(records, 2.5) == pytest.approx(15.0)
  assert ema_nesterov.steps_to_reach(records, 3.0) == 10.0
  assert ema_nesterov.steps_to_reach(records, 1.0) is None


def _records(finals, steps=(0, 50, 100)):
  """Curves that fall linearly from 4 bpb to each final value."""
  return {seed: [{"step": s, "valid_bpb": 4 + (f - 4) * s / steps[-1],
                  "valid_bpb_at_gradient_point": f} for s in steps]
          for seed, f in enumerate(finals)}


@pytest.mark.parametrize("ema_final,passes", [(1.9, True), (2.1, False)])
def test_claim_checks_follow_the_numbers(ema_final, passes):
  by_method = {
      "adamw": _records([2.0, 2.0]), "adamw+ema": _records([ema_final] * 2),
      "muon": _records([1.8, 1.8]), "muon+ema": _records([1.7, 1.7]),
      "lookahead": _records([2.2, 2.2]), "schedule_free": _records([1.95, 1.95]),
  }
  summary = ema_nesterov.summarize(by_method, [0, 1])
  grid = [{"beta": 0.5, "gamma": 0.0, "final_bpb": 2.0},
          {"beta": 0.5, "gamma": 0.9, "final_bpb": 1.9}]
  checks = {c["name"]: c["passed"]
            for c in ema_nesterov.evaluate_claim(summary, grid, 2)}
  assert checks["adamw+EMA-Nesterov: lower final validation loss than adamw"] is passes
  assert checks["adamw+EMA-Nesterov: reaches adamw's final loss in fewer steps"] is passes
  assert checks["adamw+EMA-Nesterov beats schedule-free AdamW"] is passes
  assert checks["muon+EMA-Nesterov: reaches muon's final loss in fewer steps"]
  assert checks["adamw+EMA-Nesterov beats multi-step lookahead (optax.lookahead)"]
  assert checks["grid: the best gamma>0 beats the best short-horizon gamma=0"]
  # Linear curves from 4 to 1.7 reach muon's final 1.8 at 100 * 2.2 / 2.3.
  assert summary["muon+ema"]["steps_ratio"] == pytest.approx(2.2 / 2.3)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = testing.run_smoke("ema_nesterov", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["valid_loss_vs_step.png", "grid_beta_gamma.png"]
  assert len(run_data["checks"]) == 7
  assert set(run_data["summary"]) == set(ema_nesterov.METHODS)
  # 40 steps of training take every method well below the uniform 8 bits/byte.
  for s in run_data["summary"].values():
    assert 3.0 < s["final_bpb"] < 7.0
