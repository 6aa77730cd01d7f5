"""Distributed saddle problems and monotone games: problems, metrics, methods.

Players own blocks of variables; methods are written as one player's program
and run with every player on its own device of a ``jax.make_mesh`` (or all
on one device), counting communication rounds and oracle calls.
"""

from jaxpapers.saddle.baselines import BASELINE_NAMES
from jaxpapers.saddle.baselines import textbook_baseline
from jaxpapers.saddle.complexity import growth_against_bound
from jaxpapers.saddle.complexity import loglog_slope
from jaxpapers.saddle.decoupled import DecoupledMethod
from jaxpapers.saddle.decoupled import DecoupledState
from jaxpapers.saddle.decoupled import dm_sp
from jaxpapers.saddle.decoupled import dm_vip
from jaxpapers.saddle.decoupled import ergodic_average
from jaxpapers.saddle.execution import gather_to_host
from jaxpapers.saddle.execution import init
from jaxpapers.saddle.execution import Method
from jaxpapers.saddle.execution import player_mesh
from jaxpapers.saddle.execution import replicated
from jaxpapers.saddle.execution import run
from jaxpapers.saddle.execution import Trace
from jaxpapers.saddle.extragradient import Extragradient
from jaxpapers.saddle.extragradient import extragradient
from jaxpapers.saddle.game import estimate_constants
from jaxpapers.saddle.game import Game
from jaxpapers.saddle.game import lipschitz_bound
from jaxpapers.saddle.game import make_game
from jaxpapers.saddle.game import with_constants
from jaxpapers.saddle.gda import GDA
from jaxpapers.saddle.gda import gda
from jaxpapers.saddle.metrics import distance_to_solution
from jaxpapers.saddle.metrics import duality_gap
from jaxpapers.saddle.metrics import residual_norm
from jaxpapers.saddle.network import Counters
from jaxpapers.saddle.network import ExchangesIterates
from jaxpapers.saddle.network import Player
from jaxpapers.saddle.network import PLAYER_AXIS
from jaxpapers.saddle.network import register_method
from jaxpapers.saddle.network import ViewState
from jaxpapers.saddle.optimistic import optimistic_gda
from jaxpapers.saddle.optimistic import OptimisticGDA
from jaxpapers.saddle.quadratic import linear_game
from jaxpapers.saddle.quadratic import LinearGameData
from jaxpapers.saddle.quadratic import random_bilinear_game
from jaxpapers.saddle.quadratic import random_monotone_game
from jaxpapers.saddle.quadratic import random_saddle_game
from jaxpapers.saddle.quadratic import saddle_game
from jaxpapers.saddle.robust_regression import node_operator
from jaxpapers.saddle.robust_regression import robust_regression
from jaxpapers.saddle.robust_regression import RobustRegressionData
