"""Runs every ``>>>`` example in the library's docstrings."""

import doctest
import importlib
import pkgutil

import pytest

import jaxpapers


def _modules():
  for info in pkgutil.walk_packages(jaxpapers.__path__, "jaxpapers."):
    yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_docstring_examples(name):
  module = importlib.import_module(name)
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
  assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
