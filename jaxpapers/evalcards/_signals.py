"""The four interpretive signals of Evaluation Cards, as pure functions over run records.

Ghosh, Reuel, Chim, Kennedy et al., "Evaluation Cards: An Interpretive Layer
for AI Evaluation Reporting", arXiv 2606.09809 (signal rules: the project's
public "how signals are computed" page, after the paper's Appendix H.1). A
result is one row ``(model, evaluation, metric, source)`` of a record's
``evaluation_results``; rows of one ``(model, evaluation, metric)`` form a
group.

1. Reproducibility gap (per result): flagged when a field of ``F`` is
   missing, ``F = {temperature, max_tokens}`` (plus ``harness, eval_plan,
   eval_limits`` for agentic results). Results of a record that carries our
   reproducibility fields (``jaxpapers_repro.*`` keys in
   ``source_metadata.additional_details``, :func:`records.read_repro`) are
   not generative: ``F`` is then those fields (seeds, jax/jaxlib/optax
   versions, x64, platform, a clean git commit, config hash) -- our
   reconstruction, ``docs/evaluation_cards.md``.
2. Reporting completeness (per benchmark card): the mean over its fields of
   0/1 for a plain field and the populated fraction for a field with
   sub-items (2 of 4 populated: 0.5).
3. Provenance (per result): ``first_party`` / ``third_party`` /
   ``collaborative``, else ``unspecified``; per group ``is_multi_source``
   (more than one organisation after trimming, folding runs of spaces and
   lower-casing names) and ``first_party_only``.
4. Score comparability (per group): *variant divergence* -- rows of one
   organisation whose generation setups differ in at least one field, flagged
   when their scores span more than the threshold (the differing fields are
   listed); *cross-party divergence* -- the spread of the organisations'
   medians, needing two organisations. The threshold is 5.0 for percentages,
   0.05 for proportions and normalised scores, else 5% of ``max_score -
   min_score`` when both bounds are finite, else 0.05. ``None`` means not applicable,
   ``False`` checked and not divergent.
"""

import math
import os
import statistics
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from jaxpapers.evalcards import _records as records_lib
from jaxpapers.evalcards import _schema as schema

GENERATIVE_FIELDS = ("temperature", "max_tokens")
AGENTIC_FIELDS = ("harness", "eval_plan", "eval_limits")
REPRO_FIELDS = ("seeds", "versions.jax", "versions.jaxlib", "versions.optax",
                "x64", "platform", "git_commit", "config_hash")
RELATIONSHIPS = ("first_party", "third_party", "collaborative")
PERCENT_UNITS = ("percent", "percentage", "%")
PROPORTION_UNITS = ("proportion", "fraction", "normalized", "normalised")


class Row(NamedTuple):
  """One result of one record, with what the signals read."""

  record_id: str
  model_id: str
  evaluation_name: str
  metric: str
  score: float
  organization: str  # normalised
  organization_name: str  # as written
  relationship: str  # one of RELATIONSHIPS or "unspecified"
  source_type: str
  metric_config: Mapping[str, Any]
  setup: Mapping[str, Any]  # generation args, or the repro block's config hash
  missing: tuple[str, ...]  # reproducibility fields that are absent
  checked: tuple[str, ...]  # the fields F that were checked

  @property
  def group(self) -> tuple[str, str, str]:
    return (self.model_id, self.evaluation_name, self.metric)


def normalize_organization(name: str | None) -> str:
  """Trimmed, single-spaced, lower-cased: "OpenAI " and "openai" are one organisation.

  ``None`` is the empty name; anything else but a string raises ``TypeError``.
  """
  if name is not None and not isinstance(name, str):
    raise TypeError(f"an organisation name must be a string or None; got"
                    f" {name!r}.")
  return " ".join((name or "").split()).lower()


def divergence_threshold(metric_config: Mapping[str, Any]) -> float:
  """The score spread above which rows of a group diverge (see module docstring).

  An unbounded side (EEE writes ``"Infinity"``/``"-Infinity"``) gives no
  range, hence 0.05. Raises ``ValueError`` for bounds with ``max_score <=
  min_score`` (no positive spread).
  """
  unit = str(metric_config.get("metric_unit") or "").strip().lower()
  if unit in PERCENT_UNITS:
    return 5.0
  if unit in PROPORTION_UNITS:
    return 0.05
  low, high = metric_config.get("min_score"), metric_config.get("max_score")
  if low is not None and high is not None:
    if not float(high) > float(low):
      raise ValueError(f"metric_config needs max_score > min_score; got"
                       f" min_score={low!r}, max_score={high!r}.")
    if math.isfinite(float(high) - float(low)):
      return 0.05 * (float(high) - float(low))
  return 0.05


def rows(records: Iterable[Mapping[str, Any]], *, validate: bool = True
         ) -> list[Row]:
  """Every result of every record as a :class:`Row`.

  With ``validate`` (the default) a record that does not validate raises
  :class:`schema.RecordError` naming its first failing field. Without it
  (records of other schema versions, as :func:`analyze` reads a
  :class:`records.Loaded` directory, whose loader lists every violation),
  records are read as far as they go: a result that the signals cannot
  read (:func:`records.result_problems`) gives no row.
  """
  out = []
  for record in records:
    if validate:
      schema.validate_record(record)
    source = _mapping(record.get("source_metadata"))
    relationship = source.get("evaluator_relationship")
    if relationship not in RELATIONSHIPS:
      relationship = "unspecified"
    repro = records_lib.read_repro(record)
    unreadable = {where for where, _ in records_lib.result_problems(record)}
    results = record.get("evaluation_results")
    for i, result in enumerate(results if isinstance(results, list) else []):
      if f"evaluation_results[{i}]" in unreadable:
        continue
      config = _mapping(result.get("metric_config"))
      args = _mapping(_mapping(result.get("generation_config")).get(
          "generation_args"))
      if repro is not None:
        checked = REPRO_FIELDS
        missing = tuple(f for f in checked if not _repro_present(repro, f))
        setup = {"config_hash": repro.get("config_hash")}
      else:
        agentic = any(k in args for k in ("agentic_eval_config", "eval_plan",
                                          "sandbox", "eval_limits"))
        checked = GENERATIVE_FIELDS + (AGENTIC_FIELDS if agentic else ())
        present = dict(args, harness=_mapping(record.get("eval_library")).get(
            "name"))
        missing = tuple(f for f in checked if not _populated(present.get(f)))
        setup = dict(args)
      out.append(Row(
          record_id=str(record.get("evaluation_id", "")),
          model_id=str(_mapping(record.get("model_info")).get("id", "")),
          evaluation_name=str(result.get("evaluation_name", "")),
          metric=str(config.get("metric_id") or config.get("metric_name")
                     or result.get("evaluation_name", "")),
          score=float(result["score_details"]["score"]),
          organization=normalize_organization(_string(
              source.get("source_organization_name"))),
          organization_name=_string(source.get("source_organization_name")),
          relationship=relationship,
          source_type=_string(source.get("source_type")) or "unspecified",
          metric_config=config, setup=setup, missing=missing,
          checked=checked))
  return out


def reproducibility(row: Row) -> dict[str, Any]:
  """The reproducibility-gap signal of one result row (Evaluation Cards, Ghosh et al., 2026).

  ``flagged`` when any reproducibility field (seeds, versions, platform, x64,
  commit, config hash) is missing from its record; ``missing`` and
  ``checked`` name the fields.
  """
  return {"flagged": bool(row.missing), "missing": list(row.missing),
          "checked": list(row.checked)}


def provenance(group_rows: Sequence[Row]) -> dict[str, Any]:
  """Sources of one group: who reported it, and whether only the developer did."""
  _check_group(group_rows)
  organizations = sorted({r.organization for r in group_rows})
  return {
      "sources": sorted({r.relationship for r in group_rows}),
      "organizations": organizations,
      "is_multi_source": len(organizations) > 1,
      "first_party_only": all(r.relationship == "first_party"
                              for r in group_rows),
  }


def comparability(group_rows: Sequence[Row]) -> dict[str, Any]:
  """Variant and cross-party divergence of one group (None: not applicable)."""
  _check_group(group_rows)
  threshold = divergence_threshold(group_rows[0].metric_config)
  variant, variant_fields = None, set()
  for organization in {r.organization for r in group_rows}:
    own = [r for r in group_rows if r.organization == organization]
    fields = _differing_fields([r.setup for r in own])
    if fields:
      variant_fields |= fields
      spread = max(r.score for r in own) - min(r.score for r in own)
      variant = bool(variant) or spread > threshold
  medians = {}
  for r in group_rows:
    medians.setdefault(r.organization, []).append(r.score)
  medians = {k: statistics.median(v) for k, v in medians.items()}
  cross, cross_spread = None, None
  if len(medians) >= 2:
    cross_spread = max(medians.values()) - min(medians.values())
    cross = cross_spread > threshold
  return {"threshold": threshold,
          "variant_divergence": variant,
          "variant_fields": sorted(variant_fields),
          "cross_party_divergence": cross,
          "cross_party_spread": cross_spread,
          "organization_medians": medians}


def completeness(card: Mapping[str, Mapping[str, Any]],
                 fields: Mapping[str, Sequence[str]]) -> dict[str, Any]:
  """Reporting completeness of a benchmark card over the declared ``fields``.

  ``card[section][field]`` is a plain value (scores 0 or 1) or a dict of
  sub-items (scores the fraction of populated sub-items).
  """
  per_field = {}
  for section, names in fields.items():
    for name in names:
      value = (card.get(section) or {}).get(name)
      if isinstance(value, Mapping) and value:
        score = sum(_populated(v) for v in value.values()) / len(value)
      else:
        score = float(_populated(value))
      per_field[f"{section}.{name}"] = score
  if not per_field:
    raise ValueError("fields must name at least one benchmark-card field.")
  return {"score": sum(per_field.values()) / len(per_field),
          "per_field": per_field,
          "missing": sorted(k for k, v in per_field.items() if v == 0)}


def analyze(records: Iterable[Mapping[str, Any]] | records_lib.Loaded
            ) -> dict[str, Any]:
  """Per-result, per-group and corpus signals of a set of records.

  Records given one by one must validate (:func:`rows`). A directory read by
  :func:`records.load_directory` is analysed whole, whatever schema version
  its records declare: each record's violations and each unreadable file
  are in ``record_findings`` (path relative to the directory -> findings),
  which :func:`render.summary` turns into the completeness finding, and
  ``num_records`` counts every file.
  """
  loaded = records if isinstance(records, records_lib.Loaded) else None
  if loaded is not None:
    all_rows = rows((r for _, r in loaded.records), validate=False)
  else:
    all_rows = rows(records)
  groups: dict[tuple[str, str, str], list[Row]] = {}
  for r in all_rows:
    groups.setdefault(r.group, []).append(r)
  group_out = []
  for key, members in groups.items():
    group_out.append({"model_id": key[0], "evaluation_name": key[1],
                      "metric": key[2], "num_rows": len(members),
                      "provenance": provenance(members),
                      "comparability": comparability(members)})
  results = [{"record_id": r.record_id, "model_id": r.model_id,
              "evaluation_name": r.evaluation_name, "metric": r.metric,
              "score": r.score, "source": r.relationship,
              "organization": r.organization_name,
              "reproducibility": reproducibility(r)} for r in all_rows]
  out = {"results": results, "groups": group_out,
         "corpus": corpus(all_rows, group_out)}
  if loaded is not None:
    relative = lambda path: os.path.relpath(path, loaded.root)  # pylint: disable=unnecessary-lambda-assignment
    findings = {relative(p): list(f) for p, f in loaded.findings.items()}
    findings.update({relative(p): [why] for p, why in loaded.unreadable})
    out["record_findings"] = dict(sorted(findings.items()))
    out["num_records"] = len(loaded.records) + len(loaded.unreadable)
  return out


def corpus(all_rows: Sequence[Row], groups: Sequence[Mapping[str, Any]]
           ) -> dict[str, Any]:
  """Shares over a corpus: flagged results, missingness per field, divergent groups."""
  missingness = {}
  for r in all_rows:
    for f in r.checked:
      missingness.setdefault(f, []).append(f in r.missing)

  def share(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None

  return {
      "num_results": len(all_rows),
      "num_groups": len(groups),
      "share_reproducibility_flagged": share([bool(r.missing) for r in all_rows]),
      "missingness": {f: share(v) for f, v in sorted(missingness.items())},
      "share_multi_source": share([g["provenance"]["is_multi_source"]
                                   for g in groups]),
      "share_first_party_only": share([g["provenance"]["first_party_only"]
                                       for g in groups]),
      "share_variant_divergent": share([
          g["comparability"]["variant_divergence"] for g in groups]),
      "share_cross_party_divergent": share([
          g["comparability"]["cross_party_divergence"] for g in groups]),
  }


def _check_group(group_rows: Sequence[Row]) -> None:
  if not group_rows or not all(isinstance(r, Row) for r in group_rows):
    raise ValueError("group_rows must be a non-empty sequence of Rows (see"
                     f" rows()); got {group_rows!r:.80}.")
  if len({r.group for r in group_rows}) != 1:
    raise ValueError("group_rows must share one (model, evaluation, metric)"
                     f" group; got {sorted({r.group for r in group_rows})}.")


def _differing_fields(setups: Sequence[Mapping[str, Any]]) -> set[str]:
  keys = set().union(*setups) if setups else set()
  return {k for k in keys if len({repr(s.get(k)) for s in setups}) > 1}


def _repro_present(repro: Mapping[str, Any], field: str) -> bool:
  value: Any = repro
  for part in field.split("."):
    value = value.get(part) if isinstance(value, Mapping) else None
  if field == "git_commit":
    return _populated(value) and value != "unknown" and "+dirty" not in value
  if field == "seeds":  # a JSON list of integers, read back by read_repro
    return isinstance(value, list) and bool(value)
  if field == "x64":
    return isinstance(value, bool)
  return _populated(value)


def _mapping(value: Any) -> Mapping[str, Any]:
  return value if isinstance(value, Mapping) else {}


def _string(value: Any) -> str:
  return value if isinstance(value, str) else ""


def _populated(value: Any) -> bool:
  if value is None:
    return False
  if isinstance(value, (str, list, tuple, dict)):
    return bool(value.strip() if isinstance(value, str) else value)
  return True
