r"""The Decoupled Method for distributed saddle problems (DM-SP) and VIPs (DM-VIP).

**Reconstruction.** Only the abstract of Luo, Rodomanov & Stich (2026) was
available. It says that the method reduces the saddle problem, through a
multi-stage reduction, to a sequence of *decoupled minimisations of residual
norms*, matches the communication lower bound and improves on
Extragradient's oracle cost. Everything below (the outer loop, the Jacobi
rounds, the local solver, the stopping tests and every default) is our
reconstruction (``docs/saddle_decoupled.md``; players own their blocks and a
round exchanges the blocks), not the paper's algorithm, and the rates quoted
are our reconstructed rates, not the paper's.

**Outer loop: hybrid proximal extragradient (HPE) on F.** Stage :math:`k`
finds :math:`\hat z \approx (I + \eta F)^{-1} z_k`, accepted once

.. math::
  \|e\| \le \sigma \|\hat z - z_k\|, \qquad e = \hat z - z_k + \eta F(\hat z),

and then takes the extragradient correction
:math:`z_{k+1} = z_k - \eta F(\hat z)` (local: each player needs only its own
:math:`z_{k,i}` and :math:`F_i(\hat z)`).

**Jacobi rounds (the decoupling).** Within a stage, every player in parallel
and without communication solves its own strongly convex problem against its
latest copies :math:`\hat z_{-i}` of the other blocks,

.. math::
  \hat z_i \leftarrow \arg\min_w\ f_i(w, \hat z_{-i})
      + \frac{1}{2\eta}\|w - z_{k,i}\|^2,

then the blocks are exchanged (1 round), every player evaluates its own
:math:`F_i(\hat z)` (1 oracle call) and the two squared norms of the HPE test
are summed by one scalar all-reduce. With :math:`\eta L_{xy} < 1` the rounds
contract with factor :math:`\le \eta L_{xy}` (1/2 at the default
:math:`\eta = 1/(2 L_{xy})`), so a stage needs :math:`O(\log(1/\sigma))`
rounds whatever :math:`L_{xx}`.

**Local solver.** Nesterov's accelerated gradient for the subproblem
:math:`\varphi` (modulus :math:`1/\eta`, smoothness
:math:`L_{ii} + 1/\eta`, step :math:`1/(L_{ii} + 1/\eta)`, momentum
:math:`(\sqrt\kappa - 1)/(\sqrt\kappa + 1)`, :math:`\kappa = 1 + \eta
L_{ii}`), warm-started at the previous :math:`\hat z_i`, stopped at the first
tested point with :math:`\|\nabla\varphi(w)\| \le \tau \max(\|w -
z_{k,i}\|/\eta, 10^{-12})` or after ``max_local_iters`` gradients. Every
:math:`\nabla\varphi` is one oracle call; no collective runs inside.

Reconstructed costs (ours, to be checked empirically): rounds
:math:`\tilde O(L_{xy} D^2/\varepsilon)`, oracle calls
:math:`\tilde O((L_{xy} + \sqrt{L_{xy} L_{xx}}) D^2/\varepsilon)`; on a
:math:`\mu`-strongly monotone game the same loop converges linearly, in
:math:`\tilde O(L_{xy}/\mu)` rounds.

References:
  Luo, Rodomanov & Stich, `Efficient Gradient Methods for Distributed Saddle
  Problems <https://arxiv.org/abs/2605.18604>`_, 2026 (abstract only).
  Solodov & Svaiter, `A hybrid approximate extragradient-proximal point
  algorithm using the enlargement of a maximal monotone operator
  <https://doi.org/10.1023/A:1008777829180>`_, 1999.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._network import Counters
from jaxpapers.saddle._network import Player
from jaxpapers.saddle._network import register_method
from jaxpapers.saddle._network import zero_counters


class DecoupledState(NamedTuple):
  """One player's state of the Decoupled Method.

  Attributes:
    iterate: ``(D,)`` own block of :math:`z_k` (the prox centre).
    view: ``(N, D)`` the blocks of the last exchange (the other players'
      latest :math:`\\hat z_j`; the own row is the own last :math:`\\hat z_i`).
    prox_point_sum: ``(D,)`` sum of the own accepted :math:`\\hat z_i` (the
      ergodic average is this over ``num_stages``).
    num_stages: stages done.
    jacobi_rounds: rounds used by the last stage.
    accepted: whether the last stage passed the HPE test (else it stopped at
      ``max_jacobi_rounds``).
    counters: rounds, scalar all-reduces and own oracle calls.
  """

  iterate: jax.Array
  view: jax.Array
  prox_point_sum: jax.Array
  num_stages: jax.Array
  jacobi_rounds: jax.Array
  accepted: jax.Array
  counters: Counters


@register_method(meta_fields=("max_jacobi_rounds", "max_local_iters",
                             "count_scalar_allreduce", "num_players"))
class DecoupledMethod:
  """The Decoupled Method (reconstruction); built by :func:`dm_sp`, :func:`dm_vip`."""

  eta: jax.typing.ArrayLike | None
  sigma: jax.typing.ArrayLike
  tau: jax.typing.ArrayLike
  max_jacobi_rounds: int
  max_local_iters: int
  count_scalar_allreduce: bool
  num_players: int | None

  def _eta(self, player: Player) -> jax.Array:
    return 0.5 / player.coupling if self.eta is None else self.eta

  def init(self, player: Player, z0_NxD: jax.Array) -> DecoupledState:
    if self.num_players is not None and z0_NxD.shape[0] != self.num_players:
      raise ValueError(
          f"dm_sp is the two-player method but the game has {z0_NxD.shape[0]}"
          " players; use dm_vip for N-player games."
      )
    own = z0_NxD[player.index]
    zero = jnp.zeros((), jnp.int32)
    return DecoupledState(own, z0_NxD, jnp.zeros_like(own), zero, zero,
                          jnp.ones((), bool), zero_counters())

  def step(self, player: Player, state: DecoupledState) -> DecoupledState:
    """One HPE stage: Jacobi rounds until the HPE test, then the correction."""
    eta = self._eta(player)
    centre = state.iterate

    def keep_going(carry):
      rounds, _, _, _, accepted, _ = carry
      return (rounds < self.max_jacobi_rounds) & ~accepted

    def jacobi_round(carry):
      rounds, own, view, _, _, counters = carry
      own, counters = self._local_prox(player, view, centre, own, eta,
                                       counters)
      view, counters = player.exchange(own, counters)
      grad, counters = player.gradient(view, counters)
      error = own - centre + eta * grad
      sums, counters = player.all_reduce(
          jnp.stack([jnp.sum(error**2), jnp.sum((own - centre) ** 2)]),
          counters, counts_as_round=self.count_scalar_allreduce)
      accepted = sums[0] <= self.sigma**2 * sums[1]
      return rounds + 1, own, view, grad, accepted, counters

    zero = jnp.zeros((), jnp.int32)
    rounds, prox_point, view, grad, accepted, counters = jax.lax.while_loop(
        keep_going, jacobi_round,
        (zero, centre, state.view, jnp.zeros_like(centre), jnp.zeros((), bool),
         state.counters))
    return DecoupledState(
        iterate=centre - eta * grad,
        view=view,
        prox_point_sum=state.prox_point_sum + prox_point,
        num_stages=state.num_stages + 1,
        jacobi_rounds=rounds,
        accepted=accepted,
        counters=counters,
    )

  def _local_prox(self, player, view_NxD, centre, warm_start, eta, counters):
    """AGD on phi(w) = f_i(w, view_{-i}) + |w - centre|^2 / (2 eta)."""
    smoothness = player.self_smoothness + 1.0 / eta
    sqrt_kappa = jnp.sqrt(1.0 + eta * player.self_smoothness)
    momentum = (sqrt_kappa - 1.0) / (sqrt_kappa + 1.0)

    def keep_going(carry):
      t, _, _, done, _ = carry
      return (t < self.max_local_iters) & ~done

    def agd_step(carry):
      t, x, y, _, counters = carry
      grad, counters = player.gradient(player.with_own_block(view_NxD, y),
                                       counters)
      grad = grad + (y - centre) / eta
      threshold = self.tau * jnp.maximum(jnp.linalg.norm(y - centre) / eta,
                                         1e-12)
      done = jnp.linalg.norm(grad) <= threshold
      x_next = y - grad / smoothness
      y_next = x_next + momentum * (x_next - x)
      # A converged solve returns the point it tested, unchanged.
      return (t + 1, jnp.where(done, x, x_next), jnp.where(done, y, y_next),
              done, counters)

    _, _, solution, _, counters = jax.lax.while_loop(
        keep_going, agd_step,
        (jnp.zeros((), jnp.int32), warm_start, warm_start, jnp.zeros((), bool),
         counters))
    return solution, counters

  def iterate(self, player: Player, state: DecoupledState) -> jax.Array:
    del player
    return state.iterate


def ergodic_average(state: DecoupledState) -> jax.Array:
  """Average of the accepted prox points :math:`\\hat z_k` (gap decays as 1/k).

  Args:
    state: the stacked state returned by :func:`~jaxpapers.saddle.run`.

  Returns:
    ``(N, D)``.
  """
  if not isinstance(state, DecoupledState):
    raise TypeError(
        "state must be the DecoupledState of dm_sp or dm_vip (the other"
        f" methods keep no prox points), got {type(state).__name__}.")
  stages = jnp.maximum(state.num_stages, 1).astype(state.prox_point_sum.dtype)
  return state.prox_point_sum / stages[..., None]


def _decoupled(num_players, eta, sigma, tau, max_jacobi_rounds,
               max_local_iters, count_scalar_allreduce):
  if eta is not None:
    check_constant("eta", eta, strict=True)
  check_constant("sigma", sigma, strict=True, below=1.0)
  check_constant("tau", tau, strict=True)
  for name, value in (("max_jacobi_rounds", max_jacobi_rounds),
                      ("max_local_iters", max_local_iters)):
    if not isinstance(value, int) or value < 1:
      raise ValueError(f"{name} must be a positive int, got {value!r}.")
  return DecoupledMethod(eta, sigma, tau, max_jacobi_rounds, max_local_iters,
                         bool(count_scalar_allreduce), num_players)


def dm_vip(
    *, eta: jax.typing.ArrayLike | None = None,
    sigma: jax.typing.ArrayLike = 0.5, tau: jax.typing.ArrayLike = 0.1,
    max_jacobi_rounds: int = 20, max_local_iters: int = 500,
    count_scalar_allreduce: bool = False,
) -> DecoupledMethod:
  """The Decoupled Method for N-player monotone games (DM-VIP; reconstruction).

  Args:
    eta: prox step :math:`\\eta`; None uses :math:`1/(2 L_{xy})` from the
      game's ``coupling``.
    sigma: HPE tolerance :math:`\\sigma \\in (0, 1)`.
    tau: relative tolerance :math:`\\tau` of the local solves.
    max_jacobi_rounds: rounds per stage before a stage is closed unaccepted.
    max_local_iters: gradient budget of one local solve.
    count_scalar_allreduce: also count the HPE test's scalar all-reduce as a
      communication round (it is always counted in ``scalar_allreduces``).

  Returns:
    A method for :func:`~jaxpapers.saddle.run`; the player's step is one HPE
    stage.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_monotone_game(jax.random.key(0), 3, 4, mu=0.1,
    ...                                    l_self=10.0, l_cross=1.0)
    >>> method = saddle.dm_vip()
    >>> state, trace = saddle.run(method, game, saddle.init(method, game,
    ...                           game.zeros()), num_steps=100,
    ...                           stop_residual=1e-3)
    >>> float(saddle.distance_to_solution(game, state.iterate)) < 1e-2
    True
  """
  return _decoupled(None, eta, sigma, tau, max_jacobi_rounds, max_local_iters,
                    count_scalar_allreduce)


def dm_sp(
    *, eta: jax.typing.ArrayLike | None = None,
    sigma: jax.typing.ArrayLike = 0.5, tau: jax.typing.ArrayLike = 0.1,
    max_jacobi_rounds: int = 20, max_local_iters: int = 500,
    count_scalar_allreduce: bool = False,
) -> DecoupledMethod:
  """The Decoupled Method for saddle problems (DM-SP; reconstruction).

  :func:`dm_vip` for the two players :math:`f_1 = f`, :math:`f_2 = -f`
  (player :math:`y`'s local problem is the maximisation of
  :math:`f(\\hat x, y) - \\|y - y_k\\|^2/(2\\eta)`); a game with another
  number of players is a ``ValueError``. Arguments as in :func:`dm_vip`.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_saddle_game(jax.random.key(0), 4, l_xx=100.0,
    ...                                  l_xy=1.0, mu=0.1)
    >>> method = saddle.dm_sp()
    >>> state, trace = saddle.run(method, game, saddle.init(method, game,
    ...                           game.zeros()), num_steps=100,
    ...                           stop_residual=1e-3)
    >>> float(saddle.residual_norm(game, state.iterate)) <= 1e-3
    True
    >>> stages = int(trace.num_steps_taken)  # one round per stage here
    >>> bool(trace.rounds[stages - 1] == stages)
    True
  """
  return _decoupled(2, eta, sigma, tau, max_jacobi_rounds, max_local_iters,
                    count_scalar_allreduce)
