"""Running a method: every player on its own device, or all on one.

A method is the program of one player (see :mod:`jaxpapers.saddle._network`).
:func:`run` executes that program for all players at once, either

* with ``mesh=None``: ``jax.vmap`` with a named player axis on one device
  (the collectives become cheap in-memory operations), or
* with a ``jax.make_mesh`` whose ``"players"`` axis has one device per
  player: ``jax.shard_map``, so that each player's data, state and local
  minimisations live on its own device and every exchange is a real
  collective (across processes under ``jax.distributed``).

Both paths run the same per-player code, so they agree up to the float
rounding of batched versus unbatched kernels.

Monitoring is not part of the algorithm: after every step, :func:`run`
gathers the players' current iterates, evaluates :math:`\\|F\\|` there and
stops once it is at most ``stop_residual``. That observer's collectives and
gradient evaluations are not counted (a deployment would stop after a fixed
budget, or pay one scalar all-reduce per test).
"""

import functools
import math
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.saddle._game import check_blocks
from jaxpapers.saddle._game import check_constant
from jaxpapers.saddle._game import Game
from jaxpapers.saddle._network import Counters
from jaxpapers.saddle._network import Player
from jaxpapers.saddle._network import PLAYER_AXIS
from jaxpapers.saddle._network import player_sum
from jaxpapers.tree import gather_explicit

State = Any


class Method(Protocol):
  """A distributed method, written as one player's program."""

  def init(self, player: Player, z0_NxD: jax.Array) -> State:
    """Player's initial state; every player starts knowing ``z0`` (no round)."""

  def step(self, player: Player, state: State) -> State:
    """One iteration (one HPE stage for the Decoupled Method)."""

  def iterate(self, player: Player, state: State) -> jax.Array:
    """The player's current block :math:`z_i` (the one monitored)."""


class Trace(NamedTuple):
  """Per-step record of :func:`run` (T = ``num_steps``).

  Entries past ``num_steps_taken`` hold NaN and -1.

  Attributes:
    residual: ``(T,)`` :math:`\\|F(z_t)\\|` after each step.
    rounds: ``(T,)`` communication rounds after each step (every player
      takes part in every round, so they all count the same).
    scalar_allreduces: ``(T,)`` scalar all-reduces after each step.
    oracle_calls: ``(T, N)`` each player's oracle calls after each step.
    num_steps_taken: steps executed by this call.
  """

  residual: jax.Array
  rounds: jax.Array
  scalar_allreduces: jax.Array
  oracle_calls: jax.Array
  num_steps_taken: jax.Array


def init(method: Method, game: Game, z0_NxD: jax.Array,
         mesh: jax.sharding.Mesh | None = None) -> State:
  """Every player's initial state, stacked on the player axis.

  Args:
    method: e.g. :func:`~jaxpapers.saddle.extragradient` or
      :func:`~jaxpapers.saddle.dm_sp`.
    game: the game.
    z0_NxD: the common starting point.
    mesh: None (one device) or a mesh with a ``"players"`` axis of size N.

  Returns:
    The state pytree, every leaf with the player axis first (sharded over
    ``mesh`` when given).
  """
  check_blocks(game, z0_NxD, "z0")
  _check_mesh(game, mesh)
  z0_NxD = jnp.asarray(z0_NxD, game.dtype)
  method, game, z0_NxD = _on_one_device(mesh, method, game, z0_NxD)
  return _init(method, _without_solution(game), z0_NxD, mesh)


def run(
    method: Method,
    game: Game,
    state: State,
    *,
    num_steps: int,
    stop_residual: float = 0.0,
    max_residual: float = math.inf,
    step_limit: int | None = None,
    mesh: jax.sharding.Mesh | None = None,
) -> tuple[State, Trace]:
  """Runs up to ``num_steps`` steps of ``method`` from ``state``.

  Stops early once :math:`\\|F\\| \\le` ``stop_residual`` (converged), or
  once it exceeds ``max_residual`` or is not finite (diverged); the residual
  at ``state`` is tested first, so a converged state takes no step. Call it
  again with the returned state to continue (chunked runs, checkpoints).

  Args:
    method: the method (its numeric fields may be traced).
    game: the game.
    state: from :func:`init` or a previous :func:`run`.
    num_steps: maximum number of steps (static: the length of the trace).
    stop_residual: absolute tolerance on :math:`\\|F\\|` (>= 0).
    max_residual: divergence threshold on :math:`\\|F\\|` (> 0).
    step_limit: at most this many steps (>= 0; a limit above ``num_steps``
      runs ``num_steps``); traced, so a varying limit does not recompile.
      None means ``num_steps``.
    mesh: None (one device, ``vmap``) or a mesh with a ``"players"`` axis
      with one device per player (``shard_map``).

  Returns:
    ``(state, trace)``.

  Example:
    >>> import jax
    >>> from jaxpapers import saddle
    >>> game = saddle.random_saddle_game(jax.random.key(0), 4, l_xx=2.0,
    ...                                  l_xy=1.0, mu=0.5)
    >>> method = saddle.extragradient(step_size=1 / 3)
    >>> state = saddle.init(method, game, game.zeros())
    >>> state, trace = saddle.run(method, game, state, num_steps=100,
    ...                           stop_residual=1e-4)
    >>> bool(trace.residual[int(trace.num_steps_taken) - 1] <= 1e-4)
    True
    >>> trace.rounds[:3].tolist()  # two exchanges per EG step
    [2, 4, 6]
  """
  if (not isinstance(num_steps, (int, np.integer))
      or isinstance(num_steps, bool) or num_steps < 1):
    raise ValueError(f"num_steps must be a positive int, got {num_steps!r}.")
  _check_mesh(game, mesh)
  check_constant("stop_residual", stop_residual, strict=False)
  check_constant("max_residual", max_residual, strict=True, finite=False)
  step_limit = num_steps if step_limit is None else step_limit
  check_constant("step_limit", step_limit, strict=False, integer=True)
  method, game, state = _on_one_device(mesh, method, game, state)
  return _run(method, _without_solution(game), state,
              jnp.asarray(stop_residual, game.dtype),
              jnp.asarray(max_residual, game.dtype),
              jnp.asarray(step_limit, jnp.int32), num_steps=num_steps,
              mesh=mesh)


def _on_one_device(mesh: jax.sharding.Mesh | None,
                   *trees: Any) -> tuple[Any, ...]:
  """``trees`` with Explicit-sharded leaves gathered when ``mesh`` is None.

  The one-device path vmaps over the player axis, which needs every input's
  player axis laid out alike; inputs sharded along an Explicit axis of the
  ambient mesh (``jax.set_mesh``) are therefore used whole there.
  """
  if mesh is not None:
    return trees
  return gather_explicit(trees)[0]


def _without_solution(game: Game) -> Game:
  # The solution is the experimenter's knowledge, not a player's.
  return Game(game.player_data, game.self_smoothness, game.coupling,
              game.monotonicity, None, game.player_gradient, game.block_size)


def _check_mesh(game: Game, mesh: jax.sharding.Mesh | None) -> None:
  if mesh is None:
    return
  if PLAYER_AXIS not in mesh.shape:
    raise ValueError(
        f"mesh must have an axis named {PLAYER_AXIS!r}, got axes"
        f" {tuple(mesh.shape)}."
    )
  if mesh.shape[PLAYER_AXIS] != game.num_players:
    raise ValueError(
        f"the game has {game.num_players} players but the mesh axis"
        f" {PLAYER_AXIS!r} has {mesh.shape[PLAYER_AXIS]} devices: each player"
        " needs its own device."
    )
  if len(mesh.shape) != 1:
    raise ValueError(
        f"mesh must have the single axis {PLAYER_AXIS!r}, got {dict(mesh.shape)}."
    )


def _player(game: Game, data_i, self_smoothness_i) -> Player:
  return Player(jax.lax.axis_index(PLAYER_AXIS), data_i, self_smoothness_i,
                game.coupling, game.monotonicity, game.player_gradient)


def _for_every_player(fn, mesh, player_args, shared_args, *,
                      replicated_outputs=False):
  """Runs ``fn(*player_args_i, *shared_args)`` as one program per player.

  ``player_args`` have the player axis first (split over players);
  ``shared_args`` are the same for every player. ``fn`` returns a per-player
  output, or with ``replicated_outputs`` a pair ``(per_player, replicated)``
  whose second part is the same on every player (it comes from collectives)
  and is returned once, without a player axis.
  """
  if mesh is None:
    in_axes = (0,) * len(player_args) + (None,) * len(shared_args)
    out = jax.vmap(fn, in_axes=in_axes, axis_name=PLAYER_AXIS)(
        *player_args, *shared_args)
    if replicated_outputs:
      per_player, replicated = out
      return per_player, jax.tree.map(lambda x: x[0], replicated)
    return out

  def local(*args):
    own = jax.tree.map(lambda x: x[0], args[:len(player_args)])
    out = fn(*own, *args[len(player_args):])
    if replicated_outputs:
      per_player, replicated = out
      return jax.tree.map(lambda x: x[None], per_player), replicated
    return jax.tree.map(lambda x: x[None], out)

  specs = ((jax.P(PLAYER_AXIS),) * len(player_args)
           + (jax.P(),) * len(shared_args))
  # Explicit mesh axes: lay the inputs out as their PartitionSpecs say first.
  args = tuple(
      jax.tree.map(lambda x, s=spec: jax.reshard(x, jax.NamedSharding(mesh, s)),
                   arg)
      for arg, spec in zip((*player_args, *shared_args), specs))
  out_specs = ((jax.P(PLAYER_AXIS), jax.P()) if replicated_outputs
               else jax.P(PLAYER_AXIS))
  # check_vma=False: loop carries start as player-independent constants and
  # become player-dependent; the same code also runs under vmap, so it is
  # written without pcast annotations.
  return jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=out_specs,
                       check_vma=False)(*args)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _init(method, game, z0_NxD, mesh):
  def per_player(data_i, l_ii, method, game, z0_NxD):
    return method.init(_player(game, data_i, l_ii), z0_NxD)

  return _for_every_player(per_player, mesh,
                           (game.player_data, game.self_smoothness),
                           (method, _shared(game), z0_NxD))


def _shared(game: Game) -> Game:
  """The game without its per-player leaves (they travel split)."""
  return Game(None, None, game.coupling, game.monotonicity, None,
              game.player_gradient, game.block_size)


class _Observation(NamedTuple):
  residual: jax.Array
  rounds: jax.Array
  scalar_allreduces: jax.Array
  oracle_calls: jax.Array  # (N,)


def _observe(player: Player, method: Method, state: State) -> _Observation:
  """Monitoring only: plain collectives that bypass the counted Player API."""
  block_D = method.iterate(player, state)
  counters: Counters = state.counters
  # One all-gather carries the block and, bit for bit, the oracle count
  # (collectives cost milliseconds across processes).
  count_type = {4: jnp.int32, 8: jnp.int64}[block_D.dtype.itemsize]
  count_bits = jax.lax.bitcast_convert_type(
      counters.oracle_calls.astype(count_type), block_D.dtype)
  gathered = jax.lax.all_gather(
      jnp.concatenate([block_D, count_bits[None]]), PLAYER_AXIS)
  view_NxD = gathered[:, :-1]
  oracle_calls_N = jax.lax.bitcast_convert_type(
      gathered[:, -1], count_type).astype(jnp.int32)
  grad_D = player.player_gradient(player.data, player.index, view_NxD)
  return _Observation(
      residual=jnp.sqrt(player_sum(jnp.sum(grad_D**2))),
      rounds=counters.rounds,
      scalar_allreduces=counters.scalar_allreduces,
      oracle_calls=oracle_calls_N,
  )


@functools.partial(jax.jit, static_argnames=("num_steps", "mesh"))
def _run(method, game, state, stop_residual, max_residual, step_limit, *,
         num_steps, mesh):
  player_data = (game.player_data, game.self_smoothness)
  shared = (method, _shared(game))

  def observe(data_i, l_ii, state, method, game):
    return state, _observe(_player(game, data_i, l_ii), method, state)

  def step_and_observe(data_i, l_ii, state, method, game):
    player = _player(game, data_i, l_ii)
    state = method.step(player, state)
    return state, _observe(player, method, state)

  # The loop runs outside the per-player programs so that its counter and
  # the trace stay unbatched (in-place trace updates under vmap too).
  def keep_going(carry):
    t, _, observation, _ = carry
    return ((t < jnp.minimum(num_steps, step_limit))
            & (observation.residual > stop_residual)
            & (observation.residual <= max_residual))

  def body(carry):
    t, state, _, trace = carry
    state, observation = _for_every_player(
        step_and_observe, mesh, (*player_data, state), shared,
        replicated_outputs=True)
    trace = Trace(
        trace.residual.at[t].set(observation.residual),
        trace.rounds.at[t].set(observation.rounds),
        trace.scalar_allreduces.at[t].set(observation.scalar_allreduces),
        trace.oracle_calls.at[t].set(observation.oracle_calls),
        t + 1,
    )
    return t + 1, state, observation, trace

  missing = jnp.full((num_steps,), -1, jnp.int32)
  trace = Trace(
      jnp.full((num_steps,), jnp.nan, stop_residual.dtype), missing, missing,
      jnp.full((num_steps, game.num_players), -1, jnp.int32),
      jnp.zeros((), jnp.int32))
  _, observation = _for_every_player(observe, mesh, (*player_data, state),
                                     shared, replicated_outputs=True)
  _, state, _, trace = jax.lax.while_loop(
      keep_going, body, (jnp.zeros((), jnp.int32), state, observation, trace))
  return state, trace


def player_mesh(num_players: int) -> jax.sharding.Mesh:
  """A mesh with one of the first ``num_players`` devices per player.

  Its single (explicit) axis is ``"players"``, as :func:`init` and
  :func:`run` expect; under ``jax.distributed`` the devices may belong to
  different processes.
  """
  if not isinstance(num_players, int) or num_players < 1:
    raise ValueError(
        f"num_players must be a positive int, got {num_players!r}.")
  if jax.device_count() < num_players:
    raise ValueError(f"{num_players} players need {num_players} devices (one"
                     f" each), found {jax.device_count()}.")
  return jax.make_mesh((num_players,), (PLAYER_AXIS,),
                       axis_types=(jax.sharding.AxisType.Explicit,),
                       devices=jax.devices()[:num_players])


def replicated(value: Any, mesh: jax.sharding.Mesh | None) -> jax.Array:
  """A host value as an array that every player (and process) holds whole.

  On ``mesh`` the array is replicated over its devices, so a value every
  process computed alike (e.g. a residual read back after a run) stays
  usable in jitted code across processes; with ``mesh=None`` it is a plain
  array.
  """
  value = np.asarray(value)
  if mesh is None:
    return jnp.asarray(value)
  return jax.make_array_from_callback(
      value.shape, jax.NamedSharding(mesh, jax.P()), lambda index: value[index])


def gather_to_host(tree: Any) -> Any:
  """Numpy copy of a (possibly multi-process sharded) pytree, on every process."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  return jax.tree.map(np.asarray,
                      multihost_utils.process_allgather(tree, tiled=True))
