r"""Accuracy measures of a point of a game: :math:`\|F\|`, distance, duality gap."""

import functools
import math

import jax
import jax.numpy as jnp

from jaxpapers import tree
from jaxpapers.saddle._game import check_blocks
from jaxpapers.saddle._game import Game
from jaxpapers.saddle._quadratic import LinearGameData


@jax.jit
def residual_norm(game: Game, z_NxD: jax.Array) -> jax.Array:
  r""":math:`\|F(z)\|_2` over all blocks (zero exactly at a solution)."""
  return jnp.linalg.norm(game.operator(z_NxD))


@jax.jit
def distance_to_solution(game: Game, z_NxD: jax.Array) -> jax.Array:
  r""":math:`\|z - z^\star\|_2`; needs a game built with its solution."""
  if game.solution is None:
    raise ValueError(
        "game.solution is None: this game was built without a known solution."
    )
  check_blocks(game, z_NxD, "z")
  return jnp.linalg.norm(z_NxD - game.solution)


def duality_gap(game: Game, z_NxD: jax.Array,
                radius: float | None = None) -> jax.Array:
  r"""Duality gap of a quadratic saddle problem, in closed form.

  .. math::
    \mathrm{gap}(\bar x, \bar y) = \max_{y \in Y} f(\bar x, y)
                                 - \min_{x \in X} f(x, \bar y),

  with :math:`X = Y = \mathbb{R}^d` (``radius=None``; needs :math:`P, Q
  \succ 0`, else the gap is infinite away from the solution) or the balls
  :math:`\|x\|, \|y\| \le R`, where each inner problem is a trust-region
  subproblem solved through an eigen-decomposition and bisection on its
  multiplier. The gap is >= 0 and is 0 exactly at a saddle point (inside the
  balls).

  Args:
    game: a two-player zero-sum game from
      :func:`~jaxpapers.saddle.saddle_game` (or the random constructors).
    z_NxD: the point, usually an ergodic average of iterates.
    radius: finite R > 0, or None for the unconstrained gap.

  Returns:
    The gap (scalar).
  """
  if radius is not None and not (isinstance(radius, (int, float))
                                 and radius > 0 and math.isfinite(radius)):
    raise ValueError(f"radius must be None or a positive number (finite), got"
                     f" {radius!r}.")
  saddle_blocks(game)  # named errors before tracing
  check_blocks(game, z_NxD, "z")
  return _duality_gap(game, z_NxD, radius)


@functools.partial(jax.jit, static_argnames=("radius",))
def _duality_gap(game: Game, z_NxD: jax.Array,
                 radius: float | None) -> jax.Array:
  p, b, q, a, c_y = saddle_blocks(game)
  spec = tree.explicit_spec(z_NxD)
  if spec is not None and spec[0] is not None:
    # Explicit axes slice out one player only from an unsharded player axis.
    z_NxD = jax.sharding.reshard(z_NxD, jax.P(None, *spec[1:]))
  x, y = z_NxD[0], z_NxD[1]
  # f(x, y) = 0.5 x'Px + x'By - 0.5 y'Qy + a'x - c_y'y
  g = b.T @ x - c_y  # max over y of  g'y - 0.5 y'Qy
  h = b @ y + a  # min over x of  0.5 x'Px + h'x = -max(-h'x - 0.5 x'Px)
  return (0.5 * x @ p @ x + a @ x + 0.5 * y @ q @ y + c_y @ y
          + _max_concave_quadratic(q, g, radius)
          + _max_concave_quadratic(p, -h, radius))


def saddle_blocks(game: Game):
  """``(P, B, Q, a, c_y)`` of a two-player zero-sum quadratic game."""
  if not isinstance(game.player_data, LinearGameData):
    raise ValueError(
        "game must be a quadratic game (player_data of type LinearGameData),"
        f" got {type(game.player_data).__name__}."
    )
  if game.num_players != 2:
    raise ValueError(
        f"game must have 2 players (a saddle problem), got {game.num_players}."
    )
  rows = game.player_data.jacobian_rows
  p, b, minus_bt, q = rows[0, :, 0], rows[0, :, 1], rows[1, :, 0], rows[1, :, 1]
  try:
    mismatch = float(jnp.max(jnp.abs(minus_bt + b.T)))
    scale = float(jnp.max(jnp.abs(b)))
  except jax.errors.ConcretizationTypeError:
    mismatch = scale = 0.0
  if mismatch > 1e-6 * (1.0 + scale):
    raise ValueError(
        "game must be zero-sum (A_21 = -A_12^T) to have a duality gap;"
        f" max deviation {mismatch:.3g}."
    )
  offset = game.player_data.offset
  return p, b, q, offset[0], offset[1]


def _max_concave_quadratic(m: jax.Array, g: jax.Array,
                           radius: float | None) -> jax.Array:
  r""":math:`\max_{\|w\| \le R} g^\top w - \tfrac12 w^\top M w`, :math:`M \succeq 0`."""
  evals, evecs = jnp.linalg.eigh(m)
  g_rot = evecs.T @ g
  if radius is None:
    return 0.5 * jnp.sum(g_rot**2 / evals)
  evals = jnp.maximum(evals, 0.0)
  norm_at = lambda lam: jnp.linalg.norm(g_rot / (evals + lam))
  # The multiplier lies in [0, |g| / R]: at |g| / R the step is inside the ball.
  hi = jnp.linalg.norm(g) / radius

  def bisect(_, bounds):
    lo, hi = bounds
    mid = 0.5 * (lo + hi)
    outside = norm_at(mid) > radius
    return jnp.where(outside, mid, lo), jnp.where(outside, hi, mid)

  interior = (evals[0] > 0) & (norm_at(0.0) <= radius)
  _, lam = jax.lax.fori_loop(0, 200, bisect, (jnp.zeros_like(hi), hi))
  lam = jnp.where(interior, 0.0, lam)
  w_rot = g_rot / jnp.maximum(evals + lam, jnp.finfo(g.dtype).tiny)
  return g_rot @ w_rot - 0.5 * jnp.sum(evals * w_rot**2)
