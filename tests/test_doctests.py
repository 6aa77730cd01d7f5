"""Runs every ``>>>`` example in the library's docstrings."""

import doctest
import importlib
import pkgutil

import pytest

import jaxpapers


def _modules():
  for info in pkgutil.walk_packages(jaxpapers.__path__, "jaxpapers."):
    yield info.name


# Modules whose examples take 15-25 s on the oldest stack (they train or
# compile models) run in the slow suite, which CI runs.
_SLOW = {"jaxpapers.amr.native", "jaxpapers.nesy.em", "jaxpapers.var.editing"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.slow) if name in _SLOW else name
    for name in sorted(_modules())])
def test_docstring_examples(name):
  module = importlib.import_module(name)
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
  assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
