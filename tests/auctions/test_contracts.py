"""jaxpapers.auctions: a table of misuse, each a named error before any compute."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import auctions
from jaxpapers.auctions import _dp_oracle as dp_oracle
from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _mpc as mpc
from jaxpapers.auctions import _myopic as myopic
from jaxpapers.auctions import _ppo as ppo

_PARAMS = auctions.EnvParams(horizon=2.0, base_intensity=3.0)
_OBS, _STATE = auctions.reset(jax.random.key(0), _PARAMS)
# Two episodes' states stacked without vmap (numpy: nothing compiles).
_TWO_STATES = jax.tree.map(lambda x: np.stack([x, x]), _STATE)
_ORACLE = auctions.EnvParams(saturation_measure="count", recency=False,
                             competing_log_amplitude=0.0)
_KEY = jax.random.key(1)
_NAN, _INF = math.nan, math.inf
_FUTURES = env_lib.Arrivals(*[np.zeros((2, 3), np.float32)] * 5)


def _table(nodes, weights, max_arrivals=3):
  return dp_oracle.value_table(_ORACLE, max_arrivals, value_nodes=nodes,
                               value_weights=weights)


MISUSE = [
    # step: one episode, one scalar bid, the params it was reset with.
    (lambda: auctions.step(_KEY, _STATE, jnp.ones(3), _PARAMS),
     ValueError, "action must be one real bid"),
    (lambda: auctions.step(_KEY, _STATE, jnp.complex64(1), _PARAMS),
     ValueError, "action must be one real bid"),
    (lambda: auctions.step(_KEY, _STATE, 1.0,
                           auctions.EnvParams(horizon=4.0, base_intensity=3.0)),
     ValueError, "pass the params the state was reset with"),
    (lambda: auctions.step(_KEY, _TWO_STATES, 1.0, _PARAMS),
     ValueError, r"state is a batch of episodes .*\(2, 12\).*vmap step"),
    (lambda: auctions.reset(_KEY, {"horizon": 2.0}),
     TypeError, "params must be an EnvParams; got dict"),
    # EnvParams: every number finite and in range, flags bools.
    (lambda: auctions.EnvParams(format="third"), ValueError,
     "format must be one of"),
    (lambda: auctions.EnvParams(intensity_amplitude=1.5), ValueError,
     r"intensity_amplitude must lie in \[0, 1\]"),
    (lambda: auctions.EnvParams(reserve=-1.0), ValueError,
     "reserve must be >= 0 and finite"),
    (lambda: auctions.EnvParams(reserve=_NAN), ValueError,
     "reserve must be >= 0 and finite"),
    (lambda: auctions.EnvParams(mean_delay=0.0), ValueError,
     "mean_delay must be > 0 and finite"),
    (lambda: auctions.EnvParams(competing_log_mean=_NAN), ValueError,
     "competing_log_mean must be finite; got nan"),
    (lambda: auctions.EnvParams(competing_log_amplitude=_NAN), ValueError,
     "competing_log_amplitude must be finite; got nan"),
    (lambda: auctions.EnvParams(competing_log_std=_INF), ValueError,
     "competing_log_std must be > 0 and finite; got inf"),
    (lambda: auctions.EnvParams(value_log_mean=_NAN), ValueError,
     "value_log_mean must be finite; got nan"),
    (lambda: auctions.EnvParams(value_log_mean=100.0), ValueError,
     "item value's 1 - 1e-9 quantile.*overflows float32"),
    (lambda: auctions.EnvParams(competing_log_mean=90.0), ValueError,
     "competing bid's 1 - 1e-9 quantile.*overflows float32"),
    (lambda: auctions.EnvParams(horizon=_INF), ValueError,
     "horizon must be > 0 and finite; got inf"),
    (lambda: auctions.EnvParams(horizon=1e9), ValueError,
     r"more than 2\*\*31 candidate arrivals"),
    (lambda: auctions.EnvParams(period=_INF), ValueError,
     "period must be > 0 and finite"),
    (lambda: auctions.EnvParams(saturation_strength=_NAN), ValueError,
     "saturation_strength must be >= 0 and finite"),
    (lambda: auctions.EnvParams(exposure_decay=_INF), ValueError,
     "exposure_decay must be >= 0 and finite"),
    (lambda: auctions.EnvParams(recency_time=-1.0), ValueError,
     "recency_time must be > 0 and finite"),
    (lambda: auctions.EnvParams(horizon="24"), TypeError,
     "horizon must be a real number"),
    (lambda: auctions.EnvParams(saturation="no"), TypeError,
     "saturation must be a bool"),
    # Slots, durations and contexts.
    (lambda: env_lib.num_slots(_PARAMS, -1.0), ValueError,
     "duration must be > 0 and finite"),
    (lambda: env_lib.num_slots(_PARAMS, _NAN), ValueError,
     "duration must be > 0 and finite; got nan"),
    (lambda: env_lib.sample_arrivals(_KEY, _PARAMS, 0.0, 2.0, 0), ValueError,
     "slots must be an int >= 1"),
    (lambda: env_lib.sample_arrivals(_KEY, _PARAMS, 0.0, 2.0, 2.5), TypeError,
     "slots must be an int"),
    (lambda: env_lib.sample_arrivals(_KEY, _PARAMS, 0.0, _NAN, 4), ValueError,
     "duration must be > 0 and finite"),
    (lambda: env_lib.context_prefix(np.ones(3, np.float32), np.ones(4, bool),
                                    _PARAMS),
     ValueError, r"win_times and won must be 1-D of one length.*\(3,\).*\(4,\)"),
    (lambda: env_lib.context_prefix(np.ones(3, np.float32),
                                    np.ones(3, np.float32), _PARAMS),
     TypeError, "won must be booleans"),
    # Myopic bids and shading policies.
    (lambda: myopic.first_price_bid(np.ones(3, np.float32),
                                    np.ones(4, np.float32), _PARAMS),
     ValueError, r"time \(4,\) must broadcast to the shape of valuation \(3,\)"),
    (lambda: myopic.first_price_bid(np.ones(3, np.float32), 1.0, _PARAMS,
                                    grid_size=0),
     ValueError, "grid_size must be an int >= 1"),
    (lambda: myopic.fixed_shading(_NAN, _PARAMS), ValueError,
     "theta must be >= 0 and finite"),
    (lambda: myopic.fixed_shading(-0.5, _PARAMS), ValueError,
     "theta must be >= 0 and finite"),
    (lambda: myopic.fixed_shading(1.0, None), TypeError,
     "params must be an EnvParams"),
    (lambda: myopic.best_fixed_shading(_KEY, _PARAMS, np.zeros((0,))),
     ValueError, r"thetas must be a non-empty 1-D array .*\(0,\)"),
    (lambda: myopic.best_fixed_shading(_KEY, _PARAMS, 1.0),
     ValueError, "thetas must be a non-empty 1-D array"),
    (lambda: myopic.best_fixed_shading(_KEY, _PARAMS, [0.5, _NAN]),
     ValueError, "thetas must be >= 0 and finite"),
    # MPCConfig: thetas of any 1-D form, ints, finite hours.
    (lambda: auctions.MPCConfig(planner="random"), ValueError,
     "planner must be one of"),
    (lambda: auctions.MPCConfig(cem_elites=65), ValueError,
     "cem_elites=65 must be <= cem_samples=64"),
    (lambda: auctions.MPCConfig(thetas=()), ValueError,
     "thetas must be non-empty"),
    (lambda: auctions.MPCConfig(thetas=[]), ValueError,
     "thetas must be non-empty"),
    (lambda: auctions.MPCConfig(thetas=np.array([])), ValueError,
     "thetas must be non-empty"),
    (lambda: auctions.MPCConfig(thetas=np.ones((2, 2))), ValueError,
     "thetas must be a non-empty 1-D sequence"),
    (lambda: auctions.MPCConfig(thetas="0.5"), ValueError,
     "thetas must be a non-empty 1-D sequence"),
    (lambda: auctions.MPCConfig(thetas=(0.5, _NAN)), ValueError,
     r"thetas\[1\] must be >= 0 and finite; got nan"),
    (lambda: auctions.MPCConfig(thetas=(1.0, _INF)), ValueError,
     r"thetas\[1\] must be >= 0 and finite"),
    (lambda: auctions.MPCConfig(thetas=(1.0, -0.5)), ValueError,
     r"thetas\[1\] must be >= 0 and finite"),
    (lambda: auctions.MPCConfig(num_rollouts=2.5), TypeError,
     "num_rollouts must be an int"),
    (lambda: auctions.MPCConfig(num_rollouts=_NAN), TypeError,
     "num_rollouts must be an int"),
    (lambda: auctions.MPCConfig(replan_every=0), ValueError,
     "replan_every must be an int >= 1"),
    (lambda: auctions.MPCConfig(horizon=_INF), ValueError,
     "horizon must be > 0 hours and finite"),
    (lambda: auctions.MPCConfig(cem_segment=_NAN), ValueError,
     "cem_segment must be > 0 hours and finite"),
    (lambda: mpc.rollout_returns(_FUTURES, _OBS.context, np.ones((3, 2)),
                                 _PARAMS),
     ValueError, r"theta must have the shape of futures.time \(2, 3\)"),
    (lambda: mpc.run_mpc_episode(_KEY, _PARAMS, {"thetas": (1.0,)}),
     TypeError, "config must be an MPCConfig"),
    # PPOConfig.
    (lambda: ppo.PPOConfig(num_envs=0), ValueError,
     "num_envs must be an int >= 1"),
    (lambda: ppo.PPOConfig(minibatches=2.0), TypeError,
     "minibatches must be an int"),
    (lambda: ppo.PPOConfig(gamma=1.5), ValueError,
     r"gamma must lie in \[0, 1\] and be finite"),
    (lambda: ppo.PPOConfig(learning_rate=_INF), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: ppo.PPOConfig(learning_rate=_NAN), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: ppo.PPOConfig(max_grad_norm=_NAN), ValueError,
     r"max_grad_norm must be > 0 \(or inf"),
    (lambda: ppo.PPOConfig(value_coef=_NAN), ValueError,
     "value_coef must be >= 0 and finite"),
    (lambda: ppo.PPOConfig(entropy_coef=_INF), ValueError,
     "entropy_coef must be finite"),
    (lambda: ppo.PPOConfig(init_log_std=_NAN), ValueError,
     "init_log_std must be finite"),
    (lambda: ppo.PPOConfig(max_theta=1.0), ValueError,
     "max_theta must be > 1"),
    (lambda: ppo.PPOConfig(hidden=(8, 0)), ValueError,
     r"hidden\[1\] must be an int >= 1"),
    (lambda: ppo.PPOConfig(hidden=(8.5,)), TypeError,
     r"hidden\[0\] must be an int"),
    (lambda: ppo.PPOConfig(hidden=8), TypeError,
     "hidden must be a sequence of layer widths"),
    (lambda: ppo.init(_KEY, None), TypeError, "config must be a PPOConfig"),
    # The DP oracle.
    (lambda: dp_oracle.value_table(_ORACLE, -1), ValueError,
     "max_arrivals must be an int >= 0"),
    (lambda: dp_oracle.value_table(_ORACLE, 2.5), TypeError,
     "max_arrivals must be an int"),
    (lambda: _table(np.ones(2), None), ValueError,
     "value_nodes and value_weights go together"),
    (lambda: _table(np.array([1.0, _NAN]), np.array([0.5, 0.5])), ValueError,
     "value_nodes must be finite and >= 0"),
    (lambda: _table(np.array([1.0, 2.0]), np.array([0.7, 0.7])), ValueError,
     "value_weights must sum to 1"),
    (lambda: _table(np.array([1.0, 2.0]), np.array([-0.5, 1.5])), ValueError,
     "value_weights must be finite and >= 0"),
    (lambda: _table(np.array([1.0, 2.0]), np.array([0.2, 0.3, 0.5])),
     ValueError, r"value_nodes \(2,\) and value_weights \(3,\) must have one"),
    (lambda: _table(np.array([]), np.array([])), ValueError,
     "value_nodes must be a non-empty 1-D real array"),
    (lambda: dp_oracle.value_table(auctions.EnvParams(recency=False), 3),
     ValueError, "saturation_measure='count'"),
    (lambda: dp_oracle.lognormal_quadrature(0.0, _NAN), ValueError,
     "log_std must be > 0 and finite"),
    (lambda: dp_oracle.lognormal_quadrature(0.0, 0.5, 0), ValueError,
     "num_nodes must be an int >= 1"),
    (lambda: dp_oracle.oracle_bid(np.zeros((3, 3)), 1.0, 0.0, 2, _ORACLE),
     ValueError, r"values must be a value_table of shape \[K\+1, K\+2\]"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_configs_take_any_sequence_and_store_hashable_values():
  # A list or array of thetas (and numpy ints) is a valid config: stored as
  # Python values, so that the config hashes as a static argument.
  config = auctions.MPCConfig(thetas=np.array([0.5, 1.0]),
                              num_rollouts=np.int64(4))
  assert config.thetas == (0.5, 1.0) and type(config.num_rollouts) is int
  assert hash(config) == hash(auctions.MPCConfig(thetas=[0.5, 1.0],
                                                 num_rollouts=4))
  assert ppo.PPOConfig(hidden=[8, 8]).hidden == (8, 8)
  assert ppo.PPOConfig(max_grad_norm=math.inf, clip=math.inf).clip == math.inf
