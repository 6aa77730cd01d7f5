"""DynamAuction: repeated auctions with carry-over value, MPC, a DP oracle and PPO."""

from jaxpapers import _deprecation
from jaxpapers.auctions._dp_oracle import QUADRATURE_NODES
from jaxpapers.auctions._dp_oracle import check_setting as check_oracle_setting
from jaxpapers.auctions._dp_oracle import lognormal_quadrature
from jaxpapers.auctions._dp_oracle import expected_surplus
from jaxpapers.auctions._dp_oracle import saturation as oracle_saturation
from jaxpapers.auctions._dp_oracle import value_table as oracle_value_table
from jaxpapers.auctions._dp_oracle import oracle_bid
from jaxpapers.auctions._dp_oracle import OracleEpisode
from jaxpapers.auctions._dp_oracle import run_oracle_from
from jaxpapers.auctions._environment import SLOT_HEADROOM
from jaxpapers.auctions._environment import num_slots
from jaxpapers.auctions._environment import check_params
from jaxpapers.auctions._environment import intensity
from jaxpapers.auctions._environment import integrated_intensity
from jaxpapers.auctions._environment import competing_log_mean
from jaxpapers.auctions._environment import win_probability
from jaxpapers.auctions._environment import Context
from jaxpapers.auctions._environment import identity_context
from jaxpapers.auctions._environment import win_context
from jaxpapers.auctions._environment import combine
from jaxpapers.auctions._environment import context_prefix
from jaxpapers.auctions._environment import exposure
from jaxpapers.auctions._environment import kernel
from jaxpapers.auctions._environment import Arrivals
from jaxpapers.auctions._environment import sample_arrivals
from jaxpapers.auctions._environment import Outcome
from jaxpapers.auctions._environment import resolve
from jaxpapers.auctions._environment import Observation
from jaxpapers.auctions._environment import EnvState
from jaxpapers.auctions._environment import EPISODE_CHUNK
from jaxpapers.auctions._environment import scan_episode
from jaxpapers.auctions._mpc import sample_futures
from jaxpapers.auctions._mpc import rollout_returns
from jaxpapers.auctions._mpc import plan_grid
from jaxpapers.auctions._mpc import plan_cem
from jaxpapers.auctions._mpc import plan
from jaxpapers.auctions._mpc import MPCEpisode
from jaxpapers.auctions._mpc import run_mpc_from
from jaxpapers.auctions._mpc import run_mpc_episode
from jaxpapers.auctions._myopic import FIRST_PRICE_GRID
from jaxpapers.auctions._myopic import Policy
from jaxpapers.auctions._myopic import myopic_valuation
from jaxpapers.auctions._myopic import first_price_bid
from jaxpapers.auctions._myopic import first_price_bid_fast
from jaxpapers.auctions._myopic import myopic_bid
from jaxpapers.auctions._myopic import fixed_shading
from jaxpapers.auctions._myopic import MyopicEpisode
from jaxpapers.auctions._myopic import run_episode as run_myopic_episode
from jaxpapers.auctions._myopic import run_from as run_myopic_from
from jaxpapers.auctions._myopic import run_batch as run_myopic_batch
from jaxpapers.auctions._myopic import best_fixed_shading
from jaxpapers.auctions._ppo import NUM_FEATURES as PPO_NUM_FEATURES
from jaxpapers.auctions._ppo import PPOConfig
from jaxpapers.auctions._ppo import PPOParams
from jaxpapers.auctions._ppo import features as ppo_features
from jaxpapers.auctions._ppo import init as ppo_init
from jaxpapers.auctions._ppo import shading as ppo_shading
from jaxpapers.auctions._ppo import greedy_policy as ppo_greedy_policy
from jaxpapers.auctions._ppo import PPOBatch
from jaxpapers.auctions._ppo import collect as ppo_collect
from jaxpapers.auctions._ppo import loss as ppo_loss
from jaxpapers.auctions._ppo import optimizer as ppo_optimizer
from jaxpapers.auctions._ppo import train as ppo_train
from jaxpapers.auctions._environment import EnvParams
from jaxpapers.auctions._environment import reset
from jaxpapers.auctions._environment import step
from jaxpapers.auctions._mpc import MPCConfig

__all__ = [
    "QUADRATURE_NODES",
    "check_oracle_setting",
    "lognormal_quadrature",
    "expected_surplus",
    "oracle_saturation",
    "oracle_value_table",
    "oracle_bid",
    "OracleEpisode",
    "run_oracle_from",
    "SLOT_HEADROOM",
    "num_slots",
    "check_params",
    "intensity",
    "integrated_intensity",
    "competing_log_mean",
    "win_probability",
    "Context",
    "identity_context",
    "win_context",
    "combine",
    "context_prefix",
    "exposure",
    "kernel",
    "Arrivals",
    "sample_arrivals",
    "Outcome",
    "resolve",
    "Observation",
    "EnvState",
    "EPISODE_CHUNK",
    "scan_episode",
    "sample_futures",
    "rollout_returns",
    "plan_grid",
    "plan_cem",
    "plan",
    "MPCEpisode",
    "run_mpc_from",
    "run_mpc_episode",
    "FIRST_PRICE_GRID",
    "Policy",
    "myopic_valuation",
    "first_price_bid",
    "first_price_bid_fast",
    "myopic_bid",
    "fixed_shading",
    "MyopicEpisode",
    "run_myopic_episode",
    "run_myopic_from",
    "run_myopic_batch",
    "best_fixed_shading",
    "PPO_NUM_FEATURES",
    "PPOConfig",
    "PPOParams",
    "ppo_features",
    "ppo_init",
    "ppo_shading",
    "ppo_greedy_policy",
    "PPOBatch",
    "ppo_collect",
    "ppo_loss",
    "ppo_optimizer",
    "ppo_train",
    "EnvParams",
    "reset",
    "step",
    "MPCConfig",
]

_deprecation.install(__name__)
