"""Our records against the upstream EEE package's own schema and validator, the authority.

``every-eval-ever`` (PyPI; a test dependency, never one of the library)
ships the schema (``every_eval_ever/schemas/eval.schema.json``) and the
validator its datastore runs on every submission. It needs Python >= 3.12:
on older stacks this module is skipped, on the newest it must run. No jax
compile: records are plain JSON.
"""

import copy
import glob
import json
import pathlib
import sys

import pytest

if sys.version_info < (3, 12):
  pytest.skip("every-eval-ever, the upstream EEE validator, needs Python >="
              " 3.12; the newest CI stack runs these checks",
              allow_module_level=True)

# pylint: disable=g-import-not-at-top,wrong-import-position
import jsonschema
from every_eval_ever import schema as upstream_schema
from every_eval_ever.helpers.io import datastore_path_components
from every_eval_ever.validator import format_error
from every_eval_ever.validator import format_warning
from every_eval_ever.validator import validate_file

from jaxpapers import evalcards

ROOT = pathlib.Path(__file__).resolve().parents[2]
THIRD_PARTY = ROOT / "tests" / "evalcards" / "third_party"
COMMITTED = sorted(glob.glob(str(ROOT / "experiments" / "results" / "*" / "eee"
                                 / "*.json")))
# Any fixed UUID4: the datastore names a record file <uuid4>.json.
FILE_UUID = "3f0c6a52-9d1e-4b7a-8c2d-5e4f6a7b8c9d"
UPSTREAM = jsonschema.Draft7Validator(upstream_schema.schema_json())


def upstream_findings(path: str, collection: str) -> list[str]:
  """Upstream's schema errors, plus its validator's errors and warnings.

  The validator runs as the datastore's bot does for a submission filed at
  the record's canonical path ``data/<collection>/<developer>/<model>/
  <uuid4>.json`` (our workdirs keep records elsewhere, so the path is the one
  the record would have there).
  """
  with open(path) as f:
    record = json.load(f)
  out = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
         for e in UPSTREAM.iter_errors(record)]
  model = record.get("model_info", {})
  _, developer, name = datastore_path_components(
      collection, model.get("id"), model.get("developer"))
  report = validate_file(
      pathlib.Path(path), run_semantic_checks=True,
      repo_path=f"data/{collection}/{developer}/{name}/{FILE_UUID}.json")
  out += [format_error(e) for e in report.errors]
  out += [format_warning(w) for w in report.warnings]
  return out


def test_upstream_is_the_version_we_write():
  assert upstream_schema.get_schema_version() == evalcards.SCHEMA_VERSION


def test_every_committed_record_validates_upstream():
  # 15 experiments, four of which also have the paper's numbers.
  assert len(COMMITTED) >= 19
  for path in COMMITTED:
    experiment = pathlib.Path(path).parents[1].name
    assert upstream_findings(path, experiment) == [], path


def test_records_the_writer_builds_validate_upstream(tmp_path):
  repro = {"seeds": [0, 1], "versions": {"jax": "0.7.0"},
           "platform": {"backend": "cpu", "device_count": 1}, "x64": False,
           "git_commit": "abc1234", "config_hash": "f00"}
  record = evalcards.run_record(
      evaluation_id="jaxpapers/demo/f00", source_type="evaluation_run",
      organization="jaxpapers", relationship="first_party",
      model_info={"name": "demo", "id": "jaxpapers/demo", "additional_details":
                  {"deployment_type": "self_deployed",
                   "model_availability": "unknown"}},
      eval_library={"name": "jaxpapers", "version": "0.2.0"}, repro=repro,
      results=[evalcards.result_entry(
          "e", 0.25, lower_is_better=True, dataset_name="d", metric_id="loss",
          min_score=0.0, max_score=1.0, standard_error=0.01, num_samples=2)],
      retrieved_timestamp="0")
  path = tmp_path / "r.json"
  path.write_text(json.dumps(record, allow_nan=False))
  assert upstream_findings(str(path), "demo") == []


def test_the_0_2_0_fixture_fails_upstream_as_our_findings_say():
  path = THIRD_PARTY / "hfopenllm_v2" / "0-hero_Matter-0.2-7B-DPO.json"
  upstream = {e.message for e in UPSTREAM.iter_errors(json.loads(
      path.read_text()))}
  ours = evalcards.load_directory(str(THIRD_PARTY)).findings[str(path)]
  assert upstream == {f.split(": ", 1)[1] for f in ours[1:]}


ACCEPTED = ("unbounded above", "metric parameters")


def _damages():
  """Each damage once: a field the schema requires, forbids or types."""
  def at(*keys):
    def get(r):
      for k in keys:
        r = r[k]
      return r
    return get
  details = at("model_info", "additional_details")
  result = at("evaluation_results", 0)
  config = at("evaluation_results", 0, "metric_config")
  return {
      "no deployment_type": lambda r: details(r).pop("deployment_type"),
      "bad availability": lambda r: details(r).update(
          model_availability="public"),
      "numeric detail": lambda r: details(r).update(params=7.2),
      "no model details": lambda r: r["model_info"].pop("additional_details"),
      "top-level block": lambda r: r.update(jaxpapers_repro={"seeds": [0]}),
      "no eval_library": lambda r: r.pop("eval_library"),
      "numeric source detail": lambda r: r["source_metadata"].update(
          additional_details={"seeds": [0]}),
      "url source without url": lambda r: result(r).update(
          source_data={"dataset_name": "d", "source_type": "url"}),
      "unknown source type": lambda r: result(r).update(
          source_data={"dataset_name": "d", "source_type": "private"}),
      "continuous without bounds": lambda r: config(r).update(
          score_type="continuous"),
      "unbounded above": lambda r: config(r).update(
          score_type="continuous", min_score=0, max_score="Infinity"),
      "bound as a word": lambda r: config(r).update(
          score_type="continuous", min_score=0, max_score="many"),
      "levels without names": lambda r: config(r).update(score_type="levels"),
      "metric parameters": lambda r: config(r).update(
          metric_parameters={"k": 1, "strict": True}),
      "unknown generation arg": lambda r: result(r).update(
          generation_config={"generation_args": {"seed": 3}}),
      "string score": lambda r: result(r)["score_details"].update(
          score="high"),
      "bad relationship": lambda r: r["source_metadata"].update(
          evaluator_relationship="vendor"),
      "samples path": lambda r: r.update(detailed_evaluation_results={
          "format": "jsonl", "file_path": "samples.jsonl"}),
      "judge without model axes": lambda r: config(r).update(llm_scoring={
          "judges": [{"model_info": {"name": "j", "id": "j"}}],
          "input_prompt": "p"}),
  }


@pytest.mark.parametrize("base", ["committed", "paper", "third_party"])
def test_our_declaration_agrees_with_upstream(base):
  """Our runtime schema and upstream's accept and refuse the same records."""
  path = {"committed": next(p for p in COMMITTED if "jaxpapers_" in p),
          "paper": next(p for p in COMMITTED if "paper_" in p),
          "third_party": str(THIRD_PARTY / "lab" / "gsm8k_a.json")}[base]
  with open(path) as f:
    clean = json.load(f)
  assert not evalcards.record_errors(clean)
  assert not list(UPSTREAM.iter_errors(clean))
  verdicts = {}
  for name, damage in _damages().items():
    record = copy.deepcopy(clean)
    damage(record)
    verdicts[name] = (bool(evalcards.record_errors(record)),
                      bool(list(UPSTREAM.iter_errors(record))))
  # Two of the changes are allowed by 0.3.0, every other one is refused.
  assert verdicts == {name: (name not in ACCEPTED,) * 2 for name in verdicts}
