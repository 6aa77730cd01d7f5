"""DynamAuction: repeated auctions with carry-over value, MPC, a DP oracle and PPO."""

from jaxpapers.auctions import dp_oracle
from jaxpapers.auctions import environment
from jaxpapers.auctions import mpc
from jaxpapers.auctions import myopic
from jaxpapers.auctions import ppo
from jaxpapers.auctions.environment import EnvParams
from jaxpapers.auctions.environment import reset
from jaxpapers.auctions.environment import step
from jaxpapers.auctions.mpc import MPCConfig
