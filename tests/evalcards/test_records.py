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
      relationship="first_party", model_info={"name": "m", "id": "m"},
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


def test_third_party_directory_is_loaded_with_rejections_listed():
  loaded = evalcards.load_directory(THIRD_PARTY)
  names = sorted(os.path.relpath(p, THIRD_PARTY) for p, _ in loaded.records)
  assert names == ["lab/gsm8k_a.json", "lab/gsm8k_b.json",
                   "leaderboard/mmlu_llama.json", "vendor/mmlu_llama.json"]
  rejected = {os.path.relpath(p, THIRD_PARTY): why for p, why in loaded.rejected}
  assert set(rejected) == {"broken/no_lower_is_better.json", "broken/torn.json"}
  assert rejected["broken/no_lower_is_better.json"].startswith(
      "evaluation_results[0].metric_config: 'lower_is_better' is a required")
  assert rejected["broken/torn.json"].startswith("not JSON")
  with pytest.raises(FileNotFoundError):
    evalcards.load_directory(os.path.join(THIRD_PARTY, "absent"))


def test_third_party_records_get_the_expected_flags():
  analysis = evalcards.analyze(r for _, r in evalcards.load_directory(
      THIRD_PARTY).records)
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
  analysis = evalcards.analyze(r for _, r in evalcards.load_directory(
      THIRD_PARTY).records)
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
