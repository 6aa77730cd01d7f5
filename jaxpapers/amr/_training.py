r"""WAMRViT's training objective: residual steps, relative L2, push-forward.

The models predict the residual (the authors' default
``pred_mode="residual"``): one step maps a state ``x`` to
``x + f_theta(x)``, the state being what the model reads and writes: leaf
tokens ``(B, T, Ph, Pw, C)`` for uniform-storage
:class:`jaxpapers.amr.WAMRViT`, the finest field ``(B, H, W, C)`` for
native-storage :class:`jaxpapers.amr.NativeWAMRViT` (its loss on the full
field, the authors' ``full_field`` default) and for
:class:`jaxpapers.amr.UniformViT`.

The loss is the relative L2 error ``||pred - true||_2 / ||true||_2`` per
sample, averaged over the batch (neuralop's ``LpLoss``, as in the authors'
``wamrvit/loss.py``). Push-forward (the authors' ``pf=K`` flag) unrolls
``K`` steps with ``stop_gradient`` on every input, so step ``k`` is trained
on the model's own step ``k - 1`` prediction and scored against frame
``t + k``:

.. math::

   \mathcal{L} = \frac{1}{K} \sum_{k=1}^{K}
   \mathrm{relL2}\bigl(x_k, y_k\bigr), \qquad
   x_k = \mathrm{step}\bigl(\mathrm{sg}(x_{k-1})\bigr).

Gaussian noise on the first input (``input_noise``) is our addition.

Batches (:func:`sample_batch`) are pure functions of ``(seed, step)``: a
resumed run draws the batches it would have drawn. Each sample is a frame
``t`` of a training trajectory, its ``K`` next frames, and for the quadtree
models the mesh of frame ``t + K`` (training meshes from the target frame,
our reading; :func:`trajectory_meshes`); :func:`batch_loss` scores a model on
one, uniform-storage WAMRViT on its leaf tokens; :func:`train_steps` runs
optimizer steps on such batches.
"""

import functools
import math
from typing import Any, Callable, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import _checks
from jaxpapers import tree as tree_lib
from jaxpapers.amr._native import NativeWAMRViT
from jaxpapers.amr._quadtree import Quadtree
from jaxpapers.amr._quadtree import truncate
from jaxpapers.amr._rollout import bucket_size
from jaxpapers.amr._rollout import build_meshes
from jaxpapers.amr._rollout import MeshConfig
from jaxpapers.amr._tokens import tokenize
from jaxpapers.amr._vit import WAMRViT

native_tokens = tree_lib.vmap_sharded(functools.partial(tokenize,
                                                        mode="native"))


def residual_step(model: Any, state: jax.Array,
                  trees: Quadtree | None = None) -> jax.Array:
  """``state + model(state)`` for any of the three models, on its own state.

  Args:
    model: a :class:`~jaxpapers.amr.WAMRViT` (``state``: uniform leaf tokens
      ``(B, T, Ph, Pw, C)``), a :class:`~jaxpapers.amr.NativeWAMRViT` or a
      :class:`~jaxpapers.amr.UniformViT` (``state``: fields ``(B, H, W, C)``).
    state: the model's input.
    trees: the batched meshes of the quadtree models (None for the uniform
      ViT).

  Returns:
    The next state, of ``state``'s shape.

  Raises:
    TypeError: a quadtree model without ``trees``.
  """
  if isinstance(model, (WAMRViT, NativeWAMRViT)) and trees is None:
    raise TypeError(f"{type(model).__name__} needs the batched trees.")
  if isinstance(model, NativeWAMRViT):
    return state + model(native_tokens(state, trees), trees)
  return state + (model(state) if trees is None else model(state, trees))


def relative_l2(pred: jax.Array, target: jax.Array) -> jax.Array:
  """Per-sample ``||pred - target|| / ||target||``, averaged over the batch axis 0.

  A sample whose target is all zeros divides by zero: the loss is ``inf``
  (``NaN`` if its prediction is exact too).

  Raises:
    ValueError: ``pred`` and ``target`` differ in shape or have no batch
      axis.
  """
  if pred.shape != target.shape or pred.ndim < 1:
    raise ValueError(
        f"pred and target must have one shape (B, ...); got {pred.shape} and"
        f" {target.shape}.")
  axes = tuple(range(1, pred.ndim))
  err = jnp.sqrt(jnp.sum((pred - target) ** 2, axis=axes))
  return jnp.mean(err / jnp.sqrt(jnp.sum(target ** 2, axis=axes)))


def pushforward_loss(step: Callable[[jax.Array], jax.Array], state: jax.Array,
                     targets_BxK: jax.Array, num_steps: int, *,
                     noise_key: jax.Array, input_noise: float = 0.0,
                     noise_mask: jax.Array | None = None) -> jax.Array:
  """Mean relative L2 of ``num_steps`` unrolled steps (module docstring).

  Args:
    step: one model step, ``state -> state`` (e.g. a partial of
      :func:`residual_step`).
    state: the first input ``(B, ...)``.
    targets_BxK: the targets ``(B, K, ...)`` of steps ``1 .. K``, ``K >=
      num_steps``.
    num_steps: ``K >= 1`` (1: the plain one-step loss).
    noise_key: key of the input noise.
    input_noise: std of the Gaussian noise added to the first input.
    noise_mask: where the noise goes (broadcast to ``state``; e.g. the real
      leaves of padded tokens); default everywhere.

  Returns:
    The scalar loss.

  Raises:
    ValueError: ``num_steps < 1``, a negative or non-finite
      ``input_noise``, a ``noise_mask`` that does not broadcast to the
      state, or targets
      that are not ``(B, K >= num_steps, ...)`` of the state's ``B`` and
      trailing shape.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers import amr
    >>> x = jnp.ones((2, 3))
    >>> targets = jnp.stack([2 * x, 4 * x], axis=1)  # frames t + 1, t + 2
    >>> float(amr.pushforward_loss(lambda u: 2 * u, x, targets, 2,
    ...                            noise_key=jax.random.key(0)))
    0.0
  """
  if not isinstance(num_steps, int) or num_steps < 1:
    raise ValueError(f"num_steps must be an int >= 1; got {num_steps!r}.")
  if not (input_noise >= 0 and np.isfinite(input_noise)):
    raise ValueError(f"input_noise must be >= 0 and finite; got {input_noise}.")
  if (targets_BxK.ndim != state.ndim + 1 or targets_BxK.shape[1] < num_steps
      or targets_BxK.shape[0] != state.shape[0]
      or targets_BxK.shape[2:] != state.shape[1:]):
    raise ValueError(
        f"targets must be (B, K >= {num_steps}, ...) for a state of shape"
        f" {state.shape}; got {targets_BxK.shape}.")
  if noise_mask is not None:
    try:
      broadcast = np.broadcast_shapes(np.shape(noise_mask), state.shape)
    except ValueError:
      broadcast = None
    if broadcast != state.shape:
      raise ValueError(
          f"noise_mask must broadcast to the state's shape {state.shape}; got"
          f" {np.shape(noise_mask)}.")
  noise = input_noise * jax.random.normal(noise_key, state.shape, state.dtype)
  if noise_mask is not None:
    noise = jnp.where(noise_mask, noise, jnp.zeros((), state.dtype))
  x = state + noise
  losses = []
  for k in range(num_steps):
    x = step(jax.lax.stop_gradient(x))
    losses.append(relative_l2(x, targets_BxK[:, k]))
  return sum(losses) / num_steps


class TrainingBatch(NamedTuple):
  """``B`` training samples with ``K`` push-forward targets (a pytree)."""

  inputs: jax.Array  # (B, H, W, C): frames t
  targets: jax.Array  # (B, K, H, W, C): frames t + 1 .. t + K
  trees: Quadtree | None  # batched meshes of frames t + K (bucketed) or None
  noise_key: jax.Array  # key of the input noise


def trajectory_meshes(trajectories_NxTxHxWxC: np.ndarray, mesh: MeshConfig
                      ) -> Quadtree:
  """The mesh of every frame, batched ``(N, T, ...)`` (:func:`build_meshes`).

  Raises:
    ValueError: the trajectories are not ``(N, T, H, W, C)``, or as
      :func:`build_meshes`.
  """
  shape = trajectories_NxTxHxWxC.shape
  if len(shape) != 5:
    raise ValueError(
        f"trajectories_NxTxHxWxC must be (N, T, H, W, C); got {shape}.")
  flat = build_meshes(jnp.asarray(trajectories_NxTxHxWxC.reshape(
      -1, *shape[2:])), mesh)
  return jax.tree.map(lambda x: x.reshape(shape[:2] + x.shape[1:]), flat)


def sample_batch(trajectories_NxTxHxWxC: np.ndarray, *, seed: int, step: int,
                 batch_size: int, num_steps: int,
                 meshes: Quadtree | None = None, token_bucket: int = 1
                 ) -> TrainingBatch:
  """Batch ``step`` of a run: a pure function of ``(seed, step)``.

  Args:
    trajectories_NxTxHxWxC: the training trajectories.
    seed: the run's seed.
    step: the training step.
    batch_size: ``B``.
    num_steps: push-forward steps ``K``; starts ``t`` are drawn from
      ``[0, T - K)``.
    meshes: :func:`trajectory_meshes` of the trajectories, for the quadtree
      models; None for a uniform ViT (then ``trees`` is None).
    token_bucket: the meshes are truncated to the smallest multiple of this
      holding every tree of the batch (:func:`bucket_size`).

  Returns:
    The batch; its noise key is ``fold_in(key(seed), step)``.

  Raises:
    ValueError: trajectories not ``(N, T, H, W, C)``, ``batch_size`` or
      ``token_bucket`` below 1, a negative ``seed`` or ``step``,
      ``num_steps`` not in ``[1, T)``, or ``meshes`` not of shape
      ``(N, T, ...)``.

  Example:
    >>> import numpy as np
    >>> from jaxpapers import amr
    >>> frames = np.arange(3 * 5, dtype=np.float32).reshape(3, 5, 1, 1, 1)
    >>> batch = amr.sample_batch(frames, seed=0, step=7, batch_size=4,
    ...                          num_steps=2)
    >>> bool(np.all(batch.targets[:, :, 0, 0, 0]
    ...             == batch.inputs[:, None, 0, 0, 0] + [1, 2]))
    True
  """
  shape = trajectories_NxTxHxWxC.shape
  if len(shape) != 5:
    raise ValueError(
        f"trajectories_NxTxHxWxC must be (N, T, H, W, C); got {shape}.")
  num_trajectories, frames = shape[:2]
  for name, value, low in (("batch_size", batch_size, 1),
                           ("token_bucket", token_bucket, 1),
                           ("seed", seed, 0), ("step", step, 0)):
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool)
        or value < low):
      raise ValueError(f"{name} must be an int >= {low}; got {value!r}.")
  if not isinstance(num_steps, int) or not 1 <= num_steps < frames:
    raise ValueError(
        f"num_steps must be an int in [1, T = {frames}); got {num_steps!r}.")
  if meshes is not None and meshes.level.shape[:2] != shape[:2]:
    raise ValueError(
        f"meshes must be trajectory_meshes of the trajectories, (N, T) ="
        f" {shape[:2]}; got level of shape {meshes.level.shape}.")
  rng = np.random.default_rng([seed, step])
  trajectory = rng.integers(0, num_trajectories, batch_size)
  start = rng.integers(0, frames - num_steps, batch_size)
  targets = trajectories_NxTxHxWxC[
      trajectory[:, None], start[:, None] + np.arange(1, num_steps + 1)]
  trees = None
  if meshes is not None:
    # Indexing with host indices has no inferable sharding on Explicit axes.
    trees = jax.tree.map(lambda x: x[trajectory, start + num_steps],
                         tree_lib.gather_explicit(meshes)[0])
    trees = truncate(trees, bucket_size(trees.num_leaves, token_bucket,
                                        trees.max_tokens))
  return TrainingBatch(trajectories_NxTxHxWxC[trajectory, start], targets,
                       trees, jax.random.fold_in(jax.random.key(seed), step))


def batch_loss(model: Any, batch: TrainingBatch, pushforward_steps: int,
               input_noise: float = 0.0) -> jax.Array:
  """:func:`pushforward_loss` of a model on one batch.

  A uniform-storage :class:`~jaxpapers.amr.WAMRViT` is scored on its leaf
  tokens of the batch's meshes (noise on real leaves only), the other models
  on the finest field.

  Raises:
    TypeError: a quadtree model and a batch without trees.
  """
  inputs, targets, trees = batch.inputs, batch.targets, batch.trees
  if isinstance(model, (WAMRViT, NativeWAMRViT)) and trees is None:
    raise TypeError(
        f"{type(model).__name__} needs batch.trees (sample_batch with"
        " meshes).")
  real = None
  if isinstance(model, WAMRViT):
    inputs = tree_lib.vmap_sharded(tokenize)(inputs, trees)
    # Per sample, its K target frames share the sample's mesh.
    targets = tree_lib.vmap_sharded(jax.vmap(tokenize, in_axes=(0, None)))(
        targets, trees)
    real = trees.mask[..., None, None, None]
  step = functools.partial(residual_step, model, trees=trees)
  return pushforward_loss(step, inputs, targets, pushforward_steps,
                          noise_key=batch.noise_key, input_noise=input_noise,
                          noise_mask=real)


@functools.partial(jax.jit, static_argnames=(
    "graphdef", "tx", "pushforward_steps", "input_noise"))
def _train_step(state, batch, *, graphdef, tx, pushforward_steps, input_noise):
  params, opt_state = state
  def loss_fn(params):
    return batch_loss(nnx.merge(graphdef, params), batch, pushforward_steps,
                      input_noise)
  loss, grads = jax.value_and_grad(loss_fn)(params)
  updates, opt_state = tx.update(grads, opt_state, params)
  return (optax.apply_updates(params, updates), opt_state), loss


def train_steps(state: tuple[Any, Any], trajectories_NxTxHxWxC: np.ndarray, *,
                graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
                seed: int, first_step: int, num_steps: int, batch_size: int,
                pushforward_steps: int = 1, input_noise: float = 0.0,
                meshes: Quadtree | None = None, token_bucket: int = 1
                ) -> tuple[tuple[Any, Any], dict[str, float]]:
  """``num_steps`` optimizer steps of :func:`batch_loss` from ``first_step``.

  Step ``s`` trains on :func:`sample_batch` ``(seed, s)`` (drawn on the
  host), so a run resumed at any step sees the batches it would have seen.
  One jitted step per model structure, optimizer and token bucket.

  Args:
    state: ``(params, opt_state)``: the model's ``nnx.Param`` state and
      ``tx``'s state of it.
    trajectories_NxTxHxWxC: the training trajectories.
    graphdef: the model's graph (``nnx.split(model, nnx.Param)[0]``; hashable,
      static under ``jit``).
    tx: the optax optimizer (static under ``jit``: reuse one object across
      runs to compile once).
    seed: the run's seed (its batches and input noise).
    first_step: the step of the first batch.
    num_steps: how many steps, ``>= 1``.
    batch_size, pushforward_steps, input_noise, meshes, token_bucket: as in
      :func:`sample_batch` and :func:`batch_loss`; ``meshes``
      (:func:`trajectory_meshes`) for the quadtree models, None for a
      uniform ViT.

  Returns:
    The new ``(params, opt_state)`` and the steps' record: ``train_loss``
    (their mean loss) and, with ``meshes``, ``train_tokens`` (the mean leaf
    count of their batches).

  Raises:
    TypeError: ``state`` is not a ``(params, opt_state)`` pair, or
      ``graphdef`` not an ``nnx.GraphDef``.
    ValueError: ``num_steps`` not an int >= 1, or as :func:`sample_batch`
      and :func:`batch_loss`.
    FloatingPointError: the mean loss is not finite (the run diverged).

  Example:
    >>> from flax import nnx
    >>> import numpy as np, optax
    >>> from jaxpapers import amr
    >>> config = amr.uniform_vit_config(4, 1, (8, 8), d_model=8,
    ...                                 num_heads=1, num_layers=1, mlp_ratio=1)
    >>> graphdef, params = nnx.split(
    ...     amr.UniformViT(config, 4, rngs=nnx.Rngs(0)), nnx.Param)
    >>> tx = optax.sgd(0.1)
    >>> frames = np.random.default_rng(0).normal(size=(2, 3, 8, 8, 1))
    >>> state, record = amr.train_steps(
    ...     (params, tx.init(params)), frames.astype(np.float32),
    ...     graphdef=graphdef, tx=tx, seed=0, first_step=0, num_steps=2,
    ...     batch_size=2)
    >>> sorted(record)
    ['train_loss']

  References: the authors' training loop (tonyzyl/wamrvit, ``train.py``).
  """
  _checks.check_nnx_train_state(state, graphdef)
  _checks.check_int("num_steps", num_steps, 1)
  step_fn = functools.partial(_train_step, graphdef=graphdef, tx=tx,
                              pushforward_steps=pushforward_steps,
                              input_noise=input_noise)
  losses, tokens = [], []
  for step in range(first_step, first_step + num_steps):
    batch = sample_batch(
        trajectories_NxTxHxWxC, seed=seed, step=step, batch_size=batch_size,
        num_steps=pushforward_steps, meshes=meshes, token_bucket=token_bucket)
    if meshes is not None:
      tokens.append(float(np.mean(batch.trees.num_leaves)))
    state, loss = step_fn(state, batch)
    losses.append(loss)
  record = {"train_loss": float(np.mean(jax.device_get(losses)))}
  if tokens:
    record["train_tokens"] = float(np.mean(tokens))
  if not math.isfinite(record["train_loss"]):
    raise FloatingPointError(
        f"the loss is {record['train_loss']} over steps [{first_step},"
        f" {first_step + num_steps}).")
  return state, record
