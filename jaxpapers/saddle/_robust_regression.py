r"""Robust linear regression against a shared feature shift, data split over nodes.

.. math::
  f(w, r) = \frac{1}{M} \sum_{m=1}^{M} f_m(w, r), \qquad
  f_m(w, r) = \frac{1}{2 n} \sum_{k=1}^{n}
      \big(w^\top (x_{mk} + r) - y_{mk}\big)^2
      + \frac{\lambda}{2}\|w\|^2 - \frac{\beta}{2}\|r\|^2,

:math:`\min_w \max_r f` (the robust regression of Beznosikov et al., 2021):
the regressor :math:`w` plays against an adversarial shift :math:`r` of all
features. :math:`f` is strongly convex in :math:`w` and concave in :math:`r`
where :math:`\beta > \|w\|^2`, so the game is monotone near its solution
when :math:`\beta` is large enough (checked at construction); its constants
are the local ones at the solution.

Two readings of "distributed" meet here:

* reading A (what the methods of :mod:`jaxpapers.saddle` run): players
  :math:`w` and :math:`r` own their blocks, and each holds all
  :math:`M` data shards;
* reading B (data split, similarity): node :math:`m` holds shard :math:`m`
  and can evaluate :func:`node_operator`; the full operator is the mean of
  the node operators. Methods for that reading can take the same
  :class:`RobustRegressionData`.

References:
  Beznosikov, Scutari, Rogozin & Gasnikov, `Distributed Saddle-Point
  Problems Under Similarity <https://arxiv.org/abs/2107.10706>`_, 2021.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers.saddle._game import estimate_constants
from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._game import Game
from jaxpapers.saddle._game import make_game
from jaxpapers.tree import gather_explicit


class RobustRegressionData(NamedTuple):
  """Data of the robust regression, with the player axis (size 2) first.

  Attributes:
    features: ``(2, M, n, d)``: M node shards of n examples each.
    targets: ``(2, M, n)``.
    sign: ``(2,)``, +1 for the regressor (minimises f), -1 for the shift.
    l2: ``(2,)`` :math:`\\lambda`.
    beta: ``(2,)`` :math:`\\beta`.
  """

  features: jax.Array
  targets: jax.Array
  sign: jax.Array
  l2: jax.Array
  beta: jax.Array


def _node_objective(features_nxd, targets_n, l2, beta, z_2xD):
  w, r = z_2xD[0], z_2xD[1]
  residual_n = (features_nxd + r[None, :]) @ w - targets_n
  return (0.5 * jnp.mean(residual_n**2) + 0.5 * l2 * jnp.sum(w**2)
          - 0.5 * beta * jnp.sum(r**2))


def objective(data_i: RobustRegressionData, z_2xD: jax.Array) -> jax.Array:
  """:math:`f(w, r)` from one player's copy of the data (no player axis)."""
  per_node = jax.vmap(_node_objective, in_axes=(0, 0, None, None, None))(
      data_i.features, data_i.targets, data_i.l2, data_i.beta, z_2xD)
  return jnp.mean(per_node)


def player_gradient(data_i: RobustRegressionData, index: jax.Array,
                    z_2xD: jax.Array) -> jax.Array:
  """:math:`\\nabla_w f` for the regressor, :math:`-\\nabla_r f` for the shift."""
  return data_i.sign * jax.grad(objective, argnums=1)(data_i, z_2xD)[index]


def node_operator(data: RobustRegressionData, node: int,
                  z_2xD: jax.Array) -> jax.Array:
  r"""Node ``node``'s operator :math:`F_m = (\nabla_w f_m, -\nabla_r f_m)` (reading B).

  ``node`` is a Python int in ``[0, M)``; ``z_2xD`` is ``(2, d)``.
  """
  num_nodes, dim = data.features.shape[1], data.features.shape[-1]
  if not isinstance(node, int) or not 0 <= node < num_nodes:
    raise ValueError(f"node must be an int in [0, {num_nodes}) (one of the M"
                     f" data shards), got {node!r}.")
  if tuple(jnp.shape(z_2xD)) != (2, dim):
    raise ValueError(f"z_2xD must have shape (2, {dim}), got"
                     f" {tuple(jnp.shape(z_2xD))}.")
  (data, z_2xD), _ = gather_explicit((data, z_2xD))  # as robust_regression
  own = jax.tree.map(lambda x: x[0], data)
  grad = jax.grad(_node_objective, argnums=4)(
      own.features[node], own.targets[node], own.l2, own.beta, z_2xD)
  return grad * data.sign[:, None]


def robust_regression(
    features_nxd: jax.Array, targets_n: jax.Array, *, num_nodes: int,
    l2: float = 0.1, beta: float = 1.0, newton_iters: int = 30,
) -> Game:
  """The two-player robust regression game, with its solution and local constants.

  Args:
    features_nxd: examples; the first ``num_nodes * (n // num_nodes)`` are
      used, split into ``num_nodes`` equal consecutive shards.
    targets_n: regression targets.
    num_nodes: M, the number of data shards (reading B).
    l2: :math:`\\lambda > 0`.
    beta: :math:`\\beta > 0`; too small a value makes the game non-monotone
      at its stationary point (a ``ValueError``).
    newton_iters: Newton steps on :math:`F(z) = 0` for the solution (>= 0).

  Returns:
    A :class:`~jaxpapers.saddle.Game` (player 0 is :math:`w`, player 1 is
    :math:`r`).

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> x = jax.random.normal(jax.random.key(0), (64, 3))
    >>> y = x @ jax.numpy.array([1.0, -1.0, 0.5])
    >>> game = saddle.robust_regression(x, y, num_nodes=4, beta=5.0)
    >>> float(saddle.residual_norm(game, game.solution)) < 1e-5
    True
  """
  # The shards are cut from whole arrays: Explicit shardings are gathered.
  (features_nxd, targets_n), _ = gather_explicit(
      (jnp.asarray(features_nxd), jnp.asarray(targets_n)))
  targets_n = targets_n.astype(features_nxd.dtype)
  if features_nxd.ndim != 2 or targets_n.shape != features_nxd.shape[:1]:
    raise ValueError(
        "features_nxd must be (n, d) and targets_n (n,), got"
        f" {features_nxd.shape} and {targets_n.shape}."
    )
  if not isinstance(num_nodes, int) or num_nodes < 1:
    raise ValueError(f"num_nodes must be a positive int, got {num_nodes!r}.")
  per_node = features_nxd.shape[0] // num_nodes
  if per_node == 0:
    raise ValueError(
        f"num_nodes={num_nodes} exceeds the {features_nxd.shape[0]} examples."
    )
  for name, value in (("l2", l2), ("beta", beta)):
    check_constant(name, value, strict=True)
  if not isinstance(newton_iters, int) or newton_iters < 0:
    raise ValueError(f"newton_iters must be an int >= 0, got {newton_iters!r}.")
  dim = features_nxd.shape[1]
  dtype = features_nxd.dtype
  used = num_nodes * per_node
  shards = features_nxd[:used].reshape(num_nodes, per_node, dim)
  shard_targets = targets_n[:used].reshape(num_nodes, per_node)
  data = RobustRegressionData(
      features=jnp.stack([shards, shards]),
      targets=jnp.stack([shard_targets, shard_targets]),
      sign=jnp.array([1.0, -1.0], dtype),
      l2=jnp.full((2,), l2, dtype),
      beta=jnp.full((2,), beta, dtype),
  )
  provisional = make_game(data, player_gradient, block_size=dim,
                          self_smoothness=0.0, coupling=1.0)
  solution, monotonicity, self_smoothness, coupling = _solve_and_measure(
      provisional, newton_iters)
  try:
    monotone = float(monotonicity) > 0
  except jax.errors.ConcretizationTypeError:
    monotone = True  # traced: the caller sees a negative monotonicity
  if not monotone:
    raise ValueError(
        f"beta={beta} is too small: the game is not monotone at its"
        f" stationary point (smallest eigenvalue {float(monotonicity):.3g});"
        " increase beta."
    )
  return make_game(data, player_gradient, block_size=dim,
                   self_smoothness=self_smoothness, coupling=coupling,
                   monotonicity=monotonicity, solution=solution)


@functools.partial(jax.jit, static_argnums=(1,))
def _solve_and_measure(game: Game, newton_iters: int):
  """Solution by Newton's method, then the local constants there."""
  solution = _newton(game, newton_iters)
  size = game.num_players * game.block_size
  jacobian = jax.jacfwd(game.operator)(solution).reshape(size, size)
  monotonicity = jnp.linalg.eigvalsh((jacobian + jacobian.T) / 2)[0]
  self_smoothness, coupling = estimate_constants(game, solution)
  return solution, monotonicity, self_smoothness, coupling


def _newton(game: Game, num_iters: int) -> jax.Array:
  size = game.num_players * game.block_size

  def newton_step(_, z):
    jacobian = jax.jacfwd(game.operator)(z).reshape(size, size)
    step = jnp.linalg.solve(jacobian, game.operator(z).reshape(-1))
    return z - step.reshape(z.shape)

  return jax.lax.fori_loop(0, num_iters, newton_step, game.zeros())
