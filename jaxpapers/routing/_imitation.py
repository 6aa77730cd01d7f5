r"""Supervised (imitation) training of the heavy decoder from labelled tours.

Each step draws ``batch_size`` labelled instances uniformly (with
replacement) and one random partial path of each
(:func:`~jaxpapers.routing.partial_paths`), and takes an Adam step on
the cross-entropy of the next city
(:func:`~jaxpapers.routing.imitation_loss`). The learning rate decays by
``decay`` per epoch (``steps_per_epoch`` steps, staircase), LEHD's schedule
(Luo et al., 2023: Adam 1e-4, x0.97 per epoch); 1e-3 is our CPU-scale
choice. Step ``t`` draws from ``fold_in(key, t)``, so a run resumed at any
step continues exactly as an uninterrupted one.

Example::

  graphdef, params = nnx.split(HeavyDecoder(config, rngs=nnx.Rngs(0)), nnx.Param)
  tx = optimizer(1e-3, steps_per_epoch=195)
  state = TrainState(params, tx.init(params))
  state, losses = train_steps(state, coords, tours, key, jnp.asarray(0),
                              graphdef=graphdef, tx=tx, batch_size=256,
                              num_steps=20)
  # Or steps 20..79 in calls of 20 (one compiled scan), and XLA's FLOPs/step:
  state, more = train_blocks(state, coords, tours, key, 20, 60,
                             graphdef=graphdef, tx=tx, batch_size=256,
                             block_steps=20)
  flops = train_step_flops(state, coords, tours, graphdef=graphdef, tx=tx,
                           batch_size=256)

References:
  F. Luo et al., `Neural combinatorial optimization with heavy decoder
  <https://arxiv.org/abs/2310.07985>`_, NeurIPS 2023, Sec. 4.2 (training).
"""

import functools
from typing import Any, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.data import _sampling as sampling
from jaxpapers.routing import _lehd as lehd
from jaxpapers.routing import _tsp as tsp


class TrainState(NamedTuple):
  """What :func:`train_steps` carries: the model's parameters and the optax state."""
  params: Any  # nnx.State of the model's nnx.Param leaves
  opt_state: optax.OptState


def optimizer(learning_rate: float, *, steps_per_epoch: int,
              decay: float = 0.97) -> optax.GradientTransformation:
  """``adam(exponential_decay(learning_rate, steps_per_epoch, decay, staircase=True))``.

  ``learning_rate`` must be a finite number > 0, ``steps_per_epoch`` an int
  >= 1 and ``decay`` a number in (0, 1] (``ValueError``).
  """
  check_real("learning_rate", learning_rate, low=0.0, low_open=True)
  check_int("steps_per_epoch", steps_per_epoch, 1)
  check_real("decay", decay, low=0.0, low_open=True)
  if not decay <= 1:
    raise ValueError(f"decay must be in (0, 1]; got {decay}.")
  return optax.adam(optax.exponential_decay(
      learning_rate, steps_per_epoch, decay, staircase=True))


def _check_training(coords_MxNx2, tours_MxN, first_step, batch_size,
                    num_steps) -> None:
  """:func:`train_steps`'s checks: shapes always, values when concrete."""
  tsp.check_coords(coords_MxNx2, "coords_MxNx2")
  if np.shape(coords_MxNx2)[0] < 1:
    raise ValueError("coords_MxNx2 must hold at least one instance to train"
                     " on; got none.")
  if np.ndim(tours_MxN) and len(tours_MxN) != len(coords_MxNx2):
    raise ValueError(f"tours_MxN must label every instance: {len(tours_MxN)}"
                     f" tours for {len(coords_MxNx2)} instances.")
  tsp.check_tours(tours_MxN, np.shape(coords_MxNx2)[1], "tours")
  if np.ndim(first_step) != 0 or not jnp.issubdtype(
      jnp.result_type(first_step), jnp.integer):
    raise ValueError(f"first_step must be an integer scalar; got"
                     f" {jnp.result_type(first_step)}"
                     f"{list(np.shape(first_step))}.")
  check_int("batch_size", batch_size, 1)
  check_int("num_steps", num_steps, 1)


def train_steps(state: TrainState, coords_MxNx2: jax.Array,
                tours_MxN: jax.Array, key: jax.Array, first_step: jax.Array,
                *, graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
                batch_size: int, num_steps: int
                ) -> tuple[TrainState, jax.Array]:
  """``num_steps`` steps from step ``first_step`` on the M labelled instances (jitted).

  Returns the new state and the ``[num_steps]`` losses.

  Raises:
    ValueError: for coordinates not a real ``[M, N, 2]`` array with M >= 1
      (and, concrete, finite), fewer or more tours than instances, a
      ``first_step`` that is not an integer scalar, or ``batch_size`` or
      ``num_steps`` not an int >= 1.
    TourError: for tours not ``[M, N]`` integers, or (concrete) a row that
      is not a permutation. Under an outer ``jit`` the values are traced:
      non-finite coordinates then give NaN losses, and so does an example
      drawn from a tour that is not a permutation
      (:func:`~jaxpapers.routing.partial_paths`).
  """
  _check_training(coords_MxNx2, tours_MxN, first_step, batch_size, num_steps)
  return _train_steps(state, coords_MxNx2, tours_MxN, key, first_step,
                      graphdef=graphdef, tx=tx, batch_size=batch_size,
                      num_steps=num_steps)


@functools.partial(jax.jit, static_argnames=(
    "graphdef", "tx", "batch_size", "num_steps"))
def _train_steps(state, coords_MxNx2, tours_MxN, key, first_step, *, graphdef,
                 tx, batch_size, num_steps):
  # Shapes again: lowering (below) reaches here without the wrapper.
  _check_training(coords_MxNx2, tours_MxN, first_step, batch_size, num_steps)

  def step(state, t):
    pick_key, path_key = jax.random.split(jax.random.fold_in(key, t))
    rows_B = jax.random.randint(pick_key, (batch_size,), 0,
                                coords_MxNx2.shape[0])
    # take: rows of a data set sharded along Explicit axes come out replicated.
    coords_BxNx2, tours_BxN = sampling.take((coords_MxNx2, tours_MxN), rows_B)
    paths = lehd.partial_paths(path_key, tours_BxN)
    loss, grads = jax.value_and_grad(
        lambda p: lehd.imitation_loss(nnx.merge(graphdef, p),
                                      coords_BxNx2, paths))(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    return TrainState(optax.apply_updates(state.params, updates),
                      opt_state), loss

  return jax.lax.scan(step, state, first_step + jnp.arange(num_steps))


# XLA's cost analysis lowers the step without running it: the value checks,
# which need concrete data, have nothing to guard there.
train_steps.lower = _train_steps.lower


def train_blocks(state: TrainState, coords_MxNx2: jax.Array,
                 tours_MxN: jax.Array, key: jax.Array, first_step: int,
                 num_steps: int, *, graphdef: nnx.GraphDef,
                 tx: optax.GradientTransformation, batch_size: int,
                 block_steps: int) -> tuple[TrainState, jax.Array]:
  """Steps ``first_step .. first_step + num_steps - 1``, ``block_steps`` per jitted call.

  Every call runs the one compiled ``block_steps``-step scan, so a run
  evaluated after any multiple of ``block_steps`` compiles its steps once.
  Step ``t`` draws from ``fold_in(key, t)`` as in :func:`train_steps`: the
  batches are those of one uninterrupted run.

  Args:
    state, coords_MxNx2, tours_MxN, key, graphdef, tx, batch_size: as for
      :func:`train_steps`.
    first_step: the first step's index, a Python int >= 0.
    num_steps: how many steps, an int >= 1 and a multiple of ``block_steps``.
    block_steps: the steps of one compiled call, an int >= 1.

  Returns:
    The new state and the ``[num_steps]`` losses, in step order.

  Raises:
    ValueError: ``first_step`` not an int >= 0, ``num_steps`` or
      ``block_steps`` not an int >= 1, ``num_steps`` not a multiple of
      ``block_steps``; and :func:`train_steps`' errors.

  Example::

    state, losses = train_blocks(state, coords, tours, jax.random.key(0), 40,
                                 60, graphdef=graphdef, tx=tx, batch_size=256,
                                 block_steps=20)  # steps 40..99, 3 calls
  """
  check_int("first_step", first_step, 0)
  check_int("num_steps", num_steps, 1)
  check_int("block_steps", block_steps, 1)
  if num_steps % block_steps:
    raise ValueError(f"num_steps must be a multiple of block_steps; got"
                     f" {num_steps} and {block_steps}.")
  losses = []
  for first in range(first_step, first_step + num_steps, block_steps):
    state, block_losses = train_steps(
        state, coords_MxNx2, tours_MxN, key, jnp.asarray(first),
        graphdef=graphdef, tx=tx, batch_size=batch_size, num_steps=block_steps)
    losses.append(block_losses)
  return state, jnp.concatenate(losses)


def train_step_flops(state: TrainState, coords_MxNx2: jax.Array,
                     tours_MxN: jax.Array, *, graphdef: nnx.GraphDef,
                     tx: optax.GradientTransformation, batch_size: int
                     ) -> float:
  """XLA's FLOP count of one :func:`train_steps` step (lowered: nothing compiles or runs).

  The count of the step's HLO (``cost_analysis()["flops"]``): the forward and
  backward pass on ``batch_size`` partial paths padded to N cities, and the
  optimizer update. Arguments and errors are those of :func:`train_steps`
  (the data's shapes and dtypes matter, not its values).

  Example::

    gflops = 600 * train_step_flops(state, coords, tours, graphdef=graphdef,
                                    tx=tx, batch_size=256) / 1e9
  """
  _check_training(coords_MxNx2, tours_MxN, 0, batch_size, 1)
  return float(_train_steps.lower(
      state, coords_MxNx2, tours_MxN, jax.random.key(0), jnp.asarray(0),
      graphdef=graphdef, tx=tx, batch_size=batch_size,
      num_steps=1).cost_analysis()["flops"])


def _check_gaps(coords_BxNx2, optimal_lengths_B) -> None:
  tsp.check_coords(coords_BxNx2)
  dtype = jnp.result_type(optimal_lengths_B)
  if np.shape(optimal_lengths_B) != np.shape(coords_BxNx2)[:1] or not (
      jnp.issubdtype(dtype, jnp.floating)
      or jnp.issubdtype(dtype, jnp.integer)):
    raise ValueError(f"optimal_lengths_B must be a real array of shape"
                     f" [{np.shape(coords_BxNx2)[0]}]; got {dtype}"
                     f"{list(np.shape(optimal_lengths_B))}.")
  if isinstance(optimal_lengths_B, jax.core.Tracer):
    return
  lengths = np.asarray(optimal_lengths_B)
  bad = ~(np.isfinite(lengths) & (lengths >= 0))
  if bad.any():
    raise ValueError(f"optimal_lengths_B must be finite and >= 0; got"
                     f" {lengths[bad][:3].tolist()} ({int(bad.sum())} such).")


def greedy_gaps(params: Any, coords_BxNx2: jax.Array,
                optimal_lengths_B: jax.Array, *, graphdef: nnx.GraphDef
                ) -> jax.Array:
  """``length(greedy tour) / optimal length - 1`` per instance (the optimality gap, jitted).

  ``coords_BxNx2`` must be a real ``[B, N, 2]`` array and
  ``optimal_lengths_B`` a real ``[B]`` one; concrete, the coordinates must be
  finite and the lengths finite and >= 0 (``ValueError``). An optimal length
  of 0 (every city in one place) gives a NaN or infinite gap; traced,
  non-finite coordinates and negative or non-finite lengths give NaN gaps.
  """
  _check_gaps(coords_BxNx2, optimal_lengths_B)
  return _greedy_gaps(params, coords_BxNx2, optimal_lengths_B,
                      graphdef=graphdef)


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _greedy_gaps(params, coords_BxNx2, optimal_lengths_B, *, graphdef):
  _check_gaps(coords_BxNx2, optimal_lengths_B)
  tours_BxN = lehd.greedy_tours(nnx.merge(graphdef, params), coords_BxNx2)
  gaps_B = tsp.tour_length(coords_BxNx2, tours_BxN) / optimal_lengths_B - 1
  # A traced negative or infinite optimum would give a plausible gap (-1 for
  # inf): NaN instead.
  valid_B = jnp.isfinite(optimal_lengths_B) & (optimal_lengths_B >= 0)
  return jnp.where(valid_B, gaps_B, jnp.nan)
