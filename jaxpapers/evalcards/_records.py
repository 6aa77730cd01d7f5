"""Building and loading EEE run records (one record per source, one file per record).

A record (:mod:`jaxpapers.evalcards._schema`) holds one source's results for
one model: our reproduction is a ``first_party`` ``evaluation_run`` record,
a paper's reported numbers a ``third_party`` ``documentation`` record, so the
signals compare them without anything written by hand.

Our reproducibility fields live in ``source_metadata.additional_details``
(the schema's place for run-wide provenance, string values only) under keys
``jaxpapers_repro.<field>`` (``jaxpapers_repro.versions.jax``, ...):
:func:`repro_details` writes them, :func:`read_repro` reads them back.
"""

import datetime
import json
import math
import numbers
import os
from typing import Any, Iterable, Mapping, NamedTuple

from jaxpapers.evalcards import _schema as schema

REPRO_PREFIX = "jaxpapers_repro."
# Fields whose value is a mapping: one key per entry (``versions.jax``).
_REPRO_MAPPINGS = ("versions", "platform")
# Fields written as JSON text and read back as JSON.
_REPRO_JSON = ("seeds", "x64")


def result_entry(evaluation_name: str, score: float, *, lower_is_better: bool,
                 dataset_name: str, metric_id: str | None = None,
                 metric_kind: str | None = None,
                 metric_unit: str | None = None,
                 min_score: float | None = None,
                 max_score: float | None = None,
                 standard_error: float | None = None,
                 num_samples: int | None = None,
                 description: str | None = None) -> dict[str, Any]:
  """One ``evaluation_results[]`` entry (None fields are left out).

  A non-finite ``standard_error`` (NaN: not estimated) is left out.

  Raises:
    ValueError: for a score that is not a finite number (EEE scores are JSON
      numbers; a NaN is no score), bounds with ``max_score <= min_score`` or
      only one of them, a negative ``standard_error`` or ``num_samples < 1``.
  """
  if not isinstance(score, (int, float)) or not math.isfinite(score):
    raise ValueError(f"score of {evaluation_name!r}/{metric_id!r} must be a"
                     f" finite number, got {score!r}.")
  if (min_score is None) != (max_score is None) or (
      min_score is not None and not max_score > min_score):
    raise ValueError(f"min_score and max_score must be given together with"
                     f" max_score > min_score; got {min_score!r},"
                     f" {max_score!r}.")
  if standard_error is not None and standard_error < 0:
    raise ValueError(f"standard_error must be >= 0; got {standard_error!r}.")
  if num_samples is not None and (not isinstance(num_samples, numbers.Integral)
                                  or num_samples < 1):
    raise ValueError(f"num_samples must be an int >= 1; got {num_samples!r}.")
  config = {"lower_is_better": bool(lower_is_better), "metric_id": metric_id,
            "metric_kind": metric_kind, "metric_unit": metric_unit,
            "evaluation_description": description}
  if min_score is not None and max_score is not None:
    config.update(score_type="continuous", min_score=min_score,
                  max_score=max_score)
  uncertainty = {"num_samples": num_samples}
  if standard_error is not None and math.isfinite(standard_error):
    uncertainty["standard_error"] = {"value": float(standard_error),
                                     "method": "analytic"}
  return {
      "evaluation_name": evaluation_name,
      "source_data": {"dataset_name": dataset_name, "source_type": "other"},
      "metric_config": _drop_none(config),
      "score_details": {"score": float(score),
                        "uncertainty": _drop_none(uncertainty)},
  }


def repro_details(repro: Mapping[str, Any]) -> dict[str, str]:
  """Our reproducibility fields as ``source_metadata.additional_details`` strings.

  ``{"seeds": [0, 1], "versions": {"jax": "0.7"}, "x64": False, ...}``
  becomes ``{"jaxpapers_repro.seeds": "[0, 1]", "jaxpapers_repro.versions.jax":
  "0.7", "jaxpapers_repro.x64": "false", ...}``: a mapping gives one key per
  entry, a string stays as it is, anything else is written as JSON.

  Raises:
    TypeError: for ``repro`` that is not a mapping, or a ``versions`` /
      ``platform`` entry that is not a mapping.
  """
  if not isinstance(repro, Mapping):
    raise TypeError(f"repro must be a mapping of reproducibility fields; got"
                    f" {type(repro).__name__}.")
  out = {}
  for field, value in repro.items():
    if field in _REPRO_MAPPINGS:
      if not isinstance(value, Mapping):
        raise TypeError(f"repro[{field!r}] must be a mapping; got"
                        f" {type(value).__name__}.")
      for key, entry in value.items():
        out[f"{REPRO_PREFIX}{field}.{key}"] = _text(entry)
    else:
      out[f"{REPRO_PREFIX}{field}"] = _text(value)
  return out


def read_repro(record: Mapping[str, Any]) -> dict[str, Any] | None:
  """The reproducibility fields of a record written by :func:`repro_details`.

  ``None`` when the record carries none (e.g. a third-party record); mapping
  fields come back as mappings of strings, ``seeds`` and ``x64`` as JSON
  values (a value that is not JSON stays a string, and then does not count
  as recorded).
  """
  source = record.get("source_metadata") if isinstance(record, Mapping) else None
  details = source.get("additional_details") if isinstance(source, Mapping) \
      else None
  if not isinstance(details, Mapping):
    return None
  repro: dict[str, Any] = {}
  for key, value in details.items():
    if not key.startswith(REPRO_PREFIX):
      continue
    field, _, entry = key[len(REPRO_PREFIX):].partition(".")
    if field in _REPRO_MAPPINGS and entry:
      repro.setdefault(field, {})[entry] = value
    elif field in _REPRO_JSON:
      try:
        repro[field] = json.loads(value)
      except (TypeError, ValueError):
        repro[field] = value
    else:
      repro[field] = value
  return repro or None


def run_record(*, evaluation_id: str, source_type: str, organization: str,
               relationship: str, model_info: Mapping[str, Any],
               results: Iterable[Mapping[str, Any]],
               eval_library: Mapping[str, str], source_name: str | None = None,
               repro: Mapping[str, Any] | None = None,
               retrieved_timestamp: str | None = None) -> dict[str, Any]:
  """A validated EEE run record (raises :class:`schema.RecordError` if not).

  ``model_info`` must carry ``additional_details`` with the schema's
  ``deployment_type`` and ``model_availability``. ``repro`` (seeds,
  versions, platform, x64, git commit, config hash) goes to
  ``source_metadata.additional_details`` (:func:`repro_details`).
  """
  source = {"source_name": source_name, "source_type": source_type,
            "source_organization_name": organization,
            "evaluator_relationship": relationship}
  if repro is not None:
    source["additional_details"] = repro_details(repro)
  record = {
      "schema_version": schema.SCHEMA_VERSION,
      "evaluation_id": evaluation_id,
      "retrieved_timestamp": retrieved_timestamp or str(
          int(datetime.datetime.now(datetime.timezone.utc).timestamp())),
      "source_metadata": _drop_none(source),
      "eval_library": dict(eval_library),
      "model_info": dict(model_info),
      "evaluation_results": list(results),
  }
  schema.validate_record(record)
  return record


class Loaded(NamedTuple):
  """A directory of EEE records; nothing in it is left out silently."""

  root: str
  records: list[tuple[str, dict[str, Any]]]  # (path, record): every JSON object
  findings: dict[str, list[str]]  # path -> violations of its declared schema
  unreadable: list[tuple[str, str]]  # (path, why): not a JSON object


def load_directory(directory: str) -> Loaded:
  """Every ``*.json`` below ``directory`` read as one EEE record.

  Every file that holds a JSON object is in ``records``, whatever schema
  version it declares; what it violates of that version
  (:func:`schema.version_findings`) is in ``findings`` under its path, for
  the card to show as a completeness finding. Results that the signals
  cannot read (no finite score, bounds without ``max_score > min_score``)
  are findings too. Files that are not strict JSON (NaN and infinities are
  not JSON) or not an object are in ``unreadable`` with the reason.
  """
  if not os.path.isdir(directory):
    raise FileNotFoundError(f"no directory {directory!r} of EEE records.")
  loaded, findings, unreadable = [], {}, []
  for root, dirs, files in os.walk(directory):
    dirs.sort()
    for name in sorted(f for f in files if f.endswith(".json")):
      path = os.path.join(root, name)
      try:
        with open(path) as f:
          record = json.load(f, parse_constant=_refuse_constant)
      except (OSError, ValueError) as e:
        unreadable.append((path, f"not JSON: {e}"))
        continue
      if not isinstance(record, dict):
        unreadable.append((path, f"not a JSON object but a"
                                 f" {type(record).__name__}"))
        continue
      loaded.append((path, record))
      found = schema.version_findings(record) + [
          f"{where}: {why}; not shown" for where, why in result_problems(
              record)]
      if found:
        findings[path] = found
  return Loaded(directory, loaded, findings, unreadable)


def result_problems(record: Mapping[str, Any]) -> list[tuple[str, str]]:
  """``(where, why)`` for each result of a record that the signals cannot read."""
  results = record.get("evaluation_results")
  if not isinstance(results, list):
    return [("evaluation_results", "no list of results")]
  out = []
  for i, result in enumerate(results):
    why = _result_problem(result)
    if why:
      out.append((f"evaluation_results[{i}]", why))
  return out


def _result_problem(result: Any) -> str | None:
  if not isinstance(result, Mapping):
    return "not an object"
  details = result.get("score_details")
  score = details.get("score") if isinstance(details, Mapping) else None
  if isinstance(score, bool) or not isinstance(score, (int, float)) or \
      not math.isfinite(score):
    return f"no finite score ({score!r})"
  config = result.get("metric_config")
  if config is not None and not isinstance(config, Mapping):
    return "metric_config is not an object"
  low, high = (config or {}).get("min_score"), (config or {}).get("max_score")
  if low is not None and high is not None:
    try:
      ordered = float(high) > float(low)
    except (TypeError, ValueError):
      return f"bounds {low!r}, {high!r} are not numbers"
    if not ordered:
      return f"bounds need max_score > min_score; got {low!r}, {high!r}"
  return None


def _refuse_constant(name: str) -> Any:
  raise ValueError(f"{name} is not a JSON value")


def _text(value: Any) -> str:
  return value if isinstance(value, str) else json.dumps(value)


def _drop_none(mapping: Mapping[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in mapping.items() if v is not None}
