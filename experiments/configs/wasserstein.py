r"""Dynamic W_p matching: the shifted-quadtree structure against exact recomputation.

Default (a few minutes on 2 CPU cores)::

  python -m experiments.wasserstein --config experiments/configs/wasserstein.py

Smoke test (under a minute)::

  python -m experiments.wasserstein --config experiments/configs/wasserstein.py:smoke

Paper scale (``:paper``; the paper's experiments, if any, are unknown): n up to
2048 per side and d up to 16 (the high-dimensional regime the abstract
stresses), 10 checkpoints per stream::

  python -m experiments.wasserstein --config experiments/configs/wasserstein.py:paper

Expected wall time on one H100 host: about 8 minutes, an estimate, not
measured. The exact optimum dominates: scipy's Hungarian (one CPU core) takes
about 1.5-2 s at n = 2048 (3.2 s measured on a loaded 2-core CPU) and runs
2 x 3 x 10 x 2 = 120 times at that n; then 18 streams' compilations (about
1.4 s of CPU each) and 900,000 updates on the accelerator (so the speedup
check compares its update with the host's Hungarian). ``PAPER_FEW_STEPS`` (one
shift, one checkpoint per stream, p = 1, the smallest and largest n and d)
takes 22 s on 2 idle CPU cores, 8 streams' compilations and the Hungarian
solves at n = 2048 being most of it.

Streams (``docs/wasserstein.md``): n points per side, uniform in [0, 1]^d or
from 8 Gaussian clusters, then ``num_ops`` operations in blocks of
``checkpoint_every``; each block holds as many insertions as deletions of
random live points on each side, so |A| = |B| = n at every checkpoint. At each
checkpoint the greedy matching and W_T of every shift are compared with the
optimum (``scipy.optimize.linear_sum_assignment``) for p = 1 and p = 2.
"""

import ml_collections

from experiments.configs import common


# The paper config at its extreme n and d: one shift, one checkpoint per stream, p = 1.
PAPER_FEW_STEPS = {"num_shifts": 1, "num_ops": 1000, "checkpoint_every": 1000,
                   "ps": (1,), "dims": (2, 16), "sizes": (64, 2048)}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"``
  n up to 2048 and d up to 16."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.num_shifts = 5  # random shifts of the quadtree per stream
  config.distributions = ("uniform", "clustered")
  config.dims = (2, 4, 8)
  config.ps = (1, 2)
  config.sizes = (64, 128, 256, 512)  # n per side
  # n at which update_speedup_vs_hungarian is judged (0: the largest of sizes;
  # a scaling study sets it to vary the check's n).
  config.speedup_size = 0
  config.num_ops = 10_000
  config.checkpoint_every = 500
  config.num_clusters = 8
  config.cluster_scale = 0.05
  config.resolution = 1e-3
  if common.is_smoke(arg):
    config.num_shifts = 2
    config.dims = (2, 8)
    config.sizes = (32, 64)
    config.num_ops = 1_000
  if common.is_paper(arg):
    config.dims = (2, 8, 16)
    config.sizes = (64, 512, 2048)
    config.checkpoint_every = 1000
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "distributions": common.sequence(common.one_of("uniform", "clustered")),
    "dims": common.sequence(common.COUNT),
    "sizes": common.sequence(common.integer(2)),
    "ps": common.sequence(common.real(1)),
    "speedup_size": common.NONNEGATIVE_INT,
    "num_ops": common.COUNT,
    "num_shifts": common.COUNT,
    "checkpoint_every": common.COUNT,
    "num_clusters": common.COUNT,
    "cluster_scale": common.POSITIVE,
    "resolution": common.POSITIVE,
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ``ValueError`` unless blocks split evenly (see ``make_stream``)."""
  if config.checkpoint_every % 4 or config.num_ops % config.checkpoint_every:
    raise ValueError(
        "checkpoint_every must be a multiple of 4 that divides num_ops; got"
        f" {config.checkpoint_every} and {config.num_ops}.")
  if config.speedup_size and config.speedup_size not in config.sizes:
    raise ValueError(f"speedup_size {config.speedup_size} must be 0 or one of"
                     f" sizes {tuple(config.sizes)}.")
