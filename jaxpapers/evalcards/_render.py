"""Reader modes: the same evidence worded for a research and for a policy reader.

Evaluation Cards (arXiv 2606.09809) render one record for two audiences: a
researcher wants field names and thresholds, a policy reader wants to know
whether a result can be re-run, who reported it and whether sources agree.
Both modes read the same :func:`summary`; only words and badges differ.
"""

from typing import Any, Mapping, Sequence

AUDIENCES = ("research", "policy")
# A result's source: an evaluator relationship, or none recorded.
_SOURCES = ("first_party", "third_party", "collaborative", "unspecified")


def summary(analysis: Mapping[str, Any],
            completeness: Mapping[str, Any] | None = None, *,
            reproducibility_sources: tuple[str, ...] | None = None,
            non_finite: Sequence[str] = ()) -> dict[str, Any]:
  """The card-level numbers behind every badge, from :func:`signals.analyze`.

  ``reproducibility_sources`` (e.g. ``("first_party",)`` for a card of our
  own run) limits the reproducibility count to results of those sources:
  whether a paper's documented number can be re-run is not ours to claim.

  ``non_finite`` names the results that a run computed as NaN or infinite
  (records cannot hold them, so they are not in ``analysis``): any of them
  makes the reproducibility badge a failure, whatever the recorded fields.

  For an analysed directory of records (``analysis["record_findings"]``,
  :func:`signals.analyze` of a :class:`records.Loaded`) without a benchmark
  card, reporting completeness is the share of its files that validate
  against the schema version they declare, and ``completeness_missing``
  names the others with their first finding; ``record_findings`` keeps them
  all.
  """
  results, groups = analysis["results"], analysis["groups"]
  if reproducibility_sources is not None:
    unknown = sorted(set(reproducibility_sources) - set(_SOURCES))
    if unknown or isinstance(reproducibility_sources, str):
      raise ValueError(f"reproducibility_sources must be a tuple of"
                       f" {_SOURCES}; got {reproducibility_sources!r}.")
    results = [r for r in results if r["source"] in reproducibility_sources]
  flagged = [r for r in results if r["reproducibility"]["flagged"]]
  missing = sorted({f for r in flagged for f in r["reproducibility"]["missing"]})
  compared = [g for g in groups
              if g["comparability"]["cross_party_divergence"] is not None]
  divergent = [g for g in compared if g["comparability"]["cross_party_divergence"]]
  record_findings = analysis.get("record_findings")
  if completeness is None and record_findings is not None:
    num_records = analysis["num_records"]
    completeness = {
        "score": None if not num_records else
                 1 - len(record_findings) / num_records,
        "missing": [f"{path} ({found[0]})"
                    for path, found in record_findings.items()]}
  if isinstance(non_finite, str):
    raise TypeError(f"non_finite must be a sequence of result names; got {non_finite!r}.")
  return {
      "num_results": len(results),
      "non_finite_results": list(non_finite),
      "reproducibility_flagged": len(flagged),
      "reproducibility_missing": missing,
      "completeness": None if completeness is None else completeness["score"],
      "completeness_missing": [] if completeness is None
                              else completeness["missing"],
      "record_findings": record_findings,
      "num_records": analysis.get("num_records"),
      "sources": sorted({s for g in groups for s in g["provenance"]["sources"]}),
      "multi_source_groups": sum(g["provenance"]["is_multi_source"]
                                 for g in groups),
      "first_party_only": bool(groups) and all(
          g["provenance"]["first_party_only"] for g in groups),
      "compared_groups": len(compared),
      "divergent_groups": [f"{g['evaluation_name']} / {g['metric']}"
                           for g in divergent],
  }


def badges(card_summary: Mapping[str, Any], audience: str) -> list[dict[str, str]]:
  """One badge per signal: ``{"signal", "state" (ok/warn/fail/na), "label", "text"}``."""
  if audience not in AUDIENCES:
    raise ValueError(f"audience must be one of {AUDIENCES}, got {audience!r}.")
  s, research = card_summary, audience == "research"
  out = []
  flagged, n = s["reproducibility_flagged"], s["num_results"]
  non_finite = s.get("non_finite_results", [])
  if non_finite:
    out.append(_badge(
        "reproducibility", "fail", "Non-finite results" if research else "Broken numbers",
        f"{len(non_finite)} results are NaN or infinite: {'; '.join(non_finite)}"
        if research else f"{len(non_finite)} numbers of this run are not numbers"
        " (NaN or infinite): do not trust it as it is"))
  else:
    out.append(_badge(
        "reproducibility", "warn" if flagged else "ok",
        ("Reproducibility gap" if flagged else "Reproducible") if research
        else ("Hard to re-run" if flagged else "Can be re-run"),
        (f"{flagged}/{n} results miss {', '.join(s['reproducibility_missing'])}"
         if flagged else f"all {n} results record every field checked")
        if research else
        ("some settings needed to repeat these numbers were not recorded"
         if flagged else "every setting needed to repeat these numbers is recorded")))
  score, records = s["completeness"], s.get("record_findings")
  if records is not None:  # a directory of records: schema conformance
    out.append(_badge(
        "completeness", "na" if score is None else "warn" if records else "ok",
        "Reporting completeness" if research else "Documentation",
        ("no records" if score is None else
         f"{s['num_records'] - len(records)}/{s['num_records']} record files"
         " validate against the schema version they declare"
         + (f"; findings: {'; '.join(s['completeness_missing'])}"
            if records else "")) if research else
        ("no records" if score is None else
         f"{len(records)} of {s['num_records']} records lack information"
         " their format requires"
         if records else "every record has what its format requires")))
  else:
    out.append(_badge(
        "completeness", "na" if score is None else "ok" if score >= 0.8 else "warn",
        "Reporting completeness" if research else "Documentation",
        ("not assessed" if score is None else f"{score:.2f}"
         + (f" (missing: {', '.join(s['completeness_missing'])})"
            if s["completeness_missing"] else "")) if research else
        ("not assessed" if score is None else "mostly complete" if score >= 0.8
         else "important details are missing")))
  out.append(_badge(
      "provenance", "warn" if s["first_party_only"] else "ok",
      "Provenance" if research else "Who reported it",
      f"sources: {', '.join(s['sources']) or 'none'};"
      f" {s['multi_source_groups']} multi-source groups" if research else
      ("only the people who ran it" if s["first_party_only"]
       else "more than one party reported these results")))
  compared, divergent = s["compared_groups"], s["divergent_groups"]
  out.append(_badge(
      "comparability", "na" if not compared else "warn" if divergent else "ok",
      "Cross-party divergence" if research else "Do sources agree?",
      ("no group reported by two parties" if not compared else
       f"{len(divergent)}/{compared} compared groups diverge"
       + (f": {'; '.join(divergent)}" if divergent else "")) if research else
      ("nothing to compare" if not compared else
       f"{'no' if not divergent else len(divergent)} of {compared} numbers"
       " differ from the other source's beyond the tolerance")))
  return out


def _badge(signal: str, state: str, label: str, text: str) -> dict[str, str]:
  return {"signal": signal, "state": state, "label": label, "text": text}
