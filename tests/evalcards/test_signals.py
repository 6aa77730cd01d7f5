"""The four signals: the seven hand-made cases of Evaluation Cards' rules, and properties."""

from hypothesis import given
from hypothesis import strategies as st
import numpy as np
import pytest

from jaxpapers import evalcards

# The two model axes EEE 0.3.0 requires.
AXES = {"deployment_type": "unknown", "model_availability": "unknown"}


def _record(organization, scores, *, relationship="third_party", unit=None,
            bounds=None, generation_args=None, model="m", metric="acc",
            evaluation="bench", repro=None, record_id=None):
  results = []
  for i, score in enumerate(scores):
    entry = evalcards.result_entry(
        evaluation, score, lower_is_better=False, dataset_name="d",
        metric_id=metric, metric_unit=unit,
        min_score=None if bounds is None else bounds[0],
        max_score=None if bounds is None else bounds[1])
    args = (generation_args[i] if isinstance(generation_args, list)
            else generation_args)
    if args is not None:
      entry["generation_config"] = {"generation_args": args}
    results.append(entry)
  return evalcards.run_record(
      evaluation_id=record_id or f"{organization}/{model}/{scores}",
      source_type="evaluation_run", organization=organization,
      relationship=relationship,
      model_info={"name": model, "id": model, "additional_details": AXES},
      eval_library={"name": "lm_eval", "version": "1"}, results=results,
      repro=repro, retrieved_timestamp="0")


def _group(records):
  (group,) = evalcards.analyze(records)["groups"]
  return group


def test_case1_missing_temperature_is_flagged_and_listed():
  record = _record("a", [0.5], generation_args={"max_tokens": 16})
  (result,) = evalcards.analyze([record])["results"]
  assert result["reproducibility"]["flagged"] is True
  assert result["reproducibility"]["missing"] == ["temperature"]
  complete = _record("a", [0.5], generation_args={"max_tokens": 16,
                                                  "temperature": 0.0})
  (result,) = evalcards.analyze([complete])["results"]
  assert result["reproducibility"] == {"flagged": False, "missing": [],
                                       "checked": ["temperature", "max_tokens"]}


def test_agentic_results_also_need_harness_plan_and_limits():
  record = _record("a", [0.5], generation_args={
      "temperature": 0.0, "max_tokens": 8, "sandbox": {"type": "docker"}})
  record["eval_library"]["name"] = "unknown"
  (result,) = evalcards.analyze([record])["results"]
  assert result["reproducibility"]["missing"] == ["eval_plan", "eval_limits"]
  record["eval_library"]["name"] = ""
  (result,) = evalcards.analyze([record])["results"]
  assert result["reproducibility"]["missing"] == ["harness", "eval_plan",
                                                  "eval_limits"]


def test_case2_two_of_four_sub_items_score_half():
  card = {"data": {"source": {"a": "x", "b": "y", "c": "", "d": None}}}
  out = evalcards.completeness(card, {"data": ["source"]})
  assert out["per_field"]["data.source"] == 0.5
  out = evalcards.completeness({"data": {"source": "x"}},
                               {"data": ["source", "size"]})
  assert out["score"] == 0.5 and out["missing"] == ["data.size"]


@pytest.mark.parametrize("theirs,flagged", [(0.76, True), (0.74, False)])
def test_case3_organization_medians_on_a_proportion(theirs, flagged):
  group = _group([_record("lab", [0.70, 0.69, 0.71], unit="proportion"),
                  _record("other", [theirs], unit="proportion")])
  assert group["comparability"]["threshold"] == 0.05
  assert group["comparability"]["cross_party_divergence"] is flagged
  assert group["comparability"]["organization_medians"]["lab"] == 0.70


def test_case4_percent_70_vs_74_is_not_flagged():
  group = _group([_record("a", [70.0], unit="percent"),
                  _record("b", [74.0], unit="percent")])
  assert group["comparability"]["threshold"] == 5.0
  assert group["comparability"]["cross_party_divergence"] is False


def test_case5_bounds_0_200_give_threshold_10():
  assert evalcards.divergence_threshold({"min_score": 0, "max_score": 200}) == 10.0
  assert evalcards.divergence_threshold({}) == 0.05


def test_case6_one_organization_is_not_applicable():
  group = _group([_record("a", [0.1]), _record("a", [0.9])])
  assert group["comparability"]["cross_party_divergence"] is None
  assert group["comparability"]["variant_divergence"] is None
  assert group["provenance"]["is_multi_source"] is False


def test_case7_organization_names_differing_in_case_and_space_merge():
  group = _group([_record("OpenAI ", [0.5]), _record("openai", [0.9])])
  assert group["provenance"]["organizations"] == ["openai"]
  assert group["comparability"]["cross_party_divergence"] is None


def test_variant_divergence_lists_the_differing_fields():
  record = _record("a", [0.5, 0.7], generation_args=[
      {"temperature": 0.0, "max_tokens": 8},
      {"temperature": 1.0, "max_tokens": 8}])
  group = _group([record])
  assert group["comparability"]["variant_divergence"] is True
  assert group["comparability"]["variant_fields"] == ["temperature"]
  same = _record("a", [0.5, 0.52], generation_args=[
      {"temperature": 0.0}, {"temperature": 1.0}])
  assert _group([same])["comparability"]["variant_divergence"] is False


def test_provenance_first_party_only_and_unspecified():
  group = _group([_record("dev", [0.5], relationship="first_party")])
  assert group["provenance"]["first_party_only"] is True
  other = _record("x", [0.5], relationship="other")
  group = _group([other, _record("dev", [0.5], relationship="first_party")])
  assert group["provenance"]["sources"] == ["first_party", "unspecified"]
  assert group["provenance"]["first_party_only"] is False
  assert group["provenance"]["is_multi_source"] is True


def test_repro_block_replaces_generation_fields():
  repro = {"seeds": [0, 1], "versions": {"jax": "0.10.2", "jaxlib": "0.10.2",
                                         "optax": "0.2.8"},
           "platform": {"backend": "cpu"}, "x64": False,
           "git_commit": "abc1234", "config_hash": "f00"}
  (result,) = evalcards.analyze([_record("us", [1.0], repro=repro)])["results"]
  assert result["reproducibility"]["flagged"] is False
  dirty = dict(repro, git_commit="abc1234+dirty", versions={"jax": "0.10.2"})
  (result,) = evalcards.analyze([_record("us", [1.0], repro=dirty)])["results"]
  assert result["reproducibility"]["missing"] == [
      "versions.jaxlib", "versions.optax", "git_commit"]
  # No seeds (an empty list) and no x64 flag are missing fields too.
  bare = {k: v for k, v in repro.items() if k != "x64"}
  (result,) = evalcards.analyze([_record("us", [1.0], repro=dict(
      bare, seeds=[]))])["results"]
  assert result["reproducibility"]["missing"] == ["seeds", "x64"]


def test_repro_fields_round_trip_through_source_metadata():
  repro = {"seeds": [0, 1], "versions": {"jax": "0.10.2"},
           "platform": {"backend": "cpu", "device_count": 2}, "x64": True,
           "git_commit": "abc1234", "config_hash": "f00"}
  record = _record("us", [1.0], repro=repro)
  details = record["source_metadata"]["additional_details"]
  assert details["jaxpapers_repro.seeds"] == "[0, 1]"
  assert details["jaxpapers_repro.platform.device_count"] == "2"
  assert details["jaxpapers_repro.x64"] == "true"
  assert "jaxpapers_repro" not in record  # no block outside the schema
  assert evalcards._records.read_repro(record) == dict(
      repro, platform={"backend": "cpu", "device_count": "2"})
  assert evalcards._records.read_repro(_record("them", [1.0])) is None


def test_corpus_shares_and_missingness():
  records = [_record("a", [0.5], generation_args={"max_tokens": 4},
                     evaluation="e1"),
             _record("a", [0.5], generation_args={"max_tokens": 4,
                                                  "temperature": 0.0},
                     evaluation="e2"),
             _record("b", [0.9], evaluation="e2")]
  out = evalcards.analyze(records)["corpus"]
  assert out["num_results"] == 3 and out["num_groups"] == 2
  assert out["share_reproducibility_flagged"] == pytest.approx(2 / 3)
  assert out["missingness"] == {"max_tokens": pytest.approx(1 / 3),
                                "temperature": pytest.approx(2 / 3)}
  assert out["share_multi_source"] == 0.5
  assert out["share_cross_party_divergent"] == 1.0  # e2: 0.5 vs 0.9


_NAMES = st.text(alphabet=st.sampled_from("aBcD x"), min_size=1, max_size=8
                 ).filter(lambda s: s.strip())


@given(_NAMES, st.lists(st.sampled_from(["", " ", "  "]), min_size=3,
                        max_size=3), st.booleans())
def test_names_differing_in_case_and_spacing_are_one_organization(
    name, pads, upper):
  variant = pads[0] + (name.upper() if upper else name.lower()).replace(
      " ", " " + pads[1]) + pads[2]
  assert (evalcards.normalize_organization(variant)
          == evalcards.normalize_organization(name))
  group = _group([_record(name, [0.1]), _record(variant, [0.9])])
  assert group["comparability"]["cross_party_divergence"] is None


@given(st.floats(-100, 100), st.floats(0.01, 100), st.floats(0.01, 100))
def test_threshold_scales_with_the_bounds(low, width, scale):
  base = evalcards.divergence_threshold({"min_score": low,
                                         "max_score": low + width})
  scaled = evalcards.divergence_threshold({"min_score": low * scale,
                                           "max_score": (low + width) * scale})
  assert scaled == pytest.approx(scale * base, rel=1e-9)
  assert base == pytest.approx(0.05 * width, rel=1e-9)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=5),
       st.lists(st.floats(0, 1), min_size=1, max_size=5))
def test_cross_party_flag_is_the_median_spread_against_the_threshold(a, b):
  group = _group([_record("a", a, unit="proportion"),
                  _record("b", b, unit="proportion")])
  spread = abs(float(np.median(a)) - float(np.median(b)))
  assert group["comparability"]["cross_party_spread"] == pytest.approx(spread)
  assert group["comparability"]["cross_party_divergence"] is (
      group["comparability"]["cross_party_spread"] > 0.05)
