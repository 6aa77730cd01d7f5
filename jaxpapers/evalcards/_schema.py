"""Run records in the field names of the public "Every Eval Ever" (EEE) schema, validated.

EEE (github.com/evaleval/every_eval_ever, ``every_eval_ever/schemas/
eval.schema.json``; on PyPI as ``every-eval-ever``) keeps one evaluation run
record per JSON file. The library must not depend on that package at run
time, so we re-declare its version 0.3.0 here (written from the public field
list, not copied) and validate with ``jsonschema``; the tests check every
record we write, and this declaration's verdicts, against the upstream
package's own schema and validator, which are the authority.

The schema has no place of its own for the reproducibility fields of a
non-generative run (seeds, versions, platform, commit, config hash), which
Evaluation Cards (Ghosh et al., 2026, arXiv 2606.09809) read for the
reproducibility signal. We keep them in ``source_metadata.additional_details``
(string values, as the schema allows), under keys starting with
``jaxpapers_repro.`` (:mod:`jaxpapers.evalcards._records`).

Real EEE data spans schema versions. :func:`version_findings` checks a record
against the version it declares where it is one we know (only 0.3.0: the
upstream package ships no schema of an earlier version) and otherwise against
0.3.0, saying so.
"""

import math
from typing import Any, Mapping

import jsonschema

SCHEMA_VERSION = "0.3.0"
KNOWN_VERSIONS = (SCHEMA_VERSION,)
DEPLOYMENT_TYPES = ("self_deployed", "externally_managed", "unknown")
MODEL_AVAILABILITY = ("open_weights", "closed_weights", "unknown")

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_MODEL_INFO = {
    "type": "object",
    "required": ["name", "id", "additional_details"],
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string"},
        "developer": {"type": "string"},
        "inference_platform": {"type": "string"},
        "inference_engine": {"type": "object", "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}}},
        # Who ran the model, and whether its weights are available: two
        # required axes, other details are free strings.
        "additional_details": {
            "type": "object",
            "required": ["deployment_type", "model_availability"],
            "properties": {"deployment_type": {"enum": list(DEPLOYMENT_TYPES)},
                           "model_availability": {
                               "enum": list(MODEL_AVAILABILITY)}},
            "additionalProperties": {"type": "string"},
        },
    },
}


def _source_data(source_type: str, required: list[str],
                 **properties: Any) -> dict[str, Any]:
  return {"type": "object",
          "required": ["dataset_name", "source_type"] + required,
          "properties": {"dataset_name": {"type": "string"},
                         "source_type": {"const": source_type},
                         "additional_details": _STRINGS, **properties}}


_SOURCE_DATA = {"oneOf": [
    _source_data("url", ["url"], url={"type": "array", "minItems": 1,
                                      "items": {"type": "string"}}),
    _source_data("hf_dataset", [], hf_repo={"type": "string"},
                 hf_split={"type": "string"},
                 samples_number={"type": "integer"},
                 sample_ids={"type": "array", "items": {"type": "string"}}),
    _source_data("other", []),
]}
# A bound is a number, "Infinity"/"-Infinity" for an unbounded side, or null.
_BOUND = {"oneOf": [{"type": "number"},
                    {"type": "string", "enum": ["Infinity", "-Infinity"]},
                    {"type": "null"}]}
_JUDGE = {
    "type": "object",
    "required": ["model_info"],
    "properties": {"model_info": _MODEL_INFO, "temperature": {"type": "number"},
                   "weight": {"type": "number"},
                   "additional_details": _STRINGS},
}
_METRIC_CONFIG = {
    "type": "object",
    "required": ["lower_is_better"],
    "properties": {
        "evaluation_description": {"type": "string"},
        "metric_id": {"type": "string"},
        "metric_name": {"type": "string"},
        "metric_kind": {"type": "string"},
        "metric_unit": {"type": "string"},
        "metric_parameters": {"type": "object", "additionalProperties": {
            "type": ["string", "number", "boolean", "null"]}},
        "lower_is_better": {"type": "boolean"},
        "score_type": {"type": "string",
                       "enum": ["binary", "continuous", "levels"]},
        "level_names": {"type": "array", "items": {"type": "string"}},
        "level_metadata": {"type": "array", "items": {"type": "string"}},
        "has_unknown_level": {"type": "boolean"},
        "min_score": _BOUND,
        "max_score": _BOUND,
        "llm_scoring": {
            "type": "object", "required": ["judges", "input_prompt"],
            "properties": {
                "judges": {"type": "array", "items": _JUDGE, "minItems": 1},
                "input_prompt": {"type": "string"},
                "aggregation_method": {"enum": ["majority_vote", "average",
                                                "weighted_average", "median"]},
                "expert_baseline": {"type": "number"},
                "additional_details": _STRINGS}},
        "additional_details": _STRINGS,
    },
    "if": {"required": ["score_type"],
           "properties": {"score_type": {"const": "levels"}}},
    "then": {"required": ["level_names", "has_unknown_level"]},
    "else": {"if": {"required": ["score_type"],
                    "properties": {"score_type": {"const": "continuous"}}},
             "then": {"required": ["min_score", "max_score"]}},
}
_UNCERTAINTY = {
    "type": "object",
    "properties": {
        "standard_error": {"type": "object", "required": ["value"],
                           "properties": {"value": {"type": "number"},
                                          "method": {"type": "string"}}},
        "confidence_interval": {
            "type": "object", "required": ["lower", "upper"],
            "properties": {"lower": {"type": "number"},
                           "upper": {"type": "number"},
                           "confidence_level": {"type": "number", "minimum": 0,
                                                "maximum": 1},
                           "method": {"type": "string"}}},
        "standard_deviation": {"type": "number"},
        "num_samples": {"type": "integer"},
        "num_bootstrap_samples": {"type": "integer"},
    },
}
_GENERATION_ARGS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "temperature": {"type": ["null", "number"]},
        "top_p": {"type": ["null", "number"]},
        "top_k": {"type": ["null", "number"]},
        "max_tokens": {"type": "integer", "minimum": 1},
        "execution_command": {"type": "string"},
        "reasoning": {"type": "boolean"},
        "prompt_template": {"type": "string"},
        "agentic_eval_config": {"type": "object", "properties": {
            "available_tools": {"type": "array", "items": {
                "type": "object", "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "parameters": _STRINGS}}},
            "additional_details": _STRINGS}},
        "eval_plan": {"type": "object", "properties": {
            "name": {"type": "string"},
            "steps": {"type": "array", "items": {"type": "string"}},
            "config": _STRINGS}},
        "eval_limits": {"type": "object", "properties": {
            "time_limit": {"type": "integer"},
            "message_limit": {"type": "integer"},
            "token_limit": {"type": "integer"}}},
        "sandbox": {"type": "object", "properties": {
            "type": {"type": "string"}, "config": {"type": "string"}}},
        "max_attempts": {"type": "integer"},
        "incorrect_attempt_feedback": {"type": "string"},
    },
}
_RESULT = {
    "type": "object",
    "required": ["evaluation_name", "source_data", "metric_config",
                 "score_details"],
    "properties": {
        "evaluation_result_id": {"type": "string"},
        "evaluation_name": {"type": "string"},
        "source_data": _SOURCE_DATA,
        "evaluation_timestamp": {"type": "string"},
        "metric_config": _METRIC_CONFIG,
        "score_details": {
            "type": "object", "required": ["score"],
            "properties": {"score": {"type": "number"},
                           "details": _STRINGS,
                           "uncertainty": _UNCERTAINTY},
        },
        "generation_config": {
            "type": "object",
            "properties": {"generation_args": _GENERATION_ARGS,
                           "additional_details": _STRINGS},
        },
    },
}
_SAMPLES_PATH = (r"^data/[^/]+/[^/]+/[^/]+/[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-4"
                 r"[0-9A-Fa-f]{3}-[89ABab][0-9A-Fa-f]{3}-[0-9A-Fa-f]{12}"
                 r"_samples\.jsonl$")

RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "EEE evaluation run record (re-declared by jaxpapers)",
    "version": SCHEMA_VERSION,
    "type": "object",
    "required": ["schema_version", "evaluation_id", "retrieved_timestamp",
                 "source_metadata", "model_info", "eval_library",
                 "evaluation_results"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "string"},
        "evaluation_id": {"type": "string"},
        "evaluation_timestamp": {"type": "string"},
        "retrieved_timestamp": {"type": "string"},
        "source_metadata": {
            "type": "object",
            "required": ["source_type", "source_organization_name",
                         "evaluator_relationship"],
            "properties": {
                "source_name": {"type": "string"},
                "source_type": {"type": "string",
                                "enum": ["documentation", "evaluation_run"]},
                "source_organization_name": {"type": "string"},
                "source_organization_url": {"type": "string"},
                "source_organization_logo_url": {"type": "string"},
                "evaluator_relationship": {
                    "type": "string",
                    "enum": ["first_party", "third_party", "collaborative",
                             "other"]},
                "additional_details": _STRINGS,
            },
        },
        "eval_library": {
            "type": "object", "required": ["name", "version"],
            "properties": {"name": {"type": "string"},
                           "version": {"type": "string"},
                           "additional_details": _STRINGS},
        },
        "model_info": _MODEL_INFO,
        "evaluation_results": {"type": "array", "items": _RESULT},
        "detailed_evaluation_results": {
            "type": "object", "required": ["format", "file_path"],
            "properties": {"format": {"type": "string", "enum": ["jsonl"]},
                           "file_path": {"type": "string",
                                         "pattern": _SAMPLES_PATH},
                           "hash_algorithm": {"type": "string",
                                              "enum": ["sha256", "md5"]},
                           "checksum": {"type": "string"},
                           "total_rows": {"type": "integer"},
                           "additional_details": _STRINGS},
        },
    },
}

_VALIDATOR = jsonschema.Draft7Validator(RECORD_SCHEMA)


class RecordError(ValueError):
  """A run record that does not validate; the message names the field."""


def record_errors(record: Any) -> list[str]:
  """Every error against schema 0.3.0 as ``field.path: message`` (empty: valid).

  Scores and uncertainty values must also be finite numbers (a JSON schema
  cannot say so; EEE's validator refuses NaN and infinities as well).
  """
  errors = sorted(_VALIDATOR.iter_errors(record),
                  key=lambda e: [str(p) for p in e.absolute_path])
  out = [f"{_path(e.absolute_path)}: {e.message}" for e in errors]
  return out + _non_finite(record)


def version_findings(record: Any) -> list[str]:
  """What is wrong with a record against the schema version it declares.

  A version we know (:data:`KNOWN_VERSIONS`) is checked exactly; any other
  declaration gives a first finding saying that it is unknown here, followed
  by the record's errors against version 0.3.0 (what it lacks for today's
  schema). Empty: the record validates against its declared version.
  """
  errors = record_errors(record)
  declared = record.get("schema_version") if isinstance(record, Mapping) \
      else None
  if declared in KNOWN_VERSIONS:
    return errors
  return [f"schema_version: {declared!r} is not a version known here"
          f" (known: {', '.join(KNOWN_VERSIONS)}); checked against"
          f" {SCHEMA_VERSION}"] + errors


def validate_record(record: Mapping[str, Any]) -> None:
  """Raises :class:`RecordError` naming the first failing field, if any."""
  errors = record_errors(record)
  if errors:
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise RecordError(f"invalid EEE run record: {errors[0]}{more}")


def _non_finite(record: Any) -> list[str]:
  results = record.get("evaluation_results") if isinstance(record, Mapping) \
      else None
  out = []
  for i, result in enumerate(results if isinstance(results, list) else []):
    details = result.get("score_details") if isinstance(result, Mapping) \
        else None
    if not isinstance(details, Mapping):
      continue
    values = {"score": details.get("score")}
    uncertainty = details.get("uncertainty")
    if isinstance(uncertainty, Mapping):
      se = uncertainty.get("standard_error")
      values["uncertainty.standard_error.value"] = (
          se.get("value") if isinstance(se, Mapping) else None)
      values["uncertainty.standard_deviation"] = uncertainty.get(
          "standard_deviation")
    for name, value in values.items():
      if isinstance(value, float) and not math.isfinite(value):
        out.append(f"evaluation_results[{i}].score_details.{name}: {value!r}"
                   " is not a finite number")
  return out


def _path(parts) -> str:
  out = ""
  for part in parts:
    out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
  return out or "<record>"
