"""Distributed saddle problems and monotone games: problems, metrics, methods.

Players own blocks of variables; methods are written as one player's program
and run with every player on its own device of a ``jax.make_mesh`` (or all
on one device), counting communication rounds and oracle calls.
"""

from jaxpapers import _deprecation
from jaxpapers.saddle._baselines import BASELINE_NAMES
from jaxpapers.saddle._baselines import textbook_baseline
from jaxpapers.saddle._complexity import growth_against_bound
from jaxpapers.saddle._complexity import loglog_slope
from jaxpapers.saddle._decoupled import DecoupledMethod
from jaxpapers.saddle._decoupled import DecoupledState
from jaxpapers.saddle._decoupled import dm_sp
from jaxpapers.saddle._decoupled import dm_vip
from jaxpapers.saddle._decoupled import ergodic_average
from jaxpapers.saddle._execution import gather_to_host
from jaxpapers.saddle._execution import init
from jaxpapers.saddle._execution import Method
from jaxpapers.saddle._execution import player_mesh
from jaxpapers.saddle._execution import replicated
from jaxpapers.saddle._execution import run
from jaxpapers.saddle._execution import Trace
from jaxpapers.saddle._extragradient import Extragradient
from jaxpapers.saddle._extragradient import extragradient
from jaxpapers.saddle._game import estimate_constants
from jaxpapers.saddle._game import Game
from jaxpapers.saddle._game import lipschitz_bound
from jaxpapers.saddle._game import make_game
from jaxpapers.saddle._game import with_constants
from jaxpapers.saddle._gda import GDA
from jaxpapers.saddle._gda import gda
from jaxpapers.saddle._metrics import distance_to_solution
from jaxpapers.saddle._metrics import duality_gap
from jaxpapers.saddle._metrics import residual_norm
from jaxpapers.saddle._network import Counters
from jaxpapers.saddle._network import ExchangesIterates
from jaxpapers.saddle._network import Player
from jaxpapers.saddle._network import PLAYER_AXIS
from jaxpapers.saddle._network import register_method
from jaxpapers.saddle._network import ViewState
from jaxpapers.saddle._optimistic import optimistic_gda
from jaxpapers.saddle._optimistic import OptimisticGDA
from jaxpapers.saddle._quadratic import linear_game
from jaxpapers.saddle._quadratic import LinearGameData
from jaxpapers.saddle._quadratic import random_bilinear_game
from jaxpapers.saddle._quadratic import random_monotone_game
from jaxpapers.saddle._quadratic import random_saddle_game
from jaxpapers.saddle._quadratic import saddle_game
from jaxpapers.saddle._robust_regression import node_operator
from jaxpapers.saddle._robust_regression import robust_regression
from jaxpapers.saddle._robust_regression import RobustRegressionData

__all__ = [
    "BASELINE_NAMES",
    "textbook_baseline",
    "growth_against_bound",
    "loglog_slope",
    "DecoupledMethod",
    "DecoupledState",
    "dm_sp",
    "dm_vip",
    "ergodic_average",
    "gather_to_host",
    "init",
    "Method",
    "player_mesh",
    "replicated",
    "run",
    "Trace",
    "Extragradient",
    "extragradient",
    "estimate_constants",
    "Game",
    "lipschitz_bound",
    "make_game",
    "with_constants",
    "GDA",
    "gda",
    "distance_to_solution",
    "duality_gap",
    "residual_norm",
    "Counters",
    "ExchangesIterates",
    "Player",
    "PLAYER_AXIS",
    "register_method",
    "ViewState",
    "optimistic_gda",
    "OptimisticGDA",
    "linear_game",
    "LinearGameData",
    "random_bilinear_game",
    "random_monotone_game",
    "random_saddle_game",
    "saddle_game",
    "node_operator",
    "robust_regression",
    "RobustRegressionData",
]

_deprecation.install(__name__)
