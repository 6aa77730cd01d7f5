"""Debian's headless Chromium under selenium, for the tests of our two static sites.

Both are installed by ``.ci/run`` (apt: chromium, chromium-driver; selenium comes
with the test extra). Where Chromium cannot start, the test fails saying so: a
browser test never skips.
"""

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def headless_chromium():
  """A selenium driver of headless Chromium with a 1400x1000 window."""
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
