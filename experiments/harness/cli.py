"""The command line every experiment binary shares (scenic / big_vision style).

A binary ends with ``harness.run(main, name="eoss",
fields=eoss_config.FIELDS)`` (its config module's field ranges), where
``main(config, workdir)`` reads data, runs, summarises, checks the claim and
draws figures, and is launched as::

  python -m experiments.eoss --config experiments/configs/eoss.py[:arg] \
      [--config.field=value ...] [--workdir DIR] [--overwrite]

A mistyped ``--config.x`` is a usage error naming the close matches, and
so is a value outside the field's declared range (the binary's ``fields``,
e.g. a NaN learning rate, a negative step count, an empty seed list),
checked before any compute and before the workdir is touched;
``--help`` lists the flags, the config's docstring and every field with its
default. Without ``--workdir`` the run goes to ``runs/<name>`` (``runs/
<name>_<arg>`` for a config argument such as ``:smoke``). Restarting with
the same workdir and config resumes; another config is refused (see
:mod:`experiments.harness.workdir`).

Multi-process: pass ``--distributed`` on a cluster that JAX auto-detects
(SLURM, Cloud TPU, ...), or ``--coordinator_address=127.0.0.1:PORT
--num_processes=N --process_id=I`` to launch by hand. Only process 0 writes
metrics, figures and reports; every process takes part in checkpoints.
"""

import difflib
import functools
import importlib
import importlib.util
import json
import logging as pylogging
import os
import sys
import time
from typing import Any, Callable, Mapping, Sequence

from absl import app
from absl import flags
from absl import logging
import jax
from ml_collections import config_flags
import ml_collections

from experiments.configs import common as config_common
from experiments.harness import report as report_lib
from experiments.harness import workdir as workdir_lib

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file (path[:arg]).", lock_config=True
)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Output directory; default runs/<name>[_<arg>]."
)
_OVERWRITE = flags.DEFINE_bool(
    "overwrite", False,
    "Discard whatever the workdir holds (results of another config) and"
    " start afresh.",
)
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False,
    "Call jax.distributed.initialize() with cluster auto-detection.",
)
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0 (manual launch)."
)
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Number of processes (manual launch)."
)
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "This process's index (manual launch)."
)
_HARNESS_FLAGS = ("config", "workdir", "overwrite", "distributed",
                  "coordinator_address", "num_processes", "process_id")

MainFn = Callable[[ml_collections.ConfigDict, workdir_lib.Workdir], None]
ValidateFn = Callable[[ml_collections.ConfigDict], None]


def run(main: MainFn, *, name: str,
        fields: Mapping[str, config_common.Range] | None = None,
        validate: ValidateFn | None = None) -> None:
  """Parses flags, validates the config, starts JAX and calls ``main``.

  ``fields`` maps every dotted config field to its
  :class:`experiments.configs.common.Range` (the config module's ``FIELDS``);
  ``validate(config)``, run after the ranges hold, raises ``ValueError`` for
  relations between fields the binary cannot run. Without ``fields``, both
  come from ``experiments/configs/<name>.py`` (``FIELDS`` and its optional
  ``validate``). Both are checked before
  anything is computed or written into the workdir; a failure is a usage
  error (exit 2). A workdir that cannot be used (a file, not writable,
  damaged) is ``error:`` and exit 1, also when ``main`` finds it damaged.
  """
  metadata = report_metadata(main, name)
  if fields is None:  # the binary's own config module declares both
    config_module = importlib.import_module(f"experiments.configs.{name}")
    fields = config_module.FIELDS
    validate = getattr(config_module, "validate", None)
  if any(arg in ("-h", "--help", "-?") for arg in sys.argv[1:]):
    print(help_text(name, sys.argv, fields))
    sys.exit(0)
  jax.config.config_with_absl()
  logging.get_absl_handler().addFilter(_QuietLibraries())
  app.run(functools.partial(_run_main, main, name, fields, validate, metadata),
          flags_parser=_parse_flags)


def _parse_flags(argv: list[str]) -> list[str]:
  path = _config_path(argv)
  if path is not None:
    try:
      config = load_config(path)
    except Exception as e:  # pylint: disable=broad-except
      _usage_error(f"--config {path}: {type(e).__name__}: {e}")
    known = set(_flatten_fields(config))
    for arg in argv[1:]:
      if arg.startswith("--config."):
        field = arg[len("--config."):].split("=", 1)[0]
        if field not in known:
          matches = difflib.get_close_matches(field, known, n=3, cutoff=0.6)
          _usage_error(
              f"--config.{field} is not a field of {path}"
              + (f"; did you mean {', '.join('--config.' + m for m in matches)}?"
                 if matches else "; --help lists the fields."))
  try:
    return flags.FLAGS(argv)
  except Exception as e:  # pylint: disable=broad-except
    _usage_error(str(e).strip().splitlines()[-1] if str(e).strip() else
                 type(e).__name__)


def _usage_error(message: str) -> None:
  print(f"usage error: {message}\n(see --help)", file=sys.stderr)
  sys.exit(2)


def _config_path(argv: list[str]) -> str | None:
  for i, arg in enumerate(argv[1:], start=1):
    if arg.startswith("--config="):
      return arg.split("=", 1)[1]
    if arg == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def load_config(path_and_arg: str) -> ml_collections.ConfigDict:
  """``get_config(arg)`` of a config file given as ``path[:arg]``."""
  path, _, arg = path_and_arg.partition(":")
  return _config_module(path).get_config(arg or None)


def _config_module(path: str) -> Any:
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no config file {path!r}")
  spec = importlib.util.spec_from_file_location("_experiment_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _flatten_fields(config: Any, prefix: str = "") -> dict[str, Any]:
  out = {}
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict):
      out.update(_flatten_fields(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def help_text(name: str, argv: list[str],
              fields: Mapping[str, config_common.Range] | None = None) -> str:
  """The binary's docstring, the harness flags, and the config's fields.

  Each field is shown with its default and, given ``fields``, its range.
  """
  main_doc = (sys.modules["__main__"].__doc__ or "").strip()
  path = _config_path(argv) or f"experiments/configs/{name}.py"
  lines = [main_doc, "", f"usage: python -m experiments.{name} --config"
           f" {path.partition(':')[0]}[:smoke] [--config.FIELD=VALUE ...]"
           " [--workdir DIR] [--overwrite]", "", "flags:"]
  for flag in _HARNESS_FLAGS:
    f = flags.FLAGS[flag]
    lines.append(f"  --{flag}: {f.help} (default: {f.default!r})")
  lines.append("  --helpfull: every absl and JAX flag as well")
  try:
    config = load_config(path)
    module = _config_module(path.partition(":")[0])
    lines += ["", f"config {path}:", "", (module.__doc__ or "").strip(), "",
              "fields (--config.FIELD=VALUE; defaults of this config; range):"]
    lines += [f"  {k} = {v!r}" + (f"  ({fields[k].description})"
                                  if fields and k in fields else "")
              for k, v in _flatten_fields(config).items()]
  except Exception as e:  # pylint: disable=broad-except
    lines += ["", f"(config {path} could not be loaded: {e})"]
  return "\n".join(lines)


def check_config(config: ml_collections.ConfigDict,
                 fields: Mapping[str, config_common.Range],
                 validate: ValidateFn | None = None) -> None:
  """Raises ValueError for a config outside its ranges or its binary's rules."""
  config_common.check_fields(config, fields)
  if validate is not None:
    validate(config)


def _run_main(main: MainFn, name: str,
              fields: Mapping[str, config_common.Range],
              validate: ValidateFn | None, metadata: dict[str, Any],
              argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config is required.")
  try:
    check_config(config, fields, validate)
  except (ValueError, TypeError) as e:
    _usage_error(f"invalid config: {e}")
  _maybe_initialize_distributed()
  logging.info(
      "process %d of %d; %d local of %d devices: %s",
      jax.process_index(), jax.process_count(), jax.local_device_count(),
      jax.device_count(), jax.devices(),
  )
  try:
    workdir = workdir_lib.Workdir(_WORKDIR.value or default_workdir(name),
                                  config, name, overwrite=_OVERWRITE.value)
  except workdir_lib.WorkdirError as e:
    _workdir_error(e)
  workdir.metadata = metadata
  workdir.scale = config_arg() or "default"
  logging.info("workdir: %s", workdir.path)
  logging.info("config (hash %s):\n%s", workdir.config_hash,
               json.dumps(report_lib.config_dict(config)))
  start = time.time()
  call_main(main, config, workdir)
  if workdir.is_writer:
    checks = workdir.checks
    passed = sum(c["passed"] is True for c in checks)
    unclear = sum(c["passed"] is None for c in checks)
    print(f"{passed}/{len(checks)} checks passed"
          + (f" ({unclear} inconclusive)" if unclear else "")
          + f"; wall time {time.time() - start:.0f} s; "
          + ", ".join(workdir.report_paths), flush=True)
    if workdir.scale == "smoke":
      print(scale_note(name, checks, workdir.not_at_smoke_scale), flush=True)


def report_metadata(main: MainFn, name: str | None = None) -> dict[str, Any]:
  """The report constants of ``main``'s module (``PAPER`` and ``CLAIM`` required).

  See :data:`experiments.harness.workdir.REPORT_CONSTANTS`; ``UNITS`` maps
  metrics to the unit of their result rows. The diagnoses of the checks that
  do not pass come from ``experiments/diagnoses/<name>.py``
  (:func:`diagnoses_of`); ``name`` defaults to the module's (which is
  ``__main__`` under ``python -m``).
  """
  module = sys.modules[main.__module__]
  missing = [n for n in ("PAPER", "CLAIM") if not hasattr(module, n)]
  if missing:
    raise TypeError(f"binary {module.__name__} must define {' and '.join(missing)}"
                    " at module level: the report's paper and claim.")
  not_at_smoke = getattr(module, "NOT_AT_SMOKE_SCALE", ())
  if not (isinstance(not_at_smoke, tuple)
          and all(isinstance(p, str) and p for p in not_at_smoke)):
    raise TypeError(f"NOT_AT_SMOKE_SCALE of {module.__name__} must be a tuple"
                    f" of check id prefixes; got {not_at_smoke!r}.")
  return {"units": dict(getattr(module, "UNITS", {})),
          "not_at_smoke_scale": not_at_smoke,
          **{field: getattr(module, constant)
             for constant, field in workdir_lib.REPORT_CONSTANTS.items()
             if hasattr(module, constant)},
          "diagnoses": diagnoses_of(name or module.__name__.rsplit(".", 1)[-1])}


def diagnoses_of(experiment: str) -> dict[str, dict[str, Any]]:
  """``DIAGNOSES`` of ``experiments/diagnoses/<experiment>.py`` ({} if none).

  Check id -> :func:`experiments.harness.diagnosis`: why that check does not
  pass at the committed scale, with the evidence (a scaling study's report
  and figure under ``experiments/results/<experiment>/``). Kept apart from
  the binary because the evidence is written after the runs that give it.
  """
  try:
    module = importlib.import_module(f"experiments.diagnoses.{experiment}")
  except ModuleNotFoundError as e:
    if e.name != f"experiments.diagnoses.{experiment}":
      raise
    return {}
  out = {}
  for check_id, value in getattr(module, "DIAGNOSES", {}).items():
    try:
      out[check_id] = report_lib.diagnosis(**value)
    except (TypeError, ValueError) as e:
      raise TypeError(f"DIAGNOSES[{check_id!r}] of {module.__name__} is not a"
                      f" harness.diagnosis(...): {e}") from None
  return out


def call_main(main: MainFn, config: ml_collections.ConfigDict,
              workdir: workdir_lib.Workdir) -> None:
  """``main(config, workdir)``, then the workdir's lock is released.

  A :class:`WorkdirError` that ``main`` raises (where it reads the workdir:
  a metrics file damaged in the middle) ends the process like one raised
  on opening the workdir: one ``error:`` line, exit status 1; so does an
  ``OSError`` on a file inside the workdir (it became read-only, the disk
  filled up).
  """
  try:
    main(config, workdir)
  except workdir_lib.WorkdirError as e:
    _workdir_error(e)
  except OSError as e:
    filename = os.path.abspath(str(e.filename)) if e.filename else ""
    if not filename.startswith(workdir.path + os.sep):
      raise
    _workdir_error(f"cannot write into workdir {workdir.path}:"
                   f" {e.strerror or e} ({e.filename})")
  finally:
    workdir.close()


def _workdir_error(error: Exception) -> None:
  print(f"error: {error}", file=sys.stderr)
  sys.exit(1)


def config_arg() -> str:
  """The ``arg`` of ``--config path:arg`` ("" for the default config)."""
  filename = config_flags.get_config_filename(flags.FLAGS["config"])
  return filename.split(":", 1)[1] if ":" in filename else ""


def default_workdir(name: str) -> str:
  arg = config_arg()
  return os.path.join("runs", f"{name}_{arg}" if arg else name)


def scale_note(name: str, checks: list[dict[str, Any]],
               declared: Sequence[str] = ()) -> str:
  """What a smoke run's verdicts mean: the final line of a smoke run.

  A smoke config checks that the code runs end to end. ``declared`` are the
  ids of the checks its binary declares too small for it
  (``NOT_AT_SMOKE_SCALE``); any other check it does not pass is named as
  well, with its verdict in the committed default report of
  ``experiments/results/<name>``.
  """
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))), "results", name, "report.json")
  try:
    with open(path) as f:
      default = {c["id"]: c["passed"] for c in json.load(f)["run_data"]["checks"]}
  except (OSError, ValueError, KeyError, TypeError):
    default = {}
  passed = {c["id"] for c in checks if c["passed"] is True}
  parts = []
  if declared:
    passed_anyway = [i for i in declared if i in passed]
    parts.append("the binary declares these checks too small for it (they"
                 f" need the default scale): {', '.join(declared)}"
                 + (f" (passed here anyway: {', '.join(passed_anyway)})"
                    if passed_anyway else ""))
  surprising = [c["id"] for c in checks
                if c["passed"] is not True and c["id"] not in declared]
  if surprising:
    in_default = lambda i: ("passes at the default scale" if default.get(i) is True
                            else "not in the default report" if i not in default
                            else "does not pass at the default scale either")
    parts.append("not passed here though not declared: " + ", ".join(
        f"{i} ({in_default(i)})" for i in surprising))
  return ("smoke scale: this run checks that the code runs end to end, not the"
          " claim" + "".join(f"; {p}" for p in parts) + ".")


def _maybe_initialize_distributed() -> None:
  manual = _NUM_PROCESSES.value is not None and _NUM_PROCESSES.value > 1
  if not (manual or _DISTRIBUTED.value):
    return
  # CPU processes need an explicit collectives backend; GPUs and TPUs ignore it.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if manual:
    jax.distributed.initialize(
        coordinator_address=_COORDINATOR.value,
        num_processes=_NUM_PROCESSES.value,
        process_id=_PROCESS_ID.value,
    )
  else:
    jax.distributed.initialize()


class _QuietLibraries(pylogging.Filter):
  """Drops INFO chatter of orbax (every save logs dozens of lines)."""

  def filter(self, record: pylogging.LogRecord) -> bool:
    return record.levelno >= pylogging.WARNING or "orbax" not in record.pathname
