"""EEE records: building, validation errors that name the field, loading third-party directories."""

import copy
import json
import os
import re

import pytest

from jaxpapers import evalcards

THIRD_PARTY = os.path.join(os.path.dirname(__file__), "third_party")


def _valid():
  return evalcards.run_record(
      evaluation_id="e/m/0", source_type="evaluation_run", organization="us",
      relationship="first_party", model_info={
          "name": "m", "id": "m", "additional_details": {
              "deployment_type": "self_deployed",
              "model_availability": "unknown"}},
      eval_library={"name": "jaxpapers", "version": "0.1.0"},
      results=[evalcards.result_entry(
          "e", 0.5, lower_is_better=True, dataset_name="d", metric_id="loss",
          standard_error=0.1, num_samples=3)],
      retrieved_timestamp="0")


def test_built_record_validates_and_keeps_uncertainty():
  record = _valid()
  assert evalcards.record_errors(record) == []
  details = record["evaluation_results"][0]["score_details"]
  assert details["uncertainty"] == {"num_samples": 3, "standard_error": {
      "value": 0.1, "method": "analytic"}}
  json.dumps(record, allow_nan=False)  # plain JSON, no NaN


@pytest.mark.parametrize("damage,field", [
    (lambda r: r["evaluation_results"][0]["metric_config"].pop("lower_is_better"),
     "evaluation_results[0].metric_config"),
    (lambda r: r["source_metadata"].update(evaluator_relationship="vendor"),
     "source_metadata.evaluator_relationship"),
    (lambda r: r.pop("evaluation_id"), "<record>"),
    (lambda r: r["evaluation_results"][0]["score_details"].update(score="high"),
     "evaluation_results[0].score_details.score"),
    (lambda r: r.update(extra=1), "<record>"),
    (lambda r: r["evaluation_results"][0]["metric_config"].update(
        score_type="continuous"), "evaluation_results[0].metric_config"),
])
def test_invalid_record_error_names_the_field(damage, field):
  record = copy.deepcopy(_valid())
  damage(record)
  with pytest.raises(evalcards.RecordError, match="^" + re.escape(f"invalid EEE run record: {field}")):
    evalcards.validate_record(record)


def test_non_finite_score_is_refused():
  with pytest.raises(ValueError, match="finite number"):
    evalcards.result_entry("e", float("nan"), lower_is_better=True,
                           dataset_name="d")


def test_third_party_directory_is_loaded_whole_with_findings():
  loaded = evalcards.load_directory(THIRD_PARTY)
  names = sorted(os.path.relpath(p, THIRD_PARTY) for p, _ in loaded.records)
  # Every JSON object is a record, whatever it violates or declares.
  assert names == ["broken/no_lower_is_better.json",
                   "hfopenllm_v2/0-hero_Matter-0.2-7B-DPO.json",
                   "lab/gsm8k_a.json", "lab/gsm8k_b.json",
                   "leaderboard/mmlu_llama.json", "vendor/mmlu_llama.json"]
  findings = {os.path.relpath(p, THIRD_PARTY): f
              for p, f in loaded.findings.items()}
  assert set(findings) == {"broken/no_lower_is_better.json",
                           "hfopenllm_v2/0-hero_Matter-0.2-7B-DPO.json"}
  assert findings["broken/no_lower_is_better.json"][0].startswith(
      "evaluation_results[0].metric_config: 'lower_is_better' is a required")
  (torn, why), = loaded.unreadable
  assert torn.endswith("broken/torn.json") and why.startswith("not JSON")
  with pytest.raises(FileNotFoundError):
    evalcards.load_directory(os.path.join(THIRD_PARTY, "absent"))


def test_a_0_2_0_record_is_shown_with_its_findings():
  """A public Open LLM Leaderboard v2 record of EEE 0.2.0 (before eval_library)."""
  loaded = evalcards.load_directory(THIRD_PARTY)
  path = os.path.join(THIRD_PARTY, "hfopenllm_v2",
                      "0-hero_Matter-0.2-7B-DPO.json")
  assert loaded.findings[path] == [
      "schema_version: '0.2.0' is not a version known here (known: 0.3.0);"
      " checked against 0.3.0",
      "<record>: 'eval_library' is a required property",
      "model_info.additional_details: 'deployment_type' is a required property",
      "model_info.additional_details: 'model_availability' is a required"
      " property",
      "model_info.additional_details.params_billions: 7.242 is not of type"
      " 'string'"]
  analysis = evalcards.analyze(loaded)
  shown = {r["evaluation_name"]: r["score"] for r in analysis["results"]
           if r["model_id"] == "0-hero/Matter-0.2-7B-DPO"}
  assert shown == {"IFEval": 0.3303, "BBH": 0.3596, "MMLU-PRO": 0.1164}
  assert analysis["record_findings"][
      "hfopenllm_v2/0-hero_Matter-0.2-7B-DPO.json"] == loaded.findings[path]
  assert analysis["num_records"] == 7  # six records and the torn file
  summary = evalcards.summary(analysis)
  assert summary["completeness"] == pytest.approx(4 / 7)
  research, policy = (evalcards.badges(summary, a)[1] for a in (
      "research", "policy"))
  assert research["state"] == policy["state"] == "warn"
  assert research["text"].startswith("4/7 record files validate against the"
                                     " schema version they declare")
  assert "hfopenllm_v2/0-hero_Matter-0.2-7B-DPO.json (schema_version:" \
      in research["text"]
  assert policy["text"] == ("3 of 7 records lack information their format"
                            " requires")


def test_results_the_signals_cannot_read_are_findings_not_rows(tmp_path):
  record = json.loads(json.dumps(_valid()))
  bad = copy.deepcopy(record["evaluation_results"][0])
  bad["score_details"]["score"] = "high"
  flipped = copy.deepcopy(record["evaluation_results"][0])
  flipped["metric_config"].update(score_type="continuous", min_score=1,
                                  max_score=0)
  record["evaluation_results"] += [bad, flipped]
  (tmp_path / "r.json").write_text(json.dumps(record))
  (tmp_path / "nan.json").write_text('{"score": NaN}')
  (tmp_path / "list.json").write_text("[]")
  loaded = evalcards.load_directory(str(tmp_path))
  found = loaded.findings[str(tmp_path / "r.json")]
  assert "evaluation_results[1]: no finite score ('high'); not shown" in found
  assert ("evaluation_results[2]: bounds need max_score > min_score; got 1, 0;"
          " not shown") in found
  assert dict(loaded.unreadable) == {
      str(tmp_path / "list.json"): "not a JSON object but a list",
      str(tmp_path / "nan.json"): "not JSON: NaN is not a JSON value"}
  analysis = evalcards.analyze(loaded)
  assert [r["score"] for r in analysis["results"]] == [0.5]
  assert analysis["num_records"] == 3


def test_version_findings_of_known_and_unknown_versions():
  record = _valid()
  assert evalcards._schema.version_findings(record) == []
  older = dict(record, schema_version="0.2.2")
  (first,) = evalcards._schema.version_findings(older)
  assert first.startswith("schema_version: '0.2.2' is not a version known")
  # A 0.3.0 record that violates 0.3.0 gets the violations, no version note.
  broken = dict(record, extra=1)
  assert evalcards._schema.version_findings(broken) == [
      "<record>: Additional properties are not allowed ('extra' was"
      " unexpected)"]


def test_third_party_records_get_the_expected_flags():
  analysis = evalcards.analyze(evalcards.load_directory(THIRD_PARTY))
  groups = {g["evaluation_name"]: g for g in analysis["groups"]}
  mmlu, gsm8k = groups["MMLU (5-shot)"], groups["GSM8K (8-shot)"]
  # Leaderboard 0.661 vs the model card's 0.730: two sources that disagree.
  assert mmlu["provenance"]["is_multi_source"] is True
  assert mmlu["comparability"]["cross_party_divergence"] is True
  assert mmlu["comparability"]["cross_party_spread"] == pytest.approx(0.069)
  # One lab (names differ in case and space) at two temperatures.
  assert gsm8k["provenance"]["organizations"] == ["eleutherai"]
  assert gsm8k["comparability"]["cross_party_divergence"] is None
  assert gsm8k["comparability"]["variant_divergence"] is True
  assert gsm8k["comparability"]["variant_fields"] == ["temperature"]
  repro = {r["organization"]: r["reproducibility"] for r in analysis["results"]}
  # The leaderboard record gives no generation settings.
  assert repro["Example Leaderboard Team"]["missing"] == ["temperature",
                                                          "max_tokens"]
  assert repro["Meta "]["flagged"] is False


def test_reader_modes_word_the_same_evidence_differently():
  records = [r for p, r in evalcards.load_directory(THIRD_PARTY).records
             if "broken" not in p and "hfopenllm" not in p]
  analysis = evalcards.analyze(records)
  summary = evalcards.summary(analysis, {"score": 0.5, "missing": ["data.size"]})
  research = evalcards.badges(summary, "research")
  policy = evalcards.badges(summary, "policy")
  assert [b["signal"] for b in research] == [b["signal"] for b in policy]
  assert [b["state"] for b in research] == [b["state"] for b in policy] == [
      "warn", "warn", "ok", "warn"]
  assert all(r["text"] != p["text"] for r, p in zip(research, policy))
  assert "1/1 compared groups diverge: MMLU (5-shot) / accuracy" in research[3]["text"]
  assert "1 of 1 numbers differ" in policy[3]["text"]
  assert "temperature" in research[0]["text"]
  with pytest.raises(ValueError, match="audience"):
    evalcards.badges(summary, "press")


def test_a_non_finite_result_makes_reproducibility_a_failure_in_both_modes():
  records = [r for p, r in evalcards.load_directory(THIRD_PARTY).records
             if "broken" not in p and "hfopenllm" not in p]
  analysis = evalcards.analyze(records)
  clean = evalcards.summary(analysis)
  broken = evalcards.summary(analysis, non_finite=["loss / bpb: nan"])
  for audience in evalcards.AUDIENCES:
    before, after = (evalcards.badges(s, audience)[0] for s in (clean, broken))
    assert before["signal"] == after["signal"] == "reproducibility"
    assert before["state"] != "fail" and after["state"] == "fail"
  assert "loss / bpb: nan" in evalcards.badges(broken, "research")[0]["text"]
  with pytest.raises(TypeError, match="non_finite must be a sequence"):
    evalcards.summary(analysis, non_finite="loss")
