"""The documentation site: built with warnings as errors, complete, and working in a browser.

The build is the README's command (``sphinx-build -W -b html docs build/docs``),
run once per module into the README's folder: Sphinx rebuilds only what
changed since the last build there, so after CI's own build with that command
(and on a developer's second run) it takes seconds; a first build takes about
30 s, so the tests are in the slow suite, which CI runs.
"""

import os
import pathlib
import re
import subprocess
import sys
import urllib.parse

import pytest

from tests import browser
from tests import test_public_api

_ROOT = pathlib.Path(__file__).resolve().parent.parent
_README_BUILD = "sphinx-build -W -b html docs build/docs"


@pytest.fixture(scope="module", name="site")
def site_fixture():
  out = _ROOT / "build" / "docs"
  build = subprocess.run(
      [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "docs",
       str(out)], cwd=_ROOT, capture_output=True, text=True, check=False)
  assert build.returncode == 0, build.stdout + build.stderr
  return out


def test_the_readme_names_the_build_command():
  assert _README_BUILD in (_ROOT / "README.md").read_text()
  assert _README_BUILD in (_ROOT / ".ci" / "run").read_text()


@pytest.mark.slow
def test_every_public_name_is_in_the_api_reference(site):
  documented = set()
  for page in (site / "api").glob("*.html"):
    documented |= set(re.findall(r'id="jaxpapers\.([\w.]+)"', page.read_text()))
  missing = sorted(test_public_api.public_functions() - documented)
  assert not missing, f"{len(missing)} public names missing from docs/api: {missing}"


def _internal_links(driver, page):
  """(file path, fragment) of every link on ``page`` that stays inside the site."""
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  links = set()
  for anchor in driver.find_elements(By.TAG_NAME, "a"):
    href = anchor.get_attribute("href") or ""
    if not href.startswith("file://"):
      continue
    url = urllib.parse.urlparse(href)
    links.add((pathlib.Path(urllib.parse.unquote(url.path)), url.fragment))
  assert links, f"no internal link on {page}"
  return links


@pytest.mark.slow
def test_the_site_in_a_real_browser(site, tmp_path):
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support import expected_conditions  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=g-import-not-at-top
  driver = browser.headless_chromium()
  try:
    for page, expected in (("index.html", "Getting started"),
                           ("api/optim.html", "ema_nesterov"),
                           ("eoss.html", "Batch Sharpness")):
      driver.get(f"file://{site / page}")
      assert expected in driver.find_element(By.TAG_NAME, "body").text
      images = driver.find_elements(By.TAG_NAME, "img")
      broken = [i.get_attribute("src") for i in images if not driver.execute_script(
          "return arguments[0].complete && arguments[0].naturalWidth > 0", i)]
      assert not broken, f"{page}: images that did not load: {broken}"
      for path, fragment in _internal_links(driver, page):
        assert path.is_file(), f"{page} links to a missing {path}"
        if fragment and path.suffix == ".html":
          assert re.search(rf'id="{re.escape(fragment)}"', path.read_text()), (
              f"{page} links to #{fragment}, which {path.name} lacks")
      driver.save_screenshot(str(tmp_path / page.replace("/", "_").replace(
          ".html", ".png")))
    # The formulas render from the site's own MathJax (no network).
    driver.get(f"file://{site / 'api/optim.html'}")
    WebDriverWait(driver, 30).until(expected_conditions.presence_of_element_located(
        (By.CSS_SELECTOR, "mjx-container")))
    assert "_static/mathjax/tex-chtml.js" in driver.page_source
    driver.get(f"file://{site / 'search.html'}?q=ema_nesterov")
    WebDriverWait(driver, 30).until(expected_conditions.presence_of_element_located(
        (By.CSS_SELECTOR, "#search-results ul.search li")))
    hits = [a.text for a in driver.find_elements(
        By.CSS_SELECTOR, "#search-results ul.search li a")]
    assert any("ema_nesterov" in hit for hit in hits), hits
  finally:
    driver.quit()
  for shot in ("index.png", "api_optim.png", "eoss.png"):
    assert (tmp_path / shot).read_bytes()[:4] == b"\x89PNG"
  target = os.environ.get("JAXPAPERS_SCREENSHOTS")
  if target:  # keep the screenshots
    os.makedirs(target, exist_ok=True)
    for shot in tmp_path.glob("*.png"):
      (pathlib.Path(target) / shot.name).write_bytes(shot.read_bytes())
