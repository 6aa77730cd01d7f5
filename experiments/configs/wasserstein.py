r"""Dynamic W_p matching: the shifted-quadtree structure against exact recomputation.

Default (a few minutes on 2 CPU cores)::

  python -m experiments.wasserstein --config experiments/configs/wasserstein.py

Smoke test (under a minute)::

  python -m experiments.wasserstein --config experiments/configs/wasserstein.py:smoke

Streams (``docs/wasserstein.md``): n points per side, uniform in [0, 1]^d or
from 8 Gaussian clusters, then ``num_ops`` operations in blocks of
``checkpoint_every``; each block holds as many insertions as deletions of
random live points on each side, so |A| = |B| = n at every checkpoint. At each
checkpoint the greedy matching and W_T of every shift are compared with the
optimum (``scipy.optimize.linear_sum_assignment``) for p = 1 and p = 2.
"""

import ml_collections

from experiments.configs import common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.num_shifts = 5  # random shifts of the quadtree per stream
  config.distributions = ("uniform", "clustered")
  config.dims = (2, 4, 8)
  config.ps = (1, 2)
  config.sizes = (64, 128, 256, 512)  # n per side
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
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "distributions": common.sequence(common.one_of("uniform", "clustered")),
    "dims": common.sequence(common.COUNT),
    "sizes": common.sequence(common.integer(2)),
    "ps": common.sequence(common.real(1)),
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
