"""One export style: private implementation modules, one flat ``__all__`` per area.

Each area's ``__init__`` re-exports its public names from private modules
(``_name.py``), as optax and equinox do, so no public name is both a module and
a function. The module paths of jaxpapers 0.1 still import, with a
DeprecationWarning, until 0.3 (``jaxpapers/_deprecation.py``).
"""

import importlib
import inspect
import pathlib
import subprocess
import sys
import warnings

import pytest

import jaxpapers

_PACKAGE = pathlib.Path(jaxpapers.__file__).parent
_AREAS = sorted(p.parent.name for p in _PACKAGE.glob("*/__init__.py"))


def test_every_area_is_listed_and_reachable_as_an_attribute():
  assert set(_AREAS) <= set(jaxpapers._AREAS)  # pylint: disable=protected-access
  for area in _AREAS:
    assert inspect.ismodule(getattr(jaxpapers, area))


@pytest.mark.parametrize("area", _AREAS)
def test_implementation_modules_are_private(area):
  public = sorted(p.name for p in (_PACKAGE / area).glob("*.py")
                  if p.name != "__init__.py" and not p.name.startswith("_"))
  assert not public, f"jaxpapers.{area}: public implementation modules {public}"


@pytest.mark.parametrize("area", _AREAS)
def test_all_lists_exactly_the_public_names_and_none_is_a_module(area):
  module = importlib.import_module(f"jaxpapers.{area}")
  listed = module.__all__
  assert len(listed) == len(set(listed)), f"jaxpapers.{area}.__all__ repeats names"
  public = {name for name in vars(module) if not name.startswith("_")}
  assert public == set(listed), (
      f"jaxpapers.{area}: public but not in __all__ {sorted(public - set(listed))},"
      f" in __all__ but missing {sorted(set(listed) - public)}")
  modules = [name for name in listed if inspect.ismodule(getattr(module, name))]
  assert not modules, f"jaxpapers.{area}: public names that are modules {modules}"


def _fresh_python(code):
  """Runs ``code`` in a new interpreter: the old paths are imported once per process."""
  return subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                        capture_output=True, text=True, check=False)


def test_an_old_path_that_names_a_function_warns_and_the_function_stays():
  result = _fresh_python(
      "import warnings, jaxpapers.optim as optim\n"
      "with warnings.catch_warnings(record=True) as caught:\n"
      "  warnings.simplefilter('always')\n"
      "  from jaxpapers.optim.ema_nesterov import ema_nesterov_eval_params as old\n"
      "assert [w.category for w in caught] == [DeprecationWarning], caught\n"
      "assert 'jaxpapers.optim.ema_nesterov is deprecated' in str(caught[0].message)\n"
      "assert caught[0].filename == '<string>', caught[0].filename\n"
      "assert old is optim.ema_nesterov_eval_params\n"
      "assert callable(optim.ema_nesterov) and not hasattr(optim.ema_nesterov, '__path__')\n"
      "assert optim.ema_nesterov.__name__ == 'ema_nesterov'\n")
  assert result.returncode == 0, result.stderr


def test_an_old_namespace_warns_and_reaches_the_renamed_names():
  result = _fresh_python(
      "import warnings, jaxpapers.auctions as auctions\n"
      "with warnings.catch_warnings(record=True) as caught:\n"
      "  warnings.simplefilter('always')\n"
      "  from jaxpapers.auctions import ppo\n"
      "  import jaxpapers.graph.emc\n"
      "assert [w.category for w in caught] == [DeprecationWarning] * 2, caught\n"
      "assert ppo.train is auctions.ppo_train and ppo.Batch is auctions.PPOBatch\n"
      "assert jaxpapers.graph.emc.init is jaxpapers.graph.emc_init\n"
      "assert 'ppo' not in vars(auctions) and 'ppo' not in dir(auctions)\n")
  assert result.returncode == 0, result.stderr


def test_an_unknown_attribute_is_an_attribute_error_without_a_warning():
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
      jaxpapers.optim.nonexistent  # pylint: disable=expression-not-assigned,no-member
    assert not hasattr(jaxpapers.optim, "_ema_nesterov_missing")
