"""The workdir of one experiment: config record, lock, runs, stages, report.

What a workdir reports is what its config computed:

* ``config.json`` records the resolved config; a rerun with a different
  config is refused (with the differing fields) unless it discards the old
  results (``overwrite=True``, the ``--overwrite`` flag);
* one run per workdir: ``.lock`` is held (``flock``) for the run's life; a
  second run is refused naming the holder, and a lock left by a killed
  process is recognised (the kernel released it) and taken over;
* every checkpoint step carries a digest, checked on restore
  (:mod:`experiments.harness.checkpointing`); metrics are JSONL records whose torn
  trailing line is dropped with a warning, and a run resumes only from a
  checkpoint step that has its metrics record (else from an older step, or
  from scratch), so metrics never hold records past the restored step;
* cached evaluation stages are JSON files with the config hash and a digest;
* ``invocations.json`` lists every invocation that ran in the workdir (its
  commit, start and wall time), and the report names them when there was
  more than one, so a report rebuilt from restored runs says which commits
  computed them.
"""

import contextlib
import datetime
import fcntl
import hashlib
import json
import math
import os
import shutil
import socket
import time
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from absl import logging
import jax
import ml_collections

from experiments.harness import checkpointing
from experiments.harness import card as card_lib
from experiments.harness import report as report_lib
from experiments.harness import jsonio
from experiments.harness import plots
from experiments.harness import stats
from experiments.harness import sweep as sweep_lib
from experiments.harness.jsonio import write_json_atomic

try:
  import tensorboardX  # pylint: disable=g-import-not-at-top
except ImportError:  # the optional ``tensorboard`` extra
  tensorboardX = None


# The binary's module constants that are report fields (constant -> field).
REPORT_CONSTANTS = {"PAPER": "paper", "CLAIM": "claim",
                    "PAPER_RESULTS": "paper_results", "NOTES": "notes",
                    "DIAGNOSES": "diagnoses"}


class WorkdirError(RuntimeError):
  """A workdir that this run must not or cannot write into.

  In use, another config, damaged, or not a writable directory (a file,
  read-only); the command line reports it as one ``error:`` line (exit 1).
  """


class Chunk(NamedTuple):
  """What a chunk function returns to :meth:`Workdir.train`.

  ``metrics`` is the record at ``step`` (a dict) or a list of
  ``(step, record)`` pairs; ``stop`` ends the run early (diverged,
  converged): its last state is saved and a rerun does not continue it.
  """

  state: Any
  step: int
  metrics: dict[str, Any] | list[tuple[int, dict[str, Any]]]
  stop: bool = False


class TrainResult(NamedTuple):
  state: Any  # the final state (restored when the run had finished before)
  records: list[dict[str, Any]]  # every metrics record of the run


class MetricWriter:
  """One JSON object per line, written (and flushed to disk) by process 0 only.

  With ``tensorboard_dir`` and tensorboardX installed (the ``tensorboard``
  extra), numeric fields also go to TensorBoard event files there; a
  resumed run purges the events past its restored step. A non-finite value
  stays in the JSONL record but is not written as a scalar (TensorBoard warns
  on each): ``nonfinite_values`` counts them at that step. ``config`` (the
  resolved config) is written once as text and as hparams.
  """

  def __init__(self, path: str, *, enabled: bool,
               tensorboard_dir: str | None = None,
               config: Mapping[str, Any] | None = None):
    self.path = path
    self.enabled = enabled
    self._tensorboard_dir = tensorboard_dir
    self._config = config
    self._tensorboard = None
    if enabled:
      os.makedirs(os.path.dirname(path), exist_ok=True)

  def write(self, step: int, **scalars: Any) -> None:
    if not self.enabled:
      return
    record = {"step": int(step)}
    record.update({k: to_python(v) for k, v in scalars.items()})
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
      f.flush()
      # A record must be on disk before the checkpoint that follows it, or a
      # kill between the two could lose a step that resume will not redo.
      os.fsync(f.fileno())
    self._write_tensorboard(record)

  def _write_tensorboard(self, record: dict[str, Any]) -> None:
    if self._tensorboard_dir is None or tensorboardX is None:
      return
    if self._tensorboard is None:
      self._tensorboard = tensorboardX.SummaryWriter(
          self._tensorboard_dir, purge_step=record["step"])
      if self._config is not None:
        self._write_config(record["step"])
    numbers = {k: v for k, v in record.items() if k != "step" and isinstance(
        v, (int, float)) and not isinstance(v, bool)}
    nonfinite = sum(not math.isfinite(v) for v in numbers.values())
    if nonfinite:
      numbers = {k: v for k, v in numbers.items() if math.isfinite(v)}
      numbers["nonfinite_values"] = nonfinite
    for key, value in numbers.items():
      self._tensorboard.add_scalar(key, value, record["step"])
    self._tensorboard.flush()

  def _write_config(self, step: int) -> None:
    text = json.dumps(self._config, indent=2, sort_keys=True)
    self._tensorboard.add_text("config", f"```\n{text}\n```", step)
    hparams = {k: v if isinstance(v, (int, float, str, bool)) else json.dumps(v)
               for k, v in _flatten(self._config).items()}
    writer = self._tensorboard._get_file_writer()  # pylint: disable=protected-access
    for summary in tensorboardX.summary.hparams(hparams, {}):
      writer.add_summary(summary)

  def close(self) -> None:
    if self._tensorboard is not None:
      self._tensorboard.close()
      self._tensorboard = None

  def read(self) -> list[dict[str, Any]]:
    """The records; a torn last line (a kill during a write) is dropped."""
    if not os.path.exists(self.path):
      return []
    with open(self.path) as f:
      lines = [line for line in f.read().split("\n") if line.strip()]
    records = []
    for i, line in enumerate(lines):
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        if i != len(lines) - 1:
          raise WorkdirError(
              f"{self.path} line {i + 1} is not JSON (damaged in the middle,"
              " not a torn last record); rerun with --overwrite.") from None
        logging.warning("%s: dropped a torn last record (%d bytes).",
                        self.path, len(line))
    return records

  def truncate_after(self, step: int) -> None:
    """Drops records past ``step`` (and a torn last line)."""
    if not self.enabled:
      return
    kept = [r for r in self.read() if r["step"] <= step]
    tmp = self.path + ".tmp"
    with open(tmp, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in kept)
    os.replace(tmp, self.path)


class Workdir:
  """The output directory of one experiment and everything written into it.

  Construct it only after the config has loaded and validated: it takes the
  lock, checks the recorded config and (re)writes ``config.json``.
  """

  def __init__(self, path: str, config: ml_collections.ConfigDict, name: str,
               *, overwrite: bool = False):
    self.path = os.path.abspath(path)
    self.config = config
    self.name = name
    self.config_hash = report_lib.config_hash(config)
    self.is_writer = jax.process_index() == 0
    self.started = time.time()
    self.report_paths: list[str] = []
    self.figures: list[str] = []  # saved so far; the report's by default
    self.scale = "default"  # the config's arg (smoke, ...); harness.run sets it
    self.checks: list[dict[str, Any]] = []
    self.not_at_smoke_scale: list[str] = []  # smoke runs: ids the binary declares
    self._lock_file = None
    self._job = _JobProgress()
    self.invocations: list[dict[str, Any]] = []
    # The binary's module-level report metadata (PAPER, CLAIM, UNITS,
    # DIAGNOSES), which
    # harness.run reads; write_report fills the report with it.
    self.metadata: dict[str, Any] = {}
    if self.is_writer:
      if os.path.exists(self.path) and not os.path.isdir(self.path):
        raise WorkdirError(f"--workdir {self.path} is a file, not a"
                           " directory; pass another --workdir.")
      try:
        os.makedirs(self.path, exist_ok=True)
        self._lock()
        self._check_recorded_config(overwrite)
        self._record_invocation()
      except (WorkdirError, OSError) as e:
        self.close()
        if isinstance(e, WorkdirError):
          raise
        # A file in the way, a read-only directory or file system, no space.
        raise WorkdirError(
            f"cannot use {self.path} as a workdir: {e.strerror or e}"
            f"{f' ({e.filename})' if e.filename else ''}; pass another"
            " --workdir.") from None

  # ------------------------------------------------------------ integrity --

  def _lock(self) -> None:
    path = os.path.join(self.path, ".lock")
    lock_file = open(path, "a+")  # pylint: disable=consider-using-with
    try:
      fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      lock_file.seek(0)
      holder = lock_file.read().strip() or "another process"
      lock_file.close()
      raise WorkdirError(
          f"workdir {self.path} is in use by {holder}; wait for that run to"
          " end, or pass another --workdir.") from None
    lock_file.seek(0)
    stale = lock_file.read().strip()
    if stale:
      logging.warning("took over the lock of a run that did not end cleanly"
                      " (%s).", stale)
    lock_file.seek(0)
    lock_file.truncate()
    lock_file.write(f"pid {os.getpid()} on {socket.gethostname()}, started"
                    f" {datetime.datetime.now().isoformat(timespec='seconds')}")
    lock_file.flush()
    self._lock_file = lock_file

  def _check_recorded_config(self, overwrite: bool) -> None:
    path = os.path.join(self.path, "config.json")
    contents = [e for e in os.listdir(self.path) if e != ".lock"]
    new = report_lib.config_dict(self.config)
    if contents and not overwrite:
      try:
        with open(path) as f:
          old = json.load(f)
      except (OSError, ValueError):
        raise WorkdirError(
            f"workdir {self.path} holds results but no readable config.json,"
            " so nothing there can be trusted to match this config; pass"
            " another --workdir, or --overwrite to discard them.") from None
      differences = config_differences(old, new)
      if differences:
        raise WorkdirError(
            f"workdir {self.path} holds results of a different config:\n  "
            + "\n  ".join(differences)
            + "\nNothing is resumed across configs: pass another --workdir,"
            " or --overwrite to discard the old results.")
    elif contents:
      if "config.json" not in contents:
        # Never empty a folder that is not a workdir (say, --workdir .).
        raise WorkdirError(
            f"{self.path} holds files but no config.json, so it is not a"
            " workdir; --overwrite deletes only workdirs: pass another"
            " --workdir or empty it yourself.")
      logging.warning("--overwrite: discarding %s", ", ".join(sorted(contents)))
      for entry in contents:
        target = os.path.join(self.path, entry)
        if os.path.isdir(target):
          shutil.rmtree(target)
        else:
          os.remove(target)
    write_json_atomic(path, new, indent=2, sort_keys=True)

  def _record_invocation(self) -> None:
    """Appends this invocation to ``invocations.json`` (under the lock).

    A workdir last written before invocations were recorded starts its list
    from the commit and wall time of the report it holds.
    """
    path = os.path.join(self.path, "invocations.json")
    try:
      with open(path) as f:
        self.invocations = json.load(f)
    except FileNotFoundError:
      self.invocations = self._invocation_of_old_report()
    except ValueError:
      raise WorkdirError(f"{path} is damaged; pass --overwrite to start the"
                         " workdir again.") from None
    self.invocations.append({
        "git_commit": report_lib.git_commit(),
        "started": datetime.datetime.fromtimestamp(self.started).isoformat(
            timespec="seconds"),
        "wall_time_s": None})
    write_json_atomic(path, self.invocations, indent=2)

  def _invocation_of_old_report(self) -> list[dict[str, Any]]:
    try:
      with open(os.path.join(self.path, "report.json")) as f:
        run_data = json.load(f)["run_data"]
      return [{"git_commit": run_data["git_commit"], "started": None,
               "wall_time_s": run_data["wall_time_s"]}]
    except (OSError, ValueError, KeyError, TypeError):
      return []  # No report, or a damaged one: nothing to credit.

  def close(self) -> None:
    """Releases the lock (a killed process releases it by dying)."""
    if self._lock_file is not None:
      self._lock_file.seek(0)
      self._lock_file.truncate()
      fcntl.flock(self._lock_file, fcntl.LOCK_UN)
      self._lock_file.close()
      self._lock_file = None

  # ----------------------------------------------------------------- runs --

  def plan(self, num_runs: int) -> None:
    """Declares how many runs (``train`` and ``stage`` calls) the job has."""
    self._job.total = num_runs

  def metrics(self, run: str) -> MetricWriter:
    return MetricWriter(os.path.join(self.path, "metrics", f"{run}.jsonl"),
                        enabled=self.is_writer,
                        tensorboard_dir=os.path.join(self.path, "tensorboard",
                                                     run),
                        config=report_lib.config_dict(self.config))

  def checkpointer(self, run: str) -> checkpointing.Checkpointer:
    return checkpointing.Checkpointer(
        os.path.join(self.path, "checkpoints", run),
        config_hash=self.config_hash)

  def train(self, run: str, init_state: Any,
            chunk: Callable[[Any, int], Chunk], *, num_steps: int,
            checkpoint_every: int,
            initial: Callable[[Any], tuple[Any, dict[str, Any]]] | None = None,
            ) -> TrainResult:
    """Runs (or resumes, or returns the finished) training run ``run``.

    ``chunk(state, step)`` advances the state from ``step`` and returns a
    :class:`Chunk`; the loop writes its metrics, saves a checkpoint at
    multiples of ``checkpoint_every``, at ``num_steps`` and at a stop, and
    logs progress. ``initial(state) -> (state, record)``, if given, measures
    the fresh state: its record is step 0's, its state checkpoint 0. On resume the state
    is restored (digest-checked) into the abstract shape of ``init_state``
    from the newest good checkpoint that has its metrics record.
    """
    metrics = self.metrics(run)
    # Read before the checkpointer starts orbax's threads: a damaged metrics
    # file is one error line, with no thread left running at exit.
    steps_with_record = {r["step"] for r in metrics.read()}
    ckpt = self.checkpointer(run)
    try:
      state = self._train_loop(run, init_state, chunk, metrics, ckpt,
                               steps_with_record, num_steps, checkpoint_every,
                               initial)
    finally:
      ckpt.close()
    metrics.close()
    return TrainResult(state, metrics.read())

  def _train_loop(self, run: str, init_state: Any,
                  chunk: Callable[[Any, int], Chunk], metrics: MetricWriter,
                  ckpt: checkpointing.Checkpointer, steps_with_record: set[int],
                  num_steps: int, checkpoint_every: int,
                  initial: Callable[[Any], tuple[Any, dict[str, Any]]] | None
                  ) -> Any:
    """:meth:`train`'s restore and loop; returns the last state."""
    restored = ckpt.restore_verified(
        checkpointing.abstract_like(init_state),
        acceptable=steps_with_record.__contains__)
    if restored is None:
      if steps_with_record:
        logging.warning("[%s] metrics without a usable checkpoint: the run"
                        " starts over.", run)
      metrics.truncate_after(-1)
      state, step, finished = init_state, 0, False
      if initial is not None:
        state, record = initial(state)
        metrics.write(0, **record)
        ckpt.save(0, state)
    else:
      state, step, finished = restored
      metrics.truncate_after(step)
      logging.info("[%s] resumed at step %d%s", run, step,
                   " (finished)" if finished or step >= num_steps else "")
    progress = self._job.start_run(run, step, num_steps)
    while not finished and step < num_steps:
      out = chunk(state, step)
      state, step = out.state, int(out.step)
      records = (out.metrics if isinstance(out.metrics, list)
                 else [(step, out.metrics)])
      for record_step, record in records:
        metrics.write(record_step, **record)
      finished = out.stop or step >= num_steps
      if step % checkpoint_every == 0 or finished:
        ckpt.save(step, state, finished=finished)
      progress.update(step, records[-1][1] if records else {})
    return state

  def stage(self, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON value, cached in ``stages/<name>.json``.

    The cache holds the config hash and a digest of the value; a damaged,
    torn or foreign file is reported and recomputed. Fresh and cached calls
    return the same JSON round-tripped value.
    """
    path = os.path.join(self.path, "stages", f"{name}.json")
    self._job.start_run(name, 0, 1)
    cached = _read_stage(path, self.config_hash)
    if cached is not None:
      logging.info("[%s] cached stage read from %s", name, path)
      return cached[0]
    value = json.loads(json.dumps(compute(), default=jsonio.json_default))
    if self.is_writer:
      os.makedirs(os.path.dirname(path), exist_ok=True)
      write_json_atomic(path, {"config_hash": self.config_hash,
                               "digest": _value_digest(value), "value": value})
    return value

  def sweep(self, grid: Mapping[str, Any], seeds: Sequence[int] | None,
            run: Callable[[sweep_lib.Run], Any], *,
            summarize: Callable[[Any, Any], Any] | None = None,
            keys: Sequence[str] | None = None,
            cache: bool = False) -> sweep_lib.SweepResult:
    """Runs ``run`` for every cell of ``grid`` and every seed: see :mod:`.sweep`.

    ``grid`` maps cell names to settings; ``seeds`` None runs each cell once.
    ``summarize(value, settings)`` turns a run's value into its per-seed
    summary; ``keys`` are the summary fields averaged (mean and ``_se``).
    ``cache`` stores each run's JSON value as the stage ``sweep/<run>``.
    """
    return sweep_lib.run_sweep(self.stage, grid, seeds, run,
                               summarize=summarize, keys=keys, cache=cache)

  # --------------------------------------------------------------- output --

  @contextlib.contextmanager
  def figure(self, name: str, *, title: str | None = None, rows: int = 1,
             cols: int = 1, size: tuple[float, float] = (4.0, 3.0),
             legend: bool = True, **subplots_kwargs: Any) -> Iterator[Any]:
    """``with workdir.figure(name, title=...) as axes:`` draws into ``axes[rows, cols]``.

    On leaving the block the figure is saved (:meth:`save_figure`) and
    listed among the report's figures.
    """
    fig, axes = panels(rows, cols, size=size, **subplots_kwargs)
    try:
      yield axes
    except BaseException:
      import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
      plt.close(fig)
      raise
    self.save_figure(fig, name, title=title, legend=legend)

  def save_figure(self, fig: Any, name: str, *, title: str | None = None,
                  legend: bool = True) -> str | None:
    """Saves a figure as ``<workdir>/<name>.png`` (process 0) and closes it.

    ``title`` (what the figure plots: quantities, axes, statistics; not
    the claim) becomes the suptitle; with ``legend`` the labelled artists
    of every panel get one shared legend below the panels (each label
    once), so no panel carries its own. Texts that would print over one
    another (:func:`plots.overlapping_texts`) are logged as a warning.
    """
    if legend:
      entries = {}
      for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
          entries.setdefault(label, handle)
        if ax.get_legend() is not None:
          ax.get_legend().remove()
      if entries:
        fig.legend(list(entries.values()), list(entries), loc="upper center",
                   bbox_to_anchor=(0.5, 0.0), ncol=min(len(entries), 5),
                   fontsize=8, frameon=False)
    if title:
      fig.suptitle(title, fontsize=10)
    if fig.get_layout_engine() is None:  # a constrained layout lays itself out
      fig.tight_layout()
    path = os.path.join(self.path, f"{name}.png")
    if self.is_writer:
      # Said, not raised: an unreadable label is worth a look, not a lost run.
      if overlaps := plots.overlapping_texts(fig):
        logging.warning("figure %s: overlapping texts, %d pair(s): %s%s", name,
                        len(overlaps), "; ".join(
                            f"{a!r} / {b!r}" for a, b in overlaps[:8]),
                        " ..." if len(overlaps) > 8 else "")
      fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
    plt.close(fig)
    if path not in self.figures:
      self.figures.append(path)
    return path if self.is_writer else None

  def write_report(self, *, markdown_appendix: str = "",
                   **report_fields: Any) -> dict[str, Any]:
    """Builds (:func:`report.make_report`) and writes ``report.json`` and ``report.md``.

    Every field the binary declares as a module constant
    (:data:`REPORT_CONSTANTS`: ``PAPER``, ``CLAIM``, ``PAPER_RESULTS``,
    ``NOTES``, ``DIAGNOSES``) defaults to it; ``figures`` to those saved so
    far, ``seeds`` to ``config.seeds``;
    a result row without a unit takes its metric's from ``UNITS``.

    ``markdown_appendix`` (e.g. an experiment-specific table) is added at the
    end of ``report.md``. Only process 0 writes; every process gets the dict.
    """
    wall_time_s = time.time() - self.started
    defaults = {"figures": self.figures,
                "seeds": list(self.config.get("seeds", ()))}
    report_fields["extra_run_data"] = {
        "scale": self.scale, **report_fields.get("extra_run_data", {})}
    if self.scale == "smoke":
      # The binary's NOT_AT_SMOKE_SCALE: prefixes of the ids of the checks
      # that a smoke config is too small for.
      prefixes = tuple(self.metadata.get("not_at_smoke_scale", ()))
      self.not_at_smoke_scale = [
          c["id"] for c in report_fields.get("checks", ())
          if prefixes and c["id"].startswith(prefixes)]
      report_fields["extra_run_data"]["not_at_smoke_scale"] = (
          self.not_at_smoke_scale)
    report_fields = {**defaults, **{k: v for k, v in self.metadata.items()
                                    if k in REPORT_CONSTANTS.values()},
                     **report_fields}
    units = self.metadata.get("units", {})
    report_fields["results"] = [
        {**row, "unit": units[row["metric"]]}
        if "unit" not in row and row["metric"] in units else row
        for row in report_fields.get("results", [])]
    if self.invocations:
      self.invocations[-1]["wall_time_s"] = round(wall_time_s, 1)
    report = report_lib.make_report(
        name=self.name, config=self.config, wall_time_s=wall_time_s,
        invocations=self.invocations, **report_fields)
    self.checks = report["run_data"]["checks"]
    if not self.is_writer:
      return report
    write_json_atomic(os.path.join(self.path, "invocations.json"),
                      self.invocations, indent=2)
    write_json_atomic(os.path.join(self.path, "report.json"), report, indent=2)
    # The card's records, one EEE file each: a workdir is an EEE datastore.
    card_lib.write_records(self.path, report["evaluation_card"])
    with open(os.path.join(self.path, "report.md"), "w") as f:
      f.write(report_lib.render_markdown(report))
      if markdown_appendix:
        f.write("\n" + markdown_appendix)
    for c in self.checks:
      logging.info("%s %s [%s]: %s", report_lib.VERDICTS[c["passed"]],
                   c["name"], c["id"], c["detail"])
    self.report_paths = [os.path.join(self.path, "report.md")] + [
        os.path.join(self.path, f) for f in report["run_data"]["figures"]]
    return report


def panels(rows: int = 1, cols: int = 1, *, size: tuple[float, float] = (4.0, 3.0),
           **subplots_kwargs: Any) -> tuple[Any, Any]:
  """A figure of ``rows x cols`` panels of ``size`` inches: ``(fig, axes[rows, cols])``."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt.subplots(rows, cols, squeeze=False,
                      figsize=(size[0] * cols, size[1] * rows),
                      **subplots_kwargs)


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
  """``field: old -> new`` for every dotted field that differs."""
  flat_old, flat_new = _flatten(old), _flatten(new)
  out = []
  for key in sorted(set(flat_old) | set(flat_new)):
    a, b = flat_old.get(key, "<absent>"), flat_new.get(key, "<absent>")
    if a != b:
      out.append(f"{key}: {json.dumps(a)} -> {json.dumps(b)}")
  return out


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
  if not isinstance(tree, dict):
    return {prefix: tree}
  out = {}
  for key, value in tree.items():
    out.update(_flatten(value, f"{prefix}{key}."
                        if isinstance(value, dict) else f"{prefix}{key}"))
  return out


def _value_digest(value: Any) -> str:
  return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _read_stage(path: str, config_hash: str) -> tuple[Any] | None:
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      stored = json.load(f)
    problem = (
        "made by another config" if stored["config_hash"] != config_hash else
        "damaged (digest mismatch)"
        if stored["digest"] != _value_digest(stored["value"]) else None)
  except (OSError, ValueError, KeyError, TypeError):
    problem = "unreadable (torn or damaged)"
  if problem is None:
    return (stored["value"],)
  logging.warning("stage %s is %s: computing it again.", path, problem)
  return None


def to_python(value: Any) -> Any:
  """Arrays and numpy scalars as lists and Python numbers; the rest unchanged."""
  return value.tolist() if hasattr(value, "tolist") else value


class _JobProgress:
  """Run i of n and an ETA for the whole job, from the work done in this process."""

  def __init__(self):
    self.total: int | None = None
    self.index = 0
    self.work_s = 0.0  # seconds spent computing (runs resumed as done: 0)
    self.work_done = 0.0  # runs (fractions) computed in this process

  def start_run(self, label: str, step: int, num_steps: int) -> "_RunProgress":
    self.index += 1
    return _RunProgress(self, label, step, num_steps)

  def eta(self, runs_done: float) -> str:
    if self.total is None or self.work_done <= 0:
      return "?"
    remaining = max(self.total - runs_done, 0.0)
    return stats.duration(remaining * self.work_s / self.work_done)


class _RunProgress:
  """Logs ``run i/n, step/total, steps/s, ETA`` at most every ``every_seconds``."""

  def __init__(self, job: _JobProgress, label: str, start_step: int,
               total_steps: int, every_seconds: float = 10.0):
    self.job, self.label = job, label
    self.total_steps = max(total_steps, 1)
    self.every_seconds = every_seconds
    self._t0, self._s0 = time.monotonic(), start_step
    self._last_t, self._last_s = self._t0, start_step
    self._last_log = -float("inf")

  def update(self, step: int, record: dict[str, Any]) -> None:
    now = time.monotonic()
    self.job.work_s += now - self._last_t
    self.job.work_done += (step - self._last_s) / self.total_steps
    self._last_t, self._last_s = now, step
    if now - self._last_log < self.every_seconds and step < self.total_steps:
      return
    self._last_log = now
    rate = (step - self._s0) / max(now - self._t0, 1e-9)
    eta = ((self.total_steps - step) / rate) if rate > 0 else math.inf
    of = f"/{self.job.total}" if self.job.total else ""
    shown = " ".join(f"{k}={report_lib.fmt(v)}" for k, v in record.items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)
                     )[:120]
    logging.info(
        "run %d%s [%s] step %d/%d (%.0f%%) %.1f steps/s, ETA run %s, job %s %s",
        self.job.index, of, self.label, step, self.total_steps,
        100 * step / self.total_steps, rate, stats.duration(eta),
        self.job.eta(self.job.index - 1 + step / self.total_steps), shown)
