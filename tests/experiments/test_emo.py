"""The EMO binary: claim checks, summaries, validation, resume, smoke run."""

import json

import numpy as np
import pytest

from experiments import emo
from experiments import harness
from tests import binaries
from experiments.configs import emo as emo_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, emo_config.FIELDS, emo_config.validate)


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


CHECK_IDS = ("full_models_about_equal", "standard_degrades_more_at_25pct",
             "standard_degrades_more_at_12_5pct", "emo_barely_moves_at_25pct",
             "emo_usage_more_domain_specific")


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
  barely = next(c for c in checks if c["id"] == "emo_barely_moves_at_25pct")["measure"]
  assert barely["value"] == pytest.approx(emo_deltas[0] / 1.02) and barely["bound"] == 0.05
  checks = {c["id"]: c["passed"] for c in checks}
  assert checks == dict(zip(CHECK_IDS, expected))


@pytest.mark.parametrize("field,value,message", [
    ("models", ("emo",), "models"),
    ("models", ("standard", "emo", "dense"), "models"),
    ("checkpoint_every", 25, "checkpoint_every"),
    ("model.k", 40, "k must lie in"),
    ("model.pool_low", 2, "exceeds pool_size"),  # k = 3 experts from 2
    ("data.min_chars", 4096, "min_chars=4096 exceeds")])
def test_validate_rejects_configs_the_binary_cannot_run(field, value, message):
  _refuses(emo_config.get_config())
  _refuses(emo_config.get_config("smoke"))
  config = emo_config.get_config()
  section, _, name = field.rpartition(".")
  (config[section] if section else config)[name] = value
  with pytest.raises(ValueError, match=message):
    _refuses(config)


def _stage(workdir, name):
  with open(workdir / "stages" / f"{name}.json") as f:
    return json.load(f)["value"]


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("emo", tmp_path)
  workdir = tmp_path / "smoke"
  run_data = report["run_data"]
  assert len(run_data["figures"]) == 2
  assert [c["id"] for c in run_data["checks"]] == list(CHECK_IDS)
  units = {r["metric"]: r["unit"] for r in run_data["results"]}
  assert units["full_bpb"] == units["delta_0.125"] == "bits/byte"
  assert units["relative_delta_0.25"] == units["domain_nmi"] == "proportion"
  summary = run_data["summary"]
  for kind in ("standard", "emo"):
    full = summary[kind]["mean"]["full_bpb"][0]
    assert 1.0 < full < 8.0  # trained below the 8 bits of a uniform byte
    # Keeping fewer experts never helps much: 12.5% costs more than 25%.
    assert (summary[kind]["mean"]["delta_0.125"][0]
            > summary[kind]["mean"]["delta_0.25"][0])
  evals = _stage(workdir, "sweep/emo_seed0")
  assert [r["domain"] for r in evals] == ["code", "prose", "arithmetic", "csv"]
  for r in evals:
    usage = np.asarray(r["usage"])
    assert usage.shape == (2, 15)
    np.testing.assert_allclose(usage.sum(-1), 1.0, rtol=1e-5)
    assert all(len(layer) == 3 for layer in r["kept_0.25"])
    assert all(len(layer) == 1 for layer in r["kept_0.125"])
