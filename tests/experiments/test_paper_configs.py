"""Every experiment's ``:paper`` config: valid, and a few steps of it run on CPU.

``get_config("paper")`` is the scale the paper reports (or the largest one
accelerator runs in under 15 minutes); its module's ``PAPER_FEW_STEPS``
cut steps, seeds and evaluation but keep the model and data sizes, so the
first run on a GPU does not find a config error: the binary runs end to end
at the paper's sizes here, in the ``paper`` marker's CI stage.
"""

import importlib
import json
import pathlib

import pytest

from experiments.configs import common
from experiments.harness import report as report_lib
from tests import binaries

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(
    p.stem for p in (ROOT / "experiments").glob("*.py")
    if p.stem not in ("__init__", "cards", "scaling"))


def _module(name):
  return importlib.import_module(f"experiments.configs.{name}")


def _few_steps(name):
  config = _module(name).get_config("paper")
  for field, value in _module(name).PAPER_FEW_STEPS.items():
    parent, _, leaf = field.rpartition(".")
    node = config
    for part in filter(None, parent.split(".")):
      node = node[part]
    assert leaf in node, f"PAPER_FEW_STEPS names no field {field!r}"
    node[leaf] = value
  return config


def _check(name, config):
  module = _module(name)
  common.check_fields(config, module.FIELDS)
  if hasattr(module, "validate"):
    module.validate(config)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_the_paper_config_and_its_few_steps_are_valid(name):
  paper = _module(name).get_config("paper")
  _check(name, paper)
  few = _few_steps(name)
  _check(name, few)
  assert paper != _module(name).get_config(), "paper scale is the default's"


def _flag(value):
  """``--config.<field>=`` text of ``value``: a tuple as a Python literal."""
  if isinstance(value, (tuple, list)):
    return "(" + "".join(f"{v!r}," if isinstance(v, str) else f"{_flag(v)},"
                         for v in value) + ")"
  return str(value)


@pytest.mark.paper
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_a_few_steps_of_the_paper_config_run_end_to_end(name, tmp_path):
  overrides = [f"--config.{k}={_flag(v)}"
               for k, v in _module(name).PAPER_FEW_STEPS.items()]
  done = binaries.run(
      name, [f"--config=experiments/configs/{name}.py:paper", *overrides],
      tmp_path / "wd")
  assert done.returncode == 0, done.stderr[-3000:]
  with open(tmp_path / "wd" / "report.json") as f:
    run_data = json.load(f)["run_data"]
  assert run_data["scale"] == "paper"
  assert run_data["config"] == report_lib.config_dict(_few_steps(name))
