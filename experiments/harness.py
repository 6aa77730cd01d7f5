"""The harness every experiment binary shares (scenic / big_vision style).

A binary is a few lines::

  def main(rng, config, workdir): ...
  if __name__ == "__main__":
    harness.run(main, name="eoss")

and is launched as::

  python -m experiments.eoss --config experiments/configs/eoss.py[:arg] \
      [--config.field=value ...] [--workdir DIR]

``--config`` is locked, so a mistyped ``--config.x`` is an error. Without
``--workdir`` the run goes to ``runs/<name>`` (``runs/<name>_<arg>`` for a
config argument such as ``:smoke``), relative to the current directory.
Restarting with the same workdir resumes from the latest checkpoint.

Multi-process: pass ``--distributed`` on a cluster that JAX auto-detects
(SLURM, Cloud TPU, ...), or ``--coordinator_address=127.0.0.1:PORT
--num_processes=N --process_id=I`` to launch by hand. Only process 0 writes
metrics, figures and reports; every process takes part in checkpoints.
"""

import datetime
import functools
import hashlib
import importlib.metadata
import json
import logging as pylogging
import os
import platform
import subprocess
import time
from typing import Any, Callable, NamedTuple

from absl import app
from absl import flags
from absl import logging
import jax
from ml_collections import config_flags
import ml_collections

from experiments import checkpointing

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file (path[:arg]).", lock_config=True
)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Output directory; default runs/<name>[_<arg>]."
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

MainFn = Callable[[jax.Array, ml_collections.ConfigDict, "Workdir"], None]
_PACKAGES = ("jaxpapers", "jax", "jaxlib", "flax", "optax", "chex",
             "orbax-checkpoint", "numpy", "scikit-learn", "statsmodels", "jraph")


def run(main: MainFn, *, name: str) -> None:
  """Parses flags, starts JAX (multi-process if asked) and calls ``main``."""
  jax.config.config_with_absl()
  logging.get_absl_handler().addFilter(_QuietLibraries())
  app.run(functools.partial(_run_main, main, name))


def _run_main(main: MainFn, name: str, argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  _maybe_initialize_distributed()
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config is required.")
  logging.info(
      "process %d of %d; %d local of %d devices: %s",
      jax.process_index(), jax.process_count(), jax.local_device_count(),
      jax.device_count(), jax.devices(),
  )
  workdir = Workdir(_WORKDIR.value or default_workdir(name), config, name)
  logging.info("workdir: %s", workdir.path)
  rng = jax.random.key(config.get("seed", 0))
  main(rng, config, workdir)


def default_workdir(name: str) -> str:
  filename = config_flags.get_config_filename(flags.FLAGS["config"])
  arg = filename.split(":", 1)[1] if ":" in filename else ""
  return os.path.join("runs", f"{name}_{arg}" if arg else name)


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


class MetricWriter:
  """One JSON object per line, written (and flushed to disk) by process 0 only."""

  def __init__(self, path: str, *, enabled: bool):
    self.path = path
    self.enabled = enabled
    if enabled:
      os.makedirs(os.path.dirname(path), exist_ok=True)

  def write(self, step: int, **scalars: Any) -> None:
    if not self.enabled:
      return
    record = {"step": int(step)}
    record.update({k: _to_python(v) for k, v in scalars.items()})
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
      f.flush()
      # A record must be on disk before the checkpoint that follows it, or a
      # kill between the two could lose a step that resume will not redo.
      os.fsync(f.fileno())

  def read(self) -> list[dict[str, Any]]:
    if not os.path.exists(self.path):
      return []
    with open(self.path) as f:
      return [json.loads(line) for line in f if line.strip()]

  def truncate_after(self, step: int) -> None:
    """Drops records past ``step`` (written after the checkpoint resumed from)."""
    if not self.enabled:
      return
    kept = [r for r in self.read() if r["step"] <= step]
    tmp = self.path + ".tmp"
    with open(tmp, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in kept)
    os.replace(tmp, self.path)


class Progress:
  """Logs ``step/total, steps/s, ETA`` at most every ``every_seconds``."""

  def __init__(self, label: str, total_steps: int, *, start_step: int = 0,
               every_seconds: float = 10.0):
    self.label = label
    self.total_steps = total_steps
    self.every_seconds = every_seconds
    self._start = (time.monotonic(), start_step)
    self._last_log = -float("inf")

  def update(self, step: int, **extras: Any) -> None:
    now = time.monotonic()
    if now - self._last_log < self.every_seconds and step < self.total_steps:
      return
    self._last_log = now
    t0, s0 = self._start
    rate = (step - s0) / max(now - t0, 1e-9)
    eta = (self.total_steps - step) / rate if rate > 0 else float("inf")
    eta_text = (str(datetime.timedelta(seconds=round(eta)))
                if eta != float("inf") else "?")
    extra_text = " ".join(f"{k}={_fmt(v)}" for k, v in extras.items())
    logging.info(
        "[%s] step %d/%d (%.0f%%) %.1f steps/s ETA %s %s", self.label, step,
        self.total_steps, 100 * step / max(self.total_steps, 1), rate,
        eta_text, extra_text,
    )


class RunFiles(NamedTuple):
  """What ``Workdir.open_run`` hands back for one training run."""

  state: Any  # restored from the latest checkpoint, else the initial state
  resumed_step: int | None  # the checkpoint's step, None on a fresh start
  checkpointer: checkpointing.Checkpointer
  metrics: MetricWriter


class Workdir:
  """The output directory of one experiment and everything written into it."""

  def __init__(self, path: str, config: ml_collections.ConfigDict, name: str):
    self.path = os.path.abspath(path)
    self.config = config
    self.name = name
    self.is_writer = jax.process_index() == 0
    self.started = time.time()
    if self.is_writer:
      os.makedirs(self.path, exist_ok=True)
      with open(os.path.join(self.path, "config.json"), "w") as f:
        f.write(config.to_json_best_effort(indent=2, sort_keys=True))

  def metrics(self, run: str) -> MetricWriter:
    return MetricWriter(os.path.join(self.path, "metrics", f"{run}.jsonl"),
                        enabled=self.is_writer)

  def checkpointer(self, run: str) -> checkpointing.Checkpointer:
    return checkpointing.Checkpointer(
        os.path.join(self.path, "checkpoints", run)
    )

  def open_run(self, run: str, initial_state: Any) -> RunFiles:
    """Resumes ``run`` from its latest checkpoint, or starts it fresh.

    On resume the state is restored into the abstract shape of
    ``initial_state`` and metric records written after that checkpoint are
    dropped (the run will write them again, identically); on a fresh start
    any stale metrics file is emptied.
    """
    metrics, ckpt = self.metrics(run), self.checkpointer(run)
    step = ckpt.latest_step()
    if step is None:
      metrics.truncate_after(-1)
      return RunFiles(initial_state, None, ckpt, metrics)
    state = ckpt.restore(checkpointing.abstract_like(initial_state), step)
    metrics.truncate_after(step)
    logging.info("[%s] resumed at step %d", run, step)
    return RunFiles(state, step, ckpt, metrics)

  def progress(self, label: str, total_steps: int, *,
               start_step: int = 0) -> Progress:
    return Progress(label, total_steps, start_step=start_step)

  def save_figure(self, fig: Any, name: str) -> str | None:
    """Saves a matplotlib figure as ``<workdir>/<name>.png`` (process 0)."""
    path = os.path.join(self.path, f"{name}.png")
    if self.is_writer:
      fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
    plt.close(fig)
    return path if self.is_writer else None

  def write_report(self, report: dict[str, Any], *,
                   markdown_appendix: str = "") -> None:
    """Writes ``report.json`` and its rendering ``report.md`` (process 0).

    ``markdown_appendix`` (e.g. an experiment-specific table) is added at the
    end of ``report.md``.
    """
    if not self.is_writer:
      return
    with open(os.path.join(self.path, "report.json"), "w") as f:
      json.dump(report, f, indent=2, sort_keys=False)
    with open(os.path.join(self.path, "report.md"), "w") as f:
      f.write(render_markdown(report))
      if markdown_appendix:
        f.write("\n" + markdown_appendix)
    for check in report["run_data"]["checks"]:
      logging.info("%s %s: %s", "PASS" if check["passed"] else "FAIL",
                   check["name"], check["detail"])
    logging.info("report: %s", os.path.join(self.path, "report.md"))


def config_hash(config: ml_collections.ConfigDict) -> str:
  return hashlib.sha256(
      config.to_json_best_effort(sort_keys=True).encode()
  ).hexdigest()[:16]


def make_report(
    workdir: Workdir,
    *,
    paper: dict[str, str],
    claim: str,
    dataset: dict[str, str],
    model: dict[str, Any],
    seeds: list[int],
    results: list[dict[str, Any]],
    paper_results: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    figures: list[str | None],
    notes: list[str] = (),
    extra_run_data: dict[str, Any] | None = None,
) -> dict[str, Any]:
  """Builds the report: benchmark metadata, run data, model metadata.

  The three blocks follow Evaluation Cards (Ghosh et al., 2026), so that later
  cards can be composed from these reports.

  Args:
    workdir: the run's workdir (config, timing).
    paper: ``{"title", "authors", "url"}`` of the reproduced paper.
    claim: the paper's claim as tested here, one sentence.
    dataset: ``{"name", "provenance"}``.
    model: free-form model description (architecture, parameter count).
    seeds: seeds that entered the headline numbers.
    results: our numbers, each ``{"evaluation_name", "metric", "score",
      "standard_error", "num_samples", "lower_is_better"}``.
    paper_results: the paper's numbers (or qualitative statements) beside ours.
    checks: ``{"name", "passed", "detail"}`` for each part of the claim.
    figures: paths (or names) of figures in the workdir, as returned by
      ``Workdir.save_figure`` (None entries, from non-writing processes, are
      dropped).
    notes: anything the reader should know (deviations, failures).
    extra_run_data: experiment-specific fields added to ``run_data`` (e.g.
      per-run summaries).
  """
  config = workdir.config
  return {
      "schema": "jaxpapers.report/1",
      "benchmark_metadata": {
          "experiment": workdir.name,
          "paper": dict(paper),
          "claim": claim,
          "dataset": dict(dataset),
      },
      "run_data": {
          "config": json.loads(config.to_json_best_effort(sort_keys=True)),
          "config_hash": config_hash(config),
          "seeds": list(seeds),
          "versions": _versions(),
          "platform": {
              "python": platform.python_version(),
              "machine": platform.machine(),
              "backend": jax.default_backend(),
              "device_kind": jax.devices()[0].device_kind,
              "device_count": jax.device_count(),
              "process_count": jax.process_count(),
              "x64": bool(jax.config.jax_enable_x64),
          },
          "git_commit": _git_commit(),
          "wall_time_s": round(time.time() - workdir.started, 1),
          "results": results,
          "paper_results": paper_results,
          "checks": checks,
          "all_checks_passed": all(c["passed"] for c in checks),
          "figures": [os.path.basename(f) for f in figures if f],
          "notes": list(notes),
          **(extra_run_data or {}),
      },
      "model_metadata": dict(model),
  }


def render_markdown(report: dict[str, Any]) -> str:
  """A human-readable summary of a report dict."""
  bench, run_data = report["benchmark_metadata"], report["run_data"]
  paper = bench["paper"]
  lines = [
      f"# {bench['experiment']}: {paper.get('title', '')}",
      "",
      f"Paper: {paper.get('authors', '')}, <{paper.get('url', '')}>",
      "",
      f"**Claim tested.** {bench['claim']}",
      "",
      f"**Data.** {bench['dataset'].get('name', '')}:"
      f" {bench['dataset'].get('provenance', '')}",
      "",
      "## Checks",
      "",
      "| check | result | detail |",
      "|---|---|---|",
  ]
  for c in run_data["checks"]:
    lines.append(
        f"| {c['name']} | {'PASS' if c['passed'] else 'FAIL'} | {c['detail']} |"
    )
  lines += ["", "## Our numbers", "", "| evaluation | metric | score | s.e. | n |",
            "|---|---|---|---|---|"]
  for r in run_data["results"]:
    lines.append(
        f"| {r['evaluation_name']} | {r['metric']} | {_fmt(r['score'])} |"
        f" {_fmt(r.get('standard_error'))} | {r.get('num_samples', '')} |"
    )
  lines += ["", "## The paper's numbers", ""]
  lines += [f"- {r['evaluation_name']}: {r['statement']}"
            for r in run_data["paper_results"]]
  if run_data["figures"]:
    lines += ["", "## Figures", ""]
    lines += [f"![{f}]({f})" for f in run_data["figures"]]
  if run_data["notes"]:
    lines += ["", "## Notes", ""] + [f"- {n}" for n in run_data["notes"]]
  platform_ = run_data["platform"]
  lines += [
      "", "## Reproducibility", "",
      f"- config hash `{run_data['config_hash']}`, seeds {run_data['seeds']},"
      f" git `{run_data['git_commit']}`",
      f"- {platform_['backend']} ({platform_['device_kind']}),"
      f" {platform_['device_count']} devices, {platform_['process_count']}"
      f" processes, wall time {run_data['wall_time_s']} s",
      "- " + ", ".join(f"{k} {v}" for k, v in run_data["versions"].items()),
      "",
  ]
  return "\n".join(lines)


def _versions() -> dict[str, str]:
  versions = {}
  for package in _PACKAGES:
    try:
      versions[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      pass
  return versions


def _git_commit() -> str:
  """The short commit of the checkout, with ``+dirty`` when tracked files differ from it."""
  def git(*args):
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, check=True,
        timeout=10, cwd=os.path.dirname(os.path.abspath(__file__)),
    ).stdout.strip()

  try:
    commit = git("rev-parse", "--short", "HEAD")
    changed = git("status", "--porcelain", "--untracked-files=no")
  except (OSError, subprocess.SubprocessError):
    return "unknown"
  return commit + ("+dirty" if changed else "")


def _to_python(value: Any) -> Any:
  if hasattr(value, "tolist"):
    return value.tolist()
  return value


def _fmt(value: Any) -> str:
  if value is None:
    return ""
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)
