r"""Rollout consistency: a JVP penalty along the residual a forecaster feeds back.

Reconstruction from the abstract; not the authors' code. The paper (a 2026
preprint on local rollout consistency for time-series forecasters) could not
be located; only its abstract was available. Taken from the abstract: local
rollout consistency compares the next prediction under teacher forcing with
the next prediction under free running; the practical loss is a first-order
surrogate that penalises the Jacobian-vector product of the predictor along
the actual feedback perturbation, which sidesteps designing a
residual-to-state alignment operator when state and output block differ in
shape or layout. Our reconstruction (see ``docs/rollout_consistency.md``):
the squared norm, the normalisation by the block size, every flag and
default (``stop_gradient``, ``normalize``, ``feedback_len``,
``linearize_at``, ``direction``), the default feedback, and the exact
finite-difference form used to validate the surrogate.

For a forecaster :math:`f_\theta` mapping a state :math:`s` (e.g. a lookback
window) to a block of :math:`P_\text{out}` rows, a state update
:math:`U(s, y)` that feeds :math:`P` rows back into the state, the true next
block :math:`y` and the prediction :math:`\hat y = f_\theta(s)_{:P}`,

.. math::
  s^+ = U(s, y), \qquad \delta = U(s, \hat y) - U(s, y),

  L_\text{JVP} = \frac{\lVert J_f(s^+)\, \mathrm{sg}(\delta) \rVert^2}
                      {P_\text{out} C_y},
  \qquad
  L_\text{RC} = \frac{\lVert f(s^+ + \delta) - f(s^+) \rVert^2}
                     {P_\text{out} C_y}.

:math:`\delta` comes from running :math:`U` twice, so derived, exogenous or
reshaped state channels need no alignment operator: :math:`U` places the
residual wherever the pipeline would place data. :math:`L_\text{JVP}` costs
one ``jax.jvp`` (no extra backward pass) and equals :math:`L_\text{RC}` up to
:math:`O(\lVert\delta\rVert^3)`; for a linear :math:`f` they coincide.

Geometric reading (from the abstract; the paper's conditions were not
available): near the manifold of states reachable from data, the
residual-induced directions :math:`\delta` probe its normal bundle. Keeping
:math:`\lVert J\delta\rVert` small stops a forecaster's own errors from
echoing into its next predictions, which keeps free-running trajectories in
a tube around that manifold.

The penalties and :func:`free_running_rollout` act on **one** example (a
state without batch axis); ``jax.vmap`` them over a batch. The free-running
evaluation (:func:`horizon_errors`, :func:`valid_prediction_time`,
:func:`free_running_errors`) scores a batch of windows.
"""

import math
import numbers
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers import tree as tree_lib
from jaxpapers._checks import check_int

Params = Any
PredictFn = Callable[[Params, jax.Array], jax.Array]
FeedbackFn = Callable[[jax.Array, jax.Array], jax.Array]

_NORMALIZE = ("none", "unit")
_LINEARIZE_AT = ("teacher", "free")
_DIRECTIONS = ("residual", "random", "hutchinson")
# Direct multi-horizon models feed back at most this many rows by default.
_MAX_DEFAULT_FEEDBACK_LEN = 24
# Keeps the "unit" normalisation finite when the residual vanishes.
_UNIT_EPS = 1e-8


def shift_feedback(state: jax.Array, block: jax.Array) -> jax.Array:
  """The default state update: drop the oldest rows, append ``block`` as newest.

  Args:
    state: ``(L, ...)`` lookback window, oldest row first.
    block: ``(P, ...)`` rows to append, ``P <= L``, with the trailing shape of
      ``state``.

  Returns:
    ``(L, ...)``: ``concatenate([state[P:], block])``.

  Example:
    >>> import jax.numpy as jnp
    >>> shift_feedback(jnp.arange(4.0), jnp.array([9.0]))
    Array([1., 2., 3., 9.], dtype=float32)
  """
  state_shape, block_shape = tree_lib.shape_of(state), tree_lib.shape_of(block)
  if not state_shape or not block_shape:
    raise ValueError(
        "the default feedback needs a state and a prediction block with a"
        f" leading row axis; got state {state_shape}, block {block_shape}."
    )
  if block_shape[1:] != state_shape[1:] or block_shape[0] > state_shape[0]:
    raise ValueError(
        "the default feedback writes the prediction block into the newest rows"
        " of the state, so the block must be (P, *state.shape[1:]) with P <="
        f" {state_shape[0]}; got block {block_shape} for state {state_shape}."
        " Pass feedback=U(state, block) for other layouts."
    )
  block = tree_lib.reshard_like(block.astype(state.dtype), state)
  return jnp.concatenate([state[block_shape[0]:], block])


class _Feedback(NamedTuple):
  """What every entry point needs after validation."""

  prediction: jax.ShapeDtypeStruct  # of f(s), (P_out, ...)
  feedback: FeedbackFn
  feedback_len: int


def _validated(predict_fn: PredictFn, params: Params, context: jax.Array,
               feedback: FeedbackFn | None,
               feedback_len: int | None) -> _Feedback:
  """Checks shapes on abstract values, which costs nothing at run time."""
  context_shape = tree_lib.shape_of(context)
  if not context_shape:
    raise ValueError(
        "context must be one example's state with a leading row axis (e.g."
        " (L, C)), got a scalar. vmap over a batch instead of passing it."
    )
  if not jnp.issubdtype(jnp.result_type(context), jnp.floating):
    raise TypeError(
        "context must be a floating-point state (predictions are fed back"
        f" into it, and J is taken along it); got {jnp.result_type(context)}.")
  out = jax.eval_shape(predict_fn, params, context)
  if not isinstance(out, jax.ShapeDtypeStruct) or not out.shape:
    raise ValueError(
        "predict_fn(params, context) must return one array block of rows"
        f" (P_out, ...); got {out}."
    )
  if not jnp.issubdtype(out.dtype, jnp.floating):
    raise ValueError(
        f"predict_fn must return floating-point values, got {out.dtype}."
    )
  num_rows = out.shape[0]
  if feedback_len is None:
    feedback_len = min(_MAX_DEFAULT_FEEDBACK_LEN, num_rows)
  if (not isinstance(feedback_len, numbers.Integral)
      or isinstance(feedback_len, bool) or not 1 <= feedback_len <= num_rows):
    raise ValueError(
        f"feedback_len must be an int in [1, P_out={num_rows}] (the rows of"
        f" the prediction block fed back), got {feedback_len!r}."
    )
  feedback = shift_feedback if feedback is None else feedback
  block = jax.ShapeDtypeStruct((feedback_len,) + out.shape[1:], out.dtype)
  state = jax.ShapeDtypeStruct(context_shape, context.dtype)
  try:
    next_state = jax.eval_shape(feedback, state, block)
  except (TypeError, ValueError, IndexError) as e:
    raise ValueError(
        f"feedback(state, block) failed for a state of shape {context_shape}"
        f" and a prediction block of shape {block.shape} (feedback_len ="
        f" {feedback_len}): {e}"
    ) from e
  if (not isinstance(next_state, jax.ShapeDtypeStruct)
      or next_state.shape != context_shape):
    raise ValueError(
        "feedback(state, block) must return the next state, shaped like the"
        f" state {context_shape}; got {next_state}."
    )
  return _Feedback(out, feedback, feedback_len)


def _check_target(target: jax.Array, prediction: jax.ShapeDtypeStruct,
                  feedback_len: int) -> None:
  target_shape = tree_lib.shape_of(target)
  if (not target_shape or target_shape[1:] != prediction.shape[1:]
      or target_shape[0] < feedback_len):
    raise ValueError(
        "target must hold the true next rows, shaped (R, "
        f"*{prediction.shape[1:]}) with R >= feedback_len = {feedback_len}"
        f" like the prediction block {prediction.shape}; got {target_shape}."
    )


class _Perturbation(NamedTuple):
  base: jax.Array  # the state at which J is taken
  direction: jax.Array  # state-shaped perturbation d


def _perturbation(predict_fn, params, context, target, *, feedback,
                  stop_gradient, feedback_len, linearize_at, direction,
                  key) -> _Perturbation:
  """Teacher-forced state, residual perturbation and the chosen direction."""
  if linearize_at not in _LINEARIZE_AT:
    raise ValueError(
        f"linearize_at must be one of {_LINEARIZE_AT}, got {linearize_at!r}."
    )
  if direction not in _DIRECTIONS:
    raise ValueError(
        f"direction must be one of {_DIRECTIONS}, got {direction!r}."
    )
  if direction != "residual" and key is None:
    raise ValueError(f"direction={direction!r} draws a probe: pass key=.")
  checked = _validated(predict_fn, params, context, feedback, feedback_len)
  _check_target(target, checked.prediction, checked.feedback_len)
  update, p = checked.feedback, checked.feedback_len
  truth = target[:p].astype(checked.prediction.dtype)
  teacher_state = update(context, truth)
  delta = update(context, predict_fn(params, context)[:p]) - teacher_state
  if stop_gradient:
    delta = jax.lax.stop_gradient(delta)
  if direction == "residual":
    d = delta
  else:
    # The probe enters through U exactly as a residual would, so it lives in
    # the fed-back slots whatever the state layout.
    if direction == "random":
      z = jax.random.normal(key, truth.shape, truth.dtype)
    else:
      z = jax.random.rademacher(key, truth.shape, truth.dtype)
    d = jax.lax.stop_gradient(update(context, truth + z) - teacher_state)
    if direction == "random":
      d = d * (_norm(delta) / _norm(d))
  base = teacher_state if linearize_at == "teacher" else teacher_state + delta
  return _Perturbation(base, d)


def _norm(x: jax.Array) -> jax.Array:
  return jnp.sqrt(jnp.sum(jnp.square(x)))


def _check_normalize(normalize: str) -> None:
  if normalize not in _NORMALIZE:
    raise ValueError(
        f"normalize must be one of {_NORMALIZE}, got {normalize!r}."
    )


def _reduce(change: jax.Array, direction: jax.Array,
            normalize: str) -> jax.Array:
  value = jnp.sum(jnp.square(change)) / change.size
  if normalize == "unit":
    value = value / (jnp.sum(jnp.square(direction)) + _UNIT_EPS)
  return value


def rollout_consistency(
    predict_fn: PredictFn,
    params: Params,
    context: jax.Array,
    target: jax.Array,
    *,
    feedback: FeedbackFn | None = None,
    stop_gradient: bool = True,
    normalize: str = "none",
    feedback_len: int | None = None,
    linearize_at: str = "teacher",
    direction: str = "residual",
    key: jax.Array | None = None,
) -> jax.Array:
  r"""First-order rollout-consistency penalty :math:`\lVert J_f(s^+)\,\delta\rVert^2` of one example.

  .. math::
    L_\text{JVP} = \frac{\lVert J_f(s^+)\, \mathrm{sg}(\delta)
    \rVert^2}{P_\text{out} C_y},\quad s^+ = U(s, y_{1:P}),\quad
    \delta = U(s, f(s)_{1:P}) - s^+

  computed with one ``jax.jvp`` at :math:`s^+`. Parameters enter through the
  closure, so ``jax.grad`` of a loss holding this penalty reaches
  :math:`\theta` through :math:`J`. The weight :math:`\lambda` belongs to the
  training loss, not to this function.

  Args:
    predict_fn: ``predict_fn(params, state) -> (P_out, ...)`` for one state.
    params: the forecaster's parameters (any pytree).
    context: one state :math:`s` (no batch axis), e.g. an ``(L, C)`` window.
    target: the true next rows, ``(R, ...)`` with ``R >= feedback_len`` and
      the trailing shape of the prediction; the first ``feedback_len`` rows
      are fed back.
    feedback: the state update ``U(state, block) -> next_state``; default
      :func:`shift_feedback` (drop the oldest ``P`` rows, append the block).
      Any placement works, e.g. writing the block into some channels of a
      state with exogenous ones; :math:`\delta` is taken as
      ``U(s, y_hat) - U(s, y)``.
    stop_gradient: stop the gradient through :math:`\delta` (default). With
      ``False`` it also flows through the prediction into the residual size,
      duplicating the task loss at order :math:`|r|^3`.
    normalize: ``"none"`` (default) weights by the residual size; ``"unit"``
      divides by :math:`\lVert d\rVert^2 + 10^{-8}` (direction ``d``), a
      directional Lipschitz penalty.
    feedback_len: rows fed back, ``P``; default ``min(24, P_out)`` (1 for a
      one-step model).
    linearize_at: take :math:`J` at the teacher-forced state ``"teacher"``
      (default) or at the free-running one ``"free"`` (:math:`s^+ + \delta`).
    direction: ``"residual"`` (the method); ablations ``"random"`` (a Gaussian
      block fed through ``U``, rescaled to :math:`\lVert\delta\rVert`) and
      ``"hutchinson"`` (a Rademacher block fed through ``U``: an unbiased
      estimate of :math:`\lVert J A\rVert_F^2` for the placement :math:`A`).
    key: PRNG key, needed by the two ablation directions.

  Returns:
    The scalar penalty of this example.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> predict = lambda w, s: jnp.tanh(s @ w)[None]  # (L,) -> (1,) block
    >>> w, s = jnp.array([0.1, -0.2, 0.5]), jnp.array([1.0, 2.0, 0.5])
    >>> penalty = rollout_consistency(predict, w, s, jnp.array([0.1]))
    >>> exact = rollout_consistency_exact(predict, w, s, jnp.array([0.1]))
    >>> print(f"{penalty:.5f} vs exact {exact:.5f}")
    0.00538 vs exact 0.00548
    >>> contexts, targets = jnp.ones((8, 3)), jnp.zeros((8, 1))  # a batch
    >>> jax.vmap(lambda c, t: rollout_consistency(predict, w, c, t))(
    ...     contexts, targets).shape
    (8,)

  References:
    Local rollout consistency (2026 preprint; abstract only, reconstruction:
    ``docs/rollout_consistency.md``).
    Pervez & Locatello, JVP penalties on transient amplification of rollouts,
    https://arxiv.org/abs/2605.08856.
  """
  _check_normalize(normalize)
  base, d = _perturbation(
      predict_fn, params, context, target, feedback=feedback,
      stop_gradient=stop_gradient, feedback_len=feedback_len,
      linearize_at=linearize_at, direction=direction, key=key)
  change = jax.jvp(lambda s: predict_fn(params, s), (base,), (d,))[1]
  return _reduce(change, d, normalize)


def rollout_consistency_exact(
    predict_fn: PredictFn,
    params: Params,
    context: jax.Array,
    target: jax.Array,
    *,
    feedback: FeedbackFn | None = None,
    stop_gradient: bool = True,
    normalize: str = "none",
    feedback_len: int | None = None,
    linearize_at: str = "teacher",
    direction: str = "residual",
    key: jax.Array | None = None,
) -> jax.Array:
  r"""Exact local rollout consistency :math:`\lVert f(s^+ + \delta) - f(s^+)\rVert^2` of one example.

  The finite-difference counterpart of :func:`rollout_consistency`, with the
  same arguments: the change of the next prediction between the
  teacher-forced state and the free-running one, divided by the block size.
  It validates the surrogate (they agree to :math:`O(\lVert\delta\rVert^3)`
  and coincide for a linear forecaster) and serves as a baseline.
  With ``linearize_at="free"`` the difference is taken backwards from the
  free-running state, :math:`f(s^+ + \delta) - f(s^+)` again for the residual
  direction; for the ablation directions ``d`` it is ``f(b + d) - f(b)``
  (teacher) or ``f(b) - f(b - d)`` (free) at the same base ``b``.

  Example:
    >>> import jax.numpy as jnp
    >>> predict = lambda w, s: (s @ w)[None]  # a linear forecaster
    >>> w, s = jnp.array([0.5, -0.25, 0.5]), jnp.array([1.0, 2.0, 0.5])
    >>> # residual 0.25 - 0.75 lands in the newest slot, whose weight is 0.5
    >>> float(rollout_consistency_exact(predict, w, s, jnp.array([0.75])))
    0.0625
  """
  _check_normalize(normalize)
  base, d = _perturbation(
      predict_fn, params, context, target, feedback=feedback,
      stop_gradient=stop_gradient, feedback_len=feedback_len,
      linearize_at=linearize_at, direction=direction, key=key)
  if linearize_at == "teacher":
    change = predict_fn(params, base + d) - predict_fn(params, base)
  else:
    change = predict_fn(params, base) - predict_fn(params, base - d)
  return _reduce(change, d, normalize)


def free_running_rollout(
    predict_fn: PredictFn,
    params: Params,
    context: jax.Array,
    horizon: int,
    *,
    feedback: FeedbackFn | None = None,
    feedback_len: int | None = None,
) -> jax.Array:
  r"""Forecasts ``horizon`` rows of one example, feeding predictions back.

  Each of :math:`\lceil H / P\rceil` ``lax.scan`` steps predicts a block,
  keeps its first ``P = feedback_len`` rows, and advances the state with
  ``feedback(state, rows)``. Differentiable, so a loss on it is k-step
  unrolled training (backpropagation through the model's own predictions).

  Args:
    predict_fn: ``predict_fn(params, state) -> (P_out, ...)``.
    params: the forecaster's parameters.
    context: one initial state (no batch axis).
    horizon: number of rows to forecast, ``H >= 1``.
    feedback: the state update, default :func:`shift_feedback`.
    feedback_len: rows fed back per step, default ``min(24, P_out)``.

  Returns:
    ``(H, ...)``: the forecast rows, with the prediction's trailing shape.

  Example:
    >>> import jax.numpy as jnp
    >>> # A persistence-with-drift forecaster: next = last + 1.
    >>> predict = lambda p, s: s[-1:] + p
    >>> free_running_rollout(predict, 1.0, jnp.zeros(3), 4)
    Array([1., 2., 3., 4.], dtype=float32)
  """
  check_int("horizon", horizon, 1)
  checked = _validated(predict_fn, params, context, feedback, feedback_len)
  update, p = checked.feedback, checked.feedback_len

  def step(state, _):
    rows = predict_fn(params, state)[:p]
    return update(state, rows), rows

  num_steps = math.ceil(horizon / p)
  _, blocks = jax.lax.scan(step, context, None, length=num_steps)
  rows = blocks.reshape((num_steps * p,) + blocks.shape[2:])
  return rows[:horizon]


def teacher_forcing_loss(
    predict_fn: PredictFn,
    params: Params,
    contexts: jax.Array,
    targets: jax.Array,
    lam: float | jax.Array,
    *,
    feedback: FeedbackFn | None = None,
    feedback_len: int | None = None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
  r"""The method's loss of a batch: one-step MSE + ``lam`` * mean penalty.

  .. math::
    L = \operatorname{mean}\,(f(s_b) - y_b)^2
        + \lambda \operatorname{mean}_b L_\text{JVP}(s_b, y_b)

  with :math:`L_\text{JVP}` from :func:`rollout_consistency`. The penalty is
  computed even at ``lam = 0`` (plain teacher forcing), so runs of several
  lambdas, teacher forcing included, can share one vmapped step.

  Args:
    predict_fn: ``predict_fn(params, state) -> (P_out, ...)`` for one state.
    params: the forecaster's parameters.
    contexts: ``(B, ...)`` states.
    targets: ``(B, P_out, ...)`` the true next blocks, shaped like the
      predictions.
    lam: the penalty weight (finite, >= 0; checked when concrete).
    feedback: the state update, default :func:`shift_feedback`.
    feedback_len: rows fed back, default ``min(24, P_out)``.

  Returns:
    ``(loss, (task_loss, penalty))``, the form
    ``jax.value_and_grad(..., has_aux=True)`` takes.

  Example:
    >>> import jax.numpy as jnp
    >>> predict = lambda w, s: (s[-2:] @ w)[None]  # linear AR(2)
    >>> w, contexts = jnp.array([0.0, 0.5]), jnp.array([[1.0, 2.0, 4.0]])
    >>> # prediction 2 vs truth 1: task loss 1; the residual 1 lands in the
    >>> # newest slot, whose weight is 0.5: penalty 0.25
    >>> loss, (task_loss, penalty) = teacher_forcing_loss(
    ...     predict, w, contexts, jnp.array([[1.0]]), 2.0)
    >>> float(loss), float(task_loss), float(penalty)
    (1.5, 1.0, 0.25)
  """
  _check_batch(contexts, targets)
  _check_scalar(lam, "lam")
  try:
    # inf would turn a zero penalty into NaN (inf * 0).
    if not (float(lam) >= 0 and math.isfinite(float(lam))):
      raise ValueError(
          f"lam must be >= 0 and finite (a penalty weight), got {lam!r}.")
  except jax.errors.ConcretizationTypeError:
    pass  # traced (e.g. vmapped over lambdas): cannot be checked here
  prediction = jax.eval_shape(predict_fn, params,
                              jax.ShapeDtypeStruct(contexts.shape[1:],
                                                   contexts.dtype))
  if tuple(targets.shape[1:]) != tuple(prediction.shape):
    raise ValueError(
        f"targets must be (B, *prediction.shape) = (B, {prediction.shape}),"
        f" shaped like the predictions; got {tuple(targets.shape)}."
    )
  predictions = jax.vmap(predict_fn, (None, 0))(params, contexts)
  task_loss = jnp.mean(jnp.square(predictions - targets))
  penalty = jnp.mean(jax.vmap(lambda c, t: rollout_consistency(
      predict_fn, params, c, t, feedback=feedback, feedback_len=feedback_len)
  )(contexts, targets))
  return task_loss + lam * penalty, (task_loss, penalty)


def unrolled_loss(
    predict_fn: PredictFn,
    params: Params,
    contexts: jax.Array,
    targets: jax.Array,
    *,
    feedback: FeedbackFn | None = None,
    feedback_len: int | None = None,
) -> jax.Array:
  """k-step unrolled training loss: MSE of free-running rollouts of a batch.

  Backpropagating through it is the expensive baseline the penalty competes
  with: the gradient runs through all ``k = targets.shape[1]`` steps of
  :func:`free_running_rollout`.

  Args:
    predict_fn: ``predict_fn(params, state) -> (P_out, ...)`` for one state.
    params: the forecaster's parameters.
    contexts: ``(B, ...)`` initial states.
    targets: ``(B, k, ...)`` the true rows following each context.
    feedback: the state update, default :func:`shift_feedback`.
    feedback_len: rows fed back per step, default ``min(24, P_out)``.

  Returns:
    The scalar mean squared error over the batch, the ``k`` steps and all
    trailing axes.

  Example:
    >>> import jax.numpy as jnp
    >>> predict = lambda p, s: s[-1:] + p  # persistence with drift p
    >>> unrolled_loss(predict, 1.0, jnp.zeros((1, 3)), jnp.ones((1, 2)))
    Array(0.5, dtype=float32)
  """
  return jnp.mean(jnp.square(_rollouts(
      predict_fn, params, contexts, targets, feedback, feedback_len) - targets))


def _rollouts(predict_fn, params, contexts, targets, feedback, feedback_len):
  """:func:`free_running_rollout` of every context over the targets' horizon."""
  if len(tree_lib.shape_of(targets)) < 2:
    raise ValueError(
        f"targets must be (B, H, ...), got shape {tree_lib.shape_of(targets)}."
    )
  _check_batch(contexts, targets)
  return jax.vmap(lambda c: free_running_rollout(
      predict_fn, params, c, targets.shape[1], feedback=feedback,
      feedback_len=feedback_len))(contexts)


def _check_batch(contexts: jax.Array, targets: jax.Array) -> None:
  """One target per context: the leading (batch) sizes must agree, and not be 0."""
  context_shape, target_shape = (tree_lib.shape_of(contexts),
                                 tree_lib.shape_of(targets))
  if not context_shape or not target_shape or (
      context_shape[0] != target_shape[0]):
    raise ValueError(
        "contexts and targets must share their leading (batch) axis, one"
        f" target per context; got {context_shape} and {target_shape}."
    )
  if context_shape[0] == 0:
    raise ValueError("contexts is empty: the batch axis has size 0 (a mean"
                     " over no example is NaN).")


def _check_scalar(value: Any, name: str) -> None:
  if tree_lib.shape_of(value) != ():
    raise ValueError(
        f"{name} must be a scalar; got shape {tree_lib.shape_of(value)}.")


class HorizonErrors(NamedTuple):
  """Forecast errors per horizon step (index ``h`` = ``h + 1`` steps ahead)."""

  mse: jax.Array  # (H,)
  mae: jax.Array  # (H,)


def horizon_errors(predictions: jax.Array, targets: jax.Array) -> HorizonErrors:
  """Mean squared and absolute error per horizon step.

  Args:
    predictions: ``(B, H, ...)`` forecasts (e.g. a vmapped
      :func:`free_running_rollout`).
    targets: the truth, shaped like ``predictions``.

  Returns:
    :class:`HorizonErrors` with ``(H,)`` arrays, averaged over the batch and
    all trailing axes. NaNs propagate, so a diverged rollout stays visible.

  Example:
    >>> import jax.numpy as jnp
    >>> errors = horizon_errors(jnp.array([[1.0, 2.0]]), jnp.array([[1.0, 0.0]]))
    >>> errors.mse, errors.mae
    (Array([0., 4.], dtype=float32), Array([0., 2.], dtype=float32))
  """
  _check_batch_of_horizons(predictions, targets)
  dtype = jnp.result_type(predictions.dtype, targets.dtype)
  error = predictions.astype(dtype) - targets.astype(dtype)
  axes = (0,) + tuple(range(2, error.ndim))
  return HorizonErrors(jnp.mean(jnp.square(error), axis=axes),
                       jnp.mean(jnp.abs(error), axis=axes))


def _check_batch_of_horizons(predictions: jax.Array,
                             targets: jax.Array) -> None:
  # An integer side would be cast (silently rounding the other one's values).
  tree_lib.check_real_floating(predictions, "predictions")
  tree_lib.check_real_floating(targets, "targets")
  pred_shape, target_shape = (tree_lib.shape_of(predictions),
                              tree_lib.shape_of(targets))
  if len(pred_shape) < 2:
    raise ValueError(
        f"predictions must be (B, H, ...), got shape {pred_shape}."
    )
  if pred_shape != target_shape:
    raise ValueError(
        f"targets must have the shape of predictions {pred_shape}, got"
        f" {target_shape}."
    )
  if pred_shape[0] == 0 or pred_shape[1] == 0:
    raise ValueError(
        f"predictions is empty: shape {pred_shape} has no window or no"
        " horizon step (a mean over nothing is NaN).")


def valid_prediction_time(predictions: jax.Array, targets: jax.Array,
                          threshold: float) -> jax.Array:
  """Steps until a forecast's RMS error first exceeds ``threshold``.

  The valid prediction time of chaotic-systems forecasting (e.g. Vlachas et
  al., "Backpropagation algorithms and Reservoir Computing in Recurrent
  Neural Networks for the forecasting of complex spatiotemporal dynamics",
  Neural Networks 2020, https://arxiv.org/abs/1910.05266), counted in steps:
  per window, the number of leading horizon steps whose root-mean-square
  error over the trailing axes is at most ``threshold``.

  Args:
    predictions: ``(B, H, ...)`` forecasts.
    targets: the truth, shaped like ``predictions``.
    threshold: the largest valid RMS error (>= 0), in the units of the data
      (e.g. training standard deviations for z-normalised series).

  Returns:
    ``(B,)`` integer steps in ``[0, H]``; ``H`` where no step exceeds the
    threshold. A NaN error (a diverged rollout) counts as exceeding it.

  Example:
    >>> import jax.numpy as jnp
    >>> errors = jnp.array([[0.1, 0.5, 0.2], [0.1, 0.2, 0.3]])
    >>> valid_prediction_time(errors, jnp.zeros((2, 3)), 0.4)
    Array([1, 3], dtype=int32)
  """
  _check_batch_of_horizons(predictions, targets)
  _check_scalar(threshold, "threshold")
  try:
    if not float(threshold) >= 0:
      raise ValueError(f"threshold must be >= 0 (an RMS error), got"
                       f" {threshold!r}.")
  except jax.errors.ConcretizationTypeError:
    pass  # traced: cannot be checked here
  dtype = jnp.result_type(predictions.dtype, targets.dtype)
  error = predictions.astype(dtype) - targets.astype(dtype)
  rms_BxH = jnp.sqrt(jnp.mean(jnp.square(error),
                              axis=tuple(range(2, error.ndim))))
  # Written as "not within" so that a NaN error ends the valid time.
  exceeded = ~(rms_BxH <= threshold)
  return jnp.where(jnp.any(exceeded, axis=1), jnp.argmax(exceeded, axis=1),
                   exceeded.shape[1])


class FreeRunningErrors(NamedTuple):
  """Errors of free-running forecasts of a batch of windows."""

  mse: jax.Array  # (H,) per horizon step, as in HorizonErrors
  mae: jax.Array  # (H,)
  valid_steps: jax.Array | None  # (B,) valid prediction time; None untested


def free_running_errors(
    predict_fn: PredictFn,
    params: Params,
    contexts: jax.Array,
    targets: jax.Array,
    *,
    vpt_threshold: float | None = None,
    feedback: FeedbackFn | None = None,
    feedback_len: int | None = None,
) -> FreeRunningErrors:
  """Forecasts every window free-running over the targets' horizon; scores it.

  The evaluation of a forecaster that feeds its predictions back: a vmapped
  :func:`free_running_rollout` of ``H = targets.shape[1]`` rows per context,
  its :func:`horizon_errors` and, with ``vpt_threshold``, its
  :func:`valid_prediction_time`.

  Args:
    predict_fn: ``predict_fn(params, state) -> (P_out, ...)`` for one state.
    params: the forecaster's parameters.
    contexts: ``(B, ...)`` initial states, one per window.
    targets: ``(B, H, ...)`` the true rows following each context.
    vpt_threshold: RMS error up to which a step counts as valid; None skips
      the valid prediction time.
    feedback: the state update, default :func:`shift_feedback`.
    feedback_len: rows fed back per step, default ``min(24, P_out)``.

  Returns:
    :class:`FreeRunningErrors`.

  Example:
    >>> import jax.numpy as jnp
    >>> predict = lambda p, s: s[-1:] + p  # persistence with drift p
    >>> contexts, targets = jnp.zeros((1, 3)), jnp.array([[1.0, 2.0, 2.0]])
    >>> errors = free_running_errors(predict, 1.0, contexts, targets,
    ...                              vpt_threshold=0.5)
    >>> errors.mse, errors.valid_steps
    (Array([0., 0., 1.], dtype=float32), Array([2], dtype=int32))
  """
  rollouts = _rollouts(predict_fn, params, contexts, targets, feedback,
                       feedback_len)
  errors = horizon_errors(rollouts, targets)
  valid_steps = (None if vpt_threshold is None else
                 valid_prediction_time(rollouts, targets, vpt_threshold))
  return FreeRunningErrors(errors.mse, errors.mae, valid_steps)
