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
# compile models), and those of 2 s or more on the newest stack with an empty
# compilation cache, run in the slow suite, which CI runs on both stacks.
_SLOW = {"jaxpapers.amr._native", "jaxpapers.nesy._em", "jaxpapers.var._editing",
         "jaxpapers.amr._vit", "jaxpapers.optim._soap",
         "jaxpapers.saddle._robust_regression", "jaxpapers.var._bitedit",
         "jaxpapers.saddle._decoupled", "jaxpapers.nesy._addition",
         "jaxpapers.graph._emc", "jaxpapers.moe._routing",
         "jaxpapers.routing._lehd", "jaxpapers.amr._training",
         "jaxpapers.moe._training", "jaxpapers.moe._evaluation",
         "jaxpapers.nesy._training", "jaxpapers.var._toy",
         "jaxpapers.models._language_model", "jaxpapers.moe._layer",
         "jaxpapers.models._forecaster_training"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.slow) if name in _SLOW else name
    for name in sorted(_modules())])
def test_docstring_examples(name):
  module = importlib.import_module(name)
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
  assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
