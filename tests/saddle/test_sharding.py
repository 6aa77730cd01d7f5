"""jaxpapers.saddle under Auto and Explicit meshes gives the unsharded numbers.

A method's step runs on iterates and player data sharded along the player
(batch) or block (feature) axis of the (2, 4) test mesh, on the one-device
path of :func:`~jaxpapers.saddle.run` (``mesh=None``: ``vmap`` over the
player axis); the per-device path with a ``"players"`` mesh is
tests/saddle/test_methods.py::test_sharded_run_equals_single_device_run.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import saddle
from jaxpapers.saddle import _quadratic as quadratic
from tests import sharding_checks

_GAME = saddle.random_saddle_game(jax.random.key(0), 4, l_xx=4.0, l_xy=1.0,
                                  mu=0.5)
_JACOBIAN, _OFFSET = _GAME.player_data
_rng = np.random.default_rng(0)
_Z = jnp.asarray(_rng.normal(size=(2, 4)), jnp.float32)
_BLOCKS = (jnp.asarray(_rng.normal(size=(4, 4)), jnp.float32),)
_P, _B, _Q = (_JACOBIAN[0, :, 0], _JACOBIAN[0, :, 1], _JACOBIAN[1, :, 1])
_X = jnp.asarray(_rng.normal(size=(16, 4)), jnp.float32)
_Y = _X @ jnp.array([1.0, -1.0, 0.5, 0.0]) + 0.1

# Player data sharded along the player axis, iterates along the block axis.
_DATA_SPECS = (jax.P("data", "model"), jax.P("data", "model"))
_Z_SPEC = jax.P(None, "model")


def _game(jacobian_rows, offset):
  return saddle.make_game(
      saddle.LinearGameData(jacobian_rows, offset),
      quadratic.linear_player_gradient, block_size=4,
      self_smoothness=_GAME.self_smoothness, coupling=_GAME.coupling,
      monotonicity=_GAME.monotonicity)


def _steps(method_of, jacobian_rows, offset, z0, num_steps=3):
  """``num_steps`` steps of the method ``method_of(game)`` from ``z0``."""
  game = _game(jacobian_rows, offset)
  method = method_of(game)
  state = saddle.init(method, game, z0)
  return saddle.run(method, game, state, num_steps=num_steps)


def _textbook_extragradient(game):
  del game  # the step size comes from the concrete constants of _GAME
  # textbook_baseline reads the constants as Python floats: host-side.
  with jax.ensure_compile_time_eval():
    return saddle.textbook_baseline("extragradient", _GAME)


def _game_facts(p, b, q, a, c_y, z):
  game = saddle.saddle_game(p, b, q, a, c_y)
  return (game.solution, game.self_smoothness, game.coupling,
          game.monotonicity, saddle.lipschitz_bound(game),
          saddle.residual_norm(game, z), saddle.distance_to_solution(game, z),
          saddle.duality_gap(game, z), saddle.duality_gap(game, z, radius=2.0))


def _estimates(jacobian_rows, offset, z):
  game = saddle.with_constants(saddle.linear_game(jacobian_rows, offset),
                               coupling=2.0)
  return (*saddle.estimate_constants(game, z, max_iters=20), game.coupling,
          game.self_smoothness, game.solution, game.operator(z))


def _random_games(key):
  games = (saddle.random_saddle_game(key, 3, l_xx=2.0, l_xy=1.0, mu=0.5),
           saddle.random_bilinear_game(key, 3),
           saddle.random_monotone_game(key, 2, 3, mu=0.1, l_self=2.0,
                                       l_cross=1.0))
  return [(g.player_data, g.solution, g.coupling) for g in games]


def _robust_regression(x, y, z):
  game = saddle.robust_regression(x, y, num_nodes=2, beta=5.0, newton_iters=5)
  return (game.solution, game.self_smoothness, game.coupling,
          saddle.node_operator(game.player_data, 1, z))


_ROUNDING = {"rtol": 1e-4, "atol": 1e-5}  # eigen-solvers and dense solves

CASES = {
    "saddle.gda+saddle.GDA+saddle.ExchangesIterates+saddle.init+saddle.run"
    "+saddle.make_game+saddle.Game": (
        functools.partial(_steps, lambda game: saddle.gda(0.1)),
        (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, _Z_SPEC)),
    "saddle.extragradient+saddle.Extragradient": (
        functools.partial(_steps, lambda game: saddle.extragradient(0.2)),
        (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, _Z_SPEC)),
    "saddle.optimistic_gda+saddle.OptimisticGDA": (
        functools.partial(_steps, lambda game: saddle.optimistic_gda(0.1)),
        (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, jax.P("data"))),
    "saddle.textbook_baseline": (
        functools.partial(_steps, _textbook_extragradient),
        (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, _Z_SPEC)),
    "saddle.dm_sp+saddle.DecoupledMethod+saddle.ergodic_average": (
        lambda *args: saddle.ergodic_average(_steps(
            lambda game: saddle.dm_sp(max_local_iters=20), *args)[0]),
        (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, _Z_SPEC), _ROUNDING),
    "saddle.dm_vip": (
        functools.partial(_steps, lambda game: saddle.dm_vip(
            eta=0.4, max_jacobi_rounds=3, max_local_iters=10)),
        (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, jax.P("data")), _ROUNDING),
    "saddle.saddle_game+saddle.lipschitz_bound+saddle.residual_norm"
    "+saddle.distance_to_solution+saddle.duality_gap": (
        _game_facts, (_P, _B, _Q, _OFFSET[0], _OFFSET[1], _Z),
        (jax.P("data", "model"), jax.P(None, "model"), jax.P("model"),
         jax.P("model"), jax.P("model"), _Z_SPEC), _ROUNDING),
    # The two players' strategies sharded along "data".
    "saddle.duality_gap+saddle.saddle_game": (
        lambda *args: saddle.duality_gap(saddle.saddle_game(*args[:5]),
                                         args[5]),
        (_P, _B, _Q, _OFFSET[0], _OFFSET[1], _Z),
        (jax.P("data", "model"), jax.P(None, "model"), jax.P("model"),
         jax.P("model"), jax.P("model"), jax.P("data", "model")), _ROUNDING),
    "saddle.linear_game+saddle.with_constants+saddle.estimate_constants": (
        _estimates, (_JACOBIAN, _OFFSET, _Z), (*_DATA_SPECS, _Z_SPEC),
        _ROUNDING),
    "saddle.random_saddle_game+saddle.random_bilinear_game"
    "+saddle.random_monotone_game": (
        # Their one array is a PRNG key (a scalar): replicated on the mesh.
        _random_games, (jax.random.key(1),), (jax.P(),), _ROUNDING),
    "saddle.robust_regression+saddle.node_operator": (
        _robust_regression, (_X, _Y, _Z),
        (jax.P("data"), jax.P("data"), _Z_SPEC), _ROUNDING),
}

NOT_SHARDED = {
    "saddle.player_mesh": "builds a jax Mesh from a player count; takes no"
                          " arrays",
    "saddle.register_method": "a class decorator (a dataclass of"
                              " hyperparameters as a pytree); takes no arrays",
    "saddle.loglog_slope": "host-side numpy least squares on Python sequences"
                           " of measured costs",
    "saddle.growth_against_bound": "host-side numpy comparison of Python"
                                   " sequences of measured costs",
    "saddle.replicated": "host value to a replicated array (not traceable);"
                         " checked on both mesh kinds by"
                         " tests/saddle/test_sharding.py::"
                         "test_host_transfers_under_both_mesh_modes",
    "saddle.gather_to_host": "device to host copy (not traceable); checked on"
                             " both mesh kinds by"
                             " tests/saddle/test_sharding.py::"
                             "test_host_transfers_under_both_mesh_modes",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "saddle.extragradient+saddle.Extragradient": ("Auto", "Explicit"),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_transfers_under_both_mesh_modes(mode, contract_mesh):
  mesh = contract_mesh(mode)
  value = np.arange(8.0, dtype=np.float32).reshape(2, 4)
  with jax.set_mesh(mesh):
    sharded = jax.device_put(value, jax.P("data", "model"))
    on_every_device = saddle.replicated(value, mesh)
    host = saddle.gather_to_host({"sharded": sharded,
                                  "replicated": on_every_device})
  assert on_every_device.sharding.is_fully_replicated
  assert len(on_every_device.sharding.device_set) == 8
  for leaf in host.values():
    assert isinstance(leaf, np.ndarray)
    np.testing.assert_array_equal(leaf, value)
