r"""DynamAuction at CPU scale: myopic, MPC, the DP oracle, best fixed shading, PPO.

Default (about 4 min on 2 CPU cores)::

  python -m experiments.dynamauction --config experiments/configs/dynamauction.py

Smoke test (about 30 s)::

  python -m experiments.dynamauction --config experiments/configs/dynamauction.py:smoke

Our reconstruction of the protocol (docs/dynamauction.md): 32 seeds x
{first, second price} x {saturation + recency, saturation only, neither,
count-only saturation (the DP oracle's setting)}, delayed feedback on
everywhere; each seed is one 24-hour episode (about 960 arrivals) and every
policy bids on the same draws.
"""

import ml_collections

from experiments.configs import common

FORMATS = ("second", "first")
# The environment's carry-over effects of each setting ``<format>_<effects>``
# (keyword arguments of jaxpapers.auctions.environment.EnvParams).
EFFECTS = {
    "saturation_recency": {},
    "saturation": {"recency": False},
    "none": {"saturation": False, "recency": False},
    # The DP oracle's setting: count-only saturation, stationary.
    "count": {"saturation_measure": "count", "recency": False,
              "intensity_amplitude": 0.0, "competing_log_amplitude": 0.0},
}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = tuple(range(32))
  config.settings = tuple(f"{f}_{e}" for f in FORMATS for e in EFFECTS)

  config.env = ml_collections.ConfigDict()
  config.env.horizon = 24.0
  config.env.base_intensity = 40.0

  config.mpc = ml_collections.ConfigDict()
  config.mpc.num_rollouts = 64
  config.mpc.horizon = 2.0
  config.mpc.replan_every = 10
  config.mpc.planner = "grid"

  config.ppo = ml_collections.ConfigDict()
  config.ppo.num_envs = 16
  config.ppo.num_iterations = 25
  config.ppo.epochs = 4
  config.ppo.minibatches = 8
  config.ppo.hidden = (64, 64)

  if common.is_smoke(arg):
    config.seeds = tuple(range(4))
    # The oracle's setting exercises every check kind; the other settings'
    # code paths are covered by tests/auctions.
    config.settings = ("second_count",)
    config.env.horizon = 4.0
    config.env.base_intensity = 20.0
    config.mpc.num_rollouts = 16
    config.mpc.horizon = 1.0
    config.ppo.num_envs = 4
    config.ppo.num_iterations = 3
    config.ppo.minibatches = 2
    config.ppo.hidden = (16,)
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "settings": common.sequence(common.one_of(
        *(f"{f}_{e}" for f in FORMATS for e in EFFECTS))),
    "env.base_intensity": common.POSITIVE,
    "env.horizon": common.POSITIVE,
    "mpc.horizon": common.POSITIVE,
    "mpc.num_rollouts": common.COUNT,
    "mpc.planner": common.one_of("grid", "cem"),
    "mpc.replan_every": common.COUNT,
    "ppo.epochs": common.COUNT,
    "ppo.hidden": common.sequence(common.COUNT),
    "ppo.minibatches": common.COUNT,
    "ppo.num_envs": common.COUNT,
    "ppo.num_iterations": common.COUNT,
}
