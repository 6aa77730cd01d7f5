r"""Simultaneous gradient descent-ascent (GDA), the one-round baseline.

.. math::
  z_{k+1} = z_k - \gamma F(z_k):

every player takes a gradient step on its own block at the common point and
broadcasts the result: 1 round and 1 oracle call per player per step. For a
:math:`\mu`-strongly monotone, :math:`L`-Lipschitz :math:`F` it converges for
:math:`\gamma < 2\mu / L^2`; on bilinear games it diverges for every
:math:`\gamma > 0`.
"""

import jax

from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._network import ExchangesIterates
from jaxpapers.saddle._network import Player
from jaxpapers.saddle._network import register_method
from jaxpapers.saddle._network import ViewState


@register_method()
class GDA(ExchangesIterates):
  """Simultaneous GDA with step size ``step_size`` (see :func:`gda`)."""

  step_size: jax.typing.ArrayLike

  def step(self, player: Player, state: ViewState) -> ViewState:
    grad, counters = player.gradient(state.view, state.counters)
    block = state.view[player.index] - self.step_size * grad
    view, counters = player.exchange(block, counters)
    return ViewState(view, counters)


def gda(step_size: jax.typing.ArrayLike) -> GDA:
  """Simultaneous gradient descent-ascent.

  Args:
    step_size: :math:`\\gamma > 0`; :math:`\\mu / L^2` is safe on a
      :math:`\\mu`-strongly monotone game.

  Returns:
    A method for :func:`~jaxpapers.saddle.run`.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_saddle_game(jax.random.key(0), 4, l_xx=1.0,
    ...                                  l_xy=0.2, mu=0.5)
    >>> method = saddle.gda(step_size=0.5)
    >>> state, trace = saddle.run(method, game, saddle.init(method, game,
    ...                           game.zeros()), num_steps=100)
    >>> trace.rounds[:3].tolist(), trace.oracle_calls[:3, 0].tolist()
    ([1, 2, 3], [1, 2, 3])
  """
  check_constant("step_size", step_size, strict=True)
  return GDA(step_size)
