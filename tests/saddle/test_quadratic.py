"""Quadratic games: exact constants and solutions, and named errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import saddle


@pytest.fixture(scope="module", autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


def _dense(game):
  n, d = game.num_players, game.block_size
  return np.asarray(game.player_data.jacobian_rows).reshape(n * d, n * d)


@pytest.mark.parametrize("l_xx,l_xy,mu", [(1.0, 1.0, 1e-3), (50.0, 2.0, 0.1)])
def test_random_saddle_game_has_the_requested_constants(l_xx, l_xy, mu):
  game = saddle.random_saddle_game(jax.random.key(1), 4, l_xx=l_xx, l_xy=l_xy,
                                   mu=mu, dtype=jnp.float64)
  a = _dense(game)
  p, b, q = a[:4, :4], a[:4, 4:], a[4:, 4:]
  np.testing.assert_allclose(np.linalg.eigvalsh(p)[[0, -1]], [mu, l_xx],
                             rtol=1e-9)
  np.testing.assert_allclose(np.linalg.svd(b, compute_uv=False)[0], l_xy,
                             rtol=1e-9)
  np.testing.assert_allclose(a[4:, :4], -b.T)
  np.testing.assert_allclose(game.self_smoothness, [l_xx, l_xx], rtol=1e-9)
  np.testing.assert_allclose(game.coupling, l_xy, rtol=1e-9)
  np.testing.assert_allclose(game.monotonicity,
                             min(np.linalg.eigvalsh(p)[0],
                                 np.linalg.eigvalsh(q)[0]), rtol=1e-9)
  c = np.asarray(game.player_data.offset).reshape(-1)
  np.testing.assert_allclose(np.asarray(game.solution).reshape(-1),
                             np.linalg.solve(a, -c), rtol=1e-8)
  assert float(saddle.residual_norm(game, game.solution)) < 1e-10


def test_monotone_game_is_monotone_and_general_sum():
  game = saddle.random_monotone_game(jax.random.key(2), 4, 3, mu=0.2,
                                     l_self=5.0, l_cross=1.5,
                                     dtype=jnp.float64)
  a = _dense(game)
  assert np.linalg.eigvalsh((a + a.T) / 2)[0] >= 0.2 - 1e-9
  off = a.copy()
  for i in range(4):
    off[3 * i:3 * i + 3, 3 * i:3 * i + 3] = 0
  np.testing.assert_allclose(game.coupling, np.linalg.norm(off, 2), rtol=1e-9)
  # General sum: the off-diagonal part is not skew-symmetric.
  assert np.abs(off + off.T).max() > 1e-3
  np.testing.assert_allclose(jax.jit(game.operator)(game.solution), 0.0,
                             atol=1e-10)


def test_bilinear_game_solution_and_zero_monotonicity():
  game = saddle.random_bilinear_game(jax.random.key(3), 4, l_xy=2.0,
                                     min_singular_value=0.5,
                                     dtype=jnp.float64)
  assert float(game.monotonicity) == 0.0
  np.testing.assert_allclose(game.self_smoothness, [0.0, 0.0], atol=1e-12)
  np.testing.assert_allclose(game.coupling, 2.0, rtol=1e-9)
  np.testing.assert_allclose(jax.jit(game.operator)(game.solution), 0.0,
                             atol=1e-10)


def _blocks(dx=3, dy=3):
  return (np.eye(dx), np.ones((dx, dy)), np.eye(dy), np.zeros(dx), np.zeros(dy))


@pytest.mark.parametrize("which,shape,match", [
    ("p", (3, 2), "p must be a square matrix"),
    ("q", (2, 3), "q must be a square matrix"),
    ("b", (3, 4), r"b must have shape \(d_x, d_y\) = \(3, 3\)"),
])
def test_non_square_blocks_are_named_errors(which, shape, match):
  p, b, q, a, c = _blocks()
  arrays = {"p": p, "b": b, "q": q}
  arrays[which] = np.ones(shape)
  with pytest.raises(ValueError, match=match):
    saddle.saddle_game(arrays["p"], arrays["b"], arrays["q"], a, c)


def test_rectangular_coupling_is_a_named_error():
  p, b, q, a, c = _blocks(3, 2)
  with pytest.raises(ValueError, match=r"b must be square \(d_x == d_y\)"):
    saddle.saddle_game(p, b, q, a, c)


def test_non_monotone_and_asymmetric_games_are_named_errors():
  p, b, q, a, c = _blocks()
  with pytest.raises(ValueError, match="must be monotone"):
    saddle.saddle_game(-p, b, q, a, c)
  with pytest.raises(ValueError, match="diagonal blocks must be symmetric"):
    saddle.saddle_game(np.triu(np.ones((3, 3))) + np.eye(3), b, q, a, c)
  with pytest.raises(ValueError, match="no coupling between players"):
    saddle.saddle_game(p, np.zeros((3, 3)), q, a, c)
