r"""A scaling study: one experiment's checks followed across sizes.

``experiments/diagnoses/<experiment>.py`` declares its studies in ``STUDIES``
(name -> :func:`study`); the config argument names one::

  python -m experiments.scaling --config experiments/configs/scaling.py:daf.epochs

runs DAF's ``epochs`` study (``<experiment>`` alone runs its first study).
Each size is the experiment's own config (``base``: its config argument, ""
for the default) with the study's ``overrides`` and the size's own, run by
the experiment's binary in ``<workdir>/sizes/<k>`` (resumable like any run);
the study's report draws each followed check's measure against the size.
"""

import importlib
from typing import Any, Mapping, Sequence

import ml_collections

from experiments.configs import common


def study(*, axis: str, sizes: Sequence[Mapping[str, Any]],
          checks: Sequence[str], what: str, base: str = "",
          overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """A study: the experiment's config ``base`` + ``overrides``, at each of ``sizes``.

  Args:
    axis: the dotted config field that sets the size; its value at each size
      (a sequence's length: seeds) is the study's x axis.
    sizes: per size, dotted field -> value (at least ``axis``); three or more.
    checks: the check ids followed (each must carry a ``measure``).
    what: the x axis in words ("training steps per run").
    base: the experiment's config argument ("" default, "smoke").
    overrides: dotted field -> value applied at every size.
  """
  return {"axis": axis, "sizes": [dict(s) for s in sizes],
          "checks": list(checks), "what": what, "base": base,
          "overrides": dict(overrides or {})}


def _pairs(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
  # Dotted names are not ConfigDict keys: a mapping is stored as its pairs.
  return tuple((k, tuple(v) if isinstance(v, list) else v)
               for k, v in mapping.items())


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """The study named ``<experiment>[.<study>]`` by ``arg``."""
  if not arg:
    raise ValueError("name a study: --config experiments/configs/scaling.py:"
                     "<experiment>[.<study>] (see experiments/diagnoses/).")
  experiment, _, name = arg.partition(".")
  try:
    studies = importlib.import_module(
        f"experiments.diagnoses.{experiment}").STUDIES
  except (ModuleNotFoundError, AttributeError):
    raise ValueError(f"no scaling studies for {experiment!r}: expected STUDIES"
                     f" in experiments/diagnoses/{experiment}.py") from None
  name = name or next(iter(studies))
  if name not in studies:
    raise ValueError(f"{experiment} has no study {name!r}; its studies:"
                     f" {sorted(studies)}")
  spec = studies[name]
  config = ml_collections.ConfigDict()
  config.experiment = experiment
  config.study = name
  config.base = spec["base"]
  config.axis = spec["axis"]
  config.what = spec["what"]
  config.checks = tuple(spec["checks"])
  config.overrides = _pairs(spec["overrides"])
  config.sizes = tuple(_pairs(size) for size in spec["sizes"])
  return config


FIELDS = {
    "experiment": common.NAME,
    "study": common.NAME,
    "base": common.Range("a config argument ('' or 'smoke')",
                         lambda v: v in ("", "smoke", "paper")),
    "axis": common.NAME,
    "what": common.NAME,
    "checks": common.NAMES,
    "overrides": common.Range("(field, value) pairs",
                              lambda v: all(len(p) == 2 for p in v)),
    "sizes": common.sequence(common.Range(
        "(field, value) pairs", lambda v: all(len(p) == 2 for p in v)),
        min_len=3),
}


def sized_configs(config: ml_collections.ConfigDict
                  ) -> list[ml_collections.ConfigDict]:
  """The experiment's config at each size, each checked against its ``FIELDS``.

  Raises:
    ValueError: a field the experiment's config lacks, a size without the
      axis field, or a sized config its binary would refuse.
  """
  module = importlib.import_module(f"experiments.configs.{config.experiment}")
  out = []
  for k, size in enumerate(config.sizes):
    if config.axis not in dict(size):
      raise ValueError(f"sizes[{k}] does not set the axis {config.axis!r}")
    sized = module.get_config(config.base or None)
    for field, value in (*config.overrides, *size):
      parent, _, leaf = field.rpartition(".")
      node = sized
      for part in filter(None, parent.split(".")):
        node = node[part]
      if leaf not in node:
        raise ValueError(f"{config.experiment}'s config has no field {field!r}")
      with node.ignore_type():
        node[leaf] = value
    try:
      common.check_fields(sized, module.FIELDS)
      if hasattr(module, "validate"):
        module.validate(sized)
    except (ValueError, TypeError) as e:
      raise ValueError(f"sizes[{k}] of {config.experiment}: {e}") from None
    out.append(sized)
  return out


def validate(config: ml_collections.ConfigDict) -> None:
  sized_configs(config)
