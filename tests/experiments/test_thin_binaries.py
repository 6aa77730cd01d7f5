"""The binaries stay thin: the paper in each, the plumbing in the harness.

Static checks on the source (nothing runs): each paper binary within its line
budget and function length, timing only through ``jaxpapers.profiling``,
no loop over seeds (the harness's sweep runs them), and benchmarks that time
the library alone.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAPER_BINARIES = sorted(
    p for p in (ROOT / "experiments").glob("*.py")
    if p.stem not in ("__init__", "cards", "scaling"))
MAX_LINES, MAX_TOTAL_LINES, MAX_FUNCTION_LINES = 250, 3600, 40


def _lines(path):
  return len(path.read_text().splitlines())


def test_there_are_fifteen_paper_binaries_within_the_total_budget():
  assert len(PAPER_BINARIES) == 15, [p.stem for p in PAPER_BINARIES]
  total = sum(_lines(p) for p in PAPER_BINARIES)
  assert total <= MAX_TOTAL_LINES, total


@pytest.mark.parametrize("path", PAPER_BINARIES, ids=lambda p: p.stem)
def test_a_binary_is_short_and_so_are_its_functions(path):
  assert _lines(path) <= MAX_LINES
  tree = ast.parse(path.read_text())
  too_long = {
      node.name: node.end_lineno - min(
          [d.lineno for d in node.decorator_list] + [node.lineno]) + 1
      for node in ast.walk(tree)
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
  assert {k: v for k, v in too_long.items() if v > MAX_FUNCTION_LINES} == {}


@pytest.mark.parametrize("path", PAPER_BINARIES, ids=lambda p: p.stem)
def test_a_binary_neither_times_by_hand_nor_loops_over_seeds(path):
  source = path.read_text()
  assert not re.search(r"perf_counter|time\.time\(|import time\b", source)
  assert not re.search(r"\bfor\s+\w+\s+in\s+[\w.]*seeds\b", source)


def test_benchmarks_import_only_the_library():
  offenders = [
      f"{p.name}: {line.strip()}"
      for p in sorted((ROOT / "benchmarks").glob("*.py"))
      for line in p.read_text().splitlines()
      if re.match(r"\s*(from|import)\s+experiments\b", line)]
  assert offenders == []
