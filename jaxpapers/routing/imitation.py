r"""Supervised (imitation) training of the heavy decoder from labelled tours.

Each step draws ``batch_size`` labelled instances uniformly (with
replacement) and one random partial path of each
(:func:`~jaxpapers.routing.lehd.partial_paths`), and takes an Adam step on
the cross-entropy of the next city
(:func:`~jaxpapers.routing.lehd.imitation_loss`). The learning rate decays by
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

References:
  F. Luo et al., `Neural combinatorial optimization with heavy decoder
  <https://arxiv.org/abs/2310.07985>`_, NeurIPS 2023, Sec. 4.2 (training).
"""

import functools
from typing import Any, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import optax

from jaxpapers.data import sampling
from jaxpapers.routing import lehd
from jaxpapers.routing import tsp


class TrainState(NamedTuple):
  """What :func:`train_steps` carries: the model's parameters and the optax state."""
  params: Any  # nnx.State of the model's nnx.Param leaves
  opt_state: optax.OptState


def optimizer(learning_rate: float, *, steps_per_epoch: int,
              decay: float = 0.97) -> optax.GradientTransformation:
  """``adam(exponential_decay(learning_rate, steps_per_epoch, decay, staircase=True))``."""
  if not learning_rate > 0:
    raise ValueError(f"learning_rate must be > 0; got {learning_rate}.")
  if steps_per_epoch < 1:
    raise ValueError(f"steps_per_epoch must be >= 1; got {steps_per_epoch}.")
  if not 0 < decay <= 1:
    raise ValueError(f"decay must be in (0, 1]; got {decay}.")
  return optax.adam(optax.exponential_decay(
      learning_rate, steps_per_epoch, decay, staircase=True))


@functools.partial(jax.jit, static_argnames=(
    "graphdef", "tx", "batch_size", "num_steps"))
def train_steps(state: TrainState, coords_MxNx2: jax.Array,
                tours_MxN: jax.Array, key: jax.Array, first_step: jax.Array,
                *, graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
                batch_size: int, num_steps: int
                ) -> tuple[TrainState, jax.Array]:
  """``num_steps`` steps from step ``first_step`` on the M labelled instances.

  Returns the new state and the ``[num_steps]`` losses.

  Raises:
    ValueError: for coordinates not ``[M, N, 2]``, fewer or more tours than
      instances, ``batch_size < 1`` or ``num_steps < 1``.
    TourError: for tours not ``[M, N]`` or not integer. Their values are
      traced here and not checked: validate labels with
      :func:`~jaxpapers.routing.tsp.tour_length` (eager) first.
  """
  tsp.check_coords(coords_MxNx2)
  tsp.check_tours(tours_MxN, coords_MxNx2.shape[1], "tours")
  if tours_MxN.shape[0] != coords_MxNx2.shape[0]:
    raise ValueError(f"tours_MxN must label every instance: {tours_MxN.shape[0]}"
                     f" tours for {coords_MxNx2.shape[0]} instances.")
  if batch_size < 1 or num_steps < 1:
    raise ValueError(f"batch_size and num_steps must be >= 1; got"
                     f" {batch_size}, {num_steps}.")

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


@functools.partial(jax.jit, static_argnames=("graphdef",))
def greedy_gaps(params: Any, coords_BxNx2: jax.Array,
                optimal_lengths_B: jax.Array, *, graphdef: nnx.GraphDef
                ) -> jax.Array:
  """``length(greedy tour) / optimal length - 1`` per instance (the optimality gap).

  ``optimal_lengths_B`` must be ``[B]`` (``ValueError``); a traced length of
  0 gives an infinite or NaN gap.
  """
  tsp.check_coords(coords_BxNx2)
  if optimal_lengths_B.shape != coords_BxNx2.shape[:1]:
    raise ValueError(f"optimal_lengths_B must have shape"
                     f" [{coords_BxNx2.shape[0]}]; got"
                     f" {list(optimal_lengths_B.shape)}.")
  tours_BxN = lehd.greedy_tours(nnx.merge(graphdef, params), coords_BxNx2)
  return tsp.tour_length(coords_BxNx2, tours_BxN) / optimal_lengths_B - 1
