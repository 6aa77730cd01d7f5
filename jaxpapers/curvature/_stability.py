r"""Edge of Stochastic Stability runs: SGD that tracks sharpness, and its measurement.

Andreyev & Beneventano (2024): :func:`sgd_steps` is constant-step SGD on
mini-batches that are pure functions of ``(key, step)``, with
:func:`jaxpapers.optim.track_batch_sharpness` in the optimizer chain, so each
step also measures :math:`g_B^\top H_B g_B / g_B^\top g_B` of the batch it
trains on; :func:`sharpness_at` measures the two curvatures the paper
compares, Batch Sharpness at the training batch size and :math:`\lambda_{max}`
of the full-batch Hessian, and :func:`gni_at` GNI over mini-batch draws.
"""

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxpapers import tree as tree_lib
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.curvature._batch_sharpness import batch_sharpness
from jaxpapers.curvature._batch_sharpness import BatchSharpnessEstimate
from jaxpapers.curvature._batch_sharpness import gni
from jaxpapers.curvature._hvp import linearize_gradient
from jaxpapers.curvature._lanczos import lambda_max
from jaxpapers.curvature._lanczos import LambdaMaxResult
from jaxpapers.data import _sampling as sampling

Params = Any
LossFn = Callable[[Params, Any], jax.Array]


class SGDSteps(NamedTuple):
  """What :func:`sgd_steps` returns.

  Attributes:
    params: the parameters after the last step.
    step_sharpness: mean over the steps of each live mini-batch's
      :math:`g_B^\\top H_B g_B / g_B^\\top g_B`, at the parameters the step
      started from.
    mean_loss: mean over the steps of the mini-batch loss before each step.
  """
  params: Params
  step_sharpness: jax.Array
  mean_loss: jax.Array


def sgd_steps(loss_fn: LossFn, params: Params, data: Any, key: jax.Array,
              learning_rate: Any, first_step: Any = 0, *, batch_size: int,
              num_steps: int) -> SGDSteps:
  """``num_steps`` steps of plain SGD; batch ``t`` is a pure function of ``(key, t)``.

  Step ``t`` (``t = first_step, ..., first_step + num_steps - 1``) trains on
  the ``batch_size`` distinct examples
  ``jaxpapers.data.minibatch_indices(jax.random.fold_in(key, t), n, batch_size)``, so
  calling it twice for ``num_steps`` each equals one call for twice as many
  (a resumed run needs only ``params`` and the step). SGD is stateless, so a
  fresh tracker per call makes its running mean the mean step sharpness of
  this call's steps.

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar`` mean loss over a batch,
      static (hashable); the tracker passes the batch by the name ``batch``.
    params: pytree of real floating arrays.
    data: pytree whose leaves share a leading axis of n examples.
    key: PRNG key of the batch stream.
    learning_rate: constant step size eta > 0 (may be traced).
    first_step: index of the first step (may be traced).
    batch_size: examples per step, ``1 <= batch_size <= n`` (``n``: full batch).
    num_steps: number of steps, ``>= 1``.

  Returns:
    :class:`SGDSteps` (parameters, mean step sharpness, mean loss).

  Raises:
    ValueError: ``batch_size`` outside ``[1, n]``, ``num_steps < 1``, a
      concrete ``learning_rate`` that is not positive and finite, or leaves
      of ``data`` without a common leading axis.
    TypeError: a non-int ``batch_size`` or ``num_steps``.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers import curvature
    >>> loss = lambda w, batch: jnp.mean((batch[0] @ w - batch[1]) ** 2)
    >>> data = (jnp.ones((8, 3)), jnp.ones(8))
    >>> out = curvature.sgd_steps(loss, jnp.zeros(3), data, jax.random.key(0),
    ...                           0.1, batch_size=4, num_steps=5)
    >>> out.params.shape
    (3,)

  References:
    Andreyev & Beneventano, "Edge of Stochastic Stability", arXiv 2412.20553.
  """
  _check_sizes(data, batch_size, num_steps, "num_steps")
  check_real("learning_rate", learning_rate, low=0, low_open=True,
             allow_traced=True)
  return _sgd_steps(loss_fn, params, data, key, learning_rate, first_step,
                    batch_size=batch_size, num_steps=num_steps)


@functools.partial(jax.jit,
                   static_argnames=("loss_fn", "batch_size", "num_steps"))
def _sgd_steps(loss_fn, params, data, key, learning_rate, first_step, *,
               batch_size, num_steps):
  # Imported here: jaxpapers.optim imports this area.
  from jaxpapers.optim import track_batch_sharpness  # pylint: disable=g-import-not-at-top
  num_examples = jax.tree.leaves(data)[0].shape[0]
  tx = optax.chain(track_batch_sharpness(), optax.sgd(learning_rate))
  opt_state = tx.init(params)

  def step_fn(carry, step):
    params, opt_state = carry
    batch = sampling.take(data, sampling.minibatch_indices(
        jax.random.fold_in(key, step), num_examples, batch_size))
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = tx.update(
        grads, opt_state, params, value_fn=loss_fn, grad=grads, batch=batch)
    return (optax.apply_updates(params, updates), opt_state), loss

  steps = first_step + jnp.arange(num_steps, dtype=jnp.int32)
  (params, opt_state), losses = jax.lax.scan(step_fn, (params, opt_state),
                                             steps)
  return SGDSteps(params, optax.tree.get(opt_state, "batch_sharpness_mean"),
                  jnp.mean(losses))


class Sharpness(NamedTuple):
  """What :func:`sharpness_at` returns.

  Attributes:
    batch_sharpness: :class:`BatchSharpnessEstimate` at the batch size.
    lambda_max: :class:`LambdaMaxResult` of the full-batch Hessian (its
      ``eigenvector`` warm-starts the next call).
  """
  batch_sharpness: BatchSharpnessEstimate
  lambda_max: LambdaMaxResult


def sharpness_at(loss_fn: LossFn, params: Params, data: Any, key: jax.Array,
                 *, batch_size: int, num_draws: int, v0: Params | None = None,
                 max_iters: int = 100, tol: float = 1e-3) -> Sharpness:
  """Batch Sharpness at ``batch_size`` and lambda_max of the full-batch Hessian.

  Batch Sharpness is the Monte Carlo mean over ``num_draws`` mini-batches of
  ``batch_size`` distinct examples (:func:`jaxpapers.data.sample_minibatches`
  with ``key``); at ``batch_size = n`` every draw is the full batch, so one
  exact draw is taken and ``key`` is unused. lambda_max is Lanczos on the
  Hessian of the loss over all of ``data`` (:func:`linearize_gradient`).

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar`` mean loss over a batch.
    params: pytree of real floating arrays.
    data: pytree whose leaves share a leading axis of n examples.
    key: PRNG key of the Batch Sharpness draws.
    batch_size: examples per draw, ``1 <= batch_size <= n`` (static).
    num_draws: mini-batches drawn, ``>= 1`` (static).
    v0: warm start of Lanczos (e.g. the last call's eigenvector), or None.
    max_iters: Lanczos budget in Hessian-vector products.
    tol: Lanczos relative residual at which to stop.

  Returns:
    :class:`Sharpness` (the Batch Sharpness estimate and lambda_max).

  Raises:
    ValueError: ``batch_size`` outside ``[1, n]``, ``num_draws < 1``, leaves
      of ``data`` without a common leading axis, or (from
      :func:`lambda_max`) a negative ``tol`` or a concrete zero ``v0``.
    TypeError: a non-int ``batch_size`` or ``num_draws``.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers import curvature
    >>> loss = lambda w, b: 0.5 * jnp.mean((b @ w) ** 2)
    >>> data = jnp.diag(jnp.array([1.0, 2.0, 3.0]))
    >>> out = curvature.sharpness_at(loss, jnp.ones(3), data, jax.random.key(0),
    ...                              batch_size=3, num_draws=4)
    >>> round(float(out.lambda_max.eigenvalue), 4)
    3.0

  References:
    Andreyev & Beneventano, "Edge of Stochastic Stability", arXiv 2412.20553.
  """
  if batch_size == _check_sizes(data, batch_size, num_draws):
    # Every full-batch "draw" is the same batch: one draw is exact.
    batches = jax.tree.map(lambda x: x[None], data)
  else:
    batches = sampling.sample_minibatches(key, data, batch_size, num_draws)
  _, hvp_fn = linearize_gradient(loss_fn, params, data)
  return Sharpness(batch_sharpness(loss_fn, params, batches),
                   lambda_max(hvp_fn, params, v0=v0, max_iters=max_iters,
                              tol=tol))


def gni_at(loss_fn: LossFn, params: Params, data: Any, key: jax.Array, *,
           batch_size: int, num_draws: int) -> jax.Array:
  """GNI over ``num_draws`` mini-batches of ``batch_size`` drawn from ``data``.

  :func:`gni` with its draws from :func:`jaxpapers.data.sample_minibatches`
  (``key``) and its measurement set all of ``data``; each draw costs one
  Hessian-vector product over all of ``data``.

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar`` mean loss over a batch.
    params: pytree of real floating arrays.
    data: pytree whose leaves share a leading axis of n examples.
    key: PRNG key of the draws.
    batch_size: examples per draw, ``1 <= batch_size <= n`` (static).
    num_draws: mini-batches drawn, ``>= 1`` (static).

  Returns:
    The GNI estimate, a scalar.

  Raises:
    ValueError: ``batch_size`` outside ``[1, n]``, ``num_draws < 1`` or
      leaves of ``data`` without a common leading axis.
    TypeError: a non-int ``batch_size`` or ``num_draws``.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers import curvature
    >>> loss = lambda w, b: 0.5 * jnp.mean((b @ w) ** 2)
    >>> value = curvature.gni_at(loss, jnp.ones(3), jnp.eye(3), jax.random.key(0),
    ...                          batch_size=2, num_draws=4)
    >>> value.shape
    ()

  References:
    Andreyev & Beneventano, "Edge of Stochastic Stability", arXiv 2412.20553.
  """
  _check_sizes(data, batch_size, num_draws)
  batches = sampling.sample_minibatches(key, data, batch_size, num_draws)
  return gni(loss_fn, params, batches, data).value


def _check_sizes(data, batch_size, count, count_name="num_draws") -> int:
  """The number n of examples in ``data``; named errors for bad sizes."""
  num_examples = tree_lib.leading_size(data, "data")
  check_int(count_name, count, 1)
  check_int("batch_size", batch_size, 1, num_examples,
            why=" (the number of examples in data)")
  return num_examples
