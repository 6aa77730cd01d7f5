r"""The monitor: a static site of Evaluation Cards for every run, and for third-party records.

  python -m experiments.cards [DIR ...] [--out SITE]
  python -m experiments.cards --regenerate DIR ...
  python -m experiments.cards --diagnose DIR ...

Each ``DIR`` (default ``runs/``) is searched for experiment workdirs (a
folder with ``report.json``); a ``DIR`` that holds none is read as a
directory of third-party EEE records (one record per JSON file, as the EEE
datastore keeps them, of any schema version): every record is shown and
given signals, and what a record violates of the schema version it declares
(or of 0.3.0, for a version we do not know) is listed as its completeness
finding; files that are not JSON are listed too. ``SITE`` (default
``<first DIR>/site``) gets ``index.html``, one page per run and per
third-party directory, the runs' figures and one stylesheet.

The index has one compact row per run: experiment and scale (smoke,
default, paper), the claim on one line (whole on hover), the checks passed
as a badge coloured by the verdict, each signal as a small icon (its
details on hover and on the run page), date and commit. It sorts by any
column (click its header) and filters by experiment, verdict and scale.
A run page shows the verdict, the claim, the checks (each failing one with
its diagnosis) and the figures before the numbers, which fold away. Each
card is rebuilt from its ``report.json`` by the harness's code
(``card.build``), so a report written before a signal changed is shown
with today's signals: a result that is NaN makes reproducibility red.
Plain HTML and CSS and a little JavaScript (sorting, filtering, the
research/policy audience toggle); no server and no network at view time.

``--regenerate`` writes nothing of a site: it rebuilds each workdir's
``eee/`` records from its ``report.json`` (``card.regenerate``, the code the
harness writes them with), e.g. after a change of the record format:
``python -m experiments.cards --regenerate experiments/results``.

``--diagnose`` writes nothing of a site either: it attaches each
experiment's current diagnoses (``experiments/diagnoses/<experiment>.py``)
to the failing checks of each workdir's report, computing nothing
(``report.reattach_diagnoses``): ``python -m experiments.cards --diagnose
experiments/results``.
"""

import datetime
import html
import json
import os
import shutil
import sys
from typing import Any, Iterable, Mapping

from absl import app
from absl import flags

from jaxpapers import evalcards

_OUT = flags.DEFINE_string("out", None, "Output folder; default <first DIR>/site.")
_REGENERATE = flags.DEFINE_bool(
    "regenerate", False, "Rebuild each workdir's eee/ records from its"
    " report.json instead of writing a site.")
_DIAGNOSE = flags.DEFINE_bool(
    "diagnose", False, "Attach each experiment's current diagnoses to its"
    " reports' failing checks (no recomputation) instead of writing a site.")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 84em;
       color: #222; line-height: 1.35; padding: 0 1em; }
h1 { margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.8em 0; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left;
         vertical-align: top; font-size: 0.9em; }
th { background: #f3f3f3; }
#runs td { vertical-align: middle; white-space: nowrap; }
#runs td.claim { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
                 max-width: 36em; }
#runs th[data-key] { cursor: pointer; user-select: none; }
#runs th[aria-sort=ascending]::after { content: " \\25B2"; }
#runs th[aria-sort=descending]::after { content: " \\25BC"; }
#filters { display: flex; gap: 0.6em; align-items: center; flex-wrap: wrap; }
#filters input, #filters select { font-size: 0.95em; padding: 0.2em; }
.badge { display: inline-block; border-radius: 0.8em; padding: 0.1em 0.6em;
         margin: 0.1em; font-size: 0.85em; border: 1px solid; }
.sig { display: inline-block; width: 1.5em; height: 1.5em; line-height: 1.5em;
       border-radius: 50%; text-align: center; font-size: 0.75em; font-weight: bold;
       border: 1px solid; margin-right: 0.2em; cursor: help; }
.tag { display: inline-block; font-size: 0.75em; padding: 0 0.4em; margin-left: 0.4em;
       border-radius: 0.3em; color: #fff; background: #5f6368; }
.tag.smoke { background: #e37400; }
.tag.default { background: #1a73e8; }
.tag.paper { background: #188038; }
h1 .tag { font-size: 0.4em; vertical-align: middle; }
.ok, .pass { background: #e6f4ea; border-color: #34a853; }
.warn, .inconclusive { background: #fef7e0; border-color: #f9ab00; }
.na { background: #f1f3f4; border-color: #9aa0a6; }
.fail { background: #fce8e6; border-color: #d93025; }
.sig.fail, .badge.fail { color: #a50e0e; }
body.policy .research, body.research .policy { display: none; }
button#audience { font-size: 1em; padding: 0.3em 0.8em; float: right; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
details > summary { cursor: pointer; font-weight: bold; margin: 0.8em 0; }
"""
SCRIPT = """
function setAudience(a) {
  document.body.className = a;
  document.getElementById('audience').textContent =
      a === 'research' ? 'Show policy view' : 'Show research view';
  try { localStorage.setItem('audience', a); } catch (e) {}
}
function toggleAudience() {
  setAudience(document.body.className === 'research' ? 'policy' : 'research');
}
function applyFilters() {
  var text = document.getElementById('filter-experiment').value.toLowerCase();
  var verdict = document.getElementById('filter-verdict').value;
  var scale = document.getElementById('filter-scale').value;
  var rows = document.querySelectorAll('#runs tbody tr'), shown = 0;
  rows.forEach(function (row) {
    var keep = row.dataset.experiment.toLowerCase().indexOf(text) >= 0 &&
        (!verdict || row.dataset.verdict === verdict) &&
        (!scale || row.dataset.scale === scale);
    row.style.display = keep ? '' : 'none';
    shown += keep ? 1 : 0;
  });
  document.getElementById('shown').textContent =
      shown + ' of ' + rows.length + ' shown';
}
function sortBy(th) {
  var key = th.dataset.key, body = document.querySelector('#runs tbody');
  var ascending = th.getAttribute('aria-sort') !== 'ascending';
  document.querySelectorAll('#runs th').forEach(function (h) {
    h.removeAttribute('aria-sort');
  });
  th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = a.dataset[key], y = b.dataset[key];
    var nx = parseFloat(x), ny = parseFloat(y);
    var order = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
    return ascending ? order : -order;
  });
  rows.forEach(function (row) { body.appendChild(row); });
}
window.addEventListener('DOMContentLoaded', function () {
  var a = 'research';
  try { a = localStorage.getItem('audience') || a; } catch (e) {}
  setAudience(a);
  if (document.getElementById('runs')) {
    document.querySelectorAll('#runs th[data-key]').forEach(function (th) {
      th.addEventListener('click', function () { sortBy(th); });
    });
    ['filter-experiment', 'filter-verdict', 'filter-scale'].forEach(function (id) {
      var control = document.getElementById(id);
      control.addEventListener('input', applyFilters);
      control.addEventListener('change', applyFilters);
    });
    applyFilters();
  }
});
"""
VERDICT_CLASS = {True: "pass", False: "fail", None: "inconclusive"}
VERDICT_TEXT = {True: "PASS", False: "FAIL", None: "INCONCLUSIVE"}


def find_sources(dirs: Iterable[str]
                 ) -> tuple[list[tuple[str, str]], list[str]]:
  """``([(DIR, workdir with a report.json)], [third-party EEE directory])``."""
  workdirs, third_party = [], []
  for directory in dirs:
    if not os.path.isdir(directory):
      raise FileNotFoundError(f"no directory {directory!r}")
    found = []
    for root, subdirs, files in os.walk(directory):
      if "report.json" in files:
        found.append((directory, root))
        subdirs[:] = []
      subdirs[:] = sorted(d for d in subdirs if d != "site")
    (workdirs.extend(found) if found else third_party.append(directory))
  return workdirs, third_party


def write_site(dirs: list[str], out: str) -> dict[str, Any]:
  """Writes the site; returns what it contains (for callers and tests)."""
  from experiments.harness import card as card_lib  # pylint: disable=g-import-not-at-top
  workdirs, third_party = find_sources(dirs)
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "style.css"), "w") as f:
    f.write(STYLE)
  runs = []
  for directory, workdir in workdirs:
    with open(os.path.join(workdir, "report.json")) as f:
      report = json.load(f)
    report["evaluation_card"] = card_lib.build(
        report, report["evaluation_card"]["records"][0]["retrieved_timestamp"])
    relative = os.path.relpath(workdir, directory)
    page = _slug(os.path.basename(os.path.abspath(workdir))
                 if relative == "." else relative)
    os.makedirs(os.path.join(out, page), exist_ok=True)
    # The figures, and the evidence that the diagnoses link (kept in
    # subfolders of the report's folder: a scaling study's figure, report).
    evidence = {a for c in report["run_data"]["checks"]
                for a in c.get("diagnosis", {}).get("artefacts", ())}
    for name in sorted({*report["run_data"]["figures"], *evidence}):
      if name in report["run_data"]["figures"] or os.path.isfile(
          os.path.join(workdir, name)):
        os.makedirs(os.path.dirname(os.path.join(out, page, name)),
                    exist_ok=True)
        shutil.copyfile(os.path.join(workdir, name),
                        os.path.join(out, page, name))
    _write(os.path.join(out, page, "index.html"), _run_page(report, page),
           depth=1)
    runs.append({"page": page, "report": report})
  sources = []
  for directory in third_party:
    loaded = evalcards.load_directory(directory)
    analysis = evalcards.analyze(loaded)
    page = "third_party_" + _slug(os.path.basename(os.path.abspath(directory)))
    os.makedirs(os.path.join(out, page), exist_ok=True)
    _write(os.path.join(out, page, "index.html"),
           _source_page(directory, loaded, analysis), depth=1)
    sources.append({"page": page, "directory": directory, "loaded": loaded,
                    "analysis": analysis})
  _write(os.path.join(out, "index.html"), _index(runs, sources), depth=0)
  return {"runs": runs, "sources": sources, "out": out}


SCALES = ("smoke", "default", "paper")
SIGNAL_LETTERS = {"reproducibility": "R", "completeness": "C", "provenance": "P",
                  "comparability": "D"}


def verdict_of(checks) -> str:
  """``pass`` (every check passed), ``fail`` (one failed) or ``inconclusive``."""
  if any(c["passed"] is False for c in checks):
    return "fail"
  return "pass" if checks and all(c["passed"] is True for c in checks) else "inconclusive"


def scale_of(run_data: Mapping[str, Any]) -> str:
  """The scale a run recorded (reports before the field: ``unrecorded``)."""
  return str(run_data.get("scale") or "unrecorded")


def _index(runs, sources) -> str:
  rows = []
  for run in runs:
    report = run["report"]
    data, bench = report["run_data"], report["benchmark_metadata"]
    card, checks = report["evaluation_card"], data["checks"]
    verdict, scale = verdict_of(checks), scale_of(data)
    timestamp = card["records"][0]["retrieved_timestamp"]
    ratio = data["checks_passed"] / len(checks) if checks else 0.0
    rows.append(
        f"<tr data-experiment='{_e(bench['experiment'])}' data-verdict='{verdict}'"
        f" data-scale='{_e(scale)}' data-checks='{ratio:.4f}' data-date='{_e(timestamp)}'"
        f" data-commit='{_e(data['git_commit'])}'>"
        f"<td><a href='{run['page']}/index.html'>{_e(run['page'])}</a>"
        f"<span class='tag {_e(scale)}'>{_e(scale)}</span></td>"
        f"<td class='claim' title='{_e(bench['claim'])}'>{_e(bench['claim'])}</td>"
        f"<td><span class='badge {verdict} checks' title='{verdict}'>"
        f"{data['checks_passed']}/{len(checks)}</span></td>"
        f"<td class='signals'>{_badges(card['summary'], compact=True)}</td>"
        f"<td>{_e(_date(timestamp))}</td>"
        f"<td><code>{_e(str(data['git_commit'])[:10])}</code></td></tr>")
  for source in sources:
    summary = evalcards.summary(source["analysis"])
    loaded, name = source["loaded"], os.path.basename(os.path.abspath(source["directory"]))
    description = (f"{len(loaded.records)} records, {summary['num_results']} results"
                   f" ({len(source['analysis']['record_findings'])} files with findings)")
    rows.append(
        f"<tr data-experiment='{_e(name)}' data-verdict='third-party'"
        " data-scale='third-party' data-checks='-1' data-date='0' data-commit=''>"
        f"<td><a href='{source['page']}/index.html'>{_e(name)}</a>"
        "<span class='tag'>third-party</span></td>"
        f"<td class='claim' title='{_e(description)}'>{_e(description)}</td>"
        f"<td>&mdash;</td><td class='signals'>{_badges(summary, compact=True)}</td>"
        "<td>&mdash;</td><td>&mdash;</td></tr>")
  scales = sorted({scale_of(r["report"]["run_data"]) for r in runs} | set(SCALES),
                  key=lambda x: (x not in SCALES, SCALES.index(x) if x in SCALES else x))
  options = "".join(f"<option value='{_e(x)}'>{_e(x)}</option>"
                    for x in [*scales, *(["third-party"] if sources else [])])
  header = "".join(
      f"<th data-key='{key}'>{label}</th>" if key else f"<th>{label}</th>"
      for key, label in (("experiment", "run"), ("", "claim"), ("checks", "checks passed"),
                         ("", "signals"), ("date", "date"), ("commit", "commit")))
  legend = ", ".join(f"{letter} {signal}" for signal, letter in SIGNAL_LETTERS.items())
  return (
      "<h1>Evaluation Cards</h1>"
      f"<p>{len(runs)} runs, {len(sources)} third-party directories."
      f" Signals: {legend} (hover for details).</p>"
      "<div id='filters'><input id='filter-experiment' placeholder='experiment'"
      " aria-label='filter by experiment'>"
      "<select id='filter-verdict' aria-label='filter by verdict'>"
      "<option value=''>any verdict</option><option value='pass'>every check passes</option>"
      "<option value='fail'>a check fails</option>"
      "<option value='inconclusive'>inconclusive</option>"
      + ("<option value='third-party'>third-party</option>" if sources else "")
      + "</select><select id='filter-scale' aria-label='filter by scale'>"
      f"<option value=''>any scale</option>{options}</select>"
      "<span id='shown'></span></div>"
      f"<table id='runs'><thead><tr>{header}</tr></thead><tbody>"
      + "".join(rows) + "</tbody></table>")


def _run_page(report: Mapping[str, Any], page: str) -> str:
  from experiments.harness import card as card_lib  # pylint: disable=g-import-not-at-top
  bench, data = report["benchmark_metadata"], report["run_data"]
  card, paper = report["evaluation_card"], bench["paper"]
  checks = "".join(
      f"<tr><td><code>{_e(c['id'])}</code></td><td>{_e(c['name'])}</td>"
      f"<td><span class='badge {VERDICT_CLASS[c['passed']]}'>"
      f"{VERDICT_TEXT[c['passed']]}</span></td><td>{_e(c['detail'])}"
      + (f"<p class='diagnosis'><b>Why ({_e(c['diagnosis']['kind'])}).</b>"
         f" {_e(c['diagnosis']['evidence'])}"
         + "".join(f" <a href='{_e(a)}'>{_e(a)}</a>"
                   for a in c["diagnosis"]["artefacts"]) + "</p>"
         if "diagnosis" in c else "")
      + "</td></tr>" for c in data["checks"])
  figures = "".join(f"<img src='{_e(f)}' alt='{_e(f)}'>" for f in data["figures"])
  platform, scale = data["platform"], scale_of(data)
  num_results = len(card["records"][0]["evaluation_results"])
  return (
      f"<p><a href='../index.html'>&larr; all runs</a></p>"
      f"<h1>{_e(bench['experiment'])}: {_e(paper.get('title', ''))}"
      f"<span class='tag {_e(scale)}'>{_e(scale)}</span></h1>"
      f"<p class='verdict'><b>Verdict.</b> {_e(card_lib.verdict(report))}.</p>"
      f"<p>{_badges(card['summary'])}</p>"
      f"<h2>Claim</h2><p class='claim'>{_e(bench['claim'])}</p>"
      f"<p>Paper: {_e(paper.get('authors', ''))},"
      f" <a href='{_e(paper.get('url', ''))}'>{_e(paper.get('url', ''))}</a></p>"
      f"<h2>Checks: {data['checks_passed']}/{len(data['checks'])} passed</h2>"
      "<table id='checks'><tr><th>id</th><th>check</th><th>result</th>"
      f"<th>detail</th></tr>{checks}</table>"
      f"<h2>Figures</h2>{figures}"
      f"<details id='numbers-section'><summary>Our numbers"
      + (" beside the paper's" if _has_paper_numbers(card) else "")
      + f" ({num_results} results)</summary>{_comparison(card)}</details>"
      "<h2>Provenance</h2><ul>"
      f"<li>git commit <code>{_e(data['git_commit'])}</code>, config hash"
      f" <code>{_e(data['config_hash'])}</code>, seeds {_e(data['seeds'])}</li>"
      f"<li>{_e(platform['backend'])} ({_e(platform['device_kind'])}),"
      f" {platform['device_count']} devices, {platform['process_count']}"
      f" processes, wall time {data['wall_time_s']} s</li>"
      f"<li>{_e(', '.join(f'{k} {v}' for k, v in data['versions'].items()))}</li>"
      f"<li>data: {_e(bench['dataset'].get('provenance', ''))}</li></ul>"
      f"<p><a href='../{_e(page)}/index.html'>permalink</a></p>")


def _has_paper_numbers(card: Mapping[str, Any]) -> bool:
  return len(card["records"]) > 1


def _comparison(card: Mapping[str, Any]) -> str:
  """Every result: ours, and where the paper gives numbers, its number and the divergence flag.

  Results without a finite number (no record can hold them) are listed
  after the table.
  """
  groups = {(g["evaluation_name"], g["metric"]): g
            for g in card["signals"]["groups"]}
  with_paper = _has_paper_numbers(card)
  rows = []
  for r in card["records"][0]["evaluation_results"]:
    key = (r["evaluation_name"], r["metric_config"].get("metric_id"))
    comparability = groups[key]["comparability"] if key in groups else {}
    medians = comparability.get("organization_medians", {})
    paper = [v for k, v in medians.items() if k != "jaxpapers"]
    flag = comparability.get("cross_party_divergence")
    se = r["score_details"].get("uncertainty", {}).get("standard_error", {})
    rows.append(
        f"<tr><td>{_e(key[0])}</td><td>{_e(key[1])}</td>"
        f"<td>{r['score_details']['score']:.4g}"
        + (f" &plusmn; {se['value']:.2g}" if se else "") + "</td>"
        + ("" if not with_paper else
           f"<td>{'' if not paper else f'{paper[0]:.4g}'}</td>"
           + ("<td>&mdash;</td>" if flag is None else
              f"<td><span class='badge {'warn' if flag else 'ok'} divergence'>"
              f"{'diverges' if flag else 'agrees'}</span> spread"
              f" {comparability['cross_party_spread']:.3g} vs threshold"
              f" {comparability['threshold']:.3g}</td>")) + "</tr>")
  skipped = card.get("skipped_results", [])
  return ("<table id='numbers'><tr><th>evaluation</th><th>metric</th>"
          "<th>ours (&plusmn; s.e.)</th>"
          + ("<th>paper</th><th>divergence</th>" if with_paper else "") + "</tr>"
          + "".join(rows) + "</table>"
          + ("" if not skipped else "<p class='non-finite'><b>Without a number"
             " (None: not reached; NaN or infinite: broken):</b> "
             + "; ".join(_e(x) for x in skipped) + "</p>"))


def _source_page(directory, loaded, analysis) -> str:
  groups = "".join(
      f"<tr><td>{_e(g['model_id'])}</td><td>{_e(g['evaluation_name'])}</td>"
      f"<td>{_e(g['metric'])}</td><td>{_e(', '.join(g['provenance']['organizations']))}</td>"
      f"<td>{_flag(g['comparability']['cross_party_divergence'])}</td>"
      f"<td>{_flag(g['comparability']['variant_divergence'])}"
      f" {_e(', '.join(g['comparability']['variant_fields']))}</td></tr>"
      for g in analysis["groups"])
  results = "".join(
      f"<tr><td>{_e(r['record_id'])}</td><td>{_e(r['evaluation_name'])}</td>"
      f"<td>{r['score']:.4g}</td><td>{_e(r['organization'])} ({_e(r['source'])})</td>"
      f"<td>{_e(', '.join(r['reproducibility']['missing']) or 'none')}</td></tr>"
      for r in analysis["results"])
  findings = "".join(
      f"<li><code>{_e(path)}</code><ul>"
      + "".join(f"<li>{_e(f)}</li>" for f in found) + "</ul></li>"
      for path, found in analysis["record_findings"].items())
  return (
      "<p><a href='../index.html'>&larr; all runs</a></p>"
      f"<h1>Third-party records: {_e(directory)}</h1>"
      f"<p>{_badges(evalcards.summary(analysis))}</p>"
      "<h2>Groups</h2><table id='groups'><tr><th>model</th><th>evaluation</th>"
      "<th>metric</th><th>organisations</th><th>cross-party divergence</th>"
      f"<th>variant divergence</th></tr>{groups}</table>"
      "<h2>Results</h2><table id='results'><tr><th>record</th><th>evaluation</th>"
      "<th>score</th><th>source</th><th>missing for reproduction</th></tr>"
      f"{results}</table>"
      f"<h2>Completeness findings ({len(analysis['record_findings'])} of"
      f" {analysis['num_records']} files)</h2>"
      "<p>What each file violates of the EEE schema version it declares"
      " (or of the version we know, for one we do not); its readable"
      " results are shown above.</p>"
      f"<ul id='findings'>{findings}</ul>")


def _badges(summary: Mapping[str, Any], *, compact: bool = False) -> str:
  """Every signal in both audiences' wording (CSS shows one audience).

  ``compact``: a lettered dot coloured by the signal's state, its wording on
  hover (the index); otherwise a badge with the wording (run pages).
  """
  out = []
  for audience in evalcards.AUDIENCES:
    for b in evalcards.badges(summary, audience):
      shown = SIGNAL_LETTERS.get(b["signal"], "?") if compact else (
          f"{_e(b['label'])}: {_e(b['text'])}")
      hover = f"{b['label']}: {b['text']}" if compact else b["text"]
      out.append(f"<span class='{'sig' if compact else 'badge'} {b['state']} {audience}'"
                 f" data-signal='{b['signal']}' title='{_e(hover)}'>{shown}</span>")
  return "".join(out)


def _flag(value) -> str:
  if value is None:
    return "<span class='badge na'>n/a</span>"
  return f"<span class='badge {'warn' if value else 'ok'}'>{'yes' if value else 'no'}</span>"


def _write(path: str, body: str, depth: int) -> None:
  css = "../" * depth + "style.css"
  with open(path, "w") as f:
    f.write("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<title>Evaluation Cards</title>"
            f"<link rel='stylesheet' href='{css}'><script>{SCRIPT}</script>"
            "</head><body class='research'>"
            "<button id='audience' onclick='toggleAudience()'>"
            "Show policy view</button>" + body + "</body></html>")


def _slug(text: str) -> str:
  return "".join(c if c.isalnum() or c in "-_" else "_" for c in text) or "run"


def _date(timestamp: str) -> str:
  return datetime.datetime.fromtimestamp(
      int(timestamp), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _e(value: Any) -> str:
  return html.escape(str(value), quote=True)


def regenerate(dirs: Iterable[str]) -> list[str]:
  """Rebuilds the ``eee/`` records of every workdir under ``dirs``; returns the paths."""
  from experiments.harness import card as card_lib  # pylint: disable=g-import-not-at-top
  workdirs, _ = find_sources(dirs)
  return [path for _, workdir in workdirs
          for path in card_lib.regenerate(workdir)]


def diagnose(dirs: Iterable[str]) -> list[str]:
  """Attaches the current diagnoses to every report under ``dirs``; returns those changed."""
  from experiments.harness import cli  # pylint: disable=g-import-not-at-top
  from experiments.harness import report as report_lib  # pylint: disable=g-import-not-at-top
  workdirs, _ = find_sources(dirs)
  commit = report_lib.git_commit()  # before the first write dirties the tree
  changed = []
  for _, workdir in workdirs:
    with open(os.path.join(workdir, "report.json")) as f:
      experiment = json.load(f)["benchmark_metadata"]["experiment"]
    if report_lib.reattach_diagnoses(workdir, cli.diagnoses_of(experiment),
                                     commit):
      changed.append(workdir)
  return changed


def main(argv: list[str]) -> None:
  dirs = argv[1:] or ["runs"]
  missing = [d for d in dirs if not os.path.isdir(d)]
  if missing:  # a usage error (exit 2), not a traceback
    print(f"usage error: no directory {', '.join(map(repr, missing))}: pass"
          " workdirs or directories that hold them (default: runs).\n(see"
          " --help)", file=sys.stderr)
    sys.exit(2)
  if _DIAGNOSE.value:
    changed = diagnose(dirs)
    print(f"diagnoses attached to {len(changed)} reports:")
    for workdir in changed:
      print(f"  {workdir}")
    return
  if _REGENERATE.value:
    paths = regenerate(dirs)
    print(f"{len(paths)} EEE records rebuilt from report.json:")
    for path in paths:
      print(f"  {path}")
    return
  site = write_site(dirs, _OUT.value or os.path.join(dirs[0], "site"))
  with_findings = sum(len(s["analysis"]["record_findings"])
                      for s in site["sources"])
  print(f"{len(site['runs'])} runs, {len(site['sources'])} third-party"
        f" directories ({with_findings} record files with findings):"
        f" {os.path.join(site['out'], 'index.html')}")
  for source in site["sources"]:
    for path, found in source["analysis"]["record_findings"].items():
      print(f"  {os.path.join(source['directory'], path)}: {found[0]}"
            + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
            file=sys.stderr)


if __name__ == "__main__":
  app.run(main)
