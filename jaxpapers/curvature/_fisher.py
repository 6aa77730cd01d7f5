r"""The diagonal empirical Fisher: mean squared per-example gradient.

.. math::
  F_{\mathrm{diag}}(\theta) = \frac{1}{N} \sum_{n=1}^{N}
    \big(\nabla_\theta \ell(\theta; x_n, y_n)\big)^{\odot 2}

with :math:`\ell = -\log p(y \mid x)` for the empirical Fisher proper (any
per-example loss is accepted). It is a nonnegative diagonal curvature
estimate that needs only first derivatives, the weighting of EWC (Kirkpatrick
et al., 2017, https://arxiv.org/abs/1612.00796) and of Fisher merging (Matena
& Raffel, 2022, https://arxiv.org/abs/2111.09832); Kunstner et al. (2019,
https://arxiv.org/abs/1905.12558) discuss where it differs from the Hessian.
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxpapers import tree as tree_lib
from jaxpapers.curvature._hvp import check_num_chunks
from jaxpapers.curvature._hvp import check_scalar_loss
from jaxpapers.curvature._hvp import split_examples

Params = Any


def diagonal_fisher(
    example_loss_fn: Callable[[Params, Any], jax.Array], params: Params,
    data: Any, *, num_chunks: int = 1
) -> Params:
  r"""Mean over examples of the squared per-example gradient, leaf by leaf.

  Per-example gradients come from ``jax.vmap(jax.grad(example_loss_fn))``;
  with ``num_chunks > 1`` the examples are split into equal chunks summed by
  ``lax.scan``, so memory holds one chunk's gradients at a time.

  Args:
    example_loss_fn: ``example_loss_fn(params, example) -> scalar``, the loss
      of ONE example (``example`` is ``data`` without its leading axis).
    params: pytree at which the Fisher is taken (real floating leaves).
    data: pytree whose leaves share a leading example axis.
    num_chunks: number of equal chunks; must divide the number of examples.

  Returns:
    A pytree like ``params``: the diagonal of the empirical Fisher.

  Raises:
    ValueError: if ``data`` has no common leading axis, ``num_chunks`` does not
      divide it, or the loss of one example is not a real scalar.
    TypeError: if ``params`` has non-floating leaves.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.curvature import diagonal_fisher
    >>> loss = lambda w, x: 0.5 * jnp.sum((w - x) ** 2)  # gradient w - x
    >>> diagonal_fisher(loss, jnp.zeros(2), jnp.array([[1.0, 2.0], [3.0, 0.0]]))
    Array([5., 2.], dtype=float32)
  """
  num_examples = tree_lib.leading_size(data, "data")
  check_num_chunks(num_chunks, num_examples)
  one_example = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), data)
  check_scalar_loss(example_loss_fn, params, one_example)
  per_example_grad = jax.vmap(jax.grad(example_loss_fn), in_axes=(None, 0))
  # vmap refuses unmapped parameters sharded along an Explicit mesh axis that
  # shards the examples (FSDP): those axes are gathered, others kept.
  example_axes = {name for x in jax.tree.leaves(data)
                  if (spec := tree_lib.explicit_spec(x))
                  for name in tree_lib.spec_axes(spec[0])}
  gathered = tree_lib.gather_mesh_axes(params, example_axes)

  def squared_sum(chunk):
    return jax.tree.map(lambda g: jnp.sum(g * g, axis=0),
                        per_example_grad(gathered, chunk))

  if num_chunks == 1:
    total = squared_sum(data)
  else:
    chunks = jax.tree.map(lambda x: split_examples(x, num_chunks), data)

    def body(running, chunk):
      return jax.tree.map(jnp.add, running, squared_sum(chunk)), None

    total, _ = jax.lax.scan(body, jax.tree.map(jnp.zeros_like, gathered),
                            chunks)
  # The Fisher is sharded like the parameters it weights.
  return jax.tree.map(
      lambda t, p: tree_lib.reshard_like(
          t / jnp.asarray(num_examples, t.dtype), p), total, params)
