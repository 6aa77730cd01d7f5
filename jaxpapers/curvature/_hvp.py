"""Hessian-vector products, forward-over-reverse.

Every curvature quantity in jaxpapers goes through this module: one copy of
the HVP, of the scalar-loss check, and of the chunked full-data Hessian
operator that bounds memory on large measurement sets.
"""

import numbers
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxpapers import tree as tree_lib

Params = Any
LossFn = Callable[..., jax.Array]
HVPFn = Callable[[Params], Params]


def check_scalar_loss(loss_fn: LossFn, params: Params, *args: Any) -> None:
  """Raises unless ``params`` are real floats and ``loss_fn(params, *args)`` a real scalar.

  Runs on abstract values (``jax.eval_shape``), so it costs nothing at run time
  and fires at trace time with a message that names the offending shape
  (``TypeError`` for integer or complex params, whose Hessian products would
  be zero or conjugated; ``ValueError`` for the loss).
  """
  tree_lib.check_real_floating(params, "params")
  out = jax.eval_shape(loss_fn, params, *args)
  if not isinstance(out, jax.ShapeDtypeStruct):
    raise ValueError(
        "loss_fn must return a single scalar array, got a pytree"
        f" {jax.tree.structure(out)}."
    )
  if out.shape != ():
    raise ValueError(
        f"loss_fn must return a scalar, got an array of shape {out.shape}."
        " Reduce the per-example losses (e.g. with a mean) inside loss_fn."
    )
  if not jnp.issubdtype(out.dtype, jnp.floating):
    raise ValueError(
        f"loss_fn must return a floating-point scalar, got dtype {out.dtype}."
    )


def check_num_chunks(num_chunks: Any, num_examples: int) -> None:
  """Raises ``ValueError`` unless ``num_chunks`` is an int dividing ``num_examples``."""
  if (not isinstance(num_chunks, numbers.Integral)
      or isinstance(num_chunks, bool) or num_chunks < 1
      or num_examples % num_chunks):
    raise ValueError(
        f"num_chunks={num_chunks!r} must be a positive divisor (an int) of"
        f" the number of examples in data ({num_examples})."
    )


def check_direction(v: Params, params: Params) -> None:
  """Raises unless ``v`` has the structure, shapes and dtypes of ``params``.

  ``jax.jvp`` refuses tangents of another dtype with a message that names
  neither argument; a ``TypeError`` naming ``v`` comes first.
  """
  tree_lib.check_like(v, params, "v")
  for a, b in zip(jax.tree.leaves(v), jax.tree.leaves(params)):
    if jnp.result_type(a) != jnp.result_type(b):
      raise TypeError(f"v must have the dtypes of params: {jnp.result_type(a)}"
                      f" vs {jnp.result_type(b)}.")


def split_examples(x: jax.Array, num_chunks: int) -> jax.Array:
  """``x`` of shape ``(n, ...)`` as ``(num_chunks, n // num_chunks, ...)``, to scan over.

  ``lax.scan`` needs its scanned axis replicated: where the example axis is
  sharded along an Explicit mesh axis, that sharding moves to the examples
  within a chunk (each chunk is then split over the same devices).
  """
  chunks = tree_lib.split_axis(x, 0, (num_chunks, x.shape[0] // num_chunks))
  spec = getattr(getattr(jax.typeof(x), "sharding", None), "spec", None)
  if not spec or spec[0] is None:
    return chunks
  return jax.sharding.reshard(chunks, jax.P(None, *spec))


def hvp(loss_fn: LossFn, params: Params, v: Params, *args: Any) -> Params:
  r"""Hessian-vector product :math:`\nabla^2 L(\theta)\, v`, forward-over-reverse.

  .. math::
    H v = \frac{d}{d\epsilon} \nabla_\theta L(\theta + \epsilon v)\Big|_{\epsilon=0}

  computed as ``jax.jvp`` of ``jax.grad``: one forward-mode pass through the
  reverse-mode gradient, about twice the cost of a gradient and no Hessian is
  ever materialised.

  Args:
    loss_fn: ``loss_fn(params, *args) -> scalar``.
    params: pytree at which the Hessian is taken.
    v: pytree with the structure, shapes and dtypes of ``params``.
    *args: extra positional arguments of ``loss_fn`` (typically a batch).

  Returns:
    A pytree like ``params`` holding :math:`H v`.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.curvature import hvp
    >>> loss = lambda w, a: 0.5 * jnp.sum(a * w**2)
    >>> hvp(loss, jnp.ones(3), jnp.arange(3.0), jnp.array([1.0, 2.0, 3.0]))
    Array([0., 2., 6.], dtype=float32)
  """
  check_scalar_loss(loss_fn, params, *args)
  check_direction(v, params)
  grad_fn = lambda p: jax.grad(loss_fn)(p, *args)
  return jax.jvp(grad_fn, (params,), (v,))[1]


def quadratic_form(loss_fn: LossFn, params: Params, v: Params,
                   *args: Any) -> jax.Array:
  r"""Curvature along one direction, :math:`v^\top \nabla^2 L(\theta)\, v`, forward-over-forward.

  .. math::
    v^\top H v = \frac{d^2}{dt^2} L(\theta + t v)\Big|_{t=0}

  Two nested ``jax.jvp`` calls: no reverse pass and no parameter-sized
  output, which makes it cheaper than ``vdot(v, hvp(v))`` when only the
  scalar is needed (Batch Sharpness needs just that).

  Args:
    loss_fn: ``loss_fn(params, *args) -> scalar``.
    params: pytree at which the Hessian is taken.
    v: direction, a pytree like ``params``.
    *args: extra positional arguments of ``loss_fn``.

  Returns:
    The scalar :math:`v^\top H v`.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.curvature import quadratic_form
    >>> loss = lambda w: 0.5 * jnp.sum(jnp.array([1.0, 2.0, 3.0]) * w**2)
    >>> float(quadratic_form(loss, jnp.zeros(3), jnp.array([1.0, 1.0, 0.0])))
    3.0
  """
  check_scalar_loss(loss_fn, params, *args)
  check_direction(v, params)
  # Differentiate t -> L(theta + t v) rather than jvp in params with tangent v:
  # under vmap over directions the primal is then batched like the tangent,
  # which keeps Explicit-mesh sharding propagation happy.
  along = lambda t: loss_fn(
      jax.tree.map(lambda p, d: p + t.astype(p.dtype) * d, params, v), *args
  )
  dtype = jnp.result_type(*jax.tree.leaves(params))
  zero, one = jnp.zeros((), dtype), jnp.ones((), dtype)
  slope = lambda t: jax.jvp(along, (t,), (one,))[1]
  return jax.jvp(slope, (zero,), (one,))[1]


def linearize_gradient(
    loss_fn: LossFn, params: Params, data: Any, *, num_chunks: int = 1
) -> tuple[Params, HVPFn]:
  r"""Gradient and Hessian operator of the mean loss over ``data``.

  ``data`` is a pytree whose leaves share a leading example axis. With
  ``num_chunks == 1`` the gradient is linearised once (``jax.linearize``) and
  each product reuses the stored forward pass. With ``num_chunks > 1`` the
  examples are split into equal chunks and every product is a ``lax.scan``
  over them, which bounds memory by one chunk; the operator is then the mean
  of the per-chunk Hessians, i.e. the Hessian of the mean loss when
  ``loss_fn`` averages over its batch.

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar`` averaging over ``batch``.
    params: pytree at which to linearise.
    data: the measurement set, leading axis = examples.
    num_chunks: number of equal chunks; must divide the number of examples.

  Returns:
    ``(grad, hvp_fn)``: the full-data gradient and ``v -> H v``.
  """
  check_num_chunks(num_chunks, tree_lib.leading_size(data, "data"))
  check_scalar_loss(loss_fn, params, data)
  if num_chunks == 1:
    grad, hvp_fn = jax.linearize(lambda p: jax.grad(loss_fn)(p, data), params)
    return grad, hvp_fn

  chunks = jax.tree.map(lambda x: split_examples(x, num_chunks), data)

  def mean_over_chunks(fn):
    def body(total, chunk):
      return jax.tree.map(jnp.add, total, fn(chunk)), None

    zeros = jax.tree.map(jnp.zeros_like, params)
    total, _ = jax.lax.scan(body, zeros, chunks)
    return jax.tree.map(lambda t: t / num_chunks, total)

  grad = mean_over_chunks(lambda chunk: jax.grad(loss_fn)(params, chunk))

  def hvp_fn(v):
    return mean_over_chunks(lambda chunk: hvp(loss_fn, params, v, chunk))

  return grad, hvp_fn
