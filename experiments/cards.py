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
third-party directory, the runs' figures and one stylesheet. Plain HTML and
CSS, a few lines of JavaScript for the research/policy audience toggle; no
server and no network at view time.

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
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em;
       color: #222; line-height: 1.4; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: left;
         vertical-align: top; font-size: 0.92em; }
th { background: #f3f3f3; }
.badge { display: inline-block; border-radius: 0.8em; padding: 0.1em 0.6em;
         margin: 0.1em; font-size: 0.85em; border: 1px solid; }
.ok { background: #e6f4ea; border-color: #34a853; }
.warn { background: #fef7e0; border-color: #f9ab00; }
.na { background: #f1f3f4; border-color: #9aa0a6; }
.fail { background: #fce8e6; border-color: #d93025; }
.pass { background: #e6f4ea; border-color: #34a853; }
.inconclusive { background: #fef7e0; border-color: #f9ab00; }
body.policy .research, body.research .policy { display: none; }
button#audience { font-size: 1em; padding: 0.3em 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
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
window.addEventListener('DOMContentLoaded', function () {
  var a = 'research';
  try { a = localStorage.getItem('audience') || a; } catch (e) {}
  setAudience(a);
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
  workdirs, third_party = find_sources(dirs)
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "style.css"), "w") as f:
    f.write(STYLE)
  runs = []
  for directory, workdir in workdirs:
    with open(os.path.join(workdir, "report.json")) as f:
      report = json.load(f)
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


def _index(runs, sources) -> str:
  rows = []
  for run in runs:
    report = run["report"]
    data, bench = report["run_data"], report["benchmark_metadata"]
    card = report["evaluation_card"]
    rows.append(
        f"<tr><td><a href='{run['page']}/index.html'>{_e(bench['experiment'])}"
        f"</a><br><small>{_e(run['page'])}</small></td>"
        f"<td>{_e(bench['claim'])}</td>"
        f"<td class='checks'>{data['checks_passed']}/{len(data['checks'])}</td>"
        f"<td>{_badges(card['summary'])}</td>"
        f"<td>{_e(_date(card['records'][0]['retrieved_timestamp']))}</td>"
        f"<td><code>{_e(data['git_commit'])}</code></td></tr>")
  for source in sources:
    summary = evalcards.summary(source["analysis"])
    loaded = source["loaded"]
    rows.append(
        f"<tr><td><a href='{source['page']}/index.html'>"
        f"{_e(os.path.basename(os.path.abspath(source['directory'])))}</a>"
        "<br><small>third-party EEE records</small></td>"
        f"<td>{len(loaded.records)} records, {summary['num_results']} results"
        f" ({len(source['analysis']['record_findings'])} files with findings)"
        "</td><td>&mdash;</td>"
        f"<td>{_badges(summary)}</td><td>&mdash;</td><td>&mdash;</td></tr>")
  return (
      "<h1>Evaluation Cards</h1>"
      f"<p>{len(runs)} runs, {len(sources)} third-party directories.</p>"
      "<table id='runs'><tr><th>experiment</th><th>claim</th>"
      "<th>checks passed</th><th>signals</th><th>date</th><th>commit</th></tr>"
      + "".join(rows) + "</table>")


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
  comparison = _comparison(card)
  figures = "".join(f"<img src='{_e(f)}' alt='{_e(f)}'>" for f in data["figures"])
  platform = data["platform"]
  return (
      f"<p><a href='../index.html'>&larr; all runs</a></p>"
      f"<h1>{_e(bench['experiment'])}: {_e(paper.get('title', ''))}</h1>"
      f"<p class='verdict'><b>Verdict.</b> {_e(card_lib.verdict(report))}.</p>"
      f"<p>{_badges(card['summary'])}</p>"
      f"<h2>Claim</h2><p class='claim'>{_e(bench['claim'])}</p>"
      f"<p>Paper: {_e(paper.get('authors', ''))},"
      f" <a href='{_e(paper.get('url', ''))}'>{_e(paper.get('url', ''))}</a></p>"
      f"<h2>Checks: {data['checks_passed']}/{len(data['checks'])} passed</h2>"
      "<table id='checks'><tr><th>id</th><th>check</th><th>result</th>"
      f"<th>detail</th></tr>{checks}</table>"
      f"<h2>Our numbers beside the paper's</h2>{comparison}"
      f"<h2>Figures</h2>{figures}"
      "<h2>Provenance</h2><ul>"
      f"<li>git commit <code>{_e(data['git_commit'])}</code>, config hash"
      f" <code>{_e(data['config_hash'])}</code>, seeds {_e(data['seeds'])}</li>"
      f"<li>{_e(platform['backend'])} ({_e(platform['device_kind'])}),"
      f" {platform['device_count']} devices, {platform['process_count']}"
      f" processes, wall time {data['wall_time_s']} s</li>"
      f"<li>{_e(', '.join(f'{k} {v}' for k, v in data['versions'].items()))}</li>"
      f"<li>data: {_e(bench['dataset'].get('provenance', ''))}</li></ul>"
      f"<p><a href='../{_e(page)}/index.html'>permalink</a></p>")


def _comparison(card: Mapping[str, Any]) -> str:
  """Every result: ours, the paper's where it gives one, and the divergence flag."""
  groups = {(g["evaluation_name"], g["metric"]): g
            for g in card["signals"]["groups"]}
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
        f"<td>{'' if not paper else f'{paper[0]:.4g}'}</td>"
        + ("<td>&mdash;</td>" if flag is None else
           f"<td><span class='badge {'warn' if flag else 'ok'} divergence'>"
           f"{'diverges' if flag else 'agrees'}</span> spread"
           f" {comparability['cross_party_spread']:.3g} vs threshold"
           f" {comparability['threshold']:.3g}</td>") + "</tr>")
  return ("<table id='numbers'><tr><th>evaluation</th><th>metric</th>"
          "<th>ours (&plusmn; s.e.)</th><th>paper</th><th>divergence</th></tr>"
          + "".join(rows) + "</table>")


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


def _badges(summary: Mapping[str, Any]) -> str:
  out = []
  for audience in evalcards.AUDIENCES:
    out += [f"<span class='badge {b['state']} {audience}'"
            f" data-signal='{b['signal']}' title='{_e(b['text'])}'>"
            f"{_e(b['label'])}: {_e(b['text'])}</span>"
            for b in evalcards.badges(summary, audience)]
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
