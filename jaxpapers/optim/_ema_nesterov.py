r"""EMA-Nesterov: lookahead along an exponential moving average of increments.

Nesterov-style lookahead extrapolates along the last step
:math:`x_t - x_{t-1}`, which is dominated by gradient noise in deep learning.
EMA-Nesterov (Yau et al., 2026) extrapolates along an exponential moving
average of the anchor's increments instead, and wraps any base optimizer.

Source status (see ``docs/ema_nesterov.md``): the update rule, the beta
schedule tied to the learning-rate ratio with warm-up / rest gating, the
absence of bias correction, both ``m_init`` variants and evaluation at the
anchor are taken from the authors' code (``OptimAI-Lab/ema-nesterov`` and
``OptimAI-Lab/ema-nesterov-module`` on GitHub). **Reconstruction** (ours):
the optax formulation with ``params`` held at the lookahead point, the state
with a single parameter-sized buffer (the reference keeps ``m`` and a copy of
the anchor), :func:`ema_nesterov_eval_params`, and the ``increment="inner"``
ablation.
"""

import functools
import math
from typing import Any, Callable, Literal, NamedTuple
import warnings

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import tree as tree_lib

_M_INITS = ("first_increment", "zeros")
_INCREMENTS = ("anchor", "inner")


class EmaNesterovState(NamedTuple):
  """State of :func:`ema_nesterov`.

  Attributes:
    count: number of updates so far, ``t`` (int32).
    beta: the lookahead coefficient :math:`\\beta_t` in force: the params
      the caller holds are :math:`y_t = x_t + \\beta_t m_t`.
    m: EMA of the anchor increments, like params (the one extra buffer).
    inner_state: the base optimizer's state.
  """

  count: jax.Array
  beta: jax.Array
  m: optax.Updates
  inner_state: optax.OptState


def ema_nesterov(
    inner: optax.GradientTransformation,
    *,
    beta_max: float | jax.Array = 0.5,
    gamma: float | jax.Array = 0.99,
    lr_ratio: Callable[[jax.Array], jax.Array] | None = None,
    warmup_steps: int | jax.Array = 0,
    rest_start: int | jax.Array | None = None,
    m_init: Literal["first_increment", "zeros"] = "first_increment",
    increment: Literal["anchor", "inner"] = "anchor",
    mu_dtype: Any = None,
) -> optax.GradientTransformationExtraArgs:
  r"""Wraps ``inner`` with a lookahead along an EMA of its anchor increments.

  With :math:`A` the base optimizer and :math:`x_t` the anchor, each step is

  .. math::
    y_t &= x_t + \beta_t m_t \qquad \text{(gradient taken here)}\\
    u_t &= A(\nabla f(y_t);\, y_t), \qquad x_{t+1} = y_t + u_t\\
    \Delta_t &= x_{t+1} - x_t = u_t + \beta_t m_t\\
    m_{t+1} &= \gamma\, m_t + (1 - \gamma)\, \Delta_t,

  with :math:`m_0 = 0` and no bias correction. ``m_init="first_increment"``
  (the authors' experiments) sets :math:`m_1 = \Delta_0`; ``"zeros"`` (their
  pip module) applies the EMA from the start. The coefficient is

  .. math::
    \beta_t = \beta_{\max}\, r(t)\ \text{ if }\ \text{warmup\_steps} \le t <
    \text{rest\_start},\ \text{ else } 0,

  where :math:`r(t) = \text{lr\_ratio}(t)` (1 when None). The params the
  caller holds are the lookahead points :math:`y_t`, so the emitted update is
  :math:`y_{t+1} - y_t = u_t + \beta_{t+1} m_{t+1}`; evaluate and checkpoint
  the anchor :math:`x_t` from :func:`ema_nesterov_eval_params`. With
  :math:`\gamma = 0` this is Nesterov's extrapolation
  :math:`y_t = x_t + \beta (x_t - x_{t-1})`; with :math:`\beta = 0` it is
  ``inner`` unchanged. Since :math:`m_{t+1} = (\gamma + (1-\gamma)\beta_t)
  m_t + (1-\gamma) u_t`, :math:`\beta_{\max} \ge 1` makes the EMA
  non-contractive (a warning).

  Extra keyword arguments of ``update`` are forwarded to ``inner``. Under
  ``optax.inject_hyperparams`` every numeric argument may be traced; list
  ``lr_ratio`` and ``mu_dtype`` in ``static_args`` (inject_hyperparams takes
  callables for schedules). To give only some leaves a lookahead, use
  ``optax.partition`` with ``ema_nesterov(inner)`` for those and ``inner``
  for the rest.

  Args:
    inner: the base optimizer (e.g. ``optax.adamw``, ``optax.contrib.muon``,
      :func:`jaxpapers.optim.soap`, ``optax.sgd``), whose learning-rate
      schedule, bias correction and weight decay stay its own.
    beta_max: peak lookahead coefficient, ``>= 0``.
    gamma: EMA decay of the increments, in ``[0, 1)``.
    lr_ratio: ``step -> lr(step) / lr_peak`` of ``inner``'s schedule (a
      transform cannot read another's schedule); None for a constant beta.
    warmup_steps: first step with a lookahead.
    rest_start: first step of the final lookahead-free "rest" window; None
      keeps the lookahead to the end.
    m_init: ``"first_increment"`` or ``"zeros"`` (see above).
    increment: ``"anchor"`` averages :math:`\Delta_t` (the reference);
      ``"inner"`` averages :math:`u_t` alone (an ablation of ours).
    mu_dtype: dtype of ``m`` (default: each param's dtype); use float32 for
      low-precision params.

  Returns:
    An ``optax.GradientTransformationExtraArgs`` with state
    :class:`EmaNesterovState`.

  Example:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers import optim
    >>> f = lambda x: 0.5 * jnp.sum(jnp.array([1.0, 0.01]) * x ** 2)
    >>> tx = optim.ema_nesterov(optax.sgd(1.0), beta_max=0.8, gamma=0.5)
    >>> y = jnp.array([1.0, 1.0])
    >>> state = tx.init(y)
    >>> for _ in range(100):
    ...   updates, state = tx.update(jax.grad(f)(y), state, y)
    ...   y = optax.apply_updates(y, updates)
    >>> x = optim.ema_nesterov_eval_params(y, state)  # the anchor
    >>> bool(f(x) < 1e-6)  # plain SGD(1.0) is at 6.7e-04 after 100 steps
    True

  Example (flax nnx; evaluate the anchor with :func:`ema_nesterov_eval_params`):
    >>> from flax import nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> optimizer = nnx.Optimizer(model, optim.ema_nesterov(optax.sgd(0.1)),
    ...                           wrt=nnx.Param)
    >>> loss = lambda m: jnp.mean((m(jnp.ones((4, 2))) - 1.0) ** 2)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   optimizer.update(model, nnx.grad(loss)(model))
    >>> before = loss(model)
    >>> for _ in range(10):
    ...   train_step(model, optimizer)
    >>> bool(loss(model) < before)
    True

  References:
    Yau, Li, Glentis, Boreiko, Wai & Hong, `EMA-Nesterov
    <https://arxiv.org/abs/2605.25395>`_, 2026 (authors' code:
    ``OptimAI-Lab/ema-nesterov``).
  """
  if not (hasattr(inner, "init") and hasattr(inner, "update")):
    raise ValueError(
        f"inner must be an optax GradientTransformation, got {type(inner)}."
    )
  if m_init not in _M_INITS:
    raise ValueError(f"m_init must be one of {_M_INITS}, got {m_init!r}.")
  if increment not in _INCREMENTS:
    raise ValueError(
        f"increment must be one of {_INCREMENTS}, got {increment!r}."
    )
  if lr_ratio is not None and not callable(lr_ratio):
    raise ValueError(
        "lr_ratio must be None or a callable step -> lr(step)/lr_peak, got"
        f" {lr_ratio!r}; under optax.inject_hyperparams list 'lr_ratio' in"
        " static_args."
    )
  _check_hyperparameters(beta_max, gamma, warmup_steps, rest_start)
  inner = optax.with_extra_args_support(inner)

  def beta_at(step, dtype):
    ratio = 1.0 if lr_ratio is None else lr_ratio(step)
    beta = jnp.asarray(beta_max).astype(dtype) * jnp.asarray(ratio).astype(dtype)
    active = step >= warmup_steps
    if rest_start is not None:
      active = active & (step < rest_start)
    return jnp.where(active, beta, jnp.zeros([], dtype))

  def init_fn(params):
    tree_lib.check_real_floating(params, "params")
    m = optax.tree.zeros_like(params, dtype=mu_dtype)
    count = jnp.zeros([], jnp.int32)
    return EmaNesterovState(
        count=count,
        beta=beta_at(count, _scalar_dtype(m)),
        m=m,
        inner_state=inner.init(params),
    )

  def update_fn(updates, state, params=None, **extra_args):
    # The inner transform would broadcast mismatched leaves, or fail deep in
    # jax.numpy.
    _check_params_like_lookahead(updates, state.m, "updates")
    inner_updates, inner_state = inner.update(
        updates, state.inner_state, params, **extra_args
    )
    decay = jnp.asarray(gamma)
    if m_init == "first_increment":
      # m_0 = 0, so a zero decay at t = 0 makes m_1 the first increment.
      decay = jnp.where(state.count == 0, jnp.zeros_like(decay), decay)

    def next_m(u, m):
      dtype = _wider(u.dtype, m.dtype)
      inc = u.astype(dtype)
      if increment == "anchor":
        inc = inc + state.beta.astype(dtype) * m.astype(dtype)
      g = decay.astype(dtype)
      return (g * m.astype(dtype) + (1 - g) * inc).astype(m.dtype)

    m = jax.tree.map(next_m, inner_updates, state.m)
    count = optax.safe_increment(state.count)
    beta = beta_at(count, state.beta.dtype)
    # The base step was taken from y_t in place, so y_{t+1} - y_t keeps
    # u_t whole and only adds the next lookahead (no "- beta_t m_t").
    new_updates = jax.tree.map(
        lambda u, m_: _add_scaled(u, beta, m_).astype(u.dtype),
        inner_updates, m,
    )
    return new_updates, EmaNesterovState(count, beta, m, inner_state)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def ema_nesterov_eval_params(params: optax.Params,
                             state: optax.OptState) -> optax.Params:
  r"""The anchor :math:`x_t = y_t - \beta_t m_t` to evaluate and checkpoint.

  Note the argument order ``(params, state)``, the reverse of
  ``optax.contrib.schedule_free_eval_params``.

  With flax nnx, pass the model's ``nnx.state(model, nnx.Param)`` (the
  optimizer's ``wrt``) and the ``nnx.Optimizer``'s ``opt_state``; the anchor
  comes back as a ``State`` of the same params, ready for
  ``nnx.update(model, anchor)`` on a copy of the model.

  Args:
    params: the params trained with :func:`ema_nesterov` (lookahead points):
      a pytree, or an ``nnx.State``.
    state: its optimizer state; the :class:`EmaNesterovState` may sit
      anywhere inside (``optax.chain``, ``partition``, ``inject_hyperparams``,
      ``MultiSteps``, ``apply_if_finite``, ``nnx.Optimizer.opt_state``).

  Returns:
    The anchor, like ``params``. In the rest window (:math:`\beta = 0`) it
    equals ``params``.

  Raises:
    TypeError: ``params`` is an ``nnx.Module`` (pass its state).
    ValueError: ``state`` holds no or several :class:`EmaNesterovState`, or
      ``params`` do not match the params it was built for.

  Example (flax nnx):
    >>> from flax import nnx
    >>> import jax.numpy as jnp, optax
    >>> from jaxpapers import optim
    >>> model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    >>> optimizer = nnx.Optimizer(model, optim.ema_nesterov(optax.sgd(0.1)),
    ...                           wrt=nnx.Param)
    >>> loss = lambda m: jnp.sum(m(jnp.ones((1, 3))) ** 2)
    >>> _ = optimizer.update(model, nnx.grad(loss)(model))  # a training step
    >>> anchor = optim.ema_nesterov_eval_params(nnx.state(model, nnx.Param),
    ...                                         optimizer.opt_state)
    >>> eval_model = nnx.clone(model)  # evaluate and checkpoint the anchor
    >>> nnx.update(eval_model, anchor)
    >>> {k: v.shape for k, v in nnx.to_pure_dict(anchor).items()}
    {'bias': (2,), 'kernel': (3, 2)}
  """
  if isinstance(params, nnx.Module):
    raise TypeError(
        "params must be the trained params, not the nnx.Module: pass"
        " nnx.state(model, nnx.Param) (the optimizer's wrt filter).")
  found = [s for s in jax.tree.leaves(
      state, is_leaf=lambda x: isinstance(x, EmaNesterovState))
           if isinstance(s, EmaNesterovState)]
  if len(found) != 1:
    raise ValueError(
        "state must contain exactly one EmaNesterovState (the state of"
        f" jaxpapers.optim.ema_nesterov), found {len(found)}."
    )
  (ema_state,) = found
  if isinstance(params, nnx.State):
    # nnx.Optimizer keeps the lookahead as a State of OptVariables and the
    # model's params are a State of Params: combine their values.
    m = ema_state.m
    pure = ema_nesterov_eval_params(
        nnx.to_pure_dict(params), ema_state._replace(
            m=nnx.to_pure_dict(m) if isinstance(m, nnx.State) else m))
    anchor = jax.tree.map(lambda x: x, params)  # a copy, then its values
    nnx.replace_by_pure_dict(anchor, pure)
    return anchor
  _check_params_like_lookahead(params, ema_state.m, "params")
  neg_beta = -ema_state.beta

  def anchor(p, m):
    if isinstance(m, optax.MaskedNode):  # a leaf without lookahead
      return p
    return _add_scaled(p, neg_beta, m).astype(p.dtype)

  return jax.tree.map(anchor, params, ema_state.m)


def _check_params_like_lookahead(params, m, name):
  """Raises ``ValueError`` naming ``name`` unless ``params`` match the ones ``state`` was built for."""
  try:
    lookahead = jax.tree.structure(params).flatten_up_to(m)
  except (ValueError, TypeError):
    raise ValueError(
        f"{name} must have the pytree structure of the params ema_nesterov was"
        f" initialised with: {jax.tree.structure(params)} vs the state's"
        f" {jax.tree.structure(m)}."
    ) from None
  for p, m_leaf in zip(jax.tree.leaves(params), lookahead):
    if (not isinstance(m_leaf, optax.MaskedNode)
        and tree_lib.shape_of(p) != tree_lib.shape_of(m_leaf)):
      raise ValueError(
          f"{name} must have the leaf shapes of the params ema_nesterov was"
          f" initialised with: {tree_lib.shape_of(p)} vs"
          f" {tree_lib.shape_of(m_leaf)}."
      )


def _add_scaled(x, scale, m):
  """``x + scale * m`` in the wider of the two dtypes."""
  dtype = _wider(x.dtype, m.dtype)
  return x.astype(dtype) + scale.astype(dtype) * m.astype(dtype)


def _wider(a, b) -> jnp.dtype:
  """The promotion of two dtypes, also under strict promotion (bf16 + f32)."""
  if a == b:
    return jnp.dtype(a)
  with jax.numpy_dtype_promotion("standard"):
    return jnp.promote_types(a, b)


def _scalar_dtype(tree) -> jnp.dtype:
  """The widest of float32 and the leaves' dtypes: beta is stored in it."""
  dtypes = (x.dtype for x in jax.tree.leaves(tree))
  return functools.reduce(_wider, dtypes, jnp.dtype(jnp.float32))


def _check_hyperparameters(beta_max, gamma, warmup_steps, rest_start):
  """Checks the values that are concrete (traced ones pass through)."""
  concrete = lambda x: x is not None and not isinstance(x, jax.core.Tracer)
  if concrete(beta_max):
    value = float(beta_max)
    if not (value >= 0 and math.isfinite(value)):
      raise ValueError(f"beta_max must be >= 0 and finite, got {value}.")
    if value >= 1:
      warnings.warn(
          f"beta_max={value} >= 1: the EMA of increments is not contractive"
          " (m_{t+1} = (gamma + (1-gamma) beta) m_t + ...).",
          stacklevel=3,
      )
  if concrete(gamma) and not 0 <= float(gamma) < 1:
    raise ValueError(f"gamma must lie in [0, 1), got {float(gamma)}.")
  # int() would truncate 2.5 (and fail on NaN): whole numbers only.
  for name, value in (("warmup_steps", warmup_steps),
                      ("rest_start", rest_start)):
    if concrete(value) and not (
        not isinstance(value, bool) and np.ndim(value) == 0
        and math.isfinite(float(value)) and float(value) == int(value)
        and float(value) >= 0):
      raise ValueError(f"{name} must be >= 0 (a whole number), got {value}.")
  if (concrete(rest_start) and concrete(warmup_steps)
      and int(rest_start) <= int(warmup_steps)):
    raise ValueError(
        f"rest_start={int(rest_start)} must exceed warmup_steps="
        f"{int(warmup_steps)} (else the lookahead is never on); pass None to"
        " keep it on to the end."
    )
