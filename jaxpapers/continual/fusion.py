r"""Dynamical Adapter Fusion (DAF): one global adapter from task adapters.

**Reconstruction.** DAF (Liu et al., 2026, https://arxiv.org/abs/2601.21341)
is known to us from its abstract only: it fuses three parameter sets (the
task adapter, the previous global adapter and the initialisation) with
coefficients derived from a PAC-Bayes bound and a Taylor expansion of the
loss, plus a "Robust Initialization". Every formula below is our design
(``docs/daf.md``), not the paper's equations.

With :math:`\theta_0` the initialisation (prior centre), :math:`g_{t-1}` the
global adapter before task :math:`t`, :math:`a_t` the adapter trained on task
:math:`t`, :math:`u = g_{t-1} - \theta_0` and :math:`v = a_t - \theta_0`, the
fused adapter is

.. math::
  g_t = \theta_0 + \alpha_t u + \beta_t v ,

so :math:`\theta_0` keeps weight :math:`1 - \alpha_t - \beta_t`. The
coefficients minimise a second-order Taylor model of the old and new tasks'
losses around their (assumed stationary) minima plus the KL term of a Gaussian
posterior :math:`N(g, \sigma^2 I)` against the prior :math:`N(\theta_0,
\sigma^2 I)`:

.. math::
  J(g) = \tfrac12 (g - g_{t-1})^\top H_{old} (g - g_{t-1})
       + \tfrac12 (g - a_t)^\top H_{new} (g - a_t)
       + \tfrac{\lambda}{2} \lVert g - \theta_0 \rVert^2 .

Modes:

* ``"two_coef"``: with :math:`M = H_{old} + H_{new} + \lambda I` and
  :math:`r = H_{old} u + H_{new} v`, solve
  :math:`[u^\top M u,\ u^\top M v;\ v^\top M u,\ v^\top M v]\,[\alpha; \beta]
  = [u^\top r; v^\top r]` (plus :math:`10^{-12} I`). At :math:`t = 1`,
  :math:`u = 0` and this gives :math:`\alpha = 0`,
  :math:`\beta = v^\top H_{new} v / v^\top M v`.
* ``"single_beta"``: :math:`\alpha = 1 - \beta`, :math:`\lambda = 0`, so
  :math:`g_t = g_{t-1} + \beta d` with :math:`d = a_t - g_{t-1}` and
  :math:`\beta = d^\top H_{new} d / (d^\top H_{old} d + d^\top H_{new} d)`.
* ``"running_mean"``: :math:`\beta = 1/t`, :math:`\alpha = 1 - 1/t`, the
  uniform merge; it is ``two_coef`` with :math:`\lambda = 0` and
  :math:`H_{old} = (t-1) c I`, :math:`H_{new} = c I`.

``per_layer=True`` gives every leaf of the adapter pytree its own
coefficients (one 2x2 system, or one ratio, per leaf). Curvatures are
diagonal pytrees (e.g. :func:`jaxpapers.curvature.diagonal_fisher`); negative
entries (a Hessian diagonal, say) are clipped to 0 and counted in
:attr:`FusionInfo.num_clipped`. :math:`\lambda = \rho \cdot
\mathrm{mean}(\mathrm{diag}(H_{old} + H_{new}))`.

:func:`init` / :func:`update` keep the running state (:class:`DAFState`):
:math:`H_{old}` is the running sum of the task Fishers, and the robust
initialisation ``theta0="first_task"`` (ours) makes :math:`a_1` the prior
centre from task 2 on.
"""

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib

Params = Any
MODES = ("two_coef", "single_beta", "running_mean")
THETA0_MODES = ("standard", "first_task")
# Keeps the 2x2 system solvable when u = 0 (task 1) or u is parallel to v.
SYSTEM_RIDGE = 1e-12
TINY = 1e-30


@dataclasses.dataclass(frozen=True)
class FusionConfig:
  """How DAF fuses (static; validated at construction).

  Attributes:
    mode: one of :data:`MODES`.
    per_layer: one set of coefficients per pytree leaf instead of global ones.
    rho: :math:`\\lambda = \\rho \\cdot` mean curvature (``two_coef`` only).
    theta0: ``"standard"`` keeps the initialisation as the prior centre;
      ``"first_task"`` replaces it by the first task's adapter.
  """

  mode: str = "two_coef"
  per_layer: bool = False
  rho: float = 0.01
  theta0: str = "standard"

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError(f"mode must be one of {MODES}; got {self.mode!r}.")
    if self.theta0 not in THETA0_MODES:
      raise ValueError(
          f"theta0 must be one of {THETA0_MODES}; got {self.theta0!r}.")
    if not self.rho >= 0:
      raise ValueError(f"rho must be >= 0; got {self.rho}.")
    if not isinstance(self.per_layer, bool):
      raise TypeError(f"per_layer must be a bool; got {self.per_layer!r}.")


class FusionInfo(NamedTuple):
  """Diagnostics of one fusion.

  Attributes:
    alpha: weight of :math:`u = g_{t-1} - \\theta_0` (a scalar, or a pytree of
      scalars with ``per_layer``).
    beta: weight of :math:`v = a_t - \\theta_0` (same structure as ``alpha``).
    lam: the KL weight :math:`\\lambda` used (0 outside ``two_coef``).
    num_clipped: negative curvature entries clipped to 0 (int32).
  """

  alpha: Any
  beta: Any
  lam: jax.Array
  num_clipped: jax.Array


class DAFState(NamedTuple):
  """The running state of DAF over tasks.

  Attributes:
    theta0: the prior centre :math:`\\theta_0`.
    global_params: the global adapter :math:`g_t` (used for inference).
    h_old: sum of the diagonal curvatures of the tasks seen.
    num_tasks: tasks fused so far (int32).
  """

  theta0: Params
  global_params: Params
  h_old: Params
  num_tasks: jax.Array


def _vdot_leaves(a, b, c=None):
  """Per-leaf :math:`\\sum a b` (or :math:`\\sum a b c`) as a list of scalars."""
  if c is None:
    return [jnp.sum(x * y) for x, y in zip(a, b)]
  return [jnp.sum(x * y * z) for x, y, z in zip(a, b, c)]


def _check_inputs(theta0, previous, task, h_old, h_new):
  tree_lib.check_real_floating(theta0, "theta0")
  for tree, name in ((previous, "previous"), (task, "task"), (h_old, "h_old"),
                     (h_new, "h_new")):
    tree_lib.check_like(tree, theta0, name)
    tree_lib.check_real_floating(tree, name)
  if not jax.tree.leaves(theta0):
    raise ValueError("theta0 is empty: the adapter pytree has no leaves.")


def fuse(theta0: Params, previous: Params, task: Params, h_old: Params,
         h_new: Params, task_index: jax.Array | int,
         config: FusionConfig = FusionConfig()) -> tuple[Params, FusionInfo]:
  r"""The fused adapter :math:`g_t = \theta_0 + \alpha u + \beta v` and its coefficients.

  Args:
    theta0: the prior centre :math:`\theta_0` (any pytree of float arrays).
    previous: the previous global adapter :math:`g_{t-1}`, like ``theta0``.
    task: the task adapter :math:`a_t`, like ``theta0``.
    h_old: diagonal curvature of the earlier tasks, like ``theta0``.
    h_new: diagonal curvature of task :math:`t` at ``task``, like ``theta0``.
    task_index: :math:`t \ge 1` (may be traced; used by ``running_mean``).
    config: a :class:`FusionConfig`.

  Returns:
    ``(fused, info)``: a pytree like ``theta0`` and a :class:`FusionInfo`.

  Raises:
    ValueError: if a pytree's structure or leaf shapes differ from
      ``theta0``'s, or a concrete ``task_index`` is below 1.
    TypeError: for non-floating leaves.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import continual
    >>> theta0, g, a = jnp.zeros(2), jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    >>> fused, info = continual.fuse(theta0, g, a, jnp.ones(2), jnp.ones(2), 2,
    ...                              continual.FusionConfig("running_mean"))
    >>> fused
    Array([0.5, 0.5], dtype=float32)
  """
  _check_inputs(theta0, previous, task, h_old, h_new)
  if not isinstance(task_index, jax.core.Tracer) and (
      np.ndim(task_index) != 0 or int(task_index) < 1):
    raise ValueError(f"task_index must be >= 1; got {task_index}.")
  treedef = jax.tree.structure(theta0)
  leaves = [treedef.flatten_up_to(t)
            for t in (theta0, previous, task, h_old, h_new)]
  theta0_l, previous_l, task_l, h_old_raw, h_new_raw = leaves
  num_clipped = sum(jnp.sum(h < 0, dtype=jnp.int32)
                    for h in h_old_raw + h_new_raw)
  h_old_l = [jnp.maximum(h, 0) for h in h_old_raw]
  h_new_l = [jnp.maximum(h, 0) for h in h_new_raw]
  u_l = [p - z for p, z in zip(previous_l, theta0_l)]
  v_l = [a - z for a, z in zip(task_l, theta0_l)]
  dtype = jnp.result_type(*theta0_l)
  t = jnp.asarray(task_index, dtype)
  lam = jnp.zeros((), dtype)

  if config.mode == "running_mean":
    beta = jnp.ones((), dtype) / t
    alpha_l, beta_l = [1 - beta] * len(u_l), [beta] * len(u_l)
  elif config.mode == "single_beta":
    d_l = [a - p for a, p in zip(task_l, previous_l)]
    new_l = _vdot_leaves(d_l, d_l, h_new_l)
    total_l = [o + n for o, n in zip(_vdot_leaves(d_l, d_l, h_old_l), new_l)]
    beta_l = _ratios(new_l, total_l, config.per_layer)
    alpha_l = [1 - b for b in beta_l]
  else:
    sizes = sum(h.size for h in h_old_l)
    lam = config.rho * sum(jnp.sum(o + n) for o, n in zip(h_old_l, h_new_l)
                           ) / sizes
    m_l = [o + n + lam for o, n in zip(h_old_l, h_new_l)]
    r_l = [o * u + n * v for o, n, u, v in zip(h_old_l, h_new_l, u_l, v_l)]
    # Per-leaf entries of the 2x2 normal equations; summed for global coefs.
    entries = [_vdot_leaves(u_l, u_l, m_l), _vdot_leaves(u_l, v_l, m_l),
               _vdot_leaves(v_l, v_l, m_l), _vdot_leaves(u_l, r_l),
               _vdot_leaves(v_l, r_l)]
    if config.per_layer:
      coefs = [_solve_2x2(*leaf) for leaf in zip(*entries)]
    else:
      coefs = [_solve_2x2(*(sum(e) for e in entries))] * len(u_l)
    alpha_l, beta_l = [c[0] for c in coefs], [c[1] for c in coefs]

  fused_l = [z + a * u + b * v
             for z, a, b, u, v in zip(theta0_l, alpha_l, beta_l, u_l, v_l)]
  if config.per_layer:
    alpha, beta = treedef.unflatten(alpha_l), treedef.unflatten(beta_l)
  else:
    alpha, beta = alpha_l[0], beta_l[0]
  return treedef.unflatten(fused_l), FusionInfo(alpha, beta, lam, num_clipped)


def _ratios(numerators, denominators, per_layer):
  """``n / d`` per leaf, or of the sums repeated per leaf; 1 where ``d`` is 0.

  ``d = 0`` means no curvature along ``d`` (task 1, or ``a_t = g_{t-1}``):
  taking the task adapter is then as good as any other choice.
  """
  num_leaves = len(numerators)
  if not per_layer:
    numerators, denominators = [sum(numerators)], [sum(denominators)]
  out = [jnp.where(d > TINY, n / jnp.maximum(d, TINY), jnp.ones_like(n))
         for n, d in zip(numerators, denominators)]
  return out if per_layer else out * num_leaves


def _solve_2x2(uu, uv, vv, ur, vr):
  """:math:`[\\alpha, \\beta]` from the ridge-regularised 2x2 normal equations."""
  uu, vv = uu + SYSTEM_RIDGE, vv + SYSTEM_RIDGE
  det = uu * vv - uv * uv
  return (vv * ur - uv * vr) / det, (uu * vr - uv * ur) / det


def init(theta0: Params) -> DAFState:
  """The state before task 1: :math:`g_0 = \\theta_0`, no curvature yet."""
  tree_lib.check_real_floating(theta0, "theta0")
  return DAFState(theta0=theta0, global_params=theta0,
                  h_old=jax.tree.map(jnp.zeros_like, theta0),
                  num_tasks=jnp.zeros((), jnp.int32))


def update(state: DAFState, task: Params, h_new: Params,
           config: FusionConfig = FusionConfig()
           ) -> tuple[DAFState, FusionInfo]:
  """Fuses task adapter ``task`` (curvature ``h_new``) into the global adapter.

  With ``config.theta0 == "first_task"`` the first task's adapter becomes both
  the global adapter and the prior centre :math:`\\theta_0` for later tasks.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import continual
    >>> state = continual.init(jnp.zeros(2))
    >>> state, info = continual.update(state, jnp.ones(2), jnp.ones(2))
    >>> round(float(info.beta), 3)  # t = 1: v'H v / v'(H + lambda I) v
    0.99
  """
  t = state.num_tasks + 1
  fused, info = fuse(state.theta0, state.global_params, task, state.h_old,
                     h_new, t, config)
  theta0 = state.theta0
  if config.theta0 == "first_task":
    first = t == 1
    theta0 = jax.tree.map(lambda a, z: jnp.where(first, a, z), task, theta0)
    fused = jax.tree.map(lambda a, g: jnp.where(first, a, g), task, fused)
  h_old = jax.tree.map(lambda o, n: o + jnp.maximum(n, 0), state.h_old, h_new)
  return DAFState(theta0, fused, h_old, t), info


def objective(alpha: jax.Array, beta: jax.Array, theta0: Params,
              previous: Params, task: Params, h_old: Params, h_new: Params,
              lam: jax.Array | float) -> jax.Array:
  """The Taylor-model objective :math:`J` at :math:`g = \\theta_0 + \\alpha u + \\beta v`.

  ``two_coef``'s coefficients minimise it (up to the 1e-12 ridge); a
  reference for tests and plots. Raises like :func:`fuse` for pytrees
  unlike ``theta0``.
  """
  _check_inputs(theta0, previous, task, h_old, h_new)
  fused = jax.tree.map(lambda z, p, a: z + alpha * (p - z) + beta * (a - z),
                       theta0, previous, task)
  quad = lambda h, x, c: sum(
      jnp.sum(hh * (xx - cc) ** 2) for hh, xx, cc in zip(
          jax.tree.leaves(h), jax.tree.leaves(x), jax.tree.leaves(c)))
  return 0.5 * (quad(h_old, fused, previous) + quad(h_new, fused, task)
                + lam * quad(jax.tree.map(jnp.ones_like, theta0), fused, theta0))
