"""Largest Hessian eigenvalue by Lanczos or power iteration, on pytrees.

Both solvers take any symmetric linear operator ``v -> H v`` on pytrees
(usually from :func:`jaxpapers.curvature.linearize_gradient`), run under
``jit`` with a static iteration budget and stop early on a relative residual
test. Lanczos keeps the whole Krylov basis (full reorthogonalisation), which
costs ``(max_iters + 1) x num_params`` memory, plus a dense
``max_iters x max_iters`` tridiagonal eigen-solve per product (keep
``max_iters`` in the low hundreds), and buys the square-root dependence on
the spectral gap that power iteration lacks.

Reconstruction note (``docs/eoss.md``): the authors' code
(github.com/arseniqum/edge-of-stochastic-stability) uses LOBPCG (k = 1) and
power iteration; we offer Lanczos in LOBPCG's place. Both return the algebraically
largest eigenvalue of the Krylov space explored; power iteration returns the
eigenvalue of largest magnitude, recorded with its sign.
"""

import math
import numbers
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers import tree as tree_lib

Params = Any


class LambdaMaxResult(NamedTuple):
  """Output of :func:`lambda_max`.

  Attributes:
    eigenvalue: the estimate of the top eigenvalue (scalar).
    eigenvector: unit-norm pytree like ``params``; pass it back as ``v0`` to
      warm-start the next call.
    num_hvps: number of operator applications used (int32 scalar).
    residual: relative residual ``||H u - lambda u|| / |lambda|`` at exit.
    converged: whether ``residual <= tol`` was reached within ``max_iters``.
    estimates: ``(max_iters,)`` eigenvalue estimate after each product, NaN
      past ``num_hvps``; useful to count products needed for an accuracy.
  """

  eigenvalue: jax.Array
  eigenvector: Params
  num_hvps: jax.Array
  residual: jax.Array
  converged: jax.Array
  estimates: jax.Array


def lambda_max(
    hvp_fn: Callable[[Params], Params],
    params: Params,
    *,
    method: str = "lanczos",
    max_iters: int = 100,
    tol: float = 1e-3,
    v0: Params | None = None,
    key: jax.Array | None = None,
) -> LambdaMaxResult:
  r"""Top eigenvalue and eigenvector of a symmetric operator on pytrees.

  **Lanczos** builds an orthonormal basis :math:`Q_k` of the Krylov space
  :math:`\mathcal{K}_k(H, v_0)` with the three-term recurrence
  :math:`\beta_{j} q_{j+1} = H q_j - \alpha_j q_j - \beta_{j-1} q_{j-1}`
  (reorthogonalised twice against all previous vectors), and returns the top
  Ritz pair :math:`(\theta, Q_k s)` of the tridiagonal
  :math:`T_k = Q_k^\top H Q_k`. Its residual is
  :math:`\|H Q_k s - \theta Q_k s\| = \beta_k |s_k|` at no extra cost.

  **Power iteration** repeats :math:`w = H v,\ \rho = v^\top w,\
  v \leftarrow w / \|w\|` and stops on :math:`\|H v - \rho v\| / |\rho|`.

  Args:
    hvp_fn: symmetric linear operator ``v -> H v`` on pytrees like ``params``.
    params: template pytree (shapes, dtypes) of the operator's domain.
    method: ``"lanczos"`` (default) or ``"power"``.
    max_iters: maximum number of operator applications (static).
    tol: stop once the relative residual is at most ``tol``; 0 runs all
      ``max_iters`` products.
    v0: optional start vector (warm start), a pytree like ``params``; it
      must not be zero (a concrete zero ``v0`` is a ``ValueError``; a traced
      one cannot be checked and gives NaN, as the Krylov space is empty).
    key: PRNG key for a Gaussian start when ``v0`` is None; defaults to
      ``jax.random.key(0)`` so results are deterministic.

  Returns:
    A :class:`LambdaMaxResult`.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.curvature import lambda_max
    >>> h = jnp.diag(jnp.array([1.0, 5.0, 3.0]))
    >>> res = lambda_max(lambda v: h @ v, jnp.zeros(3), max_iters=3, tol=1e-6)
    >>> round(float(res.eigenvalue), 4)
    5.0

  References:
    Lanczos, `An iteration method for the solution of the eigenvalue problem
    <https://doi.org/10.6028/jres.045.026>`_, 1950.
    Andreyev & Beneventano, `Edge of Stochastic Stability
    <https://arxiv.org/abs/2412.20553>`_, 2024.
  """
  if method not in ("lanczos", "power"):
    raise ValueError(f"method must be 'lanczos' or 'power', got {method!r}.")
  if (not isinstance(max_iters, numbers.Integral)
      or isinstance(max_iters, bool) or max_iters < 1):
    raise ValueError(f"max_iters must be a positive int, got {max_iters!r}.")
  if not isinstance(tol, jax.core.Tracer):
    # An infinite tol would stop at the first product and report the
    # start's Rayleigh quotient as converged.
    if jnp.ndim(tol) != 0 or not (float(tol) >= 0
                                  and math.isfinite(float(tol))):
      raise ValueError(f"tol must be a finite scalar >= 0, got {tol!r}.")
  matvec, unravel, flat_params = tree_lib.flat_operator(hvp_fn, params)
  if flat_params.size == 0:
    raise ValueError("params has no entries: nothing to take an eigenvalue of.")
  dtype = flat_params.dtype
  if v0 is None:
    key = jax.random.key(0) if key is None else key
    x0 = jax.random.normal(key, flat_params.shape, dtype)
  else:
    tree_lib.check_like(v0, params, "v0")
    x0 = tree_lib.ravel(v0)[0].astype(dtype)
    if not isinstance(x0, jax.core.Tracer) and not jnp.any(x0 != 0):
      raise ValueError("v0 is zero: a start vector spans no Krylov space;"
                       " pass a nonzero v0 or None for a random start.")
  x0 = x0 / jnp.linalg.norm(x0)
  solver = _lanczos if method == "lanczos" else _power_iteration
  value, vector, num_hvps, residual, estimates = solver(
      matvec, x0, max_iters, jnp.asarray(tol, dtype)
  )
  return LambdaMaxResult(
      eigenvalue=value,
      eigenvector=unravel(vector),
      num_hvps=num_hvps,
      residual=residual,
      converged=residual <= tol,
      estimates=estimates,
  )


def _relative(numerator, value):
  tiny = jnp.finfo(value.dtype).tiny
  return numerator / jnp.maximum(jnp.abs(value), tiny)


def _power_iteration(matvec, x0, max_iters, tol):
  nan_estimates = jnp.full((max_iters,), jnp.nan, x0.dtype)

  def cond(state):
    k, _, _, residual, _ = state
    return (k < max_iters) & ~(residual <= tol)

  def body(state):
    k, v, _, _, estimates = state
    w = matvec(v)
    rho = jnp.vdot(v, w)
    residual = _relative(jnp.linalg.norm(w - rho * v), rho)
    # Carry v (not w / |w|) so the returned pair is the one the residual is for.
    v_next = jnp.where(residual <= tol, v, w / jnp.linalg.norm(w))
    return k + 1, v_next, rho, residual, estimates.at[k].set(rho)

  init = (jnp.int32(0), x0, jnp.zeros((), x0.dtype),
          jnp.full((), jnp.inf, x0.dtype), nan_estimates)
  k, v, rho, residual, estimates = jax.lax.while_loop(cond, body, init)
  return rho, v, k, residual, estimates


def _ritz_top(alphas, betas, k):
  """Top eigenpair of the leading (k+1)x(k+1) block of the padded tridiagonal."""
  m = alphas.shape[0]
  idx = jnp.arange(m)
  valid = idx <= k
  off_valid = idx < k
  offdiag = jnp.where(off_valid, betas, 0.0)
  # Gershgorin: padded diagonal entries below every eigenvalue of the valid
  # block keep the padding from ever being the top Ritz value.
  floor = jnp.min(jnp.where(valid, alphas, jnp.inf)) - 2 * jnp.max(offdiag) - 1
  diag = jnp.where(valid, alphas, floor)
  t = jnp.diag(diag) + jnp.diag(offdiag[:-1], 1) + jnp.diag(offdiag[:-1], -1)
  evals, evecs = jnp.linalg.eigh(t)
  return evals[-1], evecs[:, -1]


def _lanczos(matvec, x0, max_iters, tol):
  m = max_iters
  dtype = x0.dtype
  basis = jnp.zeros((m + 1, x0.shape[0]), dtype).at[0].set(x0)
  alphas = jnp.zeros((m,), dtype)
  betas = jnp.zeros((m,), dtype)
  nan_estimates = jnp.full((m,), jnp.nan, dtype)
  breakdown = 10 * jnp.finfo(dtype).eps

  def cond(state):
    k, _, _, _, residual, _, _, _ = state
    return (k < m) & ~(residual <= tol)

  def body(state):
    k, basis, alphas, betas, _, _, _, estimates = state
    q = basis[k]
    w = matvec(q)
    alpha = jnp.vdot(q, w)
    # Two passes of classical Gram-Schmidt against the whole basis ("twice is
    # enough"); rows past k are still zero and contribute nothing.
    w = w - basis.T @ (basis @ w)
    w = w - basis.T @ (basis @ w)
    beta = jnp.linalg.norm(w)
    scale = jnp.linalg.norm(alphas) + jnp.abs(alpha)
    invariant = beta <= breakdown * jnp.maximum(scale, 1.0)
    q_next = jnp.where(invariant, 0.0, w / jnp.where(invariant, 1.0, beta))
    basis = basis.at[k + 1].set(q_next)
    alphas = alphas.at[k].set(alpha)
    betas = betas.at[k].set(beta)
    theta, s = _ritz_top(alphas, betas, k)
    residual = jnp.where(invariant, 0.0, _relative(beta * jnp.abs(s[k]), theta))
    return (k + 1, basis, alphas, betas, residual, theta, s,
            estimates.at[k].set(theta))

  init = (jnp.int32(0), basis, alphas, betas, jnp.full((), jnp.inf, dtype),
          jnp.zeros((), dtype), jnp.zeros((m,), dtype), nan_estimates)
  k, basis, _, _, residual, theta, s, estimates = jax.lax.while_loop(
      cond, body, init
  )
  vector = basis[:m].T @ s
  vector = vector / jnp.linalg.norm(vector)
  return theta, vector, k, residual, estimates
