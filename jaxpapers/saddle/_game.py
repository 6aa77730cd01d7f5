r"""Games in which every player owns one block of variables.

A :class:`Game` is the problem layer of :mod:`jaxpapers.saddle`. Player
:math:`i` owns the block :math:`z_i \in \mathbb{R}^D` of
:math:`z = (z_1, \dots, z_N)` and can only differentiate its own cost
:math:`f_i(z_i, z_{-i})` with respect to its own block. The game operator is

.. math::
  F(z) = \big(\nabla_{z_1} f_1(z), \dots, \nabla_{z_N} f_N(z)\big),

and a saddle problem :math:`\min_x \max_y f(x, y)` is the two-player game
:math:`f_1 = f`, :math:`f_2 = -f`, so that
:math:`F = (\nabla_x f, -\nabla_y f)`.

Blocks are stacked as ``z_NxD``, so that the player axis can be laid out on a
device mesh; this needs equal block sizes. Every leaf of
``Game.player_data`` has the player axis in front: it is what player ``i``
knows privately (its row of the Jacobian, its data shard), and under
:func:`jaxpapers.saddle.run` with a mesh it never leaves player ``i``'s
device.

Constants (used by the methods, never re-estimated by them):

* ``self_smoothness[i]`` = :math:`L_{ii}`, the Lipschitz constant of
  :math:`\nabla_{z_i} f_i` in :math:`z_i` (:math:`L_{xx}`, :math:`L_{yy}`);
* ``coupling`` = :math:`L_{xy}`, the spectral norm of the off-block-diagonal
  part of the Jacobian of :math:`F` (for a saddle problem, the Lipschitz
  constant of :math:`\nabla_x f` in :math:`y`);
* ``monotonicity`` = :math:`\mu \ge 0`, with
  :math:`\langle F(z) - F(w), z - w\rangle \ge \mu \|z - w\|^2`.

Problem constructors (:mod:`jaxpapers.saddle._quadratic`,
:func:`jaxpapers.saddle.robust_regression`) fill them in exactly where they
can; :func:`estimate_constants` estimates them matrix-free by power
iteration for any game.
"""

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.curvature._lanczos import lambda_max
from jaxpapers.tree import gather_explicit
from jaxpapers.tree import leading_size

# player_gradient(data_i, index, z_NxD) -> (D,): player `index`'s own
# gradient, given its private data and its view of every block.
PlayerGradientFn = Callable[[Any, jax.Array, jax.Array], jax.Array]


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["player_data", "self_smoothness", "coupling", "monotonicity",
                 "solution"],
    meta_fields=["player_gradient", "block_size"],
)
@dataclasses.dataclass(frozen=True)
class Game:
  """An N-player game with per-player private data (a pytree).

  Attributes:
    player_data: pytree whose leaves all have the player axis (size N) first.
    self_smoothness: ``(N,)`` estimates of :math:`L_{ii}` (>= 0).
    coupling: scalar estimate of :math:`L_{xy}` (> 0).
    monotonicity: scalar :math:`\\mu` (>= 0; 0 when unknown).
    solution: ``(N, D)`` solution of :math:`F(z) = 0`, or None.
    player_gradient: static ``(data_i, index, z_NxD) -> (D,)``.
    block_size: D, the size of every player's block (static).
  """

  player_data: Any
  self_smoothness: jax.Array
  coupling: jax.Array
  monotonicity: jax.Array
  solution: jax.Array | None
  player_gradient: PlayerGradientFn
  block_size: int

  @property
  def num_players(self) -> int:
    return int(self.self_smoothness.shape[0])

  @property
  def dtype(self) -> Any:
    return jax.tree.leaves(self.player_data)[0].dtype

  def operator(self, z_NxD: jax.Array) -> jax.Array:
    """:math:`F(z)`, every player's own gradient at the same point."""
    check_blocks(self, z_NxD, "z")
    indices = jnp.arange(self.num_players)
    # vmap needs the player axis of its inputs laid out alike: Explicit
    # shardings of the data and the point are gathered (tree.gather_explicit).
    (player_data, z_NxD), _ = gather_explicit((self.player_data, z_NxD))
    return jax.vmap(self.player_gradient, in_axes=(0, 0, None))(
        player_data, indices, z_NxD
    )

  def zeros(self) -> jax.Array:
    """The ``(N, D)`` origin, a common starting point."""
    return jnp.zeros((self.num_players, self.block_size), self.dtype)


def make_game(
    player_data: Any,
    player_gradient: PlayerGradientFn,
    *,
    block_size: int,
    self_smoothness: Any,
    coupling: Any,
    monotonicity: Any = 0.0,
    solution: jax.Array | None = None,
) -> Game:
  """Builds a :class:`Game` and checks shapes and constants (named errors).

  Raises:
    ValueError: if the leaves of ``player_data`` disagree on the player count,
      if ``self_smoothness`` is not ``(N,)`` or has a negative entry, if
      ``coupling`` is not a positive scalar, if ``monotonicity`` is negative,
      or if ``solution`` is not ``(N, block_size)``. Values are checked when
      concrete; traced values pass through (NaN-propagating in the methods).
  """
  num_players = leading_size(player_data, "player_data")
  if not isinstance(block_size, int) or block_size < 1:
    raise ValueError(f"block_size must be a positive int, got {block_size!r}.")
  dtype = jax.tree.leaves(player_data)[0].dtype
  self_smoothness = jnp.asarray(self_smoothness, dtype)
  if self_smoothness.shape == ():
    self_smoothness = jnp.broadcast_to(self_smoothness, (num_players,))
  if self_smoothness.shape != (num_players,):
    raise ValueError(
        f"self_smoothness must have shape ({num_players},) (one L_ii per"
        f" player), got {self_smoothness.shape}."
    )
  coupling = jnp.asarray(coupling, dtype)
  monotonicity = jnp.asarray(monotonicity, dtype)
  for name, value in (("coupling", coupling), ("monotonicity", monotonicity)):
    if value.shape != ():
      raise ValueError(f"{name} must be a scalar, got shape {value.shape}.")
  check_constant("self_smoothness", self_smoothness, strict=False)
  check_constant("coupling", coupling, strict=True)
  check_constant("monotonicity", monotonicity, strict=False)
  if solution is not None and tuple(solution.shape) != (num_players, block_size):
    raise ValueError(
        f"solution must have shape ({num_players}, {block_size}), got"
        f" {tuple(solution.shape)}."
    )
  return Game(player_data, self_smoothness, coupling, monotonicity, solution,
              player_gradient, block_size)


def with_constants(game: Game, *, self_smoothness: Any = None,
                   coupling: Any = None, monotonicity: Any = None) -> Game:
  """Replaces some constants by user estimates (same checks as :func:`make_game`)."""
  return make_game(
      game.player_data, game.player_gradient, block_size=game.block_size,
      self_smoothness=(game.self_smoothness if self_smoothness is None
                       else self_smoothness),
      coupling=game.coupling if coupling is None else coupling,
      monotonicity=game.monotonicity if monotonicity is None else monotonicity,
      solution=game.solution,
  )


def check_blocks(game: Game, z_NxD: Any, name: str) -> None:
  """Raises ``ValueError`` unless ``z_NxD`` has shape ``(N, D)`` of ``game``."""
  shape = tuple(np.shape(z_NxD))
  expected = (game.num_players, game.block_size)
  if shape != expected:
    raise ValueError(
        f"{name} must have shape (num_players, block_size) = {expected}, got"
        f" {shape}."
    )


def check_constant(name: str, value: Any, *, strict: bool,
                   below: float | None = None, finite: bool = True,
                   integer: bool = False) -> None:
  """Raises ``ValueError`` if a concrete ``value`` is not > 0 (``strict``) / >= 0.

  With ``below``, the value must also be ``< below``; with ``finite`` (the
  default) it must be finite (an infinite step size or constant makes every
  iterate NaN); with ``integer``, a whole number (a cast to int would
  truncate it). Traced values cannot be checked at trace time and pass
  through (their ranges are documented).
  """
  try:
    concrete = np.asarray(value)
  except jax.errors.TracerArrayConversionError:
    return
  if concrete.dtype == object or not np.issubdtype(concrete.dtype, np.number):
    raise ValueError(f"{name} must be a real number, got {value!r}.")
  bad = ~(concrete > 0) if strict else ~(concrete >= 0)
  if below is not None:
    bad = bad | ~(concrete < below)
  if finite:
    bad = bad | ~np.isfinite(concrete)
  if integer:
    bad = bad | ~(np.round(concrete) == concrete)
  if np.any(bad):
    bound = "> 0" if strict else ">= 0"
    if below is not None:
      bound += f" and < {below}"
    if finite:
      bound += " and finite"
    if integer:
      bound += " (a whole number)"
    raise ValueError(f"{name} must be {bound}, got {concrete.tolist()}.")


def lipschitz_bound(game: Game) -> jax.Array:
  """:math:`L = \\max_i L_{ii} + L_{xy}` >= :math:`\\|\\partial F\\|`, behind EG's step."""
  return jnp.max(game.self_smoothness) + game.coupling


def estimate_constants(
    game: Game, z_NxD: jax.Array, *, max_iters: int = 200, tol: float = 1e-4,
    key: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
  r"""Power-iteration estimates of :math:`L_{ii}` and :math:`L_{xy}` at ``z``.

  With :math:`J = \partial F(z)` (Jacobian-vector products by ``jax.jvp``,
  transposes by ``jax.vjp``; nothing dense is formed), splits
  :math:`J = J_D + J_O` into its diagonal blocks and the rest and returns
  :math:`\|J_{ii}\|_2` for every player and :math:`\|J_O\|_2`, each as the
  square root of the top eigenvalue of :math:`A^\top A` found by
  :func:`jaxpapers.curvature.lambda_max` with power iteration. For a
  quadratic game these are the exact constants; otherwise they are local
  values at ``z`` (evaluate them where the iterates live, e.g. at a solution,
  and add a margin).

  Args:
    game: the game.
    z_NxD: point of evaluation.
    max_iters: power iterations per estimate.
    tol: relative residual at which power iteration stops.
    key: PRNG key of the start vectors (default ``jax.random.key(0)``).

  Returns:
    ``(self_smoothness (N,), coupling ())``. Feed them to
    :func:`with_constants`.
  """
  check_blocks(game, z_NxD, "z")
  # Before any tracing (lambda_max checks them again).
  check_constant("tol", tol, strict=False)
  if (not isinstance(max_iters, (int, np.integer))
      or isinstance(max_iters, bool) or max_iters < 1):
    raise ValueError(f"max_iters must be a positive int, got {max_iters!r}.")
  key = jax.random.key(0) if key is None else key
  num_players = game.num_players
  _, jvp_fn = jax.linearize(game.operator, z_NxD)
  player_mask_N = jnp.eye(num_players, dtype=z_NxD.dtype)

  def diagonal_part(v_NxD):
    # Row i of J_D v is (J v_i e_i)_i: the jvp with only block i switched on.
    columns = jax.vmap(lambda m: jvp_fn(v_NxD * m[:, None]))(player_mask_N)
    return jnp.einsum("iid->id", columns)

  def off_diagonal_part(v_NxD):
    return jvp_fn(v_NxD) - diagonal_part(v_NxD)

  def top_singular_value(linear_fn, start_key):
    transpose_fn = jax.linear_transpose(linear_fn, z_NxD)
    gram = lambda v: transpose_fn(linear_fn(v))[0]
    result = lambda_max(gram, z_NxD, method="power", max_iters=max_iters,
                        tol=tol, key=start_key)
    return jnp.sqrt(jnp.maximum(result.eigenvalue, 0.0))

  coupling_key, self_key = jax.random.split(key)
  coupling = top_singular_value(off_diagonal_part, coupling_key)

  def own_block(mask_N, start_key):
    mask = mask_N[:, None]
    return top_singular_value(lambda v: diagonal_part(v * mask) * mask,
                              start_key)

  self_smoothness = jax.vmap(own_block)(
      player_mask_N, jax.random.split(self_key, num_players))
  return self_smoothness, coupling
