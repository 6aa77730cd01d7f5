r"""Quadratic games: saddle problems, bilinear games and N-player monotone games.

Every game here has an affine operator :math:`F(z) = A z + c`. Player
:math:`i` knows its row of blocks :math:`(A_{i1}, \dots, A_{iN})` and
:math:`c_i`, i.e. its cost
:math:`f_i(z) = \tfrac12 z_i^\top A_{ii} z_i + \sum_{j \ne i} z_i^\top A_{ij}
z_j + c_i^\top z_i`. The saddle problem

.. math::
  f(x, y) = \tfrac12 x^\top P x + x^\top B y - \tfrac12 y^\top Q y
            + a^\top x - b^\top y

is the case :math:`A = \begin{pmatrix} P & B \\ -B^\top & Q \end{pmatrix}`,
:math:`c = (a, b)`, with :math:`L_{xx} = \|P\|`, :math:`L_{yy} = \|Q\|`,
:math:`L_{xy} = \|B\|` and :math:`\mu = \min(\lambda_{\min}(P),
\lambda_{\min}(Q))`. Constants and the solution are computed exactly
(eigen-solvers, a dense solve), so keep ``N * D`` in the low thousands.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._game import Game
from jaxpapers.saddle._game import make_game
from jaxpapers.tree import gather_explicit
from jaxpapers.tree import merge_axes


class LinearGameData(NamedTuple):
  """Player ``i``'s private data of an affine game (leading player axis).

  Attributes:
    jacobian_rows: ``(N, D, N, D)``; ``jacobian_rows[i, :, j]`` is
      :math:`A_{ij}`.
    offset: ``(N, D)``; ``offset[i]`` is :math:`c_i`.
  """

  jacobian_rows: jax.Array
  offset: jax.Array


def linear_player_gradient(data_i: LinearGameData, index: jax.Array,
                           z_NxD: jax.Array) -> jax.Array:
  """:math:`\\nabla_{z_i} f_i(z) = \\sum_j A_{ij} z_j + c_i`."""
  del index  # the row of blocks already is player i's
  rows = data_i.jacobian_rows
  # One (D, N*D) matvec: contracting the merged axis keeps XLA from copying
  # the matrix into another layout on every call.
  return (rows.reshape(rows.shape[0], -1) @ z_NxD.reshape(-1)
          + data_i.offset)


def linear_game(jacobian_NxDxNxD: jax.Array, offset_NxD: jax.Array) -> Game:
  r"""The game with operator :math:`F(z) = A z + c` and exact constants.

  Args:
    jacobian_NxDxNxD: :math:`A` as blocks, ``[i, :, j, :]`` = :math:`A_{ij}`.
      Diagonal blocks must be symmetric (each is the Hessian of a player's
      cost in its own block) and :math:`A + A^\top \succeq 0` (monotone).
    offset_NxD: :math:`c`.

  Returns:
    A :class:`~jaxpapers.saddle.Game` with ``self_smoothness`` =
    :math:`\|A_{ii}\|_2`, ``coupling`` = :math:`\|A - \mathrm{blkdiag}(A)\|_2`,
    ``monotonicity`` = :math:`\lambda_{\min}((A + A^\top)/2)` and the
    solution of :math:`Az = -c` (None where :math:`A` is singular).

  Raises:
    ValueError: on mismatched shapes, a non-symmetric diagonal block, a
      non-monotone :math:`A`, or no coupling at all (then the players solve
      separate problems).

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import saddle
    >>> a = jnp.array([[2.0, 1.0], [-1.0, 2.0]]).reshape(2, 1, 2, 1)
    >>> game = saddle.linear_game(a, jnp.array([[1.0], [0.0]]))
    >>> float(game.coupling), [round(float(v), 3) for v in game.solution.ravel()]
    (1.0, [-0.4, -0.2])
  """
  # Dense linear algebra on the whole matrix: Explicit shardings are gathered.
  (jacobian, offset), _ = gather_explicit((jnp.asarray(jacobian_NxDxNxD),
                                           jnp.asarray(offset_NxD)))
  offset = offset.astype(jacobian.dtype)
  if jacobian.ndim != 4 or jacobian.shape[:2] != jacobian.shape[2:]:
    raise ValueError(
        "jacobian_NxDxNxD must have shape (N, D, N, D) (square blocks, one"
        f" row of blocks per player), got {jacobian.shape}."
    )
  num_players, dim = jacobian.shape[:2]
  if offset.shape != (num_players, dim):
    raise ValueError(
        f"offset_NxD must have shape ({num_players}, {dim}), got {offset.shape}."
    )
  for name, array in (("jacobian_NxDxNxD", jacobian), ("offset_NxD", offset)):
    if not isinstance(array, jax.core.Tracer) and not np.all(
        np.isfinite(np.asarray(array))):
      raise ValueError(f"{name} must be finite; it holds NaN or inf.")
  facts = _analyse(jacobian, offset)
  _check_concrete(
      "jacobian_NxDxNxD", facts.asymmetry,
      lambda v: v <= 1e-5 * (1.0 + float(facts.scale)),
      "diagonal blocks must be symmetric (A_ii is the Hessian of player i's"
      " cost in its own block); max asymmetry",
  )
  _check_concrete(
      "jacobian_NxDxNxD", facts.monotonicity,
      lambda v: v >= -1e-6 * (1.0 + float(facts.scale)),
      "must be monotone, (A + A^T)/2 >= 0; its smallest eigenvalue is",
  )
  _check_concrete(
      "jacobian_NxDxNxD", facts.coupling, lambda v: v > 0,
      "has no coupling between players (off-diagonal norm 0): solve each"
      " player's problem separately; coupling =",
  )
  try:
    solved = bool(facts.solved)
  except jax.errors.ConcretizationTypeError:
    solved = True
  return make_game(
      LinearGameData(jacobian, offset),
      linear_player_gradient,
      block_size=int(dim),
      self_smoothness=facts.self_smoothness,
      coupling=facts.coupling,
      monotonicity=jnp.maximum(facts.monotonicity, 0.0),
      solution=facts.solution if solved else None,
  )


class _Facts(NamedTuple):
  asymmetry: jax.Array
  scale: jax.Array
  monotonicity: jax.Array
  coupling: jax.Array
  self_smoothness: jax.Array
  solution: jax.Array
  solved: jax.Array


@jax.jit
def _analyse(jacobian: jax.Array, offset: jax.Array) -> _Facts:
  """Constants and solution of an affine game, in one compiled call."""
  num_players, dim = jacobian.shape[:2]
  diagonal = jnp.einsum("idie->ide", jacobian)
  # Two one-axis merges rather than one reshape: Explicit sharding of a
  # vmapped batch axis refuses a reshape that merges several axes at once.
  matrix = merge_axes(merge_axes(jacobian, 2), 0)
  block_diagonal = jax.scipy.linalg.block_diag(*diagonal)
  scale = jnp.linalg.norm(matrix, 2)
  rhs = -offset.reshape(-1)
  solution = jnp.linalg.solve(matrix, rhs)
  residual = jnp.linalg.norm(matrix @ solution - rhs)
  tolerance = 1e3 * jnp.finfo(matrix.dtype).eps * (
      scale * jnp.linalg.norm(solution) + jnp.linalg.norm(rhs))
  return _Facts(
      asymmetry=jnp.max(jnp.abs(diagonal - jnp.swapaxes(diagonal, 1, 2))),
      scale=scale,
      monotonicity=jnp.linalg.eigvalsh((matrix + matrix.T) / 2)[0],
      coupling=jnp.linalg.norm(matrix - block_diagonal, 2),
      self_smoothness=jnp.max(jnp.abs(jnp.linalg.eigvalsh(diagonal)), axis=-1),
      solution=solution.reshape(num_players, dim),
      # A singular system gives non-finite or inaccurate solutions.
      solved=residual <= tolerance,
  )


def saddle_game(p: jax.Array, b: jax.Array, q: jax.Array, a: jax.Array,
                c_y: jax.Array) -> Game:
  r"""The two-player game of :math:`\min_x \max_y f(x, y)` above.

  Args:
    p: :math:`P`, symmetric ``(d, d)``, positive semidefinite.
    b: :math:`B`, ``(d, d)``: the coupling must be square, because both
      blocks are stacked on one player axis.
    q: :math:`Q`, symmetric ``(d, d)``, positive semidefinite.
    a: linear term of :math:`x`, ``(d,)``.
    c_y: linear term of :math:`y` (:math:`b` in the formula), ``(d,)``.

  Returns:
    The :class:`~jaxpapers.saddle.Game` (player 0 is :math:`x`, player 1 is
    :math:`y`).
  """
  (p, b, q, a, c_y), _ = gather_explicit(tuple(
      jnp.asarray(x) for x in (p, b, q, a, c_y)))
  for name, m in (("p", p), ("q", q)):
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
      raise ValueError(f"{name} must be a square matrix, got shape {m.shape}.")
  if b.shape != (p.shape[0], q.shape[0]):
    raise ValueError(
        f"b must have shape (d_x, d_y) = ({p.shape[0]}, {q.shape[0]}), got"
        f" {b.shape}."
    )
  if b.shape[0] != b.shape[1]:
    raise ValueError(
        f"b must be square (d_x == d_y), got {b.shape}: the x and y blocks are"
        " stacked on one player axis; pad the smaller block with zeros."
    )
  dim = p.shape[0]
  for name, v in (("a", a), ("c_y", c_y)):
    if jnp.shape(v) != (dim,):
      raise ValueError(f"{name} must have shape ({dim},), got {jnp.shape(v)}.")
  jacobian = jnp.stack([
      jnp.stack([p, b], axis=1),
      jnp.stack([-b.T, q], axis=1),
  ])
  return linear_game(jacobian, jnp.stack([jnp.asarray(a, p.dtype),
                                          jnp.asarray(c_y, p.dtype)]))


def random_saddle_game(
    key: jax.Array, dim: int, *, l_xx: float, l_xy: float, mu: float,
    l_yy: float | None = None, dtype: jnp.dtype = jnp.float32,
) -> Game:
  r"""A quadratic game with controlled :math:`L_{xx}, L_{yy}, L_{xy}, \mu`.

  The game of our CPU-scale protocol (``docs/saddle_decoupled.md``):
  :math:`P = U \mathrm{diag}(\lambda) U^\top` with :math:`\lambda`
  log-spaced in :math:`[\mu, L_{xx}]`, :math:`Q` likewise up to
  :math:`L_{yy}` (default :math:`L_{xx}`), :math:`B = V \mathrm{diag}(s)
  W^\top` with :math:`s` uniform on :math:`[0, L_{xy}]` and rescaled so that
  :math:`\max s = L_{xy}`, standard normal linear terms; :math:`U, V, W`
  Haar-random.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_saddle_game(jax.random.key(0), 4, l_xx=10.0,
    ...                                  l_xy=1.0, mu=0.1)
    >>> game.self_smoothness.round(3).tolist(), round(float(game.coupling), 3)
    ([10.0, 10.0], 1.0)
  """
  _check_dim(dim)
  l_yy = l_xx if l_yy is None else l_yy
  for name, value in (("l_xx", l_xx), ("l_yy", l_yy), ("l_xy", l_xy),
                      ("mu", mu)):
    check_constant(name, value, strict=True)
  if not (mu <= l_xx and mu <= l_yy):
    raise ValueError(f"mu must be <= l_xx and l_yy, got mu={mu}.")
  p, b, q, linear = _random_saddle_blocks(key, dim, l_xx, l_yy, l_xy, mu,
                                         dtype=jnp.dtype(dtype))
  return saddle_game(p, b, q, linear[0], linear[1])


@functools.partial(jax.jit, static_argnums=(1,), static_argnames=("dtype",))
def _random_saddle_blocks(key, dim, l_xx, l_yy, l_xy, mu, *, dtype):
  keys = jax.random.split(key, 6)
  u, v, w, rot = (jax.random.orthogonal(k, dim, dtype=dtype) for k in keys[:4])
  spectrum_x = jnp.geomspace(mu, l_xx, dim, dtype=dtype)
  spectrum_y = jnp.geomspace(mu, l_yy, dim, dtype=dtype)
  p = (u * spectrum_x[None, :]) @ u.T
  q = (rot * spectrum_y[None, :]) @ rot.T
  s = jax.random.uniform(keys[4], (dim,), dtype)
  b = (v * (l_xy * s / jnp.max(s))[None, :]) @ w.T
  linear = jax.random.normal(keys[5], (2, dim), dtype)
  return (p + p.T) / 2, b, (q + q.T) / 2, linear


def random_bilinear_game(
    key: jax.Array, dim: int, *, l_xy: float = 1.0,
    min_singular_value: float = 0.1, dtype: jnp.dtype = jnp.float32,
) -> Game:
  r""":math:`f(x, y) = x^\top B y + a^\top x - b^\top y` (:math:`\mu = 0`).

  The singular values of :math:`B` are uniform on
  ``[min_singular_value, l_xy]`` with the extremes attained, so the unique
  solution :math:`(B^{-\top} b, -B^{-1} a)` exists.
  """
  _check_dim(dim)
  check_constant("l_xy", l_xy, strict=True)
  if not 0 < min_singular_value <= l_xy:
    raise ValueError(
        "need 0 < min_singular_value <= l_xy, got"
        f" {min_singular_value!r} and {l_xy!r}."
    )
  b, linear = _random_bilinear_blocks(key, dim, l_xy, min_singular_value,
                                      dtype=jnp.dtype(dtype))
  zeros = jnp.zeros((dim, dim), dtype)
  return saddle_game(zeros, b, zeros, linear[0], linear[1])


@functools.partial(jax.jit, static_argnums=(1,), static_argnames=("dtype",))
def _random_bilinear_blocks(key, dim, l_xy, min_singular_value, *, dtype):
  keys = jax.random.split(key, 4)
  v, w = (jax.random.orthogonal(k, dim, dtype=dtype) for k in keys[:2])
  s = jnp.sort(jax.random.uniform(keys[2], (dim,), dtype, min_singular_value,
                                  l_xy))
  s = s.at[0].set(min_singular_value).at[-1].set(l_xy)
  b = (v * s[None, :]) @ w.T
  return b, jax.random.normal(keys[3], (2, dim), dtype)


def random_monotone_game(
    key: jax.Array, num_players: int, dim: int, *, mu: float, l_self: float,
    l_cross: float, dtype: jnp.dtype = jnp.float32,
) -> Game:
  r"""An N-player general-sum quadratic game with a monotone Jacobian.

  :math:`A = S + K + E`: :math:`S` block diagonal with spectra log-spaced in
  :math:`[2\mu, L_{self}]`, :math:`K` skew-symmetric across blocks (the
  zero-sum part) with :math:`\|K\| = L_{cross}`, and :math:`E` symmetric
  across blocks with :math:`\|E\| = \mu` (the general-sum part), so that
  :math:`(A + A^\top)/2 \succeq \mu I`. The reported constants are the exact
  ones of the resulting :math:`A`.
  """
  if not isinstance(num_players, int) or num_players < 2:
    raise ValueError(f"num_players must be an int >= 2, got {num_players!r}.")
  _check_dim(dim)
  for name, value in (("mu", mu), ("l_self", l_self), ("l_cross", l_cross)):
    check_constant(name, value, strict=True)
  if not (0 < 2 * mu <= l_self and l_cross > 0):
    raise ValueError(
        "need 0 < 2 * mu <= l_self and l_cross > 0, got"
        f" mu={mu!r}, l_self={l_self!r}, l_cross={l_cross!r}."
    )
  jacobian, offset = _random_monotone_blocks(
      key, num_players, dim, mu, l_self, l_cross, dtype=jnp.dtype(dtype))
  return linear_game(jacobian, offset)


@functools.partial(jax.jit, static_argnums=(1, 2), static_argnames=("dtype",))
def _random_monotone_blocks(key, num_players, dim, mu, l_self, l_cross, *,
                            dtype):
  keys = jax.random.split(key, num_players + 3)
  spectrum = jnp.geomspace(2 * mu, l_self, dim, dtype=dtype)
  blocks = []
  for k in keys[:num_players]:
    u = jax.random.orthogonal(k, dim, dtype=dtype)
    blocks.append((u * spectrum[None, :]) @ u.T)
  size = num_players * dim
  off_diagonal = 1.0 - jax.scipy.linalg.block_diag(
      *[jnp.ones((dim, dim), dtype)] * num_players)
  skew = jax.random.normal(keys[-3], (size, size), dtype) * off_diagonal
  skew = skew - skew.T
  sym = jax.random.normal(keys[-2], (size, size), dtype) * off_diagonal
  sym = sym + sym.T
  matrix = (jax.scipy.linalg.block_diag(*[(m + m.T) / 2 for m in blocks])
            + skew * (l_cross / jnp.linalg.norm(skew, 2))
            + sym * (mu / jnp.linalg.norm(sym, 2)))
  jacobian = matrix.reshape(num_players, dim, num_players, dim)
  return jacobian, jax.random.normal(keys[-1], (num_players, dim), dtype)


def _check_dim(dim):
  if not isinstance(dim, int) or dim < 1:
    raise ValueError(f"dim must be a positive int (the block size), got"
                     f" {dim!r}.")


def _check_concrete(name, value, ok, message):
  try:
    concrete = float(value)
  except jax.errors.ConcretizationTypeError:
    return
  if not ok(concrete):
    raise ValueError(f"{name} {message} {concrete:.3g}.")
