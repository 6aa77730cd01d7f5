"""Every benchmark still runs: ``main(tiny=True)`` of each benchmark module.

The benchmarks measure speed (``python -m benchmarks.<name>``); nothing else
runs them, so an API they use could move and leave them broken unnoticed.
Each test runs one module's tiny mode (its ``TINY`` sizes, 1-2 timing rounds:
see ``benchmarks/__init__.py``) and checks that it printed finite ratios. No
timings are asserted. A new module in ``benchmarks/`` is picked up by itself.

The runs are in-process, under JAX's default dtype and rank promotion (what
a user of ``python -m benchmarks.<name>`` gets; this suite's conftest makes
both strict), since a fresh interpreter per benchmark would cost 2-5 s of
imports each. What else the conftest sets (eight virtual CPU devices,
unoptimised XLA:CPU code) changes the timings only.
"""

import importlib
import math
import pkgutil
import re

import jax
import pytest

import benchmarks

NAMES = sorted(info.name for info in pkgutil.iter_modules(benchmarks.__path__))
# A ratio is a number followed by "x" ("1.05x", "3,319x", "nanx"), not the
# "x" of a shape ("64x64", "D64xL2") nor a goal ("goal <= 1.15").
_RATIO = re.compile(r"(?<![\w.,-])(-?(?:\d[\d,]*(?:\.\d+)?|nan|inf))x(?!\w)")
_GOAL = re.compile(r"goal\s*[<>]=?\s*\S+")


def _ratios(text):
  return [float(match.replace(",", ""))
          for match in _RATIO.findall(_GOAL.sub("", text))]


def test_ratio_parser():
  line = ("64x64, D64xL2 on 2x8 tokens: 1.05x (goal <= 2x), 3,319x,"
          " -0.20x, nanx, infx")
  ratios = _ratios(line)
  assert ratios[:3] == [1.05, 3319.0, -0.2]
  assert math.isnan(ratios[3]) and math.isinf(ratios[4])


def test_every_benchmark_is_listed():
  assert len(NAMES) >= 15, NAMES


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_benchmark_tiny(name, capsys):
  module = importlib.import_module(f"benchmarks.{name}")
  assert module.TINY._fields == module.FULL._fields
  with (jax.numpy_dtype_promotion("standard"),
        jax.numpy_rank_promotion("allow")):
    module.main(tiny=True)
  out = capsys.readouterr().out
  ratios = _ratios(out)
  assert ratios, f"benchmarks.{name} printed no ratio:\n{out}"
  assert all(math.isfinite(r) for r in ratios), out
  assert any(r > 0 for r in ratios), out
