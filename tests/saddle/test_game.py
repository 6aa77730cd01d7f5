"""Game layer: operator, constant estimation, named errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import saddle


@pytest.fixture(scope="module", autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


def test_power_iteration_estimates_equal_the_exact_constants():
  # Shapes shared with the other tests reuse their compiled programs.
  game = saddle.random_monotone_game(jax.random.key(7), 4, 3, mu=0.1,
                                     l_self=6.0, l_cross=2.0,
                                     dtype=jnp.float64)
  z = jax.random.normal(jax.random.key(8), (4, 3), jnp.float64)
  self_smoothness, coupling = jax.jit(
      lambda g, z: saddle.estimate_constants(g, z, max_iters=500, tol=1e-10)
  )(game, z)
  np.testing.assert_allclose(self_smoothness, game.self_smoothness, rtol=1e-6)
  np.testing.assert_allclose(coupling, game.coupling, rtol=1e-6)


def test_operator_stacks_every_players_own_gradient():
  game = saddle.random_saddle_game(jax.random.key(2), 4, l_xx=2.0, l_xy=1.0,
                                   mu=0.5, dtype=jnp.float64)
  z = jax.random.normal(jax.random.key(3), (2, 4), jnp.float64)
  rows = np.asarray(game.player_data.jacobian_rows).reshape(8, 8)
  offset = np.asarray(game.player_data.offset).reshape(-1)
  np.testing.assert_allclose(jax.jit(game.operator)(z).reshape(-1),
                             rows @ np.asarray(z).reshape(-1) + offset,
                             rtol=1e-12)
  with pytest.raises(ValueError, match=r"z must have shape .* \(2, 4\)"):
    game.operator(jnp.zeros((3, 4)))


def test_make_game_rejects_ragged_player_data():
  data = {"a": jnp.zeros((2, 3)), "b": jnp.zeros((3, 3))}
  with pytest.raises(ValueError, match="player_data disagree"):
    saddle.make_game(data, lambda d, i, z: z[i], block_size=3,
                     self_smoothness=1.0, coupling=1.0)
