"""jaxpapers.saddle: every documented range and shape is a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import saddle

_GAME = saddle.random_saddle_game(jax.random.key(0), 2, l_xx=2.0, l_xy=1.0,
                                  mu=0.5)
_REGRESSION = saddle.robust_regression(
    jax.random.normal(jax.random.key(1), (8, 2)), jnp.ones(8), num_nodes=2,
    beta=5.0, newton_iters=3)


def _run(num_steps=2, **kwargs):
  method = saddle.gda(0.1)
  state = saddle.init(method, _GAME, _GAME.zeros())
  return saddle.run(method, _GAME, state, num_steps=num_steps, **kwargs)


MISUSE = [
    (lambda: saddle.dm_sp(sigma=1.5), ValueError, r"sigma must be > 0 and < 1.0"),
    (lambda: saddle.dm_sp(sigma=1.0), ValueError, r"sigma must be > 0 and < 1.0"),
    (lambda: saddle.dm_sp(sigma=jnp.float32(0.0)), ValueError, r"sigma must be > 0"),
    (lambda: saddle.dm_vip(tau=-0.1), ValueError, r"tau must be"),
    (lambda: _run(stop_residual=-1.0), ValueError, "stop_residual must be >= 0"),
    (lambda: _run(max_residual=0.0), ValueError, "max_residual must be > 0"),
    (lambda: _run(step_limit=-1), ValueError, "step_limit must be >= 0"),
    (lambda: _run(num_steps=0), ValueError, "num_steps must be a positive int"),
    (lambda: saddle.player_mesh(0), ValueError,
     "num_players must be a positive int"),
    (lambda: saddle.duality_gap(_GAME, _GAME.zeros(), radius=0.0), ValueError,
     "radius must be None or a positive number"),
    (lambda: saddle.duality_gap(_GAME, jnp.zeros((2, 3))), ValueError,
     r"z must have shape \(num_players, block_size\) = \(2, 2\)"),
    (lambda: saddle.residual_norm(_GAME, jnp.zeros(4)), ValueError,
     r"z must have shape"),
    (lambda: saddle.random_saddle_game(jax.random.key(0), 0, l_xx=1.0,
                                       l_xy=1.0, mu=0.5), ValueError,
     "dim must be a positive int"),
    (lambda: saddle.random_bilinear_game(jax.random.key(0), 2.5), ValueError,
     "dim must be a positive int"),
    (lambda: saddle.random_monotone_game(jax.random.key(0), 3, 0, mu=0.1,
                                         l_self=1.0, l_cross=1.0), ValueError,
     "dim must be a positive int"),
    (lambda: saddle.random_monotone_game(jax.random.key(0), 2.0, 2, mu=0.1,
                                         l_self=1.0, l_cross=1.0), ValueError,
     "num_players must be an int >= 2"),
    (lambda: saddle.robust_regression(jnp.ones((8, 2)), jnp.ones(8),
                                      num_nodes=2, newton_iters=-1),
     ValueError, "newton_iters must be an int >= 0"),
    # An index past the shards used to be clamped by the gather.
    (lambda: saddle.node_operator(_REGRESSION.player_data, 2, jnp.zeros((2, 2))),
     ValueError, r"node must be an int in \[0, 2\)"),
    (lambda: saddle.node_operator(_REGRESSION.player_data, 0, jnp.zeros((2, 3))),
     ValueError, r"z_2xD must have shape \(2, 2\)"),
    (lambda: saddle.ergodic_average(saddle.init(saddle.gda(0.1), _GAME,
                                                _GAME.zeros())),
     TypeError, "state must be the DecoupledState of dm_sp or dm_vip"),
    (lambda: saddle.loglog_slope([1.0, 2.0], [1.0]), ValueError,
     r"values must hold one value per x \(2\)"),
    (lambda: saddle.loglog_slope([1.0, -2.0], [1.0, 2.0]), ValueError,
     "xs must be positive and finite"),
    (lambda: saddle.growth_against_bound([1.0, 2.0], [1.0, 0.0],
                                         tolerance=0.1), ValueError,
     "measured must be positive and finite"),
    (lambda: saddle.growth_against_bound([1.0, 2.0], [1.0, 2.0], [1.0],
                                         tolerance=0.1), ValueError,
     "bound must hold one value per x"),
    (lambda: saddle.growth_against_bound([1.0, 2.0], [1.0, 2.0],
                                         tolerance=-0.1), ValueError,
     "tolerance must be >= 0"),
    # An infinite step size or constant used to make every iterate NaN.
    (lambda: saddle.gda(float("inf")), ValueError,
     "step_size must be > 0 and finite"),
    (lambda: saddle.extragradient(-1.0), ValueError, "step_size must be > 0"),
    (lambda: saddle.optimistic_gda("0.1"), ValueError,
     "step_size must be a real number"),
    (lambda: saddle.dm_vip(tau=float("inf")), ValueError,
     "tau must be > 0 and finite"),
    # jnp.asarray(2.5, int32) used to truncate the limit to 2 steps.
    (lambda: _run(step_limit=2.5), ValueError,
     r"step_limit must be >= 0 and finite \(a whole number\)"),
    (lambda: _run(stop_residual=float("inf")), ValueError,
     "stop_residual must be >= 0 and finite"),
    (lambda: saddle.random_saddle_game(jax.random.key(0), 2,
                                       l_xx=float("inf"), l_xy=1.0, mu=0.5),
     ValueError, "l_xx must be > 0 and finite"),
    (lambda: saddle.random_bilinear_game(jax.random.key(0), 2,
                                         l_xy=float("inf")),
     ValueError, "l_xy must be > 0 and finite"),
    (lambda: saddle.random_monotone_game(jax.random.key(0), 2, 2, mu=0.1,
                                         l_self=1.0, l_cross=float("inf")),
     ValueError, "l_cross must be > 0 and finite"),
    (lambda: saddle.robust_regression(jnp.ones((8, 2)), jnp.ones(8),
                                      num_nodes=2, beta=float("inf")),
     ValueError, "beta must be > 0 and finite"),
    (lambda: saddle.with_constants(_GAME, coupling=float("inf")), ValueError,
     "coupling must be > 0 and finite"),
    (lambda: saddle.linear_game(jnp.full((2, 1, 2, 1), jnp.nan),
                                jnp.zeros((2, 1))),
     ValueError, "jacobian_NxDxNxD must be finite"),
    (lambda: saddle.duality_gap(_GAME, _GAME.zeros(), radius=float("inf")),
     ValueError, "radius must be None or a positive number"),
    (lambda: saddle.growth_against_bound([1.0, 2.0], [1.0, 2.0],
                                         tolerance=float("inf")),
     ValueError, "tolerance must be >= 0 and finite"),
    # An infinite tol stopped at the first product, "converged".
    (lambda: saddle.estimate_constants(_GAME, _GAME.zeros(), tol=float("inf")),
     ValueError, "tol must be >= 0 and finite"),
    (lambda: saddle.textbook_baseline("sgd", _GAME), ValueError,
     "unknown baseline 'sgd'"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_the_documented_range_is_accepted():
  assert float(saddle.dm_sp(sigma=0.99).sigma) == pytest.approx(0.99)


def test_a_step_limit_above_num_steps_runs_num_steps():
  _, trace = _run(step_limit=10)
  assert int(trace.num_steps_taken) == 2
