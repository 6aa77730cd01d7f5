r"""An optax transform that records Batch Sharpness along the training run.

Edge of Stochastic Stability (Andreyev & Beneventano, 2024) predicts that
under mini-batch SGD with step size :math:`\eta` the directional curvature of
each mini-batch along its own gradient hovers at :math:`2/\eta`. This
transform measures that quantity on the live mini-batch at every step (the
authors' "step sharpness" diagnostic) and keeps its running mean, without
touching the updates.
"""

import inspect
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxpapers import tree as tree_lib
from jaxpapers.curvature._batch_sharpness import directional_curvature
from jaxpapers.curvature._hvp import quadratic_form

# Extra arguments of optax's line-search protocol that are never routed into
# value_fn (they describe the step, not the batch).
_PROTOCOL_ARGS = ("value", "grad", "value_fn")


class TrackBatchSharpnessState(NamedTuple):
  """State of :func:`track_batch_sharpness`.

  Attributes:
    count: number of measurements so far (int32).
    batch_sharpness: :math:`g_B^\\top H_B g_B / \\|g_B\\|^2` at the last step.
    batch_sharpness_mean: running mean of ``batch_sharpness`` (arithmetic
      over all steps, or bias-corrected exponential with ``decay``).
  """

  count: jax.Array
  batch_sharpness: jax.Array
  batch_sharpness_mean: jax.Array


def track_batch_sharpness(
    decay: float | None = None,
) -> optax.GradientTransformationExtraArgs:
  r"""Records the mini-batch directional curvature; updates pass through unchanged.

  At each step, with :math:`L_B` the loss returned by the ``value_fn`` extra
  argument (as optax's line searches receive it),

  .. math::
    s_t = \frac{g_B^\top H_B\, g_B}{g_B^\top g_B},\qquad g_B = \nabla L_B(\theta_t),

  computed forward-over-forward (the gradient ``g_B`` is taken from the
  ``grad`` extra argument when given, else recomputed).
  :math:`\mathbb{E}[s_t]` is Batch Sharpness; the state keeps :math:`s_t`
  and its running mean

  .. math::
    m_t = \frac1t \sum_{i \le t} s_i \quad (\text{decay=None}),\qquad
    m_t = \frac{(1-\beta)\sum_{i\le t} \beta^{t-i} s_i}{1-\beta^t}
    \quad (\text{decay}=\beta).

  Extra arguments named in ``value_fn``'s signature (e.g. ``batch``) are
  passed to it, every other extra argument is ignored, so the transform sits
  anywhere in ``optax.chain``. A zero gradient gives NaN (0/0), which stays
  visible in the mean.

  Args:
    decay: None for the arithmetic mean over all steps, or an EMA decay in
      ``[0, 1)``; a Python number is checked here, a traced one (e.g. under
      ``optax.inject_hyperparams``) cannot be and must lie in that range.

  Returns:
    An ``optax.GradientTransformationExtraArgs``; its ``update`` requires
    ``params`` and the keyword ``value_fn(params, **batch_kwargs) -> scalar``.

  Example:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers.optim import track_batch_sharpness
    >>> def loss(w, batch):
    ...   return 0.5 * jnp.mean((batch @ w) ** 2)
    >>> tx = optax.chain(track_batch_sharpness(), optax.sgd(0.1))
    >>> w = jnp.ones(2)
    >>> batch = jnp.array([[1.0, 0.0], [0.0, 3.0]])
    >>> state = tx.init(w)
    >>> g = jax.grad(loss)(w, batch)
    >>> _, state = tx.update(g, state, w, value_fn=loss, batch=batch)
    >>> round(float(optax.tree.get(state, "batch_sharpness")), 4)  # H = diag(.5, 4.5)
    4.4512

  With flax nnx, ``value_fn`` gets the params as the optimizer holds them,
  an ``nnx.State``.

  Example (flax nnx):
    >>> from flax import nnx
    >>> model = nnx.Linear(2, 1, use_bias=False, rngs=nnx.Rngs(0),
    ...                    kernel_init=nnx.initializers.ones)  # w above
    >>> graphdef = nnx.graphdef(model)
    >>> def value_fn(params, batch):
    ...   return 0.5 * jnp.mean(nnx.merge(graphdef, params)(batch) ** 2)
    >>> optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    >>> grads = nnx.grad(lambda m: 0.5 * jnp.mean(m(batch) ** 2))(model)
    >>> _ = optimizer.update(model, grads, value_fn=value_fn, batch=batch)
    >>> sharpness = optax.tree.get(nnx.as_pure(optimizer.opt_state), "batch_sharpness")
    >>> round(float(sharpness), 4)  # the same w, batch and Hessian as above
    4.4512

  References:
    Andreyev & Beneventano, `Edge of Stochastic Stability
    <https://arxiv.org/abs/2412.20553>`_, 2024.
  """
  if decay is not None and not isinstance(decay, jax.Array):
    if not 0 <= decay < 1:
      raise ValueError(f"decay must be None or lie in [0, 1), got {decay!r}.")

  def init_fn(params):
    tree_lib.check_real_floating(params, "params")
    dtype = _float_dtype(params)
    return TrackBatchSharpnessState(
        count=jnp.zeros([], jnp.int32),
        batch_sharpness=jnp.zeros([], dtype),
        batch_sharpness_mean=jnp.zeros([], dtype),
    )

  def update_fn(updates, state, params=None, *, value_fn=None, grad=None,
                **extra_args):
    if params is None:
      raise ValueError("track_batch_sharpness needs params in update().")
    if value_fn is None:
      raise ValueError(
          "track_batch_sharpness needs the extra argument value_fn="
          "f(params, **batch_kwargs) -> scalar loss of the current mini-batch."
      )
    batch_kwargs = _kwargs_for(value_fn, extra_args)
    loss_fn = lambda p, kwargs: value_fn(p, **kwargs)
    if grad is None:
      curvature, grad_sq_norm = directional_curvature(
          loss_fn, params, batch_kwargs
      )
    else:
      curvature = quadratic_form(loss_fn, params, grad, batch_kwargs)
      grad_sq_norm = tree_lib.vdot(grad, grad)
    dtype = state.batch_sharpness.dtype
    sharpness = (curvature / grad_sq_norm).astype(dtype)
    count = optax.safe_increment(state.count)
    if decay is None:
      weight = 1.0 / count.astype(dtype)
      mean = state.batch_sharpness_mean + weight * (
          sharpness - state.batch_sharpness_mean
      )
    else:
      # Keep the un-debiased EMA implicit: recover it from the stored debiased
      # mean so the state holds only readable quantities.
      beta = jnp.asarray(decay, dtype)
      prev_correction = 1 - beta ** state.count.astype(dtype)
      raw = beta * state.batch_sharpness_mean * prev_correction + (
          1 - beta
      ) * sharpness
      mean = raw / (1 - beta ** count.astype(dtype))
    new_state = TrackBatchSharpnessState(count, sharpness, mean.astype(dtype))
    return updates, new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _float_dtype(params: Any) -> jnp.dtype:
  dtypes = [x.dtype for x in jax.tree.leaves(params)
            if jnp.issubdtype(x.dtype, jnp.floating)]
  return jnp.result_type(*dtypes) if dtypes else jnp.float32


def _kwargs_for(value_fn: Callable[..., Any], extra_args: dict[str, Any]):
  """The extra arguments that value_fn accepts by name (all, if it takes **kw)."""
  candidates = {k: v for k, v in extra_args.items() if k not in _PROTOCOL_ARGS}
  parameters = inspect.signature(value_fn).parameters.values()
  if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
    return candidates
  names = {p.name for p in parameters}
  return {k: v for k, v in candidates.items() if k in names}
