r"""Extragradient (Korpelevich; Euclidean Mirror-Prox), the two-round baseline.

.. math::
  z_{k+1/2} = z_k - \gamma F(z_k), \qquad
  z_{k+1} = z_k - \gamma F(z_{k+1/2}):

2 rounds (the half step and the full step are both broadcast) and 2 oracle
calls per player per step. With :math:`\gamma = 1/L`,
:math:`L = \max(L_{xx}, L_{yy}) + L_{xy}`, it needs
:math:`O(L D^2 / \varepsilon)` of both on convex-concave problems and
:math:`O((L/\mu) \log(1/\varepsilon))` on :math:`\mu`-strongly monotone ones.

References:
  Korpelevich, `The extragradient method for finding saddle points and other
  problems <https://cir.nii.ac.jp/crid/1571980074449592064>`_, 1976.
"""

import jax

from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._network import ExchangesIterates
from jaxpapers.saddle._network import Player
from jaxpapers.saddle._network import register_method
from jaxpapers.saddle._network import ViewState


@register_method()
class Extragradient(ExchangesIterates):
  """Extragradient with step size ``step_size`` (see :func:`extragradient`)."""

  step_size: jax.typing.ArrayLike

  def step(self, player: Player, state: ViewState) -> ViewState:
    own = state.view[player.index]
    grad, counters = player.gradient(state.view, state.counters)
    half_view, counters = player.exchange(own - self.step_size * grad, counters)
    grad, counters = player.gradient(half_view, counters)
    view, counters = player.exchange(own - self.step_size * grad, counters)
    return ViewState(view, counters)


def extragradient(step_size: jax.typing.ArrayLike) -> Extragradient:
  """Extragradient.

  Args:
    step_size: :math:`\\gamma \\in (0, 1/L]`.

  Returns:
    A method for :func:`~jaxpapers.saddle.run`.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_bilinear_game(jax.random.key(0), 4)
    >>> method = saddle.extragradient(step_size=0.5)
    >>> state, trace = saddle.run(method, game, saddle.init(method, game,
    ...                           game.zeros()), num_steps=100)
    >>> trace.rounds[:3].tolist(), trace.oracle_calls[:3, 0].tolist()
    ([2, 4, 6], [2, 4, 6])
  """
  check_constant("step_size", step_size, strict=True)
  return Extragradient(step_size)
