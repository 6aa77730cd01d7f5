"""The report: checks with stable ids, result rows, and the one report writer.

A report has the three blocks of an Evaluation Card (Ghosh et al., 2026):
benchmark metadata (paper, claim, data), run data (config, seeds, versions,
platform, our numbers, the paper's, checks, figures) and model metadata.
"""

import datetime
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import subprocess
from typing import Any, Iterable, Mapping, Sequence

import jax
import ml_collections
import numpy as np

from experiments.harness import card as card_lib
from experiments.harness import stats
from experiments.harness.jsonio import json_default
from experiments.harness.jsonio import write_json_atomic
from jaxpapers import evalcards

PACKAGES = ("jaxpapers", "jax", "jaxlib", "flax", "optax", "chex",
            "orbax-checkpoint", "numpy", "scikit-learn", "statsmodels", "jraph")
VERDICTS = {True: "PASS", False: "FAIL", None: "INCONCLUSIVE"}


def check(check_id: str, name: str, passed: bool | None, detail: str, *,
          values: Any = None, machine_dependent: bool = False,
          measure: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """One part of a claim: ``passed`` True, False or None (inconclusive).

  ``check_id`` is stable (tests and later reports refer to it); ``name``
  and ``detail`` are for people and may change wording.

  A check never passes on NaN: when ``values`` (the numbers the verdict was
  computed from: a number, or a mapping or sequence of them, nested) or the
  numbers written in ``detail`` include a NaN, a PASS becomes a FAIL whose
  detail says so (:func:`refuse_pass_on_nan`; the report writer applies it
  to every check again). Binaries print the compared numbers in ``detail``,
  so the rule holds where ``values`` is not given; a NaN is then written
  ``nan``, and the word is kept for that. Infinities are compared as numbers
  (an unbounded ratio, an ``epsilon = inf`` budget).

  ``machine_dependent``: the verdict rests on wall-clock timings measured in
  this run (paired, alternating rounds judged on their spread:
  :func:`experiments.harness.stats.paired_ratio` and ``at_most``), so another
  machine or load may decide it differently; ``report.md`` marks it.

  ``measure`` (:func:`measure`): the one number the verdict compares with
  its bound, kept in the check so that a scaling study
  (``python -m experiments.scaling``) can follow it across sizes.
  """
  out = {"id": check_id, "name": name,
         "passed": None if passed is None else bool(passed), "detail": detail}
  if machine_dependent:
    out["machine_dependent"] = True
  if measure is not None:
    out["measure"] = dict(measure)
  return refuse_pass_on_nan(out, values if measure is None else
                            [values, measure["value"], measure["se"]])


def measure(value: float | None, *, bound: float, higher_is_better: bool = True,
            se: float | None = None, label: str = "") -> dict[str, Any]:
  """The number a check's verdict rests on: ``value`` (+- ``se``) against ``bound``.

  The claim holds in the direction ``higher_is_better`` (``value > bound``)
  or its opposite; ``label`` names the quantity (an axis label: "AIA
  difference", "steps ratio"). A value that could not be measured is None.
  """
  if not isinstance(bound, (int, float)) or not math.isfinite(bound):
    raise ValueError(f"bound must be a finite number; got {bound!r}.")
  as_float = lambda v: None if v is None else float(v)
  return {"value": as_float(value), "se": as_float(se), "bound": float(bound),
          "higher_is_better": bool(higher_is_better), "label": label}


def timing_check(check_id: str, name: str, ratio: Mapping[str, float], *,
                 at_most: float | None = None, at_least: float | None = None,
                 what: str = "") -> dict[str, Any]:
  """A machine-dependent check of a paired timing ratio against one bound.

  ``ratio`` is :func:`jaxpapers.profiling.paired_ratio`'s summary; the
  verdict is :func:`stats.at_most` or :func:`stats.at_least` of it (None,
  INCONCLUSIVE, when the bound lies inside its 10-90% spread); the detail
  reads ``<what>1.23x (10-90%: 1.1-1.4, 9 rounds) vs bound <= 2``.
  """
  if (at_most is None) == (at_least is None):
    raise ValueError("a timing check needs exactly one of at_most, at_least.")
  bound = at_most if at_least is None else at_least
  passed = (stats.at_most(ratio, at_most) if at_least is None
            else stats.at_least(ratio, at_least))
  detail = (f"{what}{ratio['ratio']:.3g}x (10-90%: {ratio['low']:.3g}-"
            f"{ratio['high']:.3g}, {ratio['rounds']} rounds) vs bound"
            f" {'<=' if at_least is None else '>='} {bound:g}")
  return check(check_id, name, passed, detail, values=ratio,
               machine_dependent=True, measure=measure(
                   ratio["ratio"], bound=bound, higher_is_better=at_most is None,
                   label=what.rstrip(" =") or "timing ratio"))


DIAGNOSIS_KINDS = ("scale", "reconstruction", "method", "bug")


def diagnosis(kind: str, evidence: str, artefacts: Iterable[str] = ()
              ) -> dict[str, Any]:
  """Why a check does not pass: one of :data:`DIAGNOSIS_KINDS`, with evidence.

  ``scale``: the effect needs more scale than was run (evidence: a sweep over
  sizes and its trend); ``reconstruction``: our choice of an unpublished
  detail differs from the paper's (which choice, the alternatives tried and
  their numbers); ``method``: the claim does not hold in this setting (the
  sweep or ablation showing it does not move); ``bug``: our code was wrong.
  ``artefacts`` name the files (figures, sweep reports) that hold the
  evidence. A binary lists its diagnoses by check id in the module constant
  ``DIAGNOSES``; the report attaches each to its check when that check does
  not pass.
  """
  if kind not in DIAGNOSIS_KINDS:
    raise ValueError(f"kind must be one of {DIAGNOSIS_KINDS}; got {kind!r}.")
  if not isinstance(evidence, str) or not evidence.strip():
    raise ValueError("evidence must be a non-empty description of what shows"
                     f" the diagnosis; got {evidence!r}.")
  artefacts = list(artefacts)
  if not all(isinstance(a, str) and a for a in artefacts):
    raise TypeError(f"artefacts must be file names; got {artefacts!r}.")
  return {"kind": kind, "evidence": evidence, "artefacts": artefacts}


def attach_diagnoses(checks: Sequence[Mapping[str, Any]],
                     diagnoses: Mapping[str, Mapping[str, Any]]
                     ) -> tuple[list[dict[str, Any]], list[str]]:
  """``checks`` with each diagnosis on its check when it does not pass.

  Returns the checks and notes: a diagnosis whose check passed is not shown
  (the note says so), and one naming no check is reported.
  """
  ids = {c["id"] for c in checks}
  notes = [f"diagnosis {i!r} names no check of this run" for i in diagnoses
           if i not in ids]
  out = []
  for c in checks:
    c = dict(c)
    if c["id"] in diagnoses:
      if c["passed"] is True:
        notes.append(f"{c['id']} passed: its diagnosis"
                     f" ({diagnoses[c['id']]['kind']}) is not shown")
      else:
        c["diagnosis"] = dict(diagnoses[c["id"]])
    out.append(c)
  return out, notes


def reattach_diagnoses(workdir: str,
                       diagnoses: Mapping[str, Mapping[str, Any]],
                       commit: str | None = None) -> bool:
  """Attaches ``diagnoses`` to a finished report's checks, computing nothing.

  The diagnoses of a report's failing checks are written after the runs
  that give their evidence; this puts the current ones on the checks of
  ``<workdir>/report.json`` (replacing any earlier), re-renders
  ``report.md`` (keeping the binary's appendix) and the ``eee/`` records,
  and records the commit that attached them (``run_data.diagnoses_attached``,
  a note; ``commit`` defaults to the checkout's, and a caller that
  attaches to several reports takes it once, before the first write dirties
  the tree): the numbers stay those of the run's own commits. Returns
  whether anything changed.

  Raises:
    ValueError: ``report.md`` is not a rendering of ``report.json`` (its
      reproducibility block is missing or edited): its appendix cannot be
      told apart.
  """
  json_path = os.path.join(workdir, "report.json")
  md_path = os.path.join(workdir, "report.md")
  with open(json_path) as f:
    report = json.load(f)
  with open(md_path) as f:
    markdown = f.read()
  # The rendering ends with the versions line; what follows is the appendix.
  last_line = render_markdown(report).rstrip("\n").rsplit("\n", 1)[-1]
  reproducibility = markdown.find("\n## Reproducibility\n")
  end = markdown.find("\n" + last_line + "\n", reproducibility)
  if reproducibility < 0 or end < 0:
    raise ValueError(f"{md_path} is not a rendering of its report.json;"
                     " rerun the experiment to rebuild both.")
  appendix = markdown[end + len(last_line) + 2:]
  run_data = report["run_data"]
  bare = [{k: v for k, v in c.items() if k != "diagnosis"}
          for c in run_data["checks"]]
  checks, _ = attach_diagnoses(bare, diagnoses)
  commit = commit or git_commit()
  # An attachment made on a tree with uncommitted changes is made again.
  dirty = run_data.get("diagnoses_attached", {}).get(
      "git_commit", "").endswith("+dirty")
  if checks == run_data["checks"] and not dirty and (
      not any("diagnosis" in c for c in checks)
      or markdown == render_markdown(report) + appendix):
    return False
  note = (f"Diagnoses of the checks that do not pass attached at {commit}"
          " without recomputing (the numbers are those of the commits above).")
  run_data["checks"] = checks
  run_data["diagnoses_attached"] = {"git_commit": commit}
  run_data["notes"] = [n for n in run_data["notes"]
                       if not n.startswith("Diagnoses of the checks")] + [note]
  write_json_atomic(json_path, report, indent=2)
  with open(md_path, "w") as f:
    f.write(render_markdown(report) + appendix)
  card_lib.regenerate(workdir)
  return True


_NAN_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_])[-+]?nan(?![A-Za-z0-9_])",
                          re.IGNORECASE)


def refuse_pass_on_nan(check_: dict[str, Any], values: Any = None
                       ) -> dict[str, Any]:
  """``check_`` with a PASS turned into a FAIL if its inputs include a NaN.

  The inputs are ``values`` (see :func:`check`) and the numbers in the
  check's detail. FAIL, not INCONCLUSIVE: a NaN is a measurement that broke
  (a diverged run, an empty average), and nothing in the run supports the
  claim. Other verdicts are left as they are.
  """
  if check_["passed"] is not True:
    return check_
  if _has_nan(values):
    reason = "its input values include NaN"
  elif _NAN_IN_TEXT.search(check_["detail"]):
    reason = "its detail shows a NaN input"
  else:
    return check_
  return {**check_, "passed": False,
          "detail": f"{check_['detail']} [FAIL set by the harness: {reason};"
                    " a check on NaN never passes]"}


def _has_nan(values: Any) -> bool:
  if values is None or isinstance(values, (str, bytes)):
    return False
  if isinstance(values, Mapping):
    return any(_has_nan(v) for v in values.values())
  if isinstance(values, (list, tuple)) or hasattr(values, "__array__"):
    array = np.asarray(values)
    if array.dtype.kind in "fc":
      return bool(np.isnan(array).any())
    if array.dtype == object:
      return any(_has_nan(v) for v in array.ravel().tolist())
    return False
  return isinstance(values, (float, np.floating)) and math.isnan(values)


def result(evaluation_name: str, metric: str, score: Any, *,
           standard_error: float | None = None, num_samples: int = 1,
           lower_is_better: bool = True, unit: str | None = None
           ) -> dict[str, Any]:
  """One of our numbers (a mean over ``num_samples`` seeds, with its s.e.).

  ``unit`` (e.g. "proportion", "percent", "ms") sets the divergence
  threshold of the Evaluation Card's comparability signal.
  """
  row = {"evaluation_name": evaluation_name, "metric": metric,
         "score": score, "standard_error": standard_error,
         "num_samples": num_samples, "lower_is_better": lower_is_better}
  if unit is not None:
    row["unit"] = unit
  return row


def results_of(evaluation_name: str, summary: Mapping[str, Any],
               metrics: Iterable[str], *,
               num_samples: int | Mapping[str, int],
               higher_is_better: Iterable[str] = (),
               units: Mapping[str, str] | None = None
               ) -> list[dict[str, Any]]:
  """Result rows of ``summary[metric]`` with ``summary[metric + "_se"]``.

  ``num_samples`` is one count for every metric, or a count per metric (when
  metrics average over different subsets, e.g. sparse and dense images).
  """
  higher, units = set(higher_is_better), units or {}
  count = (num_samples.__getitem__ if isinstance(num_samples, Mapping)
           else lambda _: num_samples)
  return [result(evaluation_name, m, summary[m],
                 standard_error=summary.get(m + "_se"),
                 num_samples=count(m), lower_is_better=m not in higher,
                 unit=units.get(m))
          for m in metrics]


def paper_result(evaluation_name: str, statement: str, *,
                 metric: str | None = None, score: float | None = None,
                 unit: str | None = None) -> dict[str, Any]:
  """What the paper reports, and where: a statement, and a number if it gives one.

  A number (``metric`` and ``score``, named as our result row it is
  compared with) becomes a third-party row of the Evaluation Card, so its
  divergence from ours is computed.
  """
  row = {"evaluation_name": evaluation_name, "statement": statement}
  if score is not None:
    if metric is None:
      raise ValueError("a paper number needs the metric it is compared on.")
    row.update(metric=metric, score=float(score))
    if unit is not None:
      row["unit"] = unit
  return row


def config_hash(config: ml_collections.ConfigDict) -> str:
  return hashlib.sha256(
      config.to_json_best_effort(sort_keys=True).encode()
  ).hexdigest()[:16]


def config_dict(config: ml_collections.ConfigDict) -> dict[str, Any]:
  return json.loads(config.to_json_best_effort(sort_keys=True))


def make_report(*, name: str, config: ml_collections.ConfigDict,
                wall_time_s: float, paper: Mapping[str, str], claim: str,
                dataset: Mapping[str, str], model: Mapping[str, Any],
                seeds: Iterable[int], results: list[dict[str, Any]],
                paper_results: list[dict[str, str]],
                checks: list[dict[str, Any]], figures: Iterable[str | None],
                notes: Iterable[str] = (),
                invocations: Sequence[Mapping[str, Any]] = (),
                extra_run_data: Mapping[str, Any] | None = None,
                diagnoses: Mapping[str, Mapping[str, Any]] | None = None,
                ) -> dict[str, Any]:
  """Builds the report dict (see the module docstring for its blocks).

  ``diagnoses`` (check id -> :func:`diagnosis`) are attached to the checks
  that do not pass (:func:`attach_diagnoses`).

  ``invocations`` lists every invocation that ran in the workdir (its
  ``git_commit``, ``started`` and ``wall_time_s``), oldest first: a resumed
  run's numbers were partly computed by the earlier ones.
  """
  ids = [c["id"] for c in checks]
  if len(set(ids)) != len(ids):
    raise ValueError(f"check ids must be unique; got {ids}.")
  checks, diagnosis_notes = attach_diagnoses(
      [refuse_pass_on_nan(dict(c)) for c in checks], diagnoses or {})
  notes = [*notes, *diagnosis_notes]
  report = {
      "schema": "jaxpapers.report/2",
      "benchmark_metadata": {
          "experiment": name, "paper": dict(paper), "claim": claim,
          "dataset": dict(dataset),
      },
      "run_data": {
          "config": config_dict(config),
          "config_hash": config_hash(config),
          "seeds": list(seeds),
          "versions": versions(),
          "platform": {
              "python": platform.python_version(),
              "machine": platform.machine(),
              "backend": jax.default_backend(),
              "device_kind": jax.devices()[0].device_kind,
              "device_count": jax.device_count(),
              "process_count": jax.process_count(),
              "x64": bool(jax.config.jax_enable_x64),
          },
          "git_commit": git_commit(),
          "wall_time_s": round(wall_time_s, 1),
          "invocations": [dict(i) for i in invocations],
          "results": results,
          "paper_results": paper_results,
          "checks": checks,
          "checks_passed": sum(c["passed"] is True for c in checks),
          "all_checks_passed": all(c["passed"] is True for c in checks),
          "figures": [os.path.basename(f) for f in figures if f],
          "notes": list(notes),
          **(extra_run_data or {}),
      },
      "model_metadata": dict(model),
  }
  # As report.json holds it (tuples as lists), so that the card built here
  # is the one card.regenerate builds from the file.
  report = json.loads(json.dumps(report, default=json_default))
  report["evaluation_card"] = card_lib.build(
      report, str(int(datetime.datetime.now(datetime.timezone.utc).timestamp())))
  return report


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]
                   ) -> list[str]:
  """The lines of a Markdown table; numbers in cells are shown with :func:`fmt`."""
  cell = lambda v: v if isinstance(v, str) else fmt(v)
  return ["| " + " | ".join(header) + " |",
          "|" + "---|" * len(header)] + [
              "| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def render_markdown(report: Mapping[str, Any]) -> str:
  """A human-readable summary of a report dict."""
  bench, run_data = report["benchmark_metadata"], report["run_data"]
  paper = bench["paper"]
  checks = run_data["checks"]
  lines = [
      f"# {bench['experiment']}: {paper.get('title', '')}",
      "",
      f"**Verdict.** {card_lib.verdict(report)}.",
      "",
  ]
  if run_data.get("scale") == "smoke":
    declared = run_data.get("not_at_smoke_scale", [])
    lines += ["**Scale: `smoke`.** A reduced config: its checks test that the"
              " code runs end to end, not the claim; the default config's"
              " report is the one that tests the claim."
              + (" The binary declares these checks too small for it: "
                 + ", ".join(f"`{i}`" for i in declared) + "." if declared else ""),
              ""]
  lines += [f"- **{b['label']}**: {b['text']}" for b in evalcards.badges(
      report["evaluation_card"]["summary"], "research")]
  lines += [
      "",
      f"Paper: {paper.get('authors', '')}, <{paper.get('url', '')}>",
      "",
      f"**Claim tested.** {bench['claim']}",
      "",
      f"**Data.** {bench['dataset'].get('name', '')}:"
      f" {bench['dataset'].get('provenance', '')}",
      "",
      f"## Checks ({run_data['checks_passed']}/{len(checks)} passed)",
      "",
      "| id | check | result | detail |",
      "|---|---|---|---|",
  ]
  lines += [f"| `{c['id']}` | {c['name']} | {VERDICTS[c['passed']]}"
            + (" (machine-dependent)" if c.get("machine_dependent") else "")
            + (f" ({c['diagnosis']['kind']})" if "diagnosis" in c else "")
            + f" | {c['detail']} |" for c in checks]
  diagnosed = [c for c in checks if "diagnosis" in c]
  if diagnosed:
    lines += ["", "### Why these checks do not pass", ""]
    lines += [f"- `{c['id']}` ({VERDICTS[c['passed']]}), **"
              f"{c['diagnosis']['kind']}**: {c['diagnosis']['evidence']}"
              # Paths as code, not links: the docs pages include this
              # file, where a link would resolve against docs/.
              + (" Evidence (in this report's folder): " + ", ".join(
                  f"`{a}`" for a in c["diagnosis"]["artefacts"]) + "."
                 if c["diagnosis"]["artefacts"] else "")
              for c in diagnosed]
  if any(c.get("machine_dependent") for c in checks):
    lines += ["", "Machine-dependent checks are decided by wall-clock timings"
              " measured in this run (alternating rounds; INCONCLUSIVE when"
              " the bound lies inside their 10-90% spread): another machine"
              " or load may decide them differently. A resumed run reuses the"
              " timings it measured."]
  lines += ["", "## Our numbers", "", "| evaluation | metric | score | s.e. | n |",
            "|---|---|---|---|---|"]
  lines += [f"| {r['evaluation_name']} | {r['metric']} | {fmt(r['score'])} |"
            f" {fmt(r.get('standard_error'))} | {r.get('num_samples', '')} |"
            for r in run_data["results"]]
  lines += ["", "## The paper's numbers", ""]
  lines += [f"- {r['evaluation_name']}: {r['statement']}"
            + (f" (compared: {r['metric']} = {fmt(r['score'])})"
               if "score" in r else "") for r in run_data["paper_results"]]
  if run_data["figures"]:
    lines += ["", "## Figures", ""]
    lines += [f"![{f}]({f})" for f in run_data["figures"]]
  if run_data["notes"]:
    lines += ["", "## Notes", ""] + [f"- {n}" for n in run_data["notes"]]
  platform_ = run_data["platform"]
  lines += [
      "", "## Reproducibility", "",
      f"- config hash `{run_data['config_hash']}`, seeds {run_data['seeds']},"
      f" git `{run_data['git_commit']}`",
      f"- {platform_['backend']} ({platform_['device_kind']}),"
      f" {platform_['device_count']} devices, {platform_['process_count']}"
      f" processes, wall time {run_data['wall_time_s']} s",
      *_invocation_lines(run_data.get("invocations", [])),
      "- " + ", ".join(f"{k} {v}" for k, v in run_data["versions"].items()),
      "",
  ]
  return "\n".join(lines)


def versions() -> dict[str, str]:
  out = {}
  for package in PACKAGES:
    try:
      out[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      pass
  return out


def _invocation_lines(invocations: Sequence[Mapping[str, Any]]) -> list[str]:
  """A line naming the earlier invocations whose work this report restores."""
  if len(invocations) < 2:
    return []
  runs = ", ".join(
      f"`{i['git_commit']}`" + (f" started {i['started']}" if i["started"]
                                else "")
      + (f" ({i['wall_time_s']} s)" if i.get("wall_time_s") is not None
         else " (no report: stopped early)")
      for i in invocations)
  return [f"- built by {len(invocations)} invocations of this workdir, oldest"
          f" first: {runs}; runs an earlier invocation finished are restored"
          " from its checkpoints, not recomputed"]


def git_commit() -> str:
  """The short commit of the checkout, with ``+dirty`` when tracked files differ from it."""
  def git(*args):
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, check=True,
        timeout=10, cwd=os.path.dirname(os.path.abspath(__file__)),
    ).stdout.strip()

  try:
    commit = git("rev-parse", "--short", "HEAD")
    changed = git("status", "--porcelain", "--untracked-files=no")
  except (OSError, subprocess.SubprocessError):
    return "unknown"
  return commit + ("+dirty" if changed else "")


def fmt(value: Any) -> str:
  """A value for a table: a float to 4 significant digits, None as empty."""
  if value is None:
    return ""
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)


class StaticConfig:
  """A ConfigDict as a hashable static ``jit`` argument (keyed by its JSON).

  ``jax.jit(fn, static_argnames="config")`` then compiles once per distinct
  config; read the fields through ``.value``.
  """

  def __init__(self, value: ml_collections.ConfigDict):
    self.value = value
    self._key = value.to_json_best_effort(sort_keys=True)

  def __hash__(self):
    return hash(self._key)

  def __eq__(self, other):
    return isinstance(other, StaticConfig) and self._key == other._key
