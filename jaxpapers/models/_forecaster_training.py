"""Training one-step forecasters in vmapped groups: teacher forcing, the JVP penalty, k-step unrolling.

The training side of the rollout-consistency experiment
(``docs/rollout_consistency.md``), for any nnx forecaster that maps one
``(L, C)`` window to its next row (:class:`DLinear`, :class:`MLPForecaster`):

- :func:`forecast_task` cuts a series into chronological train / validation /
  test windows;
- a :class:`ForecasterGroup` is a set of runs of one method, each with its
  own ``lam`` and seed (``"penalty"``:
  :func:`jaxpapers.losses.teacher_forcing_loss`, where ``lam = 0`` is plain
  teacher forcing; ``"unroll"``: :func:`jaxpapers.losses.unrolled_loss` over
  ``unroll_k`` steps); :func:`make_forecaster` builds the model of each run;
- :func:`init_group` stacks the runs' fresh parameters and optimizer states;
  :func:`make_train_chunk` gives one jitted ``lax.scan`` of training steps of
  every run at once, under ``jax.vmap``;
- :func:`evaluate_members` scores each trained run free-running
  (:func:`jaxpapers.losses.free_running_errors`).

Each run's initialisation and mini-batches are pure functions of its seed
(batch ``t`` = ``f(data key, t)``), so runs of one seed share them across
lambdas and methods (paired comparisons), and a resumed run sees the same
batches.
"""

import functools
from typing import Any, Callable, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import data as data_lib
from jaxpapers import losses
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.models._forecasters import DLinear
from jaxpapers.models._forecasters import MLPForecaster

FORECASTERS = ("dlinear", "mlp")
METHODS = ("penalty", "unroll")


class ForecastTask(NamedTuple):
  """One series, cut into train / validation / test windows."""

  provenance: str
  lookback: int
  channels: int
  horizons: tuple[int, ...]
  train: tuple[np.ndarray, np.ndarray]  # contexts (N, L, C), truths (N, k, C)
  val: tuple[np.ndarray, np.ndarray]  # truths of the middle horizon
  test: tuple[np.ndarray, np.ndarray]  # truths of the longest horizon


class ForecasterGroup(NamedTuple):
  """Runs of one method that train together under ``jax.vmap``.

  ``method`` is ``"penalty"`` (TF + ``lam`` * L_JVP; ``lam = 0`` is teacher
  forcing) or ``"unroll"`` (``unroll_k``-step unrolled MSE; ``lam`` is
  ignored); ``lams`` and ``seeds`` hold one entry per run (member).
  """

  method: str
  unroll_k: int  # 0 for the penalty family
  lams: tuple[float, ...]
  seeds: tuple[int, ...]


class GroupState(NamedTuple):
  """The training state of a group; ``params`` and ``opt_state`` leaves are stacked over members."""

  step: jax.Array
  params: Any  # nnx.State of the nnx.Param variables
  opt_state: Any


def forecast_task(series: data_lib.Series, *, lookback: int,
                  horizons: tuple[int, ...], train_horizon: int = 1,
                  test_stride: int = 1) -> ForecastTask:
  """Splits ``series`` 70/10/20 in time (z-normalised) into windows.

  Args:
    series: a :class:`jaxpapers.data.Series` (e.g. ``data.load_series``).
    lookback: rows of each context window ``L``.
    horizons: increasing horizons reported; the middle one sets the
      validation windows' truths, the longest the test windows'.
    train_horizon: truth rows of each training window (the largest
      ``unroll_k`` trained on, 1 for teacher forcing alone).
    test_stride: rows between the first truths of consecutive test windows.

  Returns:
    A :class:`ForecastTask` whose ``provenance`` describes the split.

  Raises:
    ValueError: on a non-positive size or horizons that do not increase.

  Example:
    >>> from jaxpapers import data
    >>> task = forecast_task(data.lorenz96(num_samples=300), lookback=8,
    ...                      horizons=(1, 5, 10))
    >>> task.train[0].shape[1:], task.test[1].shape[1:]
    ((8, 8), (10, 8))

  References: ``docs/rollout_consistency.md`` (protocol).
  """
  check_int("lookback", lookback, 1)
  check_int("train_horizon", train_horizon, 1)
  check_int("test_stride", test_stride, 1)
  horizons = tuple(check_int("horizons[i]", h, 1) for h in horizons)
  if not horizons or any(a >= b for a, b in zip(horizons, horizons[1:])):
    raise ValueError(f"horizons must be increasing and non-empty; got"
                     f" {horizons}.")
  split = data_lib.chronological_split(series.values)
  train = split.windows("train", lookback, train_horizon)
  val = split.windows("val", lookback, horizons[len(horizons) // 2])
  test = split.windows("test", lookback, max(horizons), stride=test_stride)
  provenance = (f"{series.provenance}; split 70/10/20 in time, z-normalised"
                f" with training statistics; lookback {lookback}; windows"
                f" train/val/test = {len(train[0])}/{len(val[0])}/{len(test[0])}")
  return ForecastTask(provenance, lookback, split.values.shape[1], horizons,
                      train, val, test)


def make_forecaster(name: str, lookback: int, channels: int, key: jax.Array,
                    *, moving_average: int = 25,
                    hidden: tuple[int, int] = (128, 128)) -> nnx.Module:
  """A one-step forecaster by name: ``"dlinear"`` or ``"mlp"``.

  Args:
    name: one of :data:`FORECASTERS`.
    lookback: window rows ``L``; channels: ``C``.
    key: the parameters' PRNG key.
    moving_average: :class:`DLinear`'s trend kernel (capped at ``L``).
    hidden: :class:`MLPForecaster`'s two widths.

  Returns:
    The nnx module, mapping one ``(L, C)`` window to ``(1, C)``.

  Raises:
    ValueError: for an unknown name (or sizes the model refuses).

  Example:
    >>> import jax, jax.numpy as jnp
    >>> model = make_forecaster("mlp", 4, 2, jax.random.key(0), hidden=(8, 8))
    >>> model(jnp.ones((4, 2))).shape
    (1, 2)
  """
  rngs = nnx.Rngs(params=key)
  if name == "dlinear":
    return DLinear(lookback, channels, 1, moving_average=moving_average,
                   rngs=rngs)
  if name == "mlp":
    return MLPForecaster(lookback, channels, 1, hidden=tuple(hidden),
                         rngs=rngs)
  raise ValueError(f"unknown model {name!r}; expected one of {FORECASTERS}.")


def forecaster_optimizer(learning_rate: float, *, weight_decay: float,
                         clip_norm: float) -> optax.GradientTransformation:
  """``clip_by_global_norm(clip_norm)`` then ``adamw(learning_rate, weight_decay)``.

  Clipping keeps unrolled losses on chaotic data from spiking the weights.

  Raises:
    ValueError: unless ``learning_rate`` and ``clip_norm`` are > 0 and
      ``weight_decay`` >= 0 (all finite).

  Example:
    >>> tx = forecaster_optimizer(1e-3, weight_decay=1e-4, clip_norm=1.0)
  """
  check_real("learning_rate", learning_rate, low=0, low_open=True)
  check_real("weight_decay", weight_decay, low=0)
  check_real("clip_norm", clip_norm, low=0, low_open=True)
  return optax.chain(optax.clip_by_global_norm(clip_norm),
                     optax.adamw(learning_rate, weight_decay=weight_decay))


def _check_group(group: ForecasterGroup) -> None:
  if not isinstance(group, ForecasterGroup):
    raise TypeError(f"group must be a ForecasterGroup; got {type(group)}.")
  if group.method not in METHODS:
    raise ValueError(f"group.method must be one of {METHODS}; got"
                     f" {group.method!r}.")
  check_int("group.unroll_k", group.unroll_k,
            1 if group.method == "unroll" else 0,
            None if group.method == "unroll" else 0,
            why=" (0 for the penalty family)" if group.method == "penalty"
            else "")
  if not group.seeds or len(group.lams) != len(group.seeds):
    raise ValueError(
        "group.lams and group.seeds must hold one entry per run (and at"
        f" least one); got {len(group.lams)} lams, {len(group.seeds)} seeds.")
  for lam in group.lams:
    check_real("group.lams[i]", lam, low=0)
  for seed in group.seeds:
    check_int("group.seeds[i]", seed, 0)


def init_group(group: ForecasterGroup,
               make_model: Callable[[jax.Array], nnx.Module],
               tx: optax.GradientTransformation):
  """The group's fresh state: every member's model and optimizer, stacked.

  Member ``i`` splits ``jax.random.key(group.seeds[i])`` into its parameter
  key and its data key, so members of one seed start alike and draw the same
  mini-batches.

  Args:
    group: the runs (:class:`ForecasterGroup`).
    make_model: ``make_model(key) -> nnx.Module`` (e.g. a partial of
      :func:`make_forecaster`).
    tx: the optimizer of every member (e.g. :func:`forecaster_optimizer`).

  Returns:
    ``(graphdef, state, data_keys)``: the model's graph definition, a
    :class:`GroupState` at step 0 and the ``(M,)`` data keys.

  Raises:
    TypeError, ValueError: for a malformed group.

  Example:
    >>> import functools
    >>> group = ForecasterGroup("penalty", 0, (0.0, 0.1), (0, 0))
    >>> make = functools.partial(make_forecaster, "mlp", 4, 2, hidden=(8, 8))
    >>> tx = forecaster_optimizer(1e-3, weight_decay=0.0, clip_norm=1.0)
    >>> graphdef, state, data_keys = init_group(group, make, tx)
    >>> data_keys.shape
    (2,)
  """
  _check_group(group)
  init_keys, data_keys = jnp.stack(
      [jax.random.split(jax.random.key(s)) for s in group.seeds], axis=1)
  graphdef = nnx.graphdef(nnx.eval_shape(lambda: make_model(init_keys[0])))
  params = jax.vmap(lambda key: nnx.state(make_model(key), nnx.Param))(
      init_keys)
  opt_state = jax.vmap(tx.init)(params)
  return graphdef, GroupState(jnp.int32(0), params, opt_state), data_keys


def make_train_chunk(group: ForecasterGroup, graphdef: Any,
                     tx: optax.GradientTransformation, *, batch_size: int,
                     num_steps: int):
  """A jitted chunk of ``num_steps`` training steps of every member.

  Args:
    group: the runs (:class:`ForecasterGroup`).
    graphdef: the model's graph definition (from :func:`init_group`).
    tx: the optimizer :func:`init_group` initialised.
    batch_size: windows per step, drawn without repeats.
    num_steps: steps per call (one ``lax.scan``).

  Returns:
    ``train_chunk(state, lams, data_keys, windows) -> (state, stats)``:
    ``lams`` ``(M,)`` float32 (``jnp.asarray(group.lams)``), ``data_keys``
    from :func:`init_group`, ``windows`` = ``(contexts (N, L, C), truths
    (N, k, C))`` with ``k >= max(1, unroll_k)``. ``stats`` holds ``loss``,
    ``task_loss`` and ``penalty`` per member, averaged over the chunk (the
    unrolled family's penalty is 0). Member ``i``'s batch at step ``t`` is
    ``minibatch_indices(fold_in(data_keys[i], t), N, batch_size)``.

  Raises:
    TypeError, ValueError: for a malformed group or size; when called, for
    ``lams`` or ``windows`` that do not fit the group.

  Example:
    >>> import functools, jax.numpy as jnp, optax
    >>> group = ForecasterGroup("unroll", 2, (0.0,), (0,))
    >>> make = functools.partial(make_forecaster, "mlp", 4, 1, hidden=(8, 8))
    >>> tx = optax.sgd(1e-2)  # or forecaster_optimizer(...)
    >>> graphdef, state, keys = init_group(group, make, tx)
    >>> chunk = make_train_chunk(group, graphdef, tx, batch_size=2,
    ...                          num_steps=3)
    >>> windows = (jnp.ones((5, 4, 1)), jnp.ones((5, 2, 1)))
    >>> state, stats = chunk(state, jnp.zeros(1), keys, windows)
    >>> int(state.step), stats["loss"].shape
    (3, (1,))

  References: ``docs/rollout_consistency.md``;
  :func:`jaxpapers.losses.teacher_forcing_loss`,
  :func:`jaxpapers.losses.unrolled_loss`.
  """
  _check_group(group)
  check_int("batch_size", batch_size, 1)
  check_int("num_steps", num_steps, 1)
  predict = lambda params, window: nnx.merge(graphdef, params)(window)

  def loss_fn(params, lam, contexts, truths):
    """``(loss, (task_loss, penalty))``; unrolled runs ignore ``lam``."""
    if group.method == "penalty":
      return losses.teacher_forcing_loss(predict, params, contexts,
                                         truths[:, :1], lam)
    task_loss = losses.unrolled_loss(predict, params, contexts,
                                     truths[:, :group.unroll_k])
    return task_loss, (task_loss, jnp.zeros_like(task_loss))

  def one_step(params, opt_state, lam, data_key, step, windows):
    indices = data_lib.minibatch_indices(jax.random.fold_in(data_key, step),
                                         windows[0].shape[0], batch_size)
    (loss, (task_loss, penalty)), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(params, lam, *data_lib.take(windows, indices))
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, {
        "loss": loss, "task_loss": task_loss, "penalty": penalty}

  @jax.jit
  def train_chunk(state, lams, data_keys, windows):
    _check_chunk_inputs(group, lams, data_keys, windows)

    def body(carry, step):
      params, opt_state = carry
      params, opt_state, stats = jax.vmap(
          one_step, in_axes=(0, 0, 0, 0, None, None)
      )(params, opt_state, lams, data_keys, step, windows)
      return (params, opt_state), stats

    steps = state.step + jnp.arange(num_steps, dtype=jnp.int32)
    (params, opt_state), stats = jax.lax.scan(
        body, (state.params, state.opt_state), steps)
    stats = jax.tree.map(lambda x: jnp.mean(x, axis=0), stats)
    return GroupState(state.step + num_steps, params, opt_state), stats

  return train_chunk


def _check_chunk_inputs(group, lams, data_keys, windows):
  """Shapes against the group, on abstract values (free at run time)."""
  members = len(group.seeds)
  if jnp.shape(lams) != (members,) or jnp.shape(data_keys) != (members,):
    raise ValueError(
        f"lams and data_keys must hold one entry per member, shape"
        f" ({members},); got {jnp.shape(lams)} and {jnp.shape(data_keys)}.")
  if (not isinstance(windows, tuple) or len(windows) != 2
      or jnp.ndim(windows[0]) != 3 or jnp.ndim(windows[1]) != 3
      or windows[0].shape[0] != windows[1].shape[0]):
    raise ValueError(
        "windows must be (contexts (N, L, C), truths (N, k, C)); got shapes"
        f" {jax.tree.map(jnp.shape, windows)}.")
  needed = max(1, group.unroll_k)
  if windows[1].shape[1] < needed:
    raise ValueError(
        f"windows' truths must hold at least {needed} rows per window (the"
        f" steps trained on); got {windows[1].shape[1]}.")


def evaluate_members(graphdef: Any, params: Any,
                     val: tuple[jax.Array, jax.Array],
                     test: tuple[jax.Array, jax.Array], *,
                     vpt_threshold: float) -> dict[str, np.ndarray]:
  """Free-running scores of every member of a group, one member at a time.

  Each member is evaluated by one jitted function whose shapes do not depend
  on the group, so every group of one model and task compiles it once.

  Args:
    graphdef: the model's graph definition (from :func:`init_group`).
    params: the members' parameters, leaves stacked over ``M`` members
      (``GroupState.params``).
    val: ``(contexts (N, L, C), truths (N, H_val, C))`` validation windows.
    test: ``(contexts, truths (N, H, C))`` test windows.
    vpt_threshold: the valid-prediction-time threshold (> 0, finite).

  Returns:
    numpy arrays stacked over members: ``test_mse`` and ``test_mae``
    ``(M, H)`` per horizon step, ``val_mse`` ``(M,)`` at the last validation
    step and ``vpt`` ``(M,)`` (the mean valid prediction time, in steps).

  Raises:
    ValueError: for a non-positive threshold, or windows
      :func:`jaxpapers.losses.free_running_errors` refuses.

  Example:
    >>> import functools, jax.numpy as jnp
    >>> group = ForecasterGroup("penalty", 0, (0.0, 1.0), (0, 1))
    >>> make = functools.partial(make_forecaster, "mlp", 4, 1, hidden=(8, 8))
    >>> tx = forecaster_optimizer(1e-3, weight_decay=0.0, clip_norm=1.0)
    >>> graphdef, state, _ = init_group(group, make, tx)
    >>> windows = (jnp.ones((3, 4, 1)), jnp.ones((3, 2, 1)))
    >>> scores = evaluate_members(graphdef, state.params, windows, windows,
    ...                           vpt_threshold=0.4)
    >>> scores["test_mse"].shape, scores["vpt"].shape
    ((2, 2), (2,))

  References: :func:`jaxpapers.losses.free_running_errors`.
  """
  check_real("vpt_threshold", vpt_threshold, low=0, low_open=True)
  leaves = jax.tree.leaves(params)
  if not leaves or any(jnp.ndim(x) < 1 for x in leaves):
    raise ValueError("params must be stacked over members (a leading axis on"
                     " every leaf), as GroupState.params is.")
  records = [jax.device_get(_evaluate_run(
      jax.tree.map(lambda x, i=i: x[i], params), val, test,
      graphdef=graphdef, vpt_threshold=vpt_threshold))
             for i in range(leaves[0].shape[0])]
  return jax.tree.map(lambda *xs: np.stack(xs), *records)


@functools.partial(jax.jit, static_argnames=("graphdef", "vpt_threshold"))
def _evaluate_run(params, val, test, *, graphdef, vpt_threshold):
  """Free-running errors of one run: per-step test MSE/MAE, val MSE, VPT."""
  predict = lambda params, window: nnx.merge(graphdef, params)(window)
  test_errors = losses.free_running_errors(predict, params, *test,
                                           vpt_threshold=vpt_threshold)
  return {"test_mse": test_errors.mse, "test_mae": test_errors.mae,
          "val_mse": losses.free_running_errors(predict, params, *val).mse[-1],
          "vpt": jnp.mean(test_errors.valid_steps.astype(jnp.float32))}
