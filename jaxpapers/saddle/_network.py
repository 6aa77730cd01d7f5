"""What one player can do: call its oracle, exchange blocks, all-reduce scalars.

Methods are written as the program of a single player (see
:mod:`jaxpapers.saddle._execution`) and reach the other players only through
:meth:`Player.exchange` and :meth:`Player.all_reduce`, each of which is
exactly one collective over the player axis (``lax.all_gather``,
``lax.psum``) and returns the counters advanced by one. The communication
count is therefore the number of collectives the player executed: there is
no separate tally that could drift from the traffic. Likewise every call of
the player's own gradient goes through :meth:`Player.gradient`, which
advances the oracle counter.
"""

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers.saddle._game import PlayerGradientFn

PLAYER_AXIS = "players"


def player_sum(x: jax.Array) -> jax.Array:
  """Sum of ``x`` over the players, as the all-reduce of the player programs.

  Written as a sum of the all-gathered values rather than ``lax.psum``:
  jax 0.12 batches a psum over the vmapped players (the one-device path)
  under an Explicit mesh into a value whose sharding has one axis too many.
  On one device both are the same sum over the player axis.
  """
  return jnp.sum(jax.lax.all_gather(x, PLAYER_AXIS), axis=0)


class Counters(NamedTuple):
  """Per-player costs so far (int32 scalars).

  Attributes:
    rounds: communication rounds, one per block exchange (all-gather); a
      method may also count its scalar all-reduces as rounds (see
      ``count_scalar_allreduce`` of the Decoupled Method).
    scalar_allreduces: all-reduces of a few scalars (stopping tests).
    oracle_calls: evaluations of this player's own gradient.
  """

  rounds: jax.Array
  scalar_allreduces: jax.Array
  oracle_calls: jax.Array


def zero_counters() -> Counters:
  zero = jnp.zeros((), jnp.int32)
  return Counters(zero, zero, zero)


class Player(NamedTuple):
  """Player ``index``'s view of the game inside the per-player program.

  Attributes:
    index: this player's position on the player axis (traced int32).
    data: this player's slice of ``game.player_data``.
    self_smoothness: this player's :math:`L_{ii}`.
    coupling: :math:`L_{xy}` (the same for every player).
    monotonicity: :math:`\\mu` (the same for every player).
    player_gradient: the game's static gradient function.
  """

  index: jax.Array
  data: Any
  self_smoothness: jax.Array
  coupling: jax.Array
  monotonicity: jax.Array
  player_gradient: PlayerGradientFn

  def gradient(self, view_NxD: jax.Array,
               counters: Counters) -> tuple[jax.Array, Counters]:
    """This player's own gradient at ``view_NxD``: one oracle call."""
    grad = self.player_gradient(self.data, self.index, view_NxD)
    return grad, counters._replace(oracle_calls=counters.oracle_calls + 1)

  def exchange(self, block_D: jax.Array,
               counters: Counters) -> tuple[jax.Array, Counters]:
    """Broadcasts this player's block; returns every player's (one round)."""
    view_NxD = jax.lax.all_gather(block_D, PLAYER_AXIS)
    return view_NxD, counters._replace(rounds=counters.rounds + 1)

  def all_reduce(self, scalars: jax.Array, counters: Counters, *,
                 counts_as_round: bool) -> tuple[jax.Array, Counters]:
    """Sums a few scalars over players (one all-reduce)."""
    total = player_sum(scalars)
    counters = counters._replace(
        scalar_allreduces=counters.scalar_allreduces + 1,
        rounds=counters.rounds + int(counts_as_round),
    )
    return total, counters

  def with_own_block(self, view_NxD: jax.Array, block_D: jax.Array) -> jax.Array:
    """``view_NxD`` with this player's row replaced (a local operation)."""
    return view_NxD.at[self.index].set(block_D)


class ViewState(NamedTuple):
  """State of a method whose iterate is the blocks of the last exchange."""

  view: jax.Array  # (N, D); the own row is the own current block
  counters: Counters


class ExchangesIterates:
  """Base of methods that broadcast every new iterate (GDA, EG, OGDA).

  Every player starts knowing ``z0`` and its current block is its row of
  the last exchange.
  """

  def init(self, player: Player, z0_NxD: jax.Array) -> ViewState:
    del player
    return ViewState(z0_NxD, zero_counters())

  def iterate(self, player: Player, state: Any) -> jax.Array:
    return state.view[player.index]


def register_method(*, meta_fields: tuple[str, ...] = ()):
  """Class decorator: a frozen dataclass of hyperparameters as a pytree.

  Fields in ``meta_fields`` are static; the others are leaves, so that step
  sizes can be traced. Unlike ``jax.tree_util.register_dataclass`` (whose
  treedefs of two classes with the same fields compare equal in jax 0.10.2,
  which let a jit cache hand one method's compiled program to another), the
  node type is part of the treedef here.
  """

  def register(cls):
    cls = dataclasses.dataclass(frozen=True)(cls)
    data_fields = [f.name for f in dataclasses.fields(cls)
                   if f.name not in meta_fields]

    def flatten(method):
      return ([getattr(method, name) for name in data_fields],
              tuple(getattr(method, name) for name in meta_fields))

    def unflatten(meta, leaves):
      return cls(**dict(zip(data_fields, leaves)),
                 **dict(zip(meta_fields, meta)))

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    return cls

  return register
