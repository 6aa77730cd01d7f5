"""jaxpapers.evalcards: a table of misuse, each a named error."""

import pytest

from jaxpapers import evalcards


def _entry(**overrides):
  kwargs = {"lower_is_better": False, "dataset_name": "d", "metric_id": "acc",
            **overrides}
  return evalcards.result_entry("bench", kwargs.pop("score", 0.5), **kwargs)


def _record(**overrides):
  kwargs = {"evaluation_id": "e", "source_type": "evaluation_run",
            "organization": "us", "relationship": "first_party",
            "model_info": {"name": "m", "id": "m", "additional_details": {
                "deployment_type": "unknown", "model_availability": "unknown"}},
            "results": [_entry()],
            "eval_library": {"name": "jaxpapers", "version": "1"},
            "retrieved_timestamp": "0", **overrides}
  return evalcards.run_record(**kwargs)


_ROWS = evalcards.rows([_record()])
_OTHER_GROUP = evalcards.rows([_record(model_info={
    "name": "n", "id": "n", "additional_details": {
        "deployment_type": "unknown", "model_availability": "unknown"}})])
_ANALYSIS = evalcards.analyze([_record()])

MISUSE = [
    (lambda: _entry(score=float("nan")), ValueError, "must be a finite number"),
    # max_score below min_score used to make a negative divergence threshold.
    (lambda: _entry(min_score=1.0, max_score=0.0), ValueError,
     "max_score > min_score"),
    (lambda: _entry(min_score=0.0), ValueError,
     "min_score and max_score must be given together"),
    (lambda: _entry(standard_error=-0.1), ValueError,
     "standard_error must be >= 0"),
    (lambda: _entry(num_samples=0), ValueError, "num_samples must be an int >= 1"),
    (lambda: _record(relationship="friend"), evalcards.RecordError,
     "evaluator_relationship"),
    # EEE 0.3.0 requires both model axes; a record without them is refused.
    (lambda: _record(model_info={"name": "m", "id": "m"}),
     evalcards.RecordError, "model_info: 'additional_details' is a required"),
    (lambda: _record(model_info={"name": "m", "id": "m", "additional_details": {
        "deployment_type": "cloud", "model_availability": "unknown"}}),
     evalcards.RecordError, "model_info.additional_details.deployment_type"),
    # Our reproducibility fields: a mapping, with mappings for versions.
    (lambda: _record(repro=[("seeds", [0])]), TypeError,
     "repro must be a mapping"),
    (lambda: _record(repro={"versions": "jax 0.7"}), TypeError,
     r"repro\['versions'\] must be a mapping"),
    (lambda: evalcards.validate_record({"schema_version": "0.2.2"}),
     evalcards.RecordError, "invalid EEE run record"),
    (lambda: evalcards.rows([{"evaluation_results": [{}]}]),
     evalcards.RecordError, "invalid EEE run record"),
    (lambda: evalcards.analyze([{"model_info": {}}]), evalcards.RecordError,
     "invalid EEE run record"),
    (lambda: evalcards.load_directory("/nonexistent/records"),
     FileNotFoundError, "no directory"),
    (lambda: evalcards.comparability([]), ValueError,
     "group_rows must be a non-empty sequence of Rows"),
    (lambda: evalcards.provenance([]), ValueError,
     "group_rows must be a non-empty sequence of Rows"),
    (lambda: evalcards.comparability(_ROWS + _OTHER_GROUP), ValueError,
     "group_rows must share one"),
    (lambda: evalcards.divergence_threshold({"min_score": 1, "max_score": 1}),
     ValueError, "max_score > min_score"),
    (lambda: evalcards.normalize_organization(3), TypeError,
     "organisation name must be a string or None"),
    (lambda: evalcards.completeness({}, {}), ValueError,
     "fields must name at least one benchmark-card field"),
    (lambda: evalcards.summary(_ANALYSIS, reproducibility_sources=("ours",)),
     ValueError, "reproducibility_sources must be a tuple of"),
    (lambda: evalcards.summary(_ANALYSIS, reproducibility_sources="first_party"),
     ValueError, "reproducibility_sources must be a tuple of"),
    (lambda: evalcards.badges(evalcards.summary(_ANALYSIS), "press"),
     ValueError, "audience must be one of"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_record_errors_lists_every_failing_field():
  errors = evalcards.record_errors({"schema_version": "0.2.2"})
  assert len(errors) > 1 and all(": " in e for e in errors)
  assert not evalcards.record_errors(_record())
