"""Run records in the field names of the public "Every Eval Ever" (EEE) schema, validated.

EEE (github.com/evaleval/every_eval_ever, ``every_eval_ever/schemas/
eval.schema.json``) keeps one evaluation run record per JSON file. We
re-declare the part of the schema we read and write, version 0.3.0, plus
one optional block of ours, ``jaxpapers_repro`` (seeds, versions, platform,
commit, config hash), which Evaluation Cards (Ghosh et al., 2026,
arXiv 2606.09809) read for the reproducibility signal of non-generative
results. Our declaration is written from the public field list, not copied.
"""

from typing import Any, Mapping

import jsonschema

SCHEMA_VERSION = "0.3.0"

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_MODEL_INFO = {
    "type": "object",
    "required": ["name", "id"],
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string"},
        "developer": {"type": "string"},
        "inference_platform": {"type": "string"},
        "inference_engine": {"type": "object", "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}}},
        "additional_details": _STRINGS,
    },
}
_SOURCE_DATA = {
    "type": "object",
    "required": ["dataset_name", "source_type"],
    "properties": {
        "dataset_name": {"type": "string"},
        "source_type": {"enum": ["url", "hf_dataset", "other"]},
        "url": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "hf_repo": {"type": "string"},
        "hf_split": {"type": "string"},
        "samples_number": {"type": "integer"},
        "source_id": {"type": "string"},
        "source_version": {"type": "string"},
        "additional_details": _STRINGS,
    },
    "allOf": [
        {"if": {"properties": {"source_type": {"const": "url"}}},
         "then": {"required": ["url"]}},
        {"if": {"properties": {"source_type": {"const": "hf_dataset"}}},
         "then": {"required": ["hf_repo"]}},
    ],
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
        "lower_is_better": {"type": "boolean"},
        "score_type": {"enum": ["binary", "continuous", "levels"]},
        "level_names": {"type": "array", "items": {"type": "string"}},
        "has_unknown_level": {"type": "boolean"},
        "min_score": {"type": "number"},
        "max_score": {"type": "number"},
        "additional_details": _STRINGS,
    },
    "allOf": [
        {"if": {"required": ["score_type"],
                "properties": {"score_type": {"const": "levels"}}},
         "then": {"required": ["level_names", "has_unknown_level"]}},
        {"if": {"required": ["score_type"],
                "properties": {"score_type": {"const": "continuous"}}},
         "then": {"required": ["min_score", "max_score"]}},
    ],
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
        "num_samples": {"type": "integer", "minimum": 1},
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
        "agentic_eval_config": {"type": "object"},
        "eval_plan": {"type": "object"},
        "eval_limits": {"type": "object"},
        "sandbox": {"type": "object"},
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
_REPRO = {
    "type": "object",
    "required": ["seeds", "versions", "platform", "git_commit", "config_hash"],
    "properties": {
        "seeds": {"type": "array", "items": {"type": "integer"}},
        "versions": _STRINGS,
        "platform": {"type": "object"},
        "x64": {"type": "boolean"},
        "git_commit": {"type": "string"},
        "config_hash": {"type": "string"},
    },
}

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
        "evaluation_id": {"type": "string", "minLength": 1},
        "evaluation_timestamp": {"type": "string"},
        "retrieved_timestamp": {"type": "string"},
        "source_metadata": {
            "type": "object",
            "required": ["source_type", "source_organization_name",
                         "evaluator_relationship"],
            "properties": {
                "source_name": {"type": "string"},
                "source_type": {"enum": ["documentation", "evaluation_run"]},
                "source_organization_name": {"type": "string"},
                "source_organization_url": {"type": "string"},
                "evaluator_relationship": {
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
            "properties": {"format": {"enum": ["jsonl"]},
                           "file_path": {"type": "string"},
                           "hash_algorithm": {"enum": ["sha256", "md5"]},
                           "checksum": {"type": "string"},
                           "total_rows": {"type": "integer"}},
        },
        "jaxpapers_repro": _REPRO,
    },
}

_VALIDATOR = jsonschema.Draft7Validator(RECORD_SCHEMA)


class RecordError(ValueError):
  """A run record that does not validate; the message names the field."""


def record_errors(record: Any) -> list[str]:
  """Every validation error as ``field.path: message`` (empty: valid)."""
  errors = sorted(_VALIDATOR.iter_errors(record),
                  key=lambda e: [str(p) for p in e.absolute_path])
  return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]


def validate_record(record: Mapping[str, Any]) -> None:
  """Raises :class:`RecordError` naming the first failing field, if any."""
  errors = record_errors(record)
  if errors:
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise RecordError(f"invalid EEE run record: {errors[0]}{more}")


def _path(parts) -> str:
  out = ""
  for part in parts:
    out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
  return out or "<record>"
