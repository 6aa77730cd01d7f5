"""Residual, distance and duality gap against scipy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from jaxpapers import saddle


@pytest.fixture(scope="module", autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def game():
  return saddle.random_saddle_game(jax.random.key(0), 4, l_xx=4.0, l_xy=1.0,
                                   mu=0.5, dtype=jnp.float64)


def _f(game, x, y):
  p, b, q, a, c = (np.asarray(m) for m in saddle._metrics.saddle_blocks(game))
  return 0.5 * x @ p @ x + x @ b @ y - 0.5 * y @ q @ y + a @ x - c @ y


def _scipy_gap(game, z, radius=None):
  x_bar, y_bar = np.asarray(z)
  constraints = ([] if radius is None else
                 [{"type": "ineq", "fun": lambda w: radius**2 - w @ w}])
  best_y = optimize.minimize(lambda y: -_f(game, x_bar, y), np.zeros(4),
                             constraints=constraints, tol=1e-12)
  best_x = optimize.minimize(lambda x: _f(game, x, y_bar), np.zeros(4),
                             constraints=constraints, tol=1e-12)
  return -best_y.fun - best_x.fun


@pytest.mark.parametrize("radius", [None, 0.5, 3.0])
def test_duality_gap_matches_scipy(game, radius):
  z = jax.random.normal(jax.random.key(1), (2, 4), jnp.float64)
  gap = float(saddle.duality_gap(game, z, radius=radius))
  np.testing.assert_allclose(gap, _scipy_gap(game, z, radius), rtol=1e-5)
  assert gap > 0
  assert abs(float(saddle.duality_gap(game, game.solution))) < 1e-10


def test_bilinear_gap_on_a_ball_is_the_norm_formula():
  game = saddle.random_bilinear_game(jax.random.key(2), 4, l_xy=1.0,
                                     min_singular_value=0.5,
                                     dtype=jnp.float64)
  z = jax.random.normal(jax.random.key(3), (2, 4), jnp.float64)
  _, b, _, a, c = (np.asarray(m) for m in saddle._metrics.saddle_blocks(game))
  x, y = np.asarray(z)
  # max_{|y|<=R} (B'x - c)'y + min_{|x|<=R} -(By + a)'x, plus f's x-terms.
  expected = (2.0 * (np.linalg.norm(b.T @ x - c) + np.linalg.norm(b @ y + a))
              + a @ x + c @ y)
  np.testing.assert_allclose(saddle.duality_gap(game, z, radius=2.0),
                             expected, rtol=1e-10)


def test_dm_ergodic_average_closes_the_gap_on_a_bilinear_game():
  game = saddle.random_bilinear_game(jax.random.key(4), 4, l_xy=1.0,
                                     min_singular_value=0.5,
                                     dtype=jnp.float64)
  radius = 2.0 * float(jnp.linalg.norm(game.solution))
  method = saddle.dm_sp()
  state = saddle.init(method, game, game.zeros())
  gaps = []
  for _ in range(3):
    state, _ = saddle.run(method, game, state, num_steps=5000, step_limit=20)
    gaps.append(float(saddle.duality_gap(
        game, saddle.ergodic_average(state), radius=radius)))
  assert 0 <= gaps[2] < gaps[1] < gaps[0]


def test_metrics_name_what_they_need(game):
  four_players = saddle.random_monotone_game(jax.random.key(1), 4, 3, mu=0.2,
                                             l_self=8.0, l_cross=1.0,
                                             dtype=jnp.float64)
  with pytest.raises(ValueError, match="game must have 2 players"):
    saddle.duality_gap(four_players, four_players.zeros())
  no_solution = saddle.make_game(
      game.player_data, game.player_gradient, block_size=4,
      self_smoothness=game.self_smoothness, coupling=game.coupling)
  with pytest.raises(ValueError, match="game.solution is None"):
    saddle.distance_to_solution(no_solution, game.zeros())
  np.testing.assert_allclose(saddle.residual_norm(game, game.zeros()),
                             np.linalg.norm(game.player_data.offset))
