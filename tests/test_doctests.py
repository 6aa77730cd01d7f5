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
_SLOW = {"jaxpapers.amr.native", "jaxpapers.nesy.em", "jaxpapers.var.editing",
         "jaxpapers.amr.vit", "jaxpapers.optim.soap",
         "jaxpapers.saddle.robust_regression", "jaxpapers.var.bitedit",
         "jaxpapers.saddle.decoupled", "jaxpapers.nesy.addition",
         "jaxpapers.graph.emc", "jaxpapers.moe.routing",
         "jaxpapers.routing.lehd", "jaxpapers.amr.training",
         "jaxpapers.moe.training", "jaxpapers.moe.evaluation",
         "jaxpapers.nesy.training", "jaxpapers.var.toy",
         "jaxpapers.models.language_model", "jaxpapers.moe.layer",
         "jaxpapers.models.forecaster_training"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.slow) if name in _SLOW else name
    for name in sorted(_modules())])
def test_docstring_examples(name):
  module = importlib.import_module(name)
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
  assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
