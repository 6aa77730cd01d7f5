"""Config field ranges: declared once per config, enforced by the harness before any compute."""

import ast
import glob
import importlib
import math
import os

import pytest

from experiments import harness
from experiments.configs import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


def _source(path):
  with open(path) as f:
    return f.read()


# Every binary: a module of experiments/ that ends in harness.run.
BINARIES = sorted(
    os.path.basename(p)[:-3]
    for p in glob.glob(os.path.join(ROOT, "experiments", "*.py"))
    if "harness.run(" in _source(p))
# Every scaling study of experiments/diagnoses/ is a config of the scaling binary.
STUDIES = tuple(
    f"{os.path.basename(path)[:-3]}.{study}"
    for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "diagnoses",
                                              "[a-z]*.py")))
    for study in getattr(importlib.import_module(
        f"experiments.diagnoses.{os.path.basename(path)[:-3]}"), "STUDIES", {}))
CONFIG_ARGS = {"routing": (None, "smoke", "full", "paper"), "scaling": STUDIES}


def _config(name, arg=None):
  module = importlib.import_module(f"experiments.configs.{name}")
  return module.get_config(arg), module.FIELDS


def test_the_fifteen_binaries_are_found():
  assert len(BINARIES) == 16 and "lm" not in BINARIES, BINARIES
  assert "scaling" in BINARIES and len(STUDIES) >= 12, STUDIES


@pytest.mark.parametrize("name", BINARIES)
def test_every_shipped_config_lies_in_its_declared_ranges(name):
  for arg in CONFIG_ARGS.get(name, (None, "smoke", "paper")):
    config, fields = _config(name, arg)
    common.check_fields(config, fields)  # every field declared, every value in
    assert set(fields) == set(common.flatten(config))


@pytest.mark.parametrize("name", BINARIES)
def test_every_binary_hands_its_config_ranges_to_the_harness(name):
  tree = ast.parse(_source(os.path.join(ROOT, "experiments", f"{name}.py")))
  aliases = {a.asname or a.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom)
             and node.module == "experiments.configs"
             for a in node.names if a.name == name}
  calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
           and ast.unparse(node.func) == "harness.run"]
  assert len(calls) == 1
  keywords = {k.arg: ast.unparse(k.value) for k in calls[0].keywords}
  assert keywords["name"] == repr(name)
  if "fields" in keywords:
    assert keywords["fields"] in {f"{alias}.FIELDS" for alias in aliases}
  else:  # the harness reads FIELDS and validate from the config module
    assert "validate" not in keywords
    assert importlib.import_module(f"experiments.configs.{name}").FIELDS


NAN, INF = float("nan"), float("inf")


# The kinds: NaN where a float belongs, negative and zero counts, empty
# lists, out-of-range probabilities; each named with its value and range.
@pytest.mark.parametrize("name,field,value,message", [
    ("eoss", "num_steps", 0, r"num_steps=0: expected an int in \[1, inf\]"),
    ("eoss", "num_steps", -50, r"num_steps=-50: expected an int in \[1, inf\]"),
    ("eoss", "data.label_noise", 1.5,
     r"data.label_noise=1.5: expected a finite number in \[0, 1\]"),
    ("emc", "model.learning_rate", -1e-3,
     r"model.learning_rate=-0.001: expected a finite number in \(0, inf\)"),
    ("emo", "train.learning_rate", NAN, r"train.learning_rate=nan: expected a"
     r" finite number"),
    ("echo", "seeds", (), r"seeds=\(\): expected a sequence of 1 or more"),
    ("daf", "data.test_fraction", 0.0, r"data.test_fraction=0.0"),
    ("wasserstein", "sizes", (64, 1), r"sizes=\(64, 1\): entry \[1\]=1:"
     r" expected an int in \[2, inf\]"),
    ("rollout", "lams", (INF,), r"lams=\(inf,\): entry \[0\]=inf"),
    ("dynamauction", "mpc.planner", "random", r"mpc.planner='random':"
     r" expected one of \('grid', 'cem'\)"),
    ("saddle", "ratios", (1.0, NAN), r"entry \[1\]=nan"),
    ("bitresedit", "strengths", (0.0, 2.0, 1.0), r"strictly increasing"),
    ("butr", "butr.threshold", -0.1, r"butr.threshold=-0.1"),
    ("routing", "eval_blocks", (), r"eval_blocks=\(\)"),
    ("wamrvit", "train.num_steps", -5, r"train.num_steps=-5"),
    ("ema_nesterov", "ema.betas", (1.0,), r"ema.betas=\(1.0,\)"),
    ("em_nesy", "timing_rounds", 0, r"timing_rounds=0"),
])
def test_a_value_outside_its_range_is_refused_by_name(name, field, value,
                                                      message):
  config, fields = _config(name, "smoke")
  *parents, leaf = field.split(".")
  node = config
  for parent in parents:
    node = node[parent]
  node[leaf] = value
  with pytest.raises(ValueError, match=message):
    # The ranges are checked first: validate (here one that cannot run) is
    # not reached, so a sign error is not reported as a divisibility one.
    harness.check_config(config, fields, validate=lambda c: 1 / 0)


def test_undeclared_and_missing_fields_are_errors():
  config, fields = _config("eoss")
  with pytest.raises(ValueError, match="tail_fraction has no declared range"):
    common.check_fields(config, {k: v for k, v in fields.items()
                                 if k != "tail_fraction"})
  with pytest.raises(ValueError, match="extra is declared in FIELDS but not"):
    common.check_fields(config, {**fields, "extra": common.COUNT})


@pytest.mark.parametrize("spec,good,bad", [
    (common.COUNT, [1, 10**9], [0, -1, 1.0, True, "1", None]),
    (common.POSITIVE, [1e-30, 3, 1e30], [0.0, -1e-9, NAN, INF, True]),
    (common.FRACTION, [0, 0.5, 1], [-1e-9, 1.0000001, NAN]),
    (common.real(0, 1, low_open=True, high_open=True), [0.5], [0.0, 1.0]),
    (common.sequence(common.COUNT, min_len=0), [(), [3]], [(0,), "ab", 3]),
    (common.sequence(common.COUNT, increasing=True), [(1, 2)], [(2, 2)]),
    (common.one_of("a", "b"), ["a"], ["c", ""]),
    (common.FLAG, [True, False], [1, "True"]),
    (common.NAME, ["x"], ["", 1]),
])
def test_range_kinds_accept_and_refuse(spec, good, bad):
  assert all(spec.problem(v) is None for v in good)
  for value in bad:
    assert spec.problem(value) is not None, value
  assert math.isnan(NAN)  # the table's NaN is a real NaN


def _bad_values(value):
  """The issue's battery for one field: NaN, infinities and -1 (in a list too)."""
  if isinstance(value, bool) or isinstance(value, str):
    return []
  if isinstance(value, float):
    return [NAN, INF, -INF, -1.0]
  if isinstance(value, int):
    return [-1]
  if isinstance(value, tuple) and value and not isinstance(value[0], tuple):
    return [(*value[:-1], bad) for bad in _bad_values(value[-1])]
  return []


@pytest.mark.parametrize("name", BINARIES)
def test_no_field_takes_nan_an_infinity_or_a_negative_count(name):
  config, fields = _config(name, STUDIES[0] if name == "scaling" else "smoke")
  signed = []
  for field, value in common.flatten(config).items():
    for bad in _bad_values(value):
      if fields[field].problem(bad) is None:
        signed.append(field)
        assert -1 in (bad if isinstance(bad, tuple) else (bad,)), (field, bad)
  # The only fields that take a negative number: angles, offsets, velocity.
  assert set(signed) <= {"csbm.rotation_deg", "csbm.offset",
                         "digits.rotation_deg", "data.velocity"}, signed
