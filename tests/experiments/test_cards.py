"""The Evaluation Cards monitor: the static site, and the site in a real browser.

The browser test drives Debian's headless Chromium with selenium (both
installed by ``.ci/run``). Where Chromium cannot start, it fails with that
reason; it is never skipped.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from experiments import cards
from experiments import testing

THIRD_PARTY = os.path.join(testing.ROOT, "tests", "evalcards", "third_party")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
  """Real smoke runs of two experiments under one ``runs/`` folder."""
  runs = tmp_path_factory.mktemp("runs")
  for name in ("eoss", "saddle"):
    out = testing.run(name, ["--config", f"experiments/configs/{name}.py:smoke"],
                      runs / name)
    assert out.returncode == 0, out.stderr[-3000:]
  return runs


def _report(runs, name):
  return testing.read_report(runs / name)


@pytest.mark.slow
def test_site_lists_runs_and_third_party_records(two_runs, tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "experiments.cards", str(two_runs), THIRD_PARTY,
       "--out", str(tmp_path / "site")],
      cwd=testing.ROOT, capture_output=True, text=True, timeout=120,
      check=False)
  assert out.returncode == 0, out.stderr
  assert "2 runs, 1 third-party directories (2 records rejected)" in out.stdout
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


def _browser():
  from selenium import webdriver  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.chrome.service import Service  # pylint: disable=g-import-not-at-top
  for path in (CHROMIUM, CHROMEDRIVER):
    if not os.path.exists(path):
      pytest.fail(f"{path} is missing: install Debian's chromium and"
                  " chromium-driver (as .ci/run does).")
  options = webdriver.ChromeOptions()
  options.binary_location = CHROMIUM
  for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", "--window-size=1400,1000"):
    options.add_argument(arg)
  try:
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
  except Exception as e:  # pylint: disable=broad-except
    pytest.fail(f"headless Chromium could not start: {e}")


@pytest.mark.slow
def test_site_in_a_real_browser(two_runs, tmp_path):
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  site = cards.write_site([str(two_runs), THIRD_PARTY], str(tmp_path / "site"))
  assert len(site["runs"]) == 2
  eoss = _report(two_runs, "eoss")
  driver = _browser()
  try:
    driver.get(f"file://{tmp_path / 'site' / 'index.html'}")
    text = driver.find_element(By.TAG_NAME, "body").text
    assert "2 runs, 1 third-party directories." in text
    assert eoss["benchmark_metadata"]["claim"] in text
    rows = driver.find_elements(By.CSS_SELECTOR, "#runs tr")
    assert len(rows) == 1 + 2 + 1  # header, two runs, one third-party folder
    checks = {r.find_element(By.TAG_NAME, "a").text:
              r.find_element(By.CLASS_NAME, "checks").text
              for r in rows[1:3]}
    for name in ("eoss", "saddle"):
      run_data = _report(two_runs, name)["run_data"]
      assert checks[name] == f"{run_data['checks_passed']}/{len(run_data['checks'])}"
    # The audience toggle swaps the visible wording, not the evidence.
    research = [b.text for b in driver.find_elements(By.CSS_SELECTOR, ".badge")
                if b.is_displayed()]
    assert any(t.startswith("Cross-party divergence") for t in research)
    driver.find_element(By.ID, "audience").click()
    policy = [b.text for b in driver.find_elements(By.CSS_SELECTOR, ".badge")
              if b.is_displayed()]
    assert len(policy) == len(research) and policy != research
    assert any(t.startswith("Do sources agree?") for t in policy)
    assert not any(t.startswith("Cross-party divergence") for t in policy)
    driver.save_screenshot(str(tmp_path / "index.png"))
    # A divergence flag between two sources, on the third-party page.
    driver.find_element(By.LINK_TEXT, "third_party").click()
    groups = driver.find_element(By.ID, "groups").text
    assert "MMLU (5-shot)" in groups and "yes" in groups
    # A run page: the claim, the checks, our numbers beside the paper's.
    driver.get(f"file://{tmp_path / 'site' / 'eoss' / 'index.html'}")
    page = driver.find_element(By.TAG_NAME, "body").text
    assert eoss["benchmark_metadata"]["claim"] in page
    assert (f"Checks: {eoss['run_data']['checks_passed']}/"
            f"{len(eoss['run_data']['checks'])} passed") in page
    numbers = driver.find_element(By.ID, "numbers").text
    assert "diverges" in numbers or "agrees" in numbers
    images = driver.find_elements(By.TAG_NAME, "img")
    assert len(images) == len(eoss["run_data"]["figures"])
    assert all(driver.execute_script(
        "return arguments[0].naturalWidth", img) > 0 for img in images)
    driver.save_screenshot(str(tmp_path / "eoss.png"))
  finally:
    driver.quit()
  for shot in ("index.png", "eoss.png"):
    assert (tmp_path / shot).read_bytes()[:4] == b"\x89PNG"
  target = os.environ.get("JAXPAPERS_SCREENSHOTS")
  if target:  # keep the screenshots (e.g. for the README)
    os.makedirs(target, exist_ok=True)
    for shot in ("index.png", "eoss.png"):
      shutil.copyfile(tmp_path / shot, os.path.join(target, shot))


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
