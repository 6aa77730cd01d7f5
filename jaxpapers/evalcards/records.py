"""Building and loading EEE run records (one record per source, one file per record).

A record (:mod:`jaxpapers.evalcards.schema`) holds one source's results for
one model: our reproduction is a ``first_party`` ``evaluation_run`` record,
a paper's reported numbers a ``third_party`` ``documentation`` record, so the
signals compare them without anything written by hand.
"""

import datetime
import json
import math
import numbers
import os
from typing import Any, Iterable, Mapping, NamedTuple

from jaxpapers.evalcards import schema


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


def run_record(*, evaluation_id: str, source_type: str, organization: str,
               relationship: str, model_info: Mapping[str, str],
               results: Iterable[Mapping[str, Any]],
               eval_library: Mapping[str, str], source_name: str | None = None,
               repro: Mapping[str, Any] | None = None,
               retrieved_timestamp: str | None = None) -> dict[str, Any]:
  """A validated EEE run record (raises :class:`schema.RecordError` if not)."""
  record = {
      "schema_version": schema.SCHEMA_VERSION,
      "evaluation_id": evaluation_id,
      "retrieved_timestamp": retrieved_timestamp or str(
          int(datetime.datetime.now(datetime.timezone.utc).timestamp())),
      "source_metadata": _drop_none({
          "source_name": source_name, "source_type": source_type,
          "source_organization_name": organization,
          "evaluator_relationship": relationship}),
      "eval_library": dict(eval_library),
      "model_info": dict(model_info),
      "evaluation_results": list(results),
  }
  if repro is not None:
    record["jaxpapers_repro"] = dict(repro)
  schema.validate_record(record)
  return record


class Loaded(NamedTuple):
  records: list[tuple[str, dict[str, Any]]]  # (path, record), valid ones
  rejected: list[tuple[str, str]]  # (path, why it was skipped)


def load_directory(directory: str) -> Loaded:
  """Every ``*.json`` below ``directory`` read as one EEE record, validated.

  Files that are not JSON or do not validate are listed in ``rejected`` with
  the reason (the first failing field), never dropped silently.
  """
  if not os.path.isdir(directory):
    raise FileNotFoundError(f"no directory {directory!r} of EEE records.")
  loaded, rejected = [], []
  for root, dirs, files in os.walk(directory):
    dirs.sort()
    for name in sorted(f for f in files if f.endswith(".json")):
      path = os.path.join(root, name)
      try:
        with open(path) as f:
          record = json.load(f)
      except (OSError, ValueError) as e:
        rejected.append((path, f"not JSON: {e}"))
        continue
      errors = schema.record_errors(record)
      if errors:
        rejected.append((path, errors[0]))
      else:
        loaded.append((path, record))
  return Loaded(loaded, rejected)


def _drop_none(mapping: Mapping[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in mapping.items() if v is not None}
