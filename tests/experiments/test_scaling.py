"""Scaling studies and diagnoses: a check followed across sizes, diagnoses on committed reports.

The study runs a stand-in experiment (registered as ``experiments.toy_study``
with its config module) whose check's measure is a known function of the
size, so the trend and its prediction have closed forms and nothing compiles.
"""

import json
import math
import os
import sys
import types

import ml_collections
import numpy as np
import pytest

from experiments import harness
from experiments import scaling
from experiments.configs import common
from experiments.configs import scaling as scaling_config
from experiments.harness import cli
from experiments.harness import report as report_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "experiments", "results")


def _toy_main(config, workdir):
  # The gap closes like log(steps): measure = -1 + 0.5 log(steps / 2).
  _toy_main.calls += 1
  value = -1.0 + 0.5 * math.log(config.steps / 2)
  workdir.write_report(
      dataset={"name": "toy", "provenance": "generated"}, model={}, seeds=[0],
      results=[], paper_results=[], figures=[],
      checks=[harness.check(
          "gap_closes", "the gap closes", value > 0, f"{value:+.3f}",
          measure=harness.measure(value, se=0.1, bound=0.0, label="gap"))])


@pytest.fixture
def toy_experiment(monkeypatch):
  binary = types.ModuleType("experiments.toy_study")
  binary.PAPER = {"title": "Toy", "authors": "A", "url": "u"}
  binary.CLAIM = "the gap closes"
  binary.main = _toy_main
  _toy_main.__module__ = binary.__name__
  _toy_main.calls = 0
  configs = types.ModuleType("experiments.configs.toy_study")
  configs.get_config = lambda arg=None: ml_collections.ConfigDict(
      {"steps": 2, "seeds": (0,)})
  configs.FIELDS = {"steps": common.COUNT, "seeds": common.SEEDS}
  monkeypatch.setitem(sys.modules, binary.__name__, binary)
  monkeypatch.setitem(sys.modules, configs.__name__, configs)
  return binary


def _study_config(sizes=(3, 4, 6), axis="steps"):
  spec = scaling_config.study(axis=axis, what="steps",
                              sizes=[{"steps": s} for s in sizes],
                              checks=["gap_closes"])
  config = ml_collections.ConfigDict(
      {"experiment": "toy_study", "study": "steps", "base": spec["base"],
       "axis": spec["axis"], "what": spec["what"],
       "checks": tuple(spec["checks"]), "overrides": ()})
  config.sizes = tuple(tuple(s.items()) for s in spec["sizes"])
  return config


def test_a_study_follows_its_check_and_predicts_where_the_trend_meets_the_bound(
    toy_experiment, tmp_path):
  config = _study_config()
  cli.check_config(config, scaling_config.FIELDS, scaling_config.validate)
  workdir = harness.Workdir(str(tmp_path / "study"), config, "scaling")
  scaling.main(config, workdir)
  workdir.close()
  with open(tmp_path / "study" / "report.json") as f:
    report = json.load(f)
  followed = report["run_data"]["followed"]["gap_closes"]
  assert followed["x"] == [3.0, 4.0, 6.0]
  np.testing.assert_allclose(followed["value"],
                             [-1 + 0.5 * math.log(s / 2) for s in (3, 4, 6)])
  assert followed["slope"] == pytest.approx(0.5)
  assert followed["predicted_size"] == pytest.approx(2 * math.e ** 2)
  assert followed["verdicts"] == ["FAIL"] * 3
  assert os.path.isfile(tmp_path / "study" / "scaling_steps.png")
  assert "the trend reaches 0 at steps = 14.8" in report["run_data"]["notes"][0]
  assert report["benchmark_metadata"]["paper"]["title"] == "Toy"
  # A rerun reads every finished size back from its stage.
  workdir = harness.Workdir(str(tmp_path / "study"), config, "scaling")
  scaling.main(config, workdir)
  workdir.close()
  assert _toy_main.calls == 3


def test_a_trend_away_from_the_bound_predicts_nothing():
  away = scaling.trend([1, 2, 4], [-0.1, -0.2, -0.3], [0.01] * 3, 0.0, True)
  assert away["toward_claim"] is False and away["predicted_size"] is None
  assert away["slope"] == pytest.approx(-0.1 / math.log(2))
  flat = scaling.trend([2, 2, 2], [0.1, 0.2, 0.3], [None] * 3, 0.0, True)
  assert flat["slope"] is None  # one size three times: no trend


@pytest.mark.parametrize("sizes, axis, message", [
    ((3, 4, 6), "epochs", "does not set the axis 'epochs'"),
    ((3, 4, 0), "steps", r"sizes\[2\] of toy_study: .*steps"),
])
def test_a_study_is_checked_before_any_run(toy_experiment, sizes, axis,
                                           message):
  config = _study_config(sizes, axis)
  with pytest.raises(ValueError, match=message):
    scaling_config.validate(config)


def test_a_check_without_a_measure_cannot_be_followed():
  runs = [{"checks": [{"id": "c", "name": "c", "passed": False}]}] * 3
  with pytest.raises(ValueError, match="give its harness.check a measure"):
    scaling.follow("c", [1, 2, 3], runs)


def test_a_measure_needs_a_finite_bound_and_refuses_pass_on_nan():
  with pytest.raises(ValueError, match="bound must be a finite number"):
    harness.measure(1.0, bound=math.nan)
  check = harness.check("c", "c", True, "fine",
                        measure=harness.measure(math.nan, bound=0.0))
  assert check["passed"] is False


def _committed_like(tmp_path):
  workdir = harness.Workdir(str(tmp_path / "wd"), ml_collections.ConfigDict(
      {"seed": 0}), "toy")
  workdir.write_report(
      markdown_appendix="## Appendix\n\nkept\n",
      paper={"title": "T", "authors": "A", "url": "u"}, claim="c",
      dataset={"name": "d", "provenance": "p"}, model={}, seeds=[0],
      results=[], paper_results=[], figures=[],
      checks=[harness.check("gap", "gap", False, "0.1"),
              harness.check("ok", "ok", True, "fine")])
  workdir.close()
  return workdir.path


def test_diagnoses_attach_to_a_finished_report_without_recomputing(tmp_path):
  path = _committed_like(tmp_path)
  why = {"gap": harness.diagnosis("scale", "it shrinks.", ["s.png"])}
  assert report_lib.reattach_diagnoses(path, why, "abc1234+dirty")
  assert report_lib.reattach_diagnoses(path, why, "abc1234")  # made again
  with open(os.path.join(path, "report.json")) as f:
    run_data = json.load(f)["run_data"]
  assert run_data["checks"][0]["diagnosis"]["kind"] == "scale"
  assert "diagnosis" not in run_data["checks"][1]
  assert run_data["notes"][-1].startswith("Diagnoses of the checks")
  with open(os.path.join(path, "report.md")) as f:
    text = f.read()
  assert "| `gap` | gap | FAIL (scale) | 0.1 |" in text
  assert text.endswith("## Appendix\n\nkept\n")
  assert run_data["diagnoses_attached"] == {"git_commit": "abc1234"}
  assert not report_lib.reattach_diagnoses(path, why, "def5678")  # nothing new
  with open(os.path.join(path, "report.md"), "w") as f:
    f.write(text.replace("## Reproducibility", "## Edited by hand"))
  with pytest.raises(ValueError, match="not a rendering of its report.json"):
    report_lib.reattach_diagnoses(path, {}, "abc1234")


def _committed_reports():
  return sorted(d for d in os.listdir(RESULTS)
                if os.path.isfile(os.path.join(RESULTS, d, "report.json")))


@pytest.mark.parametrize("experiment", _committed_reports())
def test_every_committed_check_passes_or_says_why(experiment):
  with open(os.path.join(RESULTS, experiment, "report.json")) as f:
    checks = json.load(f)["run_data"]["checks"]
  diagnoses = cli.diagnoses_of(experiment)
  unexplained = [c["id"] for c in checks
                 if c["passed"] is not True and "diagnosis" not in c]
  assert unexplained == []
  stale = [c["id"] for c in checks if "diagnosis" in c
           and c["diagnosis"] != diagnoses.get(c["id"])]
  assert stale == [], "rerun: python -m experiments.cards --diagnose"
  for check_id, why in diagnoses.items():
    for artefact in why["artefacts"]:
      assert os.path.isfile(os.path.join(RESULTS, experiment, artefact)), (
          check_id, artefact)
    if why["kind"] in ("scale", "method"):
      assert any(a.endswith(".png") for a in why["artefacts"]), check_id


def test_a_binary_run_with_python_m_gets_its_experiments_diagnoses(
    toy_experiment):
  # Under ``python -m experiments.daf`` main's module is __main__: the
  # harness names the experiment instead.
  metadata = cli.report_metadata(toy_experiment.main, "daf")
  assert metadata["diagnoses"] == cli.diagnoses_of("daf")
  assert set(metadata["diagnoses"]) >= {"two_coef_beats_uniform_merge"}
