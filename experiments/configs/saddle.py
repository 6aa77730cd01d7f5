r"""Distributed saddle problems: communication and oracle cost vs L_xx / L_xy.

Default (105 s of CPU time; 8.5 min wall on a shared, busy 2-core machine)::

  python -m experiments.saddle --config experiments/configs/saddle.py

Smoke test (under a minute)::

  python -m experiments.saddle --config experiments/configs/saddle.py:smoke

Paper scale (``:paper``): the paper reports no experiments, so this is the
default protocol at d = 1000 instead of 200 (the largest we expect one H100
to run well inside 15 minutes; expected about 4 min, an estimate, not
measured: this task had no GPU). The estimate: about 2e6 sequential
launch-bound steps in all (EG and OGDA at L_xx/L_xy = 1000 take ~4e5 each
per step size), at ~50-100 us per float64 step of d = 1000 matvecs, plus
compilation::

  python -m experiments.saddle --config experiments/configs/saddle.py:paper

``PAPER_FEW_STEPS`` cuts it to two ratios, one step size and at most 1000
rounds at the same d (29 s wall on 2 lightly loaded CPU cores).

The same run as two processes, one player (one CPU device) per process, with
gloo collectives on localhost; it gives the same numbers::

  for i in 0 1; do
    XLA_FLAGS=--xla_force_host_platform_device_count=1 \
    python -m experiments.saddle --config experiments/configs/saddle.py:smoke \
        --coordinator_address=127.0.0.1:PORT --num_processes=2 \
        --process_id=$i --workdir runs/saddle_smoke_2proc &
  done; wait

(A gloo collective costs milliseconds, against microseconds for a step on
one device, so the default sweep, with EG's 4e5 steps at L_xx/L_xy = 1000,
takes hours this way; use ``:smoke`` or smaller ``ratios``.)

Setup (our CPU-scale protocol, docs/saddle_decoupled.md): d_x = d_y = ``dim``
quadratic games with L_xy = 1, mu = 1e-3 and L_xx = L_yy = ratio * L_xy for
each ratio; every method starts at z = 0 and stops at ||F(z)|| <= ``rtol`` *
||F(0)||. EG and OGDA try the step sizes ``step_multipliers`` x (1/L, 1/(2L))
and report the best; GDA uses mu / L^2; DM-SP uses its defaults (eta =
1/(2 L_xy), sigma = 0.5, tau = 0.1).
"""

import ml_collections

from experiments.configs import common
from jaxpapers import saddle


# The paper config cut to a few hundred rounds at the same game size (CPU, ~30 s).
PAPER_FEW_STEPS = {"ratios": (1.0, 10.0), "step_multipliers": (1.0,), "max_rounds": 1000,
                   "gda_max_rounds": 200, "steps_per_chunk": 500}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"`` d = 1000."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.x64 = True  # a 1e-6 relative residual on kappa ~ 1e6 games needs it
  # "auto": one device per player on a mesh when there are >= 2 devices
  # (e.g. two processes), else all players on one device; or "mesh"/"single".
  config.execution = "auto"

  config.dim = 200
  config.l_xy = 1.0
  config.mu = 1e-3
  config.ratios = (1.0, 10.0, 100.0, 1000.0)  # L_xx / L_xy
  config.rtol = 1e-6
  config.divergence_factor = 1e6  # stop once ||F|| > this * ||F(0)||

  config.methods = ("dm_sp", "extragradient", "optimistic_gda", "gda")
  # DM-SP's eta in units of its default 1/(2 L_xy) (untuned; the saddle
  # diagnosis's "eta" study varies it).
  config.dm_sp_eta_multiplier = 1.0
  # Largest first: a later (smaller) step only runs until it has used the
  # rounds of the best so far, since it cannot win after that.
  config.step_multipliers = (2.0, 1.0, 0.5)
  config.max_rounds = 1_000_000
  config.gda_max_rounds = 50_000
  config.steps_per_chunk = 20_000  # checkpoint and metrics cadence
  config.num_records = 300  # log-spaced residual records per run

  if common.is_smoke(arg):
    config.dim = 20
    config.ratios = (1.0, 10.0, 100.0)
    config.max_rounds = 50_000
    config.gda_max_rounds = 2_000
    config.steps_per_chunk = 2_000
    config.num_records = 100
  if common.is_paper(arg):
    config.dim = 1000
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "x64": common.FLAG,
    "execution": common.one_of("auto", "mesh", "single"),
    "dim": common.COUNT,
    "l_xy": common.POSITIVE,
    "mu": common.POSITIVE,
    "ratios": common.sequence(common.POSITIVE),
    "rtol": common.real(0, 1, low_open=True, high_open=True),
    "divergence_factor": common.real(1, low_open=True),
    "methods": common.NAMES,
    "step_multipliers": common.sequence(common.POSITIVE),
    "dm_sp_eta_multiplier": common.POSITIVE,
    "max_rounds": common.COUNT,
    "gda_max_rounds": common.COUNT,
    "steps_per_chunk": common.COUNT,
    "num_records": common.integer(2),
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ``ValueError`` for a method the binary does not know."""
  known = {"dm_sp", *saddle.BASELINE_NAMES}
  unknown = sorted(set(config.methods) - known)
  if unknown:
    raise ValueError(f"unknown methods {unknown}; known: {sorted(known)}.")
