r"""DynamAuction at CPU scale: myopic, MPC, the DP oracle, best fixed shading, PPO.

Default (about 4 min on 2 CPU cores)::

  python -m experiments.dynamauction --config experiments/configs/dynamauction.py

Smoke test (about 30 s)::

  python -m experiments.dynamauction --config experiments/configs/dynamauction.py:smoke

Paper scale (``:paper``)::

  python -m experiments.dynamauction --config experiments/configs/dynamauction.py:paper

The paper's sizes are unknown (abstract only, no text or code located), so
``:paper`` keeps the spec's protocol (every setting, 32 seeds, 24-hour
episodes, MPC with 64 rollouts of 2 h) and gives the deep-RL baseline an
off-the-shelf budget: PPO on 64 parallel episodes for 100 iterations, 6,400
episodes (about 6.1M auction arrivals) per setting, 16x the default's 400,
since the check "MPC above PPO" rests on how long PPO trains. Expected wall
time on one H100: about 6 minutes, an estimate (no accelerator was lent to
measure it): a PPO iteration is one 960-step ``lax.scan`` over the vmapped
episodes (latency-bound, about 0.15 ms a step, so about 0.15 s for any batch
of 64) plus 32 minibatch updates, about 0.2 s; 100 of them per setting is
about 20 s, 8 settings about 3 min; the evaluations (MPC: 96 plans of
16 x 64 rollouts of 80 steps per episode, vmapped over the seeds) took
7-24 s per setting on 2 CPU cores and take about as long again on one GPU
(latency-bound scans), about 1.5 min; compilations about 1 min.
``PAPER_FEW_STEPS`` cuts it to the DP oracle's setting, two seeds and one
PPO iteration, keeping the episode, the MPC planner and the PPO network and
batch: 25 s of CPU time (measured; 3.3 min of wall time on 2 cores shared
with about 20 other processes).

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
# (keyword arguments of jaxpapers.auctions.EnvParams).
EFFECTS = {
    "saturation_recency": {},
    "saturation": {"recency": False},
    "none": {"saturation": False, "recency": False},
    # The DP oracle's setting: count-only saturation, stationary.
    "count": {"saturation_measure": "count", "recency": False,
              "intensity_amplitude": 0.0, "competing_log_amplitude": 0.0},
}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"`` the paper scale."""
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

  if common.is_paper(arg):
    config.ppo.num_envs = 64
    config.ppo.num_iterations = 100
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


# A few steps of :paper on CPU (episode, planner and PPO network and batch kept).
PAPER_FEW_STEPS = {"settings": ("second_count",), "seeds": (0, 1),
                   "ppo.num_iterations": 1}

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
