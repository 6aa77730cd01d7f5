"""The README and the docs pages run as written, and the README's table is the committed results'.

Every ```python block of README.md and docs/*.md runs as written (with JAX's
default settings); the README's table of papers gives each committed report's
checks passed and links files that exist.
"""

import json
import os
import pathlib
import re

import jax
import pytest

_ROOT = pathlib.Path(__file__).resolve().parent.parent
README = _ROOT / "README.md"
_PAGES = [README] + sorted((_ROOT / "docs").glob("*.md"))


def _snippets():
  return [(page.relative_to(_ROOT), code) for page in _PAGES
          for code in re.findall(r"```python\n(.*?)```", page.read_text(),
                                 flags=re.DOTALL)]


# The snippets run op by op, as users paste them: 10-40 s each on the oldest
# stack, about 4 min of the default suite in all. They run with `-m slow`,
# which CI runs on both stacks (.ci/run). The working directory is the
# checkout's, as for the binaries (some read the committed test records).
@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_snippets())),
                         ids=[f"{p}#{i}" for i, (p, _) in enumerate(_snippets())])
def test_snippet_runs(index, monkeypatch):
  page, code = _snippets()[index]
  monkeypatch.chdir(_ROOT)
  # Users run with JAX's defaults, not the suite's strict settings.
  with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
    exec(compile(code, f"{page} snippet {index}", "exec"), {})  # pylint: disable=exec-used


@pytest.mark.parametrize("command", [
    'pip install -e ".[test]" && pytest -n 2',  # the newest stack
    'pip install -c .ci/oldest.txt -e ".[test]"',  # the oldest stack
])
def test_readme_names_the_ci_test_commands(command):
  readme = README.read_text()
  ci = (_ROOT / ".ci" / "run").read_text()
  assert command in readme and command in ci


def test_readme_is_a_map_that_fits_on_a_few_screens():
  assert len(README.read_text().splitlines()) <= 200


def test_readme_table_gives_the_committed_checks_and_links_that_exist():
  readme = README.read_text()
  rows = re.findall(r"^\| \[.*\|$", readme, flags=re.MULTILINE)
  assert len(rows) == 16, "one row per paper"
  for row in rows:
    for target in re.findall(r"\]\(([^)#]+)\)", row):
      if not target.startswith("http"):
        assert (_ROOT / target).exists(), f"{target} in the README's table"
    report = re.search(r"\(experiments/results/(\w+)/report\.md\)", row)
    if report is None:
      continue
    run_data = json.loads((_ROOT / "experiments" / "results" / report.group(1)
                           / "report.json").read_text())["run_data"]
    checks = run_data["checks"]
    passed = sum(c["passed"] is True for c in checks)
    assert row.endswith(f" {passed}/{len(checks)} |"), (
        f"{report.group(1)}: the committed report passes {passed}/{len(checks)}")
