"""The baselines with their textbook step sizes.

With :math:`L = \\max_i L_{ii} + L_{xy}`
(:func:`~jaxpapers.saddle.lipschitz_bound`) and :math:`\\mu` the game's
strong monotonicity: Extragradient takes :math:`1/L` (Korpelevich, "The
extragradient method for finding saddle points and other problems", 1976),
optimistic GDA :math:`1/(2L)` (Popov, "A modification of the Arrow-Hurwicz
method for search of saddle points", 1980) and simultaneous GDA
:math:`\\mu/L^2`, the classical safe step on a strongly monotone game.
"""

from jaxpapers.saddle._execution import Method
from jaxpapers.saddle._extragradient import extragradient
from jaxpapers.saddle._game import Game
from jaxpapers.saddle._game import lipschitz_bound
from jaxpapers.saddle._gda import gda
from jaxpapers.saddle._optimistic import optimistic_gda

BASELINE_NAMES = ("gda", "extragradient", "optimistic_gda")


def textbook_baseline(name: str, game: Game,
                      step_multiplier: float = 1.0) -> Method:
  """``name``'s method with its textbook step size times ``step_multiplier``.

  Args:
    name: one of :data:`BASELINE_NAMES`.
    game: the game whose constants set the step size.
    step_multiplier: scales the textbook step (e.g. for a step-size sweep).

  Returns:
    A method for :func:`~jaxpapers.saddle.run`.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_saddle_game(jax.random.key(0), 4, l_xx=2.0,
    ...                                  l_xy=1.0, mu=0.5)
    >>> method = saddle.textbook_baseline("optimistic_gda", game)
    >>> round(method.step_size * float(saddle.lipschitz_bound(game)), 6)
    0.5
  """
  lipschitz = float(lipschitz_bound(game))
  if name == "extragradient":
    return extragradient(step_multiplier / lipschitz)
  if name == "optimistic_gda":
    return optimistic_gda(step_multiplier * 0.5 / lipschitz)
  if name == "gda":
    return gda(step_multiplier * float(game.monotonicity) / lipschitz**2)
  raise ValueError(f"unknown baseline {name!r}; known: {BASELINE_NAMES}.")
