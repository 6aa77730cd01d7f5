"""The Evaluation Cards monitor: the static site, and the site in a real browser.

The browser test drives Debian's headless Chromium with selenium
(tests/browser.py); it is never skipped.
"""

import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from experiments import cards
from tests import binaries
from tests import browser

THIRD_PARTY = os.path.join(binaries.ROOT, "tests", "evalcards", "third_party")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
  """Two committed runs (report, figures, EEE records) under one ``runs/`` folder.

  Committed results are real runs, and ``test_committed_records_are_what_the_
  harness_writes`` keeps their records what the harness writes today; each
  binary's own smoke test covers writing them.
  """
  runs = tmp_path_factory.mktemp("runs")
  for name in ("eoss", "saddle"):
    source = pathlib.Path(binaries.ROOT, "experiments", "results", name)
    shutil.copytree(source, runs / name, ignore=lambda folder, names: [
        n for n in names if folder == str(source) and (source / n).is_dir() and n != "eee"])
  return runs


def _report(runs, name):
  return binaries.read_report(runs / name)


@pytest.mark.slow
def test_site_lists_runs_and_third_party_records(two_runs, tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "experiments.cards", str(two_runs), THIRD_PARTY,
       "--out", str(tmp_path / "site")],
      cwd=binaries.ROOT, capture_output=True, text=True, timeout=120,
      check=False)
  assert out.returncode == 0, out.stderr
  assert ("2 runs, 1 third-party directories (3 record files with findings)"
          in out.stdout)
  assert "no_lower_is_better.json" in out.stderr
  index = (tmp_path / "site" / "index.html").read_text()
  for name in ("eoss", "saddle"):
    report = _report(two_runs, name)
    run_data = report["run_data"]
    assert f"{name}/index.html" in index
    assert f"{run_data['checks_passed']}/{len(run_data['checks'])}" in index
    page = (tmp_path / "site" / name / "index.html").read_text()
    for check in run_data["checks"]:
      assert check["id"] in page
    for figure in run_data["figures"]:
      assert (tmp_path / "site" / name / figure).read_bytes()[:4] == b"\x89PNG"
  source = (tmp_path / "site" / "third_party_third_party" / "index.html").read_text()
  assert "torn.json" in source and "lower_is_better" in source


def _visible_rows(driver):
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  return [r for r in driver.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
          if r.is_displayed()]


@pytest.mark.slow
def test_site_in_a_real_browser(two_runs, tmp_path):
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  site = cards.write_site([str(two_runs), THIRD_PARTY], str(tmp_path / "site"))
  assert len(site["runs"]) == 2
  eoss = _report(two_runs, "eoss")
  driver = browser.headless_chromium()
  try:
    driver.get(f"file://{tmp_path / 'site' / 'index.html'}")
    text = driver.find_element(By.TAG_NAME, "body").text
    assert "2 runs, 1 third-party directories." in text
    rows = _visible_rows(driver)
    assert len(rows) == 2 + 1  # two runs, one third-party folder
    checks = {r.find_element(By.TAG_NAME, "a").text:
              r.find_element(By.CLASS_NAME, "checks").text for r in rows[:2]}
    for name in ("eoss", "saddle"):
      run_data = _report(two_runs, name)["run_data"]
      assert checks[name] == f"{run_data['checks_passed']}/{len(run_data['checks'])}"
    claim = rows[0].find_element(By.CLASS_NAME, "claim")
    assert claim.get_attribute("title") == eoss["benchmark_metadata"]["claim"]
    # The audience toggle swaps the wording of the signals, not the evidence.
    def signals():
      return [(s.text, s.get_attribute("title"))
              for s in driver.find_elements(By.CSS_SELECTOR, ".sig") if s.is_displayed()]
    research = signals()
    assert any(t.startswith("Cross-party divergence") for _, t in research)
    driver.find_element(By.ID, "audience").click()
    policy = signals()
    assert [x for x, _ in policy] == [x for x, _ in research] and policy != research
    assert any(t.startswith("Do sources agree?") for _, t in policy)
    driver.save_screenshot(str(tmp_path / "index.png"))
    # A divergence flag between two sources, on the third-party page.
    driver.find_element(By.LINK_TEXT, "third_party").click()
    groups = driver.find_element(By.ID, "groups").text
    assert "MMLU (5-shot)" in groups and "yes" in groups
    # A run page: verdict, claim and checks, then the figures, then the numbers folded.
    driver.get(f"file://{tmp_path / 'site' / 'eoss' / 'index.html'}")
    page = driver.find_element(By.TAG_NAME, "body").text
    assert eoss["benchmark_metadata"]["claim"] in page
    assert (f"Checks: {eoss['run_data']['checks_passed']}/"
            f"{len(eoss['run_data']['checks'])} passed") in page
    order = [driver.find_element(By.CSS_SELECTOR, css).location["y"] for css in (
        ".verdict", "p.claim", "#checks", "img", "#numbers-section")]
    assert order == sorted(order), order
    numbers = driver.find_element(By.ID, "numbers")
    assert not numbers.is_displayed()
    driver.find_element(By.CSS_SELECTOR, "#numbers-section summary").click()
    assert "diverges" in numbers.text or "agrees" in numbers.text
    images = driver.find_elements(By.TAG_NAME, "img")
    assert len(images) == len(eoss["run_data"]["figures"])
    assert all(driver.execute_script(
        "return arguments[0].naturalWidth", img) > 0 for img in images)
    driver.save_screenshot(str(tmp_path / "eoss.png"))
  finally:
    driver.quit()
  for shot in ("index.png", "eoss.png"):
    assert (tmp_path / shot).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_index_of_every_committed_run_sorts_filters_and_fits_a_screen(tmp_path):
  """The committed runs and a smoke-scale copy of one: sort, filter, >10 rows on 1400x1000."""
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support.ui import Select  # pylint: disable=g-import-not-at-top
  runs = tmp_path / "runs"
  results = pathlib.Path(binaries.ROOT, "experiments", "results")
  for source in sorted(results.iterdir()):
    shutil.copytree(source, runs / source.name, ignore=shutil.ignore_patterns("scaling_*",
                                                                              "alternative_*"))
  committed = len(list(results.glob("*/report.json")))
  driver = browser.headless_chromium()
  try:
    driver.set_window_size(1400, 1000)
    cards.write_site([str(runs)], str(tmp_path / "site"))
    driver.get(f"file://{tmp_path / 'site' / 'index.html'}")
    height = driver.execute_script("return window.innerHeight")
    on_screen = [r for r in _visible_rows(driver)
                 if r.location["y"] + r.size["height"] <= height]
    assert len(on_screen) > 10, len(on_screen)
    target = os.environ.get("JAXPAPERS_SCREENSHOTS")
    if target:  # the screenshot in docs/evaluation_cards.md
      driver.save_screenshot(os.path.join(target, "cards_index.png"))
    # A smoke run whose result is NaN (the site must show it red, not green).
    smoke = runs / "eoss_smoke"
    shutil.copytree(results / "eoss", smoke)
    report = json.loads((smoke / "report.json").read_text())
    report["run_data"]["scale"] = "smoke"
    report["run_data"]["results"][0]["score"] = float("nan")
    (smoke / "report.json").write_text(json.dumps(report))
    cards.write_site([str(runs)], str(tmp_path / "site"))
    driver.get(f"file://{tmp_path / 'site' / 'index.html'}")
    # Sorting by checks passed, both ways.
    header = driver.find_element(By.CSS_SELECTOR, "th[data-key=checks]")
    def column(key):
      return [float(r.get_attribute(f"data-{key}")) for r in _visible_rows(driver)]
    header.click()
    assert column("checks") == sorted(column("checks"))
    header.click()
    assert column("checks") == sorted(column("checks"), reverse=True)
    # Filtering by experiment, verdict and scale.
    shown = driver.find_element(By.ID, "shown")
    assert shown.text == f"{committed + 1} of {committed + 1} shown"
    driver.find_element(By.ID, "filter-experiment").send_keys("eoss")
    assert sorted(r.get_attribute("data-experiment") for r in _visible_rows(driver)) == [
        "eoss", "eoss"]
    driver.find_element(By.ID, "filter-experiment").clear()
    driver.execute_script("applyFilters()")
    Select(driver.find_element(By.ID, "filter-scale")).select_by_value("smoke")
    (row,) = _visible_rows(driver)
    assert row.find_element(By.TAG_NAME, "a").text == "eoss_smoke"
    reproducibility = row.find_element(By.CSS_SELECTOR, ".sig.research[data-signal=reproducibility]")
    assert "fail" in reproducibility.get_attribute("class").split()
    assert "NaN or infinite" in reproducibility.get_attribute("title")
    Select(driver.find_element(By.ID, "filter-scale")).select_by_value("")
    Select(driver.find_element(By.ID, "filter-verdict")).select_by_value("fail")
    failing = sorted(
        path.parent.name for path in results.glob("*/report.json")
        if any(c["passed"] is False for c in json.loads(path.read_text())["run_data"]["checks"]))
    assert sorted(r.get_attribute("data-experiment") for r in _visible_rows(driver)) == failing
  finally:
    driver.quit()


def test_third_party_records_of_any_version_are_shown(tmp_path):
  """A 0.2.0 record (no eval_library yet) is shown, its violations listed."""
  site = cards.write_site([THIRD_PARTY], str(tmp_path / "site"))
  (source,) = site["sources"]
  shown = [r for r in source["analysis"]["results"]
           if r["model_id"] == "0-hero/Matter-0.2-7B-DPO"]
  assert [r["evaluation_name"] for r in shown] == ["IFEval", "BBH", "MMLU-PRO"]
  page = (tmp_path / "site" / "third_party_third_party" / "index.html"
          ).read_text()
  assert page.count("<td>0-hero/Matter-0.2-7B-DPO</td>") == 3  # its groups
  assert page.count("<td>hfopenllm_v2/0-hero_Matter-0.2-7B-DPO/") == 3  # rows
  assert "Completeness findings (3 of 7 files)" in page
  assert "&#x27;eval_library&#x27; is a required property" in page
  assert "torn.json" in page and "lower_is_better" in page
  index = (tmp_path / "site" / "index.html").read_text()
  assert "6 records, 8 results (3 files with findings)" in index


def test_committed_records_are_what_the_harness_writes():
  """experiments/results/*/eee/ is card.build of each committed report.json."""
  from experiments.harness import card  # pylint: disable=g-import-not-at-top
  reports = sorted(glob.glob(os.path.join(
      binaries.ROOT, "experiments", "results", "*", "report.json")))
  assert len(reports) >= 15
  for path in reports:
    with open(path) as f:
      report = json.load(f)
    timestamp = report["evaluation_card"]["records"][0]["retrieved_timestamp"]
    expected = dict(card.record_files(card.build(report, timestamp)))
    eee = os.path.join(os.path.dirname(path), "eee")
    assert sorted(os.listdir(eee)) == sorted(expected), eee
    for name, record in expected.items():
      with open(os.path.join(eee, name)) as f:
        assert json.load(f) == record, name


def test_regenerate_rebuilds_a_workdirs_records(tmp_path):
  from experiments.harness import card  # pylint: disable=g-import-not-at-top
  source = os.path.join(binaries.ROOT, "experiments", "results", "eoss")
  workdir = tmp_path / "eoss"
  shutil.copytree(source, workdir)
  (name,) = [n for n in os.listdir(workdir / "eee") if n.startswith("jaxpapers")]
  (workdir / "eee" / name).write_text("{}")
  (workdir / "eee" / "stale.json").write_text("{}")
  paths = cards.regenerate([str(tmp_path)])
  assert sorted(os.path.basename(p) for p in paths) == sorted(
      os.listdir(os.path.join(source, "eee")))
  for p in paths:
    with open(p) as f, open(os.path.join(source, "eee",
                                         os.path.basename(p))) as g:
      assert json.load(f) == json.load(g)
  assert not (workdir / "eee" / "stale.json").exists()
  with pytest.raises(FileNotFoundError, match="no report.json"):
    card.regenerate(str(tmp_path / "absent"))


def test_workdirs_and_third_party_directories_are_told_apart(tmp_path):
  (tmp_path / "runs" / "a" / "eee").mkdir(parents=True)
  (tmp_path / "runs" / "a" / "report.json").write_text("{}")
  (tmp_path / "runs" / "site").mkdir()
  (tmp_path / "runs" / "site" / "report.json").write_text("{}")
  (tmp_path / "records").mkdir()
  (tmp_path / "records" / "r.json").write_text(json.dumps({}))
  workdirs, third_party = cards.find_sources(
      [str(tmp_path / "runs"), str(tmp_path / "records")])
  assert workdirs == [(str(tmp_path / "runs"), str(tmp_path / "runs" / "a"))]
  assert third_party == [str(tmp_path / "records")]
  with pytest.raises(FileNotFoundError):
    cards.find_sources([str(tmp_path / "absent")])


def test_a_missing_directory_is_a_usage_error_not_a_traceback(tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "experiments.cards", str(tmp_path / "nowhere")],
      cwd=binaries.ROOT, capture_output=True, text=True, check=False)
  assert out.returncode == 2, out.stderr
  assert "nowhere" in out.stderr and "Traceback" not in out.stderr
