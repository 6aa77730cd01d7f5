"""The harness every experiment binary shares: loop, resume, checkpoints, metrics, report.

A binary reads data, runs, summarises, checks the claim and draws figures;
the harness owns the rest::

  PAPER = {"title": ..., "authors": ..., "url": ...}  # read by the harness
  CLAIM = "..."

  def main(config, workdir):
    sweep = workdir.sweep(grid, config.seeds, train_one, summarize=...)
    ...
    workdir.write_report(results=sweep.results(...),
                         checks=[harness.check(...)], ...)

  if __name__ == "__main__":
    harness.run(main, name="eoss", fields=eoss_config.FIELDS)

See :mod:`experiments.harness.cli` (flags, help, the final line),
:mod:`experiments.harness.sweep` (a grid of settings x seeds, cell by cell),
:mod:`experiments.harness.plots` (a mean +- s.e. band, bars with error bars),
:mod:`experiments.harness.workdir` (integrity, the training loop, cached
stages), :mod:`experiments.harness.report` (checks, results, the report)
and :mod:`experiments.harness.stats` (mean +- s.e., the verdict on an effect, timing ratios).
"""

from experiments.harness.cli import call_main
from experiments.harness.cli import check_config
from experiments.harness.cli import default_workdir
from experiments.harness.cli import load_config
from experiments.harness.cli import run
from experiments.harness.report import check
from experiments.harness.report import config_hash
from experiments.harness.report import diagnosis
from experiments.harness.report import fmt
from experiments.harness.report import make_report
from experiments.harness.report import markdown_table
from experiments.harness.report import measure
from experiments.harness.report import paper_result
from experiments.harness.report import refuse_pass_on_nan
from experiments.harness.report import render_markdown
from experiments.harness.report import result
from experiments.harness.report import StaticConfig
from experiments.harness.report import timing_check
from experiments.harness.report import results_of
from experiments.harness.stats import at_least
from experiments.harness.stats import at_most
from experiments.harness.stats import effect_verdict
from experiments.harness.stats import mean_se
from experiments.harness.stats import mean_se_curve
from experiments.harness.stats import over_seeds
from experiments.harness.stats import paired_difference
from experiments.harness.stats import paired_ratio
from experiments.harness.plots import band
from experiments.harness.plots import bars
from experiments.harness.sweep import Run
from experiments.harness.sweep import SweepResult
from experiments.harness.workdir import Chunk
from experiments.harness.workdir import MetricWriter
from experiments.harness.workdir import panels
from experiments.harness.workdir import TrainResult
from experiments.harness.workdir import Workdir
from experiments.harness.workdir import WorkdirError
