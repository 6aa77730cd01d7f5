"""The BitResEdit experiment: claim checks, aggregation, validation and the smoke run."""

import numpy as np
import pytest

from experiments import bitresedit
from experiments import harness
from tests import binaries
from experiments.configs import bitresedit as bitresedit_config


def _refuses(config):
  """The binary's refusal: its declared field ranges, then its validate."""
  harness.check_config(config, bitresedit_config.FIELDS, bitresedit_config.validate)


def _config():
  config = bitresedit_config.get_config("smoke")
  config.seeds = (0, 1)
  return config


def _seed(alignment, *, both=0.8, resedit=0.7, leak=0.5, kl=0.09):
  """One seed's record: the quadratic alignment curve over lambda (0, 1, 4)."""
  curve = {"alignment": list(alignment), "clipped": [0.0, 0.3, 0.6],
           "kl_max": [0.0, kl, kl], "kl_mean": [0.0, 0.01, 0.02],
           "outside_max_error": [0.0] * 3, "outside_rms_error": [0.0] * 3}
  arm = lambda a, e: {"alignment": a, "outside_max_error": e,
                      "outside_rms_error": e, "kl_max": kl, "kl_mean": 0.01,
                      "clipped": 0.1}
  return {"sweep": {"quadratic/0.1": curve, "quadratic/inf": curve,
                    "exact/0.1": curve},
          "ablation": {"bitedit_only": arm(0.85, leak),
                       "resedit_only": arm(resedit, 0.0),
                       "both": arm(both, 0.0),
                       "plain_target_cfg": arm(0.75, leak),
                       "no_trust_region": arm(0.8, 0.0)},
          "clean_mismatches": 0}


def _sweep(per_seed):
  """The sweep of these per-seed records: a cell per strength and arm."""
  config = _config()
  grid = bitresedit.conditions(config)
  rows = {}
  for cell in grid:
    curve, _, lam = cell.rpartition("/lambda")
    i = [f"{s:g}" for s in config.strengths].index(lam) if curve else None
    rows[cell] = [s["ablation"][cell.split("/")[1]] if i is None else
                  {m: v[i] for m, v in s["sweep"][curve].items()}
                  for s in per_seed]
  values = {c: [dict(r) for r in rs] for c, rs in rows.items()}
  for value, s in zip(values["ablation/plain_target_cfg"], per_seed):
    value["clean_mismatches"] = s["clean_mismatches"]
  return harness.SweepResult(grid, tuple(range(len(per_seed))), values, rows,
                             None)


def _checks(per_seed):
  sweep = _sweep(per_seed)
  summary = bitresedit.aggregate(_config(), sweep)
  gaps = {"0.001": 0.036, "0.1": 0.54}
  return {c["id"]: c for c in bitresedit.evaluate_claim(_config(), sweep,
                                                        summary, gaps)}


def test_checks_pass_on_a_rising_saturating_curve():
  checks = _checks([_seed([0.70, 0.79, 0.80]), _seed([0.71, 0.80, 0.81])])
  assert all(c["passed"] is True for c in checks.values()), checks


def test_checks_fail_on_falling_alignment_leaks_and_broken_bounds():
  per_seed = [_seed([0.70, 0.75, 0.60], both=0.6, kl=0.2),
              _seed([0.71, 0.76, 0.61], both=0.6, kl=0.2)]
  per_seed[0]["ablation"]["both"]["outside_max_error"] = 1e-7
  per_seed[1]["clean_mismatches"] = 3
  checks = _checks(per_seed)
  for check_id in ("alignment_rises_eps0.1", "saturates_eps0.1",
                   "exact_kl_within_budget", "background_exact",
                   "bitedit_adds_alignment", "complementary",
                   "zero_strength_is_clean_sampler"):
    assert checks[check_id]["passed"] is False, check_id
  assert checks["radius_quadratic_vs_exact"]["passed"] is True


def test_a_curve_that_keeps_rising_does_not_saturate():
  checks = _checks([_seed([0.70, 0.75, 0.80]), _seed([0.71, 0.76, 0.81])])
  assert checks["alignment_rises_eps0.1"]["passed"] is True
  assert checks["saturates_eps0.1"]["passed"] is False


def test_checked_trust_picks_the_curves_and_the_measures_match_the_verdicts():
  per_seed = [_seed([0.70, 0.79, 0.80]), _seed([0.71, 0.80, 0.81])]
  for record in per_seed:  # exact mode over-steers: rises, then falls
    record["sweep"]["exact/0.1"] = {**record["sweep"]["exact/0.1"],
                                    "alignment": [0.70, 0.80, 0.75]}
  config = _config()
  config.checked_trust = "exact"
  sweep = _sweep(per_seed)
  checks = {c["id"]: c for c in bitresedit.evaluate_claim(
      config, sweep, bitresedit.aggregate(config, sweep), {"0.001": 0.036, "0.1": 0.54})}
  assert checks["saturates_eps0.1"]["passed"] is False
  assert "(exact)" in checks["saturates_eps0.1"]["name"]
  assert _checks(per_seed)["saturates_eps0.1"]["passed"] is True  # quadratic
  for check in (checks["saturates_eps0.1"], _checks(per_seed)["saturates_eps0.1"]):
    value, bound = check["measure"]["value"], check["measure"]["bound"]
    assert check["measure"]["higher_is_better"] is False
    assert (value <= bound) is check["passed"]
  rises = checks["alignment_rises_eps0.1"]["measure"]
  assert rises["value"] > 0 and rises["se"] is not None and rises["bound"] == 0.0


def _gain(differences):
  """The verdict of ``both - resedit_only`` alignments with these differences."""
  per_seed = [_seed([0.7, 0.8, 0.8], both=0.7 + d) for d in differences]
  return bitresedit.gain(_sweep(per_seed), "ablation/both",
                         "ablation/resedit_only")[0]


def test_paired_verdict_is_inconclusive_within_two_standard_errors():
  assert _gain([0.1, 0.12, 0.11]) is True
  assert _gain([-0.1, -0.12, -0.11]) is False
  assert _gain([0.1, -0.1, 0.05]) is None
  assert _gain([0.02]) is True


@pytest.mark.parametrize("field,value", [("strengths", (1.0, 2.0, 4.0)),
                                         ("trust_modes", ("exact",)),
                                         ("num_examples", 99), ("seeds", ())])
def test_validate_rejects_configs_it_cannot_run(field, value):
  config = bitresedit_config.get_config("smoke")
  _refuses(config)
  config[field] = value
  with pytest.raises(ValueError, match=field):
    _refuses(config)


@pytest.mark.slow
def test_smoke_config_writes_report_and_figures(tmp_path):
  report = binaries.run_smoke("bitresedit", tmp_path)
  run_data = report["run_data"]
  assert run_data["figures"] == ["alignment_vs_strength.png", "ablation.png",
                                 "edited_examples.png"]
  checks = {c["id"]: c for c in run_data["checks"]}
  assert set(checks) == {
      "radius_quadratic_vs_exact", "zero_strength_is_clean_sampler",
      "exact_kl_within_budget", "alignment_rises_eps0.1", "saturates_eps0.1",
      "background_exact", "bitedit_adds_alignment", "complementary"}
  # The library's guarantees hold on any config: these cannot be noise.
  for check_id in ("radius_quadratic_vs_exact",
                   "zero_strength_is_clean_sampler", "exact_kl_within_budget",
                   "background_exact"):
    assert checks[check_id]["passed"] is True, checks[check_id]
  ablation = run_data["summary"]["ablation"]
  assert ablation["resedit_only"]["outside_max_error"] == 0.0
  assert ablation["bitedit_only"]["outside_max_error"] > 0.0
  sweep = run_data["summary"]["sweep"]
  assert set(sweep) == {"quadratic/0.1", "quadratic/inf", "exact/0.1"}
  assert max(sweep["exact/0.1"]["kl_max"]) <= np.float32(0.1)
