"""The sweep: a grid of settings x seeds, run (or resumed) cell by cell.

No binary loops over its settings or seeds itself. It names its grid, a
mapping ``cell name -> settings``, and one function that runs one cell for one
seed; the workdir runs every (cell, seed) in order::

  grid = {f"lr{lr:g}": lr for lr in config.learning_rates}
  sweep = workdir.sweep(grid, config.seeds, train_one, summarize=summarize,
                        keys=("final_loss",))
  sweep.summaries["lr0.1"]["final_loss"], sweep.summaries["lr0.1"]["final_loss_se"]
  sweep.paired("final_loss", "lr0.1", "lr0.01")   # mean +- s.e. of per-seed differences

Each (cell, seed) is a :class:`Run`; ``run.name`` (``<cell>_seed<seed>``) is
the name to give the ``workdir.train`` or ``workdir.stage`` calls inside it.
With ``cache=True`` its JSON value is also cached as the stage
``sweep/<run.name>``, so a resumed sweep skips every finished cell; a run that
trains through ``workdir.train`` resumes by itself and can leave ``cache``
off. Progress logs each finished run with an ETA for the whole sweep.
"""

import time
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from absl import logging

from experiments.harness import report as report_lib
from experiments.harness import stats


class Run(NamedTuple):
  """One seed of one grid cell."""
  cell: str
  settings: Any
  seed: int | None

  @property
  def name(self) -> str:
    """``<cell>_seed<seed>`` (the cell alone for a sweep without seeds)."""
    return self.cell if self.seed is None else f"{self.cell}_seed{self.seed}"


class SweepResult(NamedTuple):
  """What a sweep computed, keyed by cell; seeds in the order given.

  Attributes:
    grid: cell name -> settings, in grid order.
    seeds: the seeds of every cell (``(None,)`` for a sweep without seeds).
    values: cell name -> the run function's value per seed.
    per_seed: cell name -> the summary per seed (``summarize(value, settings)``,
      or the value itself without ``summarize``).
    keys: the summary fields averaged over seeds (None: every numeric one).
  """
  grid: dict[str, Any]
  seeds: tuple[int | None, ...]
  values: dict[str, list[Any]]
  per_seed: dict[str, list[Any]]
  keys: tuple[str, ...] | None

  @property
  def summaries(self) -> dict[str, dict[str, Any]]:
    """Cell name -> :func:`stats.over_seeds` of its per-seed summaries."""
    return {cell: stats.over_seeds(rows, self.keys)
            for cell, rows in self.per_seed.items()}

  def paired(self, metric: str, cell: str, baseline: str
             ) -> tuple[float | None, float | None]:
    """Mean and s.e. over seeds of ``cell``'s ``metric`` minus ``baseline``'s."""
    return stats.paired_difference([s[metric] for s in self.per_seed[cell]],
                                   [s[metric] for s in self.per_seed[baseline]])

  def results(self, metrics: Iterable[str], *, cells: Iterable[str] | None = None,
              higher_is_better: Iterable[str] = (),
              units: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Report rows (mean +- s.e. over seeds) of ``metrics`` for every cell."""
    metrics, summaries = tuple(metrics), self.summaries
    return [row for cell in (self.grid if cells is None else cells)
            for row in report_lib.results_of(
                cell, summaries[cell], metrics, num_samples=len(self.seeds),
                higher_is_better=higher_is_better, units=units)]


def run_sweep(stage: Callable[[str, Callable[[], Any]], Any],
              grid: Mapping[str, Any], seeds: Sequence[int] | None,
              run: Callable[[Run], Any], *,
              summarize: Callable[[Any, Any], Any] | None = None,
              keys: Sequence[str] | None = None,
              cache: bool = False) -> SweepResult:
  """Runs ``run(Run(cell, settings, seed))`` for every cell and seed.

  ``stage(name, compute)`` caches a value (:meth:`Workdir.stage`); the
  workdir passes its own. See the module docstring.
  """
  if not grid:
    raise ValueError("a sweep needs at least one cell; got an empty grid.")
  seeds = (None,) if seeds is None else tuple(seeds)
  if not seeds or len(set(seeds)) != len(seeds):
    raise ValueError(f"seeds must be distinct and at least one; got {seeds}.")
  runs = [Run(cell, settings, seed) for cell, settings in grid.items()
          for seed in seeds]
  values: dict[str, list[Any]] = {cell: [] for cell in grid}
  progress = _SweepProgress(len(runs))
  for one in runs:
    start = time.monotonic()
    value = (stage(f"sweep/{one.name}", lambda one=one: run(one)) if cache
             else run(one))
    values[one.cell].append(value)
    progress.done(one.name, time.monotonic() - start)
  per_seed = {cell: [summarize(v, grid[cell]) for v in vs] if summarize
              else vs for cell, vs in values.items()}
  return SweepResult(dict(grid), seeds, values, per_seed,
                     None if keys is None else tuple(keys))


class _SweepProgress:
  """Logs ``sweep run i/n [name] in s; ETA`` from the runs computed here.

  A run that took under a tenth of a second was read back (cached or
  finished); it does not shorten the estimate of the runs left.
  """

  def __init__(self, total: int):
    self.total, self.index = total, 0
    self.seconds, self.computed = 0.0, 0

  def done(self, name: str, seconds: float) -> None:
    self.index += 1
    if seconds >= 0.1:
      self.seconds += seconds
      self.computed += 1
    remaining = self.total - self.index
    eta = (self.seconds / self.computed * remaining if self.computed
           else float("nan"))
    logging.info("sweep run %d/%d [%s] %.1f s; ETA sweep %s", self.index,
                 self.total, name, seconds, stats.duration(eta))
