"""Packaging contracts: what `pip install jaxpapers` brings and what it leaves out.

The library's core dependencies must be exactly what ``jaxpapers`` imports at module
level; what is imported only inside functions (optional data sets, reference
solvers) must come with the ``experiments`` extra; the binaries refuse to start
without that extra and name it.
"""

import ast
import configparser
import importlib
import importlib.metadata
import importlib.resources
import importlib.util
import pathlib
import pkgutil
import re
import subprocess
import sys

from packaging import version
import pytest

import experiments
import jaxpapers

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _setup_cfg() -> configparser.ConfigParser:
  parser = configparser.ConfigParser()
  parser.read(ROOT / "setup.cfg")
  return parser


def _distribution_names(requirements: str) -> set[str]:
  names = set()
  for line in requirements.strip().splitlines():
    name = re.match(r"[A-Za-z0-9_.\-]+", line.strip()).group(0)
    names.add(name.lower().replace("_", "-"))
  return names


def _third_party_imports() -> tuple[set[str], set[str]]:
  """Top-level module names jaxpapers imports: (at module level, inside functions)."""
  module_level, in_functions = set(), set()
  for path in (ROOT / "jaxpapers").rglob("*.py"):
    tree = ast.parse(path.read_text())
    function_nodes = {
        id(node) for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)}
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        roots = [alias.name.split(".")[0] for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        roots = [node.module.split(".")[0]]
      else:
        continue
      roots = [r for r in roots
               if r not in sys.stdlib_module_names and r != "jaxpapers"]
      (in_functions if id(node) in function_nodes else module_level).update(roots)
  return module_level, in_functions - module_level


def _to_distributions(modules: set[str]) -> set[str]:
  owners = importlib.metadata.packages_distributions()
  return {owners[m][0].lower().replace("_", "-") for m in modules}


def test_core_dependencies_are_what_the_library_imports():
  module_level, _ = _third_party_imports()
  declared = _distribution_names(_setup_cfg()["options"]["install_requires"])
  assert _to_distributions(module_level) == declared


def test_lazy_imports_come_with_the_experiments_extra():
  _, in_functions = _third_party_imports()
  extra = _distribution_names(
      _setup_cfg()["options.extras_require"]["experiments"])
  assert in_functions, "expected optional imports (scikit-learn, statsmodels, POT)"
  assert _to_distributions(in_functions) <= extra


def test_the_binaries_check_exactly_the_experiments_extra():
  extra = _distribution_names(
      _setup_cfg()["options.extras_require"]["experiments"])
  checked = {d.lower() for d in experiments._EXPERIMENTS_EXTRA.values()}  # pylint: disable=protected-access
  assert checked == extra


def test_binaries_without_the_extra_fail_at_once_naming_it(monkeypatch):
  real_find_spec = importlib.util.find_spec
  monkeypatch.setattr(
      importlib.util, "find_spec",
      lambda name, *a: None if name in ("ml_collections", "ot")
      else real_find_spec(name, *a))
  with pytest.raises(ImportError, match=r"'experiments' extra.*ml-collections, "
                     r"POT are not installed.*\.\[experiments\]"):
    importlib.reload(experiments)


def test_one_version_string():
  assert importlib.metadata.version("jaxpapers") == jaxpapers.__version__
  assert _setup_cfg()["metadata"]["version"] == "attr: jaxpapers.__version__"
  changelog = (ROOT / "CHANGELOG.md").read_text()
  assert f"## {jaxpapers.__version__}" in changelog


def test_type_information_ships():
  assert importlib.resources.files("jaxpapers").joinpath("py.typed").is_file()


def test_only_the_library_is_installed():
  top_level = importlib.metadata.distribution("jaxpapers").read_text(
      "top_level.txt")
  assert top_level.split() == ["jaxpapers"]


def test_classifiers_match_python_requires():
  metadata = _setup_cfg()["metadata"]
  versions = re.findall(r"Python :: (3\.\d+)$", metadata["classifiers"], re.M)
  assert versions == ["3.11", "3.12", "3.13"]
  assert _setup_cfg()["options"]["python_requires"] == ">=3.11,<3.14"
  assert f"{sys.version_info.major}.{sys.version_info.minor}" in versions


def test_oldest_stack_pins_every_lower_bound():
  """`.ci/oldest.txt` installs each declared lower bound exactly."""
  cfg = _setup_cfg()
  requirements = "\n".join([cfg["options"]["install_requires"]] + [
      line for line in cfg["options.extras_require"]["experiments"].splitlines()
      + cfg["options.extras_require"]["test"].splitlines()
      if line.strip() and not line.strip().startswith("jaxpapers")])
  lower_bounds = {}
  for line in requirements.strip().splitlines():
    name, lower = re.match(r"\s*([A-Za-z0-9_.\-]+)>=([^,]+)", line).groups()
    lower_bounds[name.lower()] = lower
  pins = dict(
      line.lower().split("==") for line in
      (ROOT / ".ci" / "oldest.txt").read_text().splitlines()
      if line and not line.startswith("#"))
  for name, lower in lower_bounds.items():
    assert name in pins, name
    assert version.Version(pins[name]) == version.Version(lower), (
        name, lower, pins[name])


def test_every_area_is_an_attribute_of_the_package_imported_on_first_use():
  import jaxpapers  # pylint: disable=g-import-not-at-top
  public = {m.name for m in pkgutil.iter_modules(jaxpapers.__path__)
            if not m.name.startswith("_")}
  assert set(jaxpapers._AREAS) == public  # pylint: disable=protected-access
  assert public <= set(dir(jaxpapers))
  code = ("import sys, jaxpapers; assert 'jaxpapers.losses' not in sys.modules;"
          " jaxpapers.losses.rollout_consistency; jaxpapers.routing.held_karp;"
          " extras = {'experiments', 'ml_collections', 'orbax', 'matplotlib'};"
          " assert not extras & set(sys.modules), extras & set(sys.modules)")
  subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
  with pytest.raises(AttributeError, match="has no attribute 'lossez'"):
    jaxpapers.lossez  # pylint: disable=pointless-statement
