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
"""

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxpapers.amr.native import NativeWAMRViT
from jaxpapers.amr.quadtree import Quadtree
from jaxpapers.amr.tokens import tokenize
from jaxpapers.amr.vit import WAMRViT

native_tokens = jax.vmap(functools.partial(tokenize, mode="native"))


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
  """Per-sample ``||pred - target|| / ||target||``, averaged over the batch axis 0."""
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
    ValueError: ``num_steps < 1``, or fewer targets than steps.

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
  if targets_BxK.ndim != state.ndim + 1 or targets_BxK.shape[1] < num_steps:
    raise ValueError(
        f"targets must be (B, K >= {num_steps}, ...) for a state of shape"
        f" {state.shape}; got {targets_BxK.shape}.")
  noise = input_noise * jax.random.normal(noise_key, state.shape, state.dtype)
  if noise_mask is not None:
    noise = jnp.where(noise_mask, noise, jnp.zeros((), state.dtype))
  x = state + noise
  losses = []
  for k in range(num_steps):
    x = step(jax.lax.stop_gradient(x))
    losses.append(relative_l2(x, targets_BxK[:, k]))
  return sum(losses) / num_steps
