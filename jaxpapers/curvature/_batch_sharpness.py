r"""Batch Sharpness and GNI: the curvature that SGD keeps at :math:`2/\eta`.

Edge of Stochastic Stability (Andreyev & Beneventano, 2024): under mini-batch
SGD with step size :math:`\eta`, what hovers at :math:`2/\eta` is not the top
eigenvalue of the full-batch Hessian but **Batch Sharpness**, the expected
curvature of each mini-batch Hessian along its own mini-batch gradient,

.. math::
  \mathrm{BS}(\theta) = \mathbb{E}_B\left[
    \frac{g_B^\top H_B\, g_B}{g_B^\top g_B}\right],
  \qquad g_B = \nabla L_B(\theta),\ H_B = \nabla^2 L_B(\theta).

Verified from the authors' code: the estimator (mean of per-draw ratios, the
same batch for gradient and Hessian, at the training batch size), the
adaptive Monte Carlo stopping rule and its defaults, and GNI.
Reconstruction (ours): all JAX mechanics (chunked ``lax.while_loop`` Monte
Carlo, merged moments), the delta-method variance formula used by the
stopping rule, and the statistics reported beside the estimates.
"""

import functools
import numbers
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers import tree as tree_lib
from jaxpapers.curvature._hvp import check_scalar_loss
from jaxpapers.curvature._hvp import linearize_gradient
from jaxpapers.curvature._hvp import quadratic_form
from jaxpapers.curvature._hvp import split_examples

Params = Any
Batch = Any
LossFn = Callable[[Params, Batch], jax.Array]

_ESTIMATORS = ("mean_of_ratios", "ratio_of_means")
# Draws whose gradient vanishes carry no direction; the authors' code has no
# such guard, ours drops them rather than dividing by zero.
_MIN_GRAD_SQ_NORM = 1e-30
# chunk_size="auto": at most this many draws per chunk, and at most this many
# bytes of params plus batches in one (see _auto_chunk_size).
_AUTO_MAX_CHUNK = 8
_AUTO_CHUNK_BYTES = 64 * 2**20


class BatchSharpnessEstimate(NamedTuple):
  """Monte Carlo estimate of Batch Sharpness.

  Attributes:
    value: the estimate (``mean_of_ratios``: mean of :math:`a_j / c_j`;
      ``ratio_of_means``: :math:`\\bar a / \\bar c`).
    stderr: its standard error (sample std / sqrt(K) for the mean of ratios;
      delta method for the ratio of means). NaN with fewer than two draws.
    num_draws: number of draws K that entered the estimate.
    mean_curvature: :math:`\\bar a`, mean of :math:`g_B^\\top H_B g_B`.
    mean_grad_sq_norm: :math:`\\bar c`, mean of :math:`g_B^\\top g_B`.
    rel_se: delta-method relative standard error of :math:`\\bar a/\\bar c`,
      the quantity the authors' stopping rule tests (whatever the estimator).
  """

  value: jax.Array
  stderr: jax.Array
  num_draws: jax.Array
  mean_curvature: jax.Array
  mean_grad_sq_norm: jax.Array
  rel_se: jax.Array


class GNIEstimate(NamedTuple):
  """Gradient-noise interaction :math:`E_B[g_B^\\top H g_B] / \\|\\nabla L\\|^2`."""

  value: jax.Array
  stderr: jax.Array
  num_draws: jax.Array


class _Moments(NamedTuple):
  """Count, mean and centred second moments of the per-draw vector (a, c, a/c)."""

  count: jax.Array
  mean: jax.Array  # (3,)
  m2: jax.Array  # (3, 3)


def directional_curvature(
    loss_fn: LossFn, params: Params, batch: Batch
) -> tuple[jax.Array, jax.Array]:
  r"""Returns :math:`(g_B^\top H_B g_B,\ g_B^\top g_B)` for one batch.

  One gradient, then the curvature along it forward-over-forward
  (:func:`jaxpapers.curvature.quadratic_form`), which needs no second reverse
  pass: about 1.5 SGD steps per sample instead of 2 to 3 for a full HVP.
  """
  check_scalar_loss(loss_fn, params, batch)
  grad = jax.grad(loss_fn)(params, batch)
  curvature = quadratic_form(loss_fn, params, grad, batch)
  return curvature, tree_lib.vdot(grad, grad)


def batch_sharpness(
    loss_fn: LossFn,
    params: Params,
    batches: Batch,
    *,
    estimator: str = "mean_of_ratios",
    chunk_size: int | Literal["auto"] | None = "auto",
) -> BatchSharpnessEstimate:
  r"""Batch Sharpness over a stack of mini-batches.

  For each draw :math:`j` (leading axis of ``batches``) computes, on that same
  batch, :math:`a_j = g_j^\top H_j g_j` and :math:`c_j = g_j^\top g_j`, then

  * ``"mean_of_ratios"`` (default, the authors' code):
    :math:`\mathrm{BS} = \frac1K \sum_j a_j / c_j`;
  * ``"ratio_of_means"``: :math:`\mathrm{BS} = \bar a / \bar c`.

  Draws are vmapped (``chunk_size=None``) or mapped in chunks
  (``lax.map`` with ``batch_size=chunk_size``). The default ``"auto"`` maps
  chunks of at most 8 draws, fewer when a chunk's params and batches would
  exceed 64 MiB, and vmaps all draws when they fit in one chunk or when the
  draw axis is sharded over an Explicit mesh: on CPU, vmapping 100 draws of
  the README's MLP is 2-4x slower than chunks of 8 (``python -m
  benchmarks.curvature``), and the value is the same up to float rounding.
  When ``batches`` is sharded along the draw axis, the per-draw work stays on
  the device that holds the draw and only scalars are reduced; parameters
  may be sharded along any axis, under an Auto or an Explicit mesh.

  Draws whose gradient vanishes (:math:`c_j \le 10^{-30}`) carry no
  direction and are left out; ``num_draws`` counts the rest. If no draw is
  left the curvature along a zero direction is undefined and ``value`` and
  ``stderr`` are NaN with ``num_draws = 0``. A draw whose gradient or
  curvature is NaN is kept, so a NaN loss in any draw makes ``value`` NaN
  rather than leaving that draw out of the mean.

  Layout: the leading axis of every leaf of ``batches`` indexes the K draws,
  and ``loss_fn`` receives one draw with that axis removed, whatever it
  holds: usually a mini-batch of examples, but also e.g. a quadratic form
  ``{"A": (K, d, d), "c": (K, d)}`` or a fixed-size graph per draw. Hence a
  single unstacked ``(b, d)`` batch is read as b draws of one ``(d,)``
  example each; measure one batch as ``jax.tree.map(lambda x: x[None],
  batch)``. A ``loss_fn`` that fails on one draw is a ``ValueError`` saying
  so, raised at trace time.

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar`` mean loss over a batch.
    params: parameters at which to measure.
    batches: pytree whose leaves share a leading draw axis of size K >= 1,
      typically ``(K, b, ...)``: K mini-batches of b examples, e.g. from
      :func:`jaxpapers.data.sample_minibatches` (see "Layout" above).
    estimator: ``"mean_of_ratios"`` or ``"ratio_of_means"``.
    chunk_size: draws per vectorised chunk; None vectorises all K;
      ``"auto"`` chooses from K and the per-draw size (see above).

  Returns:
    A :class:`BatchSharpnessEstimate`.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.curvature import batch_sharpness
    >>> loss = lambda w, x: 0.5 * jnp.mean((x @ w) ** 2)
    >>> batches = jnp.ones((4, 2, 3))  # 4 draws of 2 examples in R^3
    >>> float(batch_sharpness(loss, jnp.ones(3), batches).value)
    3.0

  References:
    Andreyev & Beneventano, `Edge of Stochastic Stability
    <https://arxiv.org/abs/2412.20553>`_, 2024.
  """
  _check_estimator(estimator)
  _check_batches(loss_fn, params, batches)
  if chunk_size == "auto":
    chunk_size = _auto_chunk_size(params, batches)
  else:
    chunk_size = _check_chunk_size(chunk_size, "(or 'auto')")
  per_draw = _per_draw_fn(loss_fn, params)
  if chunk_size is None:
    a, c = jax.vmap(per_draw)(batches)
  else:
    a, c = _map_draws(per_draw, batches, chunk_size)
  return _finalize(_moments_of(a, c), estimator)


def batch_sharpness_adaptive(
    loss_fn: LossFn,
    params: Params,
    sample_batches: Callable[[jax.Array, int], Batch],
    key: jax.Array,
    *,
    estimator: str = "mean_of_ratios",
    min_draws: int = 20,
    max_draws: int = 1000,
    rel_tol: float = 0.005,
    chunk_size: int = 20,
) -> BatchSharpnessEstimate:
  r"""Batch Sharpness with the authors' adaptive Monte Carlo stopping rule.

  Draws chunks of ``chunk_size`` mini-batches until, with K draws so far,
  ``K > min_draws`` and the delta-method relative standard error of the
  ratio of means, as the authors' code computes it,

  .. math::
    \mathrm{relSE}^2 = \frac{1}{K-1}\left[\frac{s_a^2}{\bar a^2}
      + \frac{s_c^2}{\bar c^2} - \frac{2 s_{ac}}{\bar a \bar c}\right]

  (sample co-variances with ddof = 1) falls below ``rel_tol``, or
  ``max_draws`` draws were made. As in the code, the rule is first tested
  once ``min_draws + 1`` draws exist, divides by K - 1 and tests the ratio
  of means even for the default estimator; ``chunk_size=1`` therefore
  reproduces the code's draw counts exactly (the returned ``rel_se`` is the
  usual one, divided by K).

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar``.
    params: parameters at which to measure.
    sample_batches: ``sample_batches(key, num) -> batches``, a pure function
      of the key, whose leaves have leading (draw) size ``num``: typically
      ``(num, b, ...)``; one draw is whatever ``loss_fn`` takes (see
      :func:`batch_sharpness`).
    key: PRNG key of the measurement stream (e.g. ``fold_in(key, step)``).
    estimator: ``"mean_of_ratios"`` or ``"ratio_of_means"``.
    min_draws: the rule is tested only with more than this many draws.
    max_draws: never draw more; must be a multiple of ``chunk_size``.
    rel_tol: target relative standard error.
    chunk_size: draws per vectorised chunk (static).

  Returns:
    A :class:`BatchSharpnessEstimate`; ``num_draws`` is the K at which the
    rule stopped.
  """
  _check_estimator(estimator)
  for name, value in (("chunk_size", chunk_size), ("min_draws", min_draws),
                      ("max_draws", max_draws)):
    if not _is_int(value):
      raise ValueError(f"{name} must be an int, got {value!r}.")
  chunk_size, min_draws, max_draws = map(int, (chunk_size, min_draws, max_draws))
  if chunk_size < 1 or max_draws < chunk_size or max_draws % chunk_size:
    raise ValueError(
        f"max_draws={max_draws} must be a positive multiple of"
        f" chunk_size={chunk_size}."
    )
  if min_draws < 2 or min_draws > max_draws:
    raise ValueError(
        f"min_draws={min_draws} must lie in [2, max_draws={max_draws}]."
    )
  # A traced rel_tol is fine (it only enters the loop's condition); a
  # concrete one must be a positive number (NaN would never stop early).
  if not isinstance(rel_tol, jax.core.Tracer) and (
      jnp.ndim(rel_tol) != 0 or not float(rel_tol) > 0):
    raise ValueError(f"rel_tol must be a positive scalar, got {rel_tol!r}.")
  sampled = jax.eval_shape(lambda k: sample_batches(k, chunk_size), key)
  num_sampled = tree_lib.leading_size(sampled, "sample_batches(key, num)")
  if num_sampled != chunk_size:
    # The loop counts chunk_size draws per chunk: another count would make
    # min_draws, max_draws and num_draws disagree with the draws made.
    raise ValueError(
        f"sample_batches(key, num) must return num draws (leading axis), got"
        f" {num_sampled} for num={chunk_size}."
    )
  _check_batches(loss_fn, params, sampled)
  per_draw = jax.vmap(_per_draw_fn(loss_fn, params))

  def cond(state):
    drawn, _, moments = state
    k = moments.count
    rel_se = _finalize(moments, estimator).rel_se * jnp.sqrt(k / (k - 1))
    done = (k > min_draws) & (rel_se < rel_tol)
    return (drawn < max_draws) & ~done

  def body(state):
    drawn, key, moments = state
    key, draw_key = jax.random.split(key)
    a, c = per_draw(sample_batches(draw_key, chunk_size))
    return drawn + chunk_size, key, _merge(moments, _moments_of(a, c))

  dtype = jax.eval_shape(loss_fn, params, _first(sample_batches, key)).dtype
  empty = _Moments(jnp.zeros((), dtype), jnp.zeros((3,), dtype),
                   jnp.zeros((3, 3), dtype))
  _, _, moments = jax.lax.while_loop(cond, body, (jnp.int32(0), key, empty))
  return _finalize(moments, estimator)


def gni(
    loss_fn: LossFn,
    params: Params,
    batches: Batch,
    data: Batch,
    *,
    num_chunks: int = 1,
    chunk_size: int | None = None,
) -> GNIEstimate:
  r"""Gradient-noise interaction: full-batch curvature along mini-batch gradients.

  .. math::
    \mathrm{GNI} = \frac{\mathbb{E}_B[g_B^\top H g_B]}{\|\nabla L\|^2},

  with :math:`H` and :math:`\nabla L` on the measurement set ``data``.
  Expanding one SGD step to second order,
  :math:`\mathbb{E}[L(\theta - \eta g_B)] - L(\theta) \approx
  -\eta\|\nabla L\|^2 + \tfrac{\eta^2}{2}\mathbb{E}[g_B^\top H g_B]`,
  so the expected loss decreases iff :math:`\mathrm{GNI} < 2/\eta`
  (this motivation is our reconstruction; the quantity is the authors').

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar`` mean loss over a batch.
    params: parameters at which to measure.
    batches: K draws along the leading axis of every leaf, typically K
      mini-batches ``(K, b, ...)``; one draw is whatever ``loss_fn`` takes
      (see :func:`batch_sharpness`).
    data: the measurement set, one argument of ``loss_fn`` whose leaves
      share a leading example axis of size n (split into ``num_chunks``).
    num_chunks: split ``data`` into this many chunks per Hessian product.
    chunk_size: mini-batch gradients per vectorised chunk; None = all.

  Returns:
    A :class:`GNIEstimate` (stderr over the K draws). Where the full-data
    gradient vanishes the ratio is undefined: ``value`` is then inf or NaN.
  """
  _check_batches(loss_fn, params, batches)
  chunk_size = _check_chunk_size(chunk_size, "")
  full_grad, hvp_fn = linearize_gradient(
      loss_fn, params, data, num_chunks=num_chunks
  )

  def curvature_along(batch):
    g = jax.grad(loss_fn)(params, batch)
    return tree_lib.vdot(g, hvp_fn(g))

  if chunk_size is None:
    values = jax.vmap(curvature_along)(batches)
  else:
    values = _map_draws(curvature_along, batches, chunk_size)
  norm_sq = tree_lib.vdot(full_grad, full_grad)
  k = values.shape[0]
  stderr = jnp.std(values, ddof=1) / jnp.sqrt(k) if k > 1 else jnp.nan
  return GNIEstimate(
      value=jnp.mean(values) / norm_sq,
      stderr=jnp.asarray(stderr, values.dtype) / norm_sq,
      num_draws=jnp.asarray(k, jnp.int32),
  )


def _auto_chunk_size(params, batches) -> int | None:
  """Draws per chunk for ``chunk_size="auto"``; None vmaps them all.

  The rule is measured (``benchmarks/curvature.py``, ``docs/eoss.md``): on
  CPU a vmap over many draws turns every matmul into a large batched one
  that runs slower per draw than a chunk of a few; 8 was the best of 1-32 on
  the EoSS MLP. The byte cap keeps a chunk's params-sized work bounded.
  """
  leaves = jax.tree.leaves(batches)
  if any(_explicitly_sharded_leading_axis(x) for x in leaves):
    return None  # a chunk reshape would split the sharded draw axis
  num_draws = tree_lib.leading_size(batches, "batches")
  per_draw_bytes = (sum(x.size * x.dtype.itemsize
                        for x in jax.tree.leaves(params))
                    + sum(x.size * x.dtype.itemsize for x in leaves)
                    // num_draws)
  chunk = max(1, min(_AUTO_MAX_CHUNK,
                     _AUTO_CHUNK_BYTES // max(per_draw_bytes, 1)))
  return None if chunk >= num_draws else chunk


def _map_draws(fn, batches, chunk_size):
  """``lax.map(fn, batches, batch_size=chunk_size)``, also on a sharded draw axis.

  ``lax.map`` refuses a draw axis sharded along an Explicit mesh axis (it
  scans over it); when ``chunk_size`` divides the draws, the chunks are cut
  with the sharding moved to the draws within a chunk, so that every device
  works on its share of each chunk.
  """
  leaves = jax.tree.leaves(batches)
  num_draws = tree_lib.leading_size(batches, "batches")
  if (not any(_explicitly_sharded_leading_axis(x) for x in leaves)
      or num_draws % chunk_size):
    return jax.lax.map(fn, batches, batch_size=chunk_size)
  chunks = jax.tree.map(lambda x: split_examples(x, num_draws // chunk_size),
                        batches)
  # The per-draw outputs are scalars: gathered, they merge back to one axis.
  out, _ = tree_lib.gather_explicit(jax.lax.map(jax.vmap(fn), chunks))
  return jax.tree.map(lambda x: tree_lib.merge_axes(x, 0), out)


def _explicitly_sharded_leading_axis(x) -> bool:
  sharding = getattr(jax.typeof(x), "sharding", None)
  mesh = getattr(sharding, "mesh", None)
  if mesh is None or mesh.empty or not sharding.spec:
    return False
  entry = sharding.spec[0]
  names = entry if isinstance(entry, tuple) else (entry,)
  explicit = {name for name, kind in zip(mesh.axis_names, mesh.axis_types)
              if kind == jax.sharding.AxisType.Explicit}
  return bool(set(names) & explicit)


def _per_draw_fn(loss_fn, params):
  return functools.partial(directional_curvature, loss_fn, params)


def _first(sample_batches, key):
  """Abstract single batch from the sampler, to read the loss dtype."""
  stacked = jax.eval_shape(lambda k: sample_batches(k, 1), key)
  return jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), stacked
  )


def _is_int(value) -> bool:
  """A Python or numpy integer; bool is refused (True would count as 1)."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_chunk_size(chunk_size, alternatives) -> int | None:
  """``chunk_size`` as a Python int (or None); a named error otherwise."""
  if chunk_size is None:
    return None
  if not _is_int(chunk_size) or chunk_size < 1:
    raise ValueError(f"chunk_size must be None or a positive int"
                     f"{' ' + alternatives if alternatives else ''}, got"
                     f" {chunk_size!r}.")
  return int(chunk_size)


def _check_estimator(estimator):
  if estimator not in _ESTIMATORS:
    raise ValueError(
        f"estimator must be one of {_ESTIMATORS}, got {estimator!r}."
    )


def _check_batches(loss_fn, params, batches):
  """Named errors for params and a stack of draws (trace time).

  The layout asks only for what the estimators use: every leaf of
  ``batches`` has a leading axis of one common size K >= 1 that indexes the
  draws. What one draw holds (a mini-batch of examples, a quadratic form, a
  fixed-size graph) is ``loss_fn``'s business, so it is not guessed at:
  ``loss_fn`` is traced over the draws exactly as the estimators map it
  (abstractly, no compute), and only its own failure there is reported. A
  call refused here therefore fails on every path that could compute it.
  """
  tree_lib.check_real_floating(params, "params")
  tree_lib.leading_size(batches, "batches")
  try:
    jax.eval_shape(lambda p, b: jax.vmap(lambda draw: loss_fn(p, draw))(b),
                   params, batches)
  except Exception as e:  # whatever the user's loss raises on one draw
    shapes = [tree_lib.shape_of(x)[1:] for x in jax.tree.leaves(batches)]
    raise ValueError(
        "loss_fn fails on one draw of batches. The leading axis of every leaf"
        " of batches indexes draws, and loss_fn receives one draw with that"
        f" axis removed (leaf shapes {shapes}); to measure on a single batch,"
        " pass jax.tree.map(lambda x: x[None], batch)."
        f" ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    ) from e


def _moments_of(a, c) -> _Moments:
  """Moments of (a, c, a/c) over the draws with a non-vanishing gradient.

  ``~(c <= min)`` rather than ``c > min``: a NaN draw stays in and makes the
  moments NaN instead of being dropped as if its gradient had vanished.
  """
  valid = ~(c <= _MIN_GRAD_SQ_NORM)
  x = jnp.stack([a, c, a / jnp.where(valid, c, 1.0)], axis=-1)
  w = valid.astype(x.dtype)
  count = jnp.sum(w)
  mean = jnp.sum(w[:, None] * x, axis=0) / jnp.maximum(count, 1.0)
  centred = (x - mean[None, :]) * w[:, None]
  # A sum (not a matmul) over the draw axis stays valid when that axis is
  # sharded over an Explicit mesh: the reduction result is replicated.
  m2 = jnp.sum(centred[:, :, None] * centred[:, None, :], axis=0)
  return _Moments(count, mean, m2)


def _merge(m1: _Moments, m2: _Moments) -> _Moments:
  """Chan et al.'s pairwise merge of counts, means and co-moments."""
  count = m1.count + m2.count
  safe = jnp.maximum(count, 1.0)
  delta = m2.mean - m1.mean
  mean = m1.mean + delta * (m2.count / safe)
  m2_total = m1.m2 + m2.m2 + jnp.outer(delta, delta) * (m1.count * m2.count / safe)
  return _Moments(count, mean, m2_total)


def _finalize(moments: _Moments, estimator: str) -> BatchSharpnessEstimate:
  k = moments.count
  mean_a, mean_c, mean_r = moments.mean[0], moments.mean[1], moments.mean[2]
  cov = moments.m2 / (k - 1)  # ddof = 1; NaN/inf for k < 2 is the honest answer
  ratio = mean_a / mean_c
  rel_var = (cov[0, 0] / mean_a**2 + cov[1, 1] / mean_c**2
             - 2 * cov[0, 1] / (mean_a * mean_c)) / k
  rel_se = jnp.sqrt(jnp.maximum(rel_var, 0.0))
  if estimator == "mean_of_ratios":
    value, stderr = mean_r, jnp.sqrt(cov[2, 2] / k)
  else:
    value, stderr = ratio, jnp.abs(ratio) * rel_se
  # Every gradient vanished: the curvature along no direction is undefined.
  value = jnp.where(k > 0, value, jnp.nan)
  return BatchSharpnessEstimate(
      value=value,
      stderr=stderr,
      num_draws=k.astype(jnp.int32),
      mean_curvature=mean_a,
      mean_grad_sq_norm=mean_c,
      rel_se=rel_se,
  )
