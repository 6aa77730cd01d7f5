r"""Optimistic GDA (Popov's past extragradient), the one-round extragradient.

.. math::
  z_{k+1} = z_k - \gamma \big(2 F(z_k) - F(z_{k-1})\big),
  \qquad F(z_{-1}) := F(z_0):

1 round and 1 oracle call per player per step, EG's rates with
:math:`\gamma \le 1/(2L)`. Each player's block update is
``optax.optimistic_gradient_descent(step_size, alpha=1, beta=1)`` applied to
its own gradient.

References:
  Popov, `A modification of the Arrow-Hurwicz method for search of saddle
  points <https://doi.org/10.1007/BF01141092>`_, 1980.
  Mokhtari et al, `A Unified Analysis of Extra-gradient and Optimistic
  Gradient Methods for Saddle Point Problems: Proximal Point Approach
  <https://arxiv.org/abs/1901.08511>`_, 2020.
"""

from typing import Any, NamedTuple

import jax
import optax

from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._network import Counters
from jaxpapers.saddle._network import ExchangesIterates
from jaxpapers.saddle._network import Player
from jaxpapers.saddle._network import register_method
from jaxpapers.saddle._network import zero_counters


class OptimisticState(NamedTuple):
  view: jax.Array  # (N, D) every player's block after the last exchange
  optimizer_state: Any  # optax state of the player's own block
  counters: Counters


@register_method()
class OptimisticGDA(ExchangesIterates):
  """Optimistic GDA with step size ``step_size`` (see :func:`optimistic_gda`)."""

  step_size: jax.typing.ArrayLike

  def _optimizer(self) -> optax.GradientTransformation:
    return optax.optimistic_gradient_descent(self.step_size, alpha=1.0,
                                             beta=1.0)

  def init(self, player: Player, z0_NxD: jax.Array) -> OptimisticState:
    optimizer_state = self._optimizer().init(z0_NxD[player.index])
    return OptimisticState(z0_NxD, optimizer_state, zero_counters())

  def step(self, player: Player, state: OptimisticState) -> OptimisticState:
    own = state.view[player.index]
    grad, counters = player.gradient(state.view, state.counters)
    update, optimizer_state = self._optimizer().update(
        grad, state.optimizer_state)
    view, counters = player.exchange(optax.apply_updates(own, update), counters)
    return OptimisticState(view, optimizer_state, counters)


def optimistic_gda(step_size: jax.typing.ArrayLike) -> OptimisticGDA:
  """Optimistic gradient descent-ascent (Popov).

  Args:
    step_size: :math:`\\gamma \\in (0, 1/(2L)]`.

  Returns:
    A method for :func:`~jaxpapers.saddle.run`.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_bilinear_game(jax.random.key(1), 4)
    >>> step_size = 0.5 / float(saddle.lipschitz_bound(game))
    >>> method = saddle.optimistic_gda(step_size)
    >>> state = saddle.init(method, game, game.zeros())
    >>> state, trace = saddle.run(method, game, state, num_steps=100)
    >>> trace.rounds[-1].tolist()  # one exchange per step
    100
  """
  check_constant("step_size", step_size, strict=True)
  return OptimisticGDA(step_size)
