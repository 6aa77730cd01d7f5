"""Every public function of every area is in the sharding contract, or says why not.

The public API is what each ``jaxpapers.<area>`` package (and the top-level
``tree`` and ``profiling`` modules) defines or re-exports from jaxpapers
(tests/test_export_style.py checks that it is one flat ``__all__`` per area). Each
``tests/**/test_sharding*.py`` file holds ``CASES`` (keys name the functions a
case covers, joined by ``+``; traced under Auto and Explicit meshes by
tests/sharding_checks.py), ``NUMERIC_CASES`` (the cases also run and compared
numerically, in the modes listed) and may hold ``NOT_SHARDED`` (name -> why
the function takes no device arrays, or which other test checks it under
meshes) and ``SLOW_CASES`` (numeric cases that run in the slow suite). A
function added to an area without either fails here, so later areas are held
to the same contract.
"""

import enum
import importlib
import inspect
import pathlib
import pkgutil
import re

import pytest

import jaxpapers

_TESTS = pathlib.Path(__file__).parent
_REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def _areas():
  for info in pkgutil.iter_modules(jaxpapers.__path__):
    if not info.name.startswith("_"):  # private shared code (``_checks``)
      yield info.name


def _is_contract_free(obj):
  """Exceptions, NamedTuples, enums and protocols hold values or name a type."""
  return inspect.isclass(obj) and (
      issubclass(obj, (BaseException, tuple, enum.Enum))
      or getattr(obj, "_is_protocol", False))


def _public_members(module, defined_in):
  """``module``'s public callables defined under the ``defined_in`` package."""
  for name, obj in vars(module).items():
    if (name.startswith("_") or inspect.ismodule(obj) or not callable(obj)
        or not getattr(obj, "__module__", "").startswith(defined_in)
        or _is_contract_free(obj)):
      continue
    yield name, obj


def public_functions():
  """``area.name`` for every function an area exports."""
  names = set()
  for area in _areas():
    module = importlib.import_module(f"jaxpapers.{area}")
    names |= {f"{area}.{name}" for name, _ in _public_members(module, "jaxpapers")}
  return names


def _sharding_tables():
  # The name pytest's importlib mode gives a test module, so that a table
  # already collected is not executed (and its inputs built) a second time.
  for path in sorted(_TESTS.rglob("test_sharding*.py")):
    relative = path.relative_to(_TESTS.parent).with_suffix("")
    yield path, importlib.import_module(".".join(relative.parts))


@pytest.fixture(scope="module", name="tables")
def tables_fixture():
  cases, not_sharded = {}, {}
  for path, module in _sharding_tables():
    for key in module.CASES:
      for name in key.split("+"):
        cases.setdefault(name, []).append(path.name)
    for name, reason in getattr(module, "NOT_SHARDED", {}).items():
      assert name not in not_sharded, f"{name} is exempted twice"
      not_sharded[name] = reason
  return cases, not_sharded


def test_every_public_function_is_in_the_sharding_contract(tables):
  cases, not_sharded = tables
  missing = sorted(public_functions() - set(cases) - set(not_sharded))
  assert not missing, (
      f"{len(missing)} public functions have neither a sharding case nor a"
      f" reason in NOT_SHARDED: {missing}")


def test_the_tables_name_only_public_functions(tables):
  cases, not_sharded = tables
  public = public_functions()
  stale = sorted((set(cases) | set(not_sharded)) - public)
  assert not stale, f"not public functions of jaxpapers: {stale}"
  both = sorted(set(cases) & set(not_sharded))
  assert not both, f"both run under meshes and exempted: {both}"


def test_every_exemption_gives_a_reason_and_its_references_exist(tables):
  _, not_sharded = tables
  for name, reason in not_sharded.items():
    assert len(reason.split()) >= 3, f"{name}: give a reason, not {reason!r}"
    for path, test in _REFERENCE.findall(reason):
      source = (_TESTS.parent / path).read_text()
      assert f"def {test}(" in source, f"{name}: {path}::{test} does not exist"


def test_numeric_and_slow_cases_are_cases():
  for path, module in _sharding_tables():
    if not module.CASES:
      continue
    numeric = module.NUMERIC_CASES
    unknown = set(numeric) - set(module.CASES)
    assert not unknown, f"{path}: NUMERIC_CASES not in CASES: {unknown}"
    for name, modes in numeric.items():
      assert modes and set(modes) <= {"Auto", "Explicit"}, (path, name, modes)
    slow = set(getattr(module, "SLOW_CASES", ()))
    assert slow <= set(numeric), f"{path}: SLOW_CASES not numeric: {slow}"


def test_every_table_checks_numbers_in_both_modes():
  """At least one numeric case per table (an area, or a cross-area table) and mode."""
  for path, module in _sharding_tables():
    if not module.CASES:
      continue
    for mode in ("Auto", "Explicit"):
      assert any(mode in modes for modes in module.NUMERIC_CASES.values()), (
          f"{path}: no case is compared numerically under {mode} axes")
