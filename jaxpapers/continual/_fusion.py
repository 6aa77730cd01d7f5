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
  :math:`r = H_{old} u + H_{new} v`, the minimiser over
  :math:`\mathrm{span}\{u, v\}` solves the normal equations
  :math:`[u^\top M u,\ u^\top M v;\ v^\top M u,\ v^\top M v]\,[\alpha; \beta]
  = [u^\top r; v^\top r]`. They are not formed: the pair is first rebased
  on :math:`u` and :math:`d = a_t - g_{t-1} = v - u` (a difference of the
  inputs, exact to rounding however close the two adapters are), the larger
  of the two in the :math:`M`-norm first, and the other is made
  :math:`M`-orthogonal to it (Gram-Schmidt, twice). Its orthogonal part is
  dropped when its :math:`M`-norm is at most ``RANK_ULPS`` (64) machine
  epsilons times the direction's own (parallel directions up to the
  inputs' rounding): the span is then one-dimensional and
  :math:`(\alpha, \beta)` is the minimum-norm pair that gives the minimiser
  on it. So parallel (``a_t = g_{t-1}``, one task fed twice), nearly
  parallel and orthogonal directions all reach the objective's minimum to
  float rounding; nearly parallel directions can need large, opposite
  :math:`\alpha` and :math:`\beta` (the fused adapter itself is formed in
  the orthogonal basis, without that cancellation). At :math:`t = 1`,
  :math:`u = 0` and this gives :math:`\alpha = 0`,
  :math:`\beta = v^\top H_{new} v / v^\top M v`.
* ``"single_beta"``: :math:`\alpha = 1 - \beta`, :math:`\lambda = 0`, so
  :math:`g_t = g_{t-1} + \beta d` with :math:`d = a_t - g_{t-1}` and
  :math:`\beta = d^\top H_{new} d / (d^\top H_{old} d + d^\top H_{new} d)`
  (1 where the denominator is 0: no curvature along :math:`d`).
* ``"running_mean"``: :math:`\beta = 1/t`, :math:`\alpha = 1 - 1/t`, the
  uniform merge; it is ``two_coef`` with :math:`\lambda = 0` and
  :math:`H_{old} = (t-1) c I`, :math:`H_{new} = c I`.

``per_layer=True`` gives every leaf of the adapter pytree its own
coefficients (one 2x2 problem, or one ratio, per leaf). Every sum is taken
over vectors divided by their largest magnitude (and the curvatures by
theirs), so no fixed tiny constant decides a case and neither small nor
large parameters underflow or overflow the products; the arithmetic is at
least float32 (lower-precision leaves are upcast, the fused adapter is cast
back to each leaf's dtype). A NaN in any input that the mode reads gives
NaN coefficients and a NaN fused adapter (never a silently finite one). Curvatures are
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
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree as tree_lib
from jaxpapers._checks import check_flag
from jaxpapers._checks import check_real

Params = Any
MODES = ("two_coef", "single_beta", "running_mean")
THETA0_MODES = ("standard", "first_task")
# two_coef keeps the second direction's M-orthogonal part when its M-norm is
# above this many ulps of the direction's own: the inputs' rounding (one ulp
# per entry of u and w, a few through Gram-Schmidt) cannot make a part that
# large out of parallel directions.
RANK_ULPS = 64


@dataclasses.dataclass(frozen=True)
class FusionConfig:
  """How DAF fuses (static; validated at construction).

  Attributes:
    mode: one of :data:`MODES`.
    per_layer: one set of coefficients per pytree leaf instead of global ones.
    rho: :math:`\\lambda = \\rho \\cdot` mean curvature (``two_coef`` only);
      a finite real number >= 0.
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
    # inf would make lambda inf and the fused adapter NaN.
    check_real("rho", self.rho, low=0.0)
    check_flag("per_layer", self.per_layer)


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


def _check_inputs(theta0, previous, task, h_old, h_new):
  tree_lib.check_real_floating(theta0, "theta0")
  for tree, name in ((previous, "previous"), (task, "task"), (h_old, "h_old"),
                     (h_new, "h_new")):
    tree_lib.check_like(tree, theta0, name)
    tree_lib.check_real_floating(tree, name)
  _check_nonempty(theta0)


def _check_nonempty(theta0):
  leaves = jax.tree.leaves(theta0)
  if not leaves:
    raise ValueError("theta0 is empty: the adapter pytree has no leaves.")
  if not sum(np.size(x) for x in leaves):
    raise ValueError("theta0 is empty: every leaf of the adapter pytree has"
                     " size 0.")


def _check_task_index(task_index):
  dtype = jnp.result_type(task_index)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"task_index must be an integer task count t >= 1; got"
                    f" {task_index!r} of dtype {dtype}.")
  if np.ndim(task_index) != 0:
    raise ValueError(f"task_index must be a scalar; got shape"
                     f" {np.shape(task_index)}.")
  if not isinstance(task_index, jax.core.Tracer) and int(task_index) < 1:
    raise ValueError(f"task_index must be >= 1; got {task_index}.")


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
    task_index: the integer :math:`t \ge 1` (may be traced; used by
      ``running_mean``, where a traced :math:`t < 1` gives NaN).
    config: a :class:`FusionConfig`.

  Returns:
    ``(fused, info)``: a pytree like ``theta0`` and a :class:`FusionInfo`.
    ``fused`` is formed from the coefficients of a well-conditioned basis
    (module docstring): it equals :math:`\theta_0 + \alpha u + \beta v` up
    to the rounding of that sum, which is large when nearly parallel
    directions make :math:`\alpha` and :math:`\beta` large and opposite.
    Non-finite inputs give a non-finite ``fused``.

  Raises:
    ValueError: if a pytree's structure or leaf shapes differ from
      ``theta0``'s, ``theta0`` has no entries, or ``task_index`` is not a
      scalar or is a concrete value below 1.
    TypeError: for non-floating leaves or a non-integer ``task_index``.

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
  _check_task_index(task_index)
  treedef = jax.tree.structure(theta0)
  # At least float32 throughout: the rank decision and the sums need it.
  dtype = jnp.promote_types(jnp.result_type(*jax.tree.leaves(theta0)),
                            jnp.float32)
  theta0_l, previous_l, task_l, h_old_raw, h_new_raw = (
      [x.astype(dtype) for x in treedef.flatten_up_to(t)]
      for t in (theta0, previous, task, h_old, h_new))
  num_clipped = sum(jnp.sum(h < 0, dtype=jnp.int32)
                    for h in h_old_raw + h_new_raw)
  # jnp.maximum keeps a NaN curvature NaN.
  h_old_l = [jnp.maximum(h, 0) for h in h_old_raw]
  h_new_l = [jnp.maximum(h, 0) for h in h_new_raw]
  u_l = [p - z for p, z in zip(previous_l, theta0_l)]
  v_l = [a - z for a, z in zip(task_l, theta0_l)]
  # d = a_t - g_{t-1} from the inputs themselves: one rounding, so exact to
  # its own size however close the two adapters are (v - u is not).
  d_l = [a - p for a, p in zip(task_l, previous_l)]
  lam = jnp.zeros((), dtype)
  groups = ([[i] for i in range(len(u_l))] if config.per_layer
            else [list(range(len(u_l)))])
  pick = lambda leaves, group: [leaves[i] for i in group]

  if config.mode == "two_coef":
    total_l = [o + n for o, n in zip(h_old_l, h_new_l)]
    scale = _max_abs(total_l)  # the mean of scaled entries cannot overflow
    lam = config.rho * scale * sum(jnp.sum(x) for x in _scaled(
        total_l, scale)) / sum(x.size for x in total_l)
    solved = [_two_coef(*(pick(x, g) for x in (u_l, d_l, v_l, h_old_l,
                                                h_new_l)), lam)
              for g in groups]
    coefs = [(alpha, beta) for alpha, beta, _ in solved]
    step_l = [step for _, _, steps in solved for step in steps]
    order = [i for g in groups for i in g]
    step_l = [step for _, step in sorted(zip(order, step_l))]
    fused_l = [z + s for z, s in zip(theta0_l, step_l)]
  else:
    if config.mode == "running_mean":
      t = jnp.asarray(task_index, dtype)
      beta = jnp.where(t >= 1, 1 / t, jnp.nan)
      coefs = [(1 - beta, beta)] * len(groups)
    else:
      coefs = []
      for g in groups:
        beta = _single_beta(pick(d_l, g), pick(h_old_l, g), pick(h_new_l, g))
        coefs.append((1 - beta, beta))
    beta_of = {i: b for g, (_, b) in zip(groups, coefs) for i in g}
    fused_l = [p + beta_of[i] * d for i, (p, d) in enumerate(zip(previous_l,
                                                                d_l))]

  fused_l = [f.astype(jnp.result_type(z)) for f, z in zip(
      fused_l, treedef.flatten_up_to(theta0))]
  if config.per_layer:
    alpha = treedef.unflatten([a for a, _ in coefs])
    beta = treedef.unflatten([b for _, b in coefs])
  else:
    alpha, beta = coefs[0]
  return treedef.unflatten(fused_l), FusionInfo(alpha, beta, lam, num_clipped)


def _max_abs(leaves):
  return functools.reduce(jnp.maximum, [jnp.max(jnp.abs(x), initial=0)
                                        for x in leaves])


def _scaled(leaves, scale):
  """``leaves / scale`` (unchanged where ``scale`` is 0: all zero then)."""
  safe = jnp.where(scale == 0, 1, scale)
  return [x / safe for x in leaves]


def _dot(*factors):
  """:math:`\\sum_i \\prod_k x_{k,i}` over the leaves of one group."""
  return sum(jnp.sum(functools.reduce(jnp.multiply, leaf))
             for leaf in zip(*factors))


def _single_beta(d_l, h_old_l, h_new_l):
  """:math:`d^\\top H_{new} d / d^\\top (H_{old} + H_{new}) d` (1 for 0/0)."""
  d_l = _scaled(d_l, _max_abs(d_l))
  total_l = [o + n for o, n in zip(h_old_l, h_new_l)]
  scale = _max_abs(total_l)
  new = _dot(d_l, d_l, _scaled(h_new_l, scale))
  total = _dot(d_l, d_l, _scaled(total_l, scale))
  # 0 means no curvature along d (task 1, or a_t = g_{t-1}): taking the
  # task adapter is then as good as any other choice.
  return jnp.where(total == 0, jnp.ones_like(total), new / jnp.where(
      total == 0, 1, total))


def _two_coef(u_l, d_l, v_l, h_old_l, h_new_l, lam):
  """The minimiser of :math:`J` over :math:`\\theta_0 + \\mathrm{span}\\{u, v\\}`.

  Returns ``(alpha, beta, steps)`` with ``steps`` the leaves of
  :math:`g - \\theta_0`. ``u`` and ``d = v - u`` (as given) are scaled to
  magnitude 1, the one of larger :math:`M`-norm taken first (``e1``), and
  the other made :math:`M`-orthogonal to it (``q``); in that basis the
  normal equations are diagonal. A NaN input fails every equality test
  below, so it reaches the coefficients and the step.
  """
  s_u, s_d = _max_abs(u_l), _max_abs(d_l)
  u_hat, d_hat = _scaled(u_l, s_u), _scaled(d_l, s_d)
  # M and r share one scale (it cancels in the coefficients); the
  # curvatures are scaled before they multiply u and v.
  s_m = _max_abs([o + n + lam for o, n in zip(h_old_l, h_new_l)])
  h_old_l, h_new_l = _scaled(h_old_l, s_m), _scaled(h_new_l, s_m)
  lam = lam / jnp.where(s_m == 0, 1, s_m)
  m_l = [o + n + lam for o, n in zip(h_old_l, h_new_l)]
  r_l = [o * u + n * v for o, n, u, v in zip(h_old_l, h_new_l, u_l, v_l)]
  n_u, n_d = _dot(m_l, u_hat, u_hat), _dot(m_l, d_hat, d_hat)
  swap = n_d > n_u
  e1 = [jnp.where(swap, d, u) for u, d in zip(u_hat, d_hat)]
  e2 = [jnp.where(swap, u, d) for u, d in zip(u_hat, d_hat)]
  n1, n2 = jnp.where(swap, n_d, n_u), jnp.where(swap, n_u, n_d)
  safe1 = jnp.where(n1 == 0, 1, n1)
  # Gram-Schmidt twice: the second pass removes what rounding left of e1.
  c1 = _dot(m_l, e1, e2) / safe1
  q = [y - c1 * x for x, y in zip(e1, e2)]
  c2 = _dot(m_l, e1, q) / safe1
  q = [y - c2 * x for x, y in zip(e1, q)]
  c = c1 + c2  # e2 = q + c e1
  n_q = _dot(m_l, q, q)
  eps = jnp.finfo(n_q.dtype).eps
  parallel = n_q <= (RANK_ULPS * eps) ** 2 * n2
  xi1 = jnp.where(n1 == 0, 0, _dot(e1, r_l) / safe1)
  xi2 = jnp.where(parallel, 0, _dot(q, r_l) / jnp.where(parallel, 1, n_q))
  steps = [xi1 * x + xi2 * y for x, y in zip(e1, q)]

  # (alpha, beta) of g - theta0 = alpha u + beta v, with v = u + d.
  k1, k2 = xi1 - xi2 * c, xi2  # g - theta0 = k1 e1 + k2 e2
  k_u, k_d = jnp.where(swap, k2, k1), jnp.where(swap, k1, k2)
  safe_u = jnp.where(s_u == 0, 1, s_u)
  safe_d = jnp.where(s_d == 0, 1, s_d)
  alpha_full, beta_full = k_u / safe_u - k_d / safe_d, k_d / safe_d
  # One direction: u = sigma_u e1 and v = sigma_v e1; the minimum-norm pair
  # with alpha sigma_u + beta sigma_v = xi1 (scaled so that no square
  # overflows).
  sigma_u = jnp.where(swap, s_u * c, s_u)
  sigma_v = sigma_u + jnp.where(swap, s_d, s_d * c)
  top = jnp.maximum(jnp.abs(sigma_u), jnp.abs(sigma_v))
  safe_top = jnp.where(top == 0, 1, top)
  a, b = sigma_u / safe_top, sigma_v / safe_top
  norm = jnp.where(top == 0, 1, safe_top * (a * a + b * b))
  alpha = jnp.where(parallel, xi1 * a / norm, alpha_full)
  beta = jnp.where(parallel, xi1 * b / norm, beta_full)
  return alpha, beta, steps


def init(theta0: Params) -> DAFState:
  """The state before task 1: :math:`g_0 = \\theta_0`, no curvature yet.

  Raises like :func:`fuse` for non-floating or empty ``theta0``.
  """
  tree_lib.check_real_floating(theta0, "theta0")
  _check_nonempty(theta0)
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

  ``two_coef``'s coefficients minimise it; a reference for tests and plots.
  It is evaluated in the inputs' dtype at the sum above, so for nearly
  parallel :math:`u, v` (large, opposite coefficients) it carries that
  sum's rounding: evaluate :math:`J` at :func:`fuse`'s adapter there.
  Raises like :func:`fuse` for pytrees unlike ``theta0``, and
  ``ValueError`` for a concrete ``lam`` that is not finite and >= 0.
  """
  _check_inputs(theta0, previous, task, h_old, h_new)
  if not isinstance(lam, jax.core.Tracer) and not (
      np.ndim(lam) == 0 and np.isfinite(lam) and lam >= 0):
    raise ValueError(f"lam must be a finite scalar >= 0; got {lam}.")
  fused = jax.tree.map(lambda z, p, a: z + alpha * (p - z) + beta * (a - z),
                       theta0, previous, task)
  quad = lambda h, x, c: sum(
      jnp.sum(hh * (xx - cc) ** 2) for hh, xx, cc in zip(
          jax.tree.leaves(h), jax.tree.leaves(x), jax.tree.leaves(c)))
  return 0.5 * (quad(h_old, fused, previous) + quad(h_new, fused, task)
                + lam * quad(jax.tree.map(jnp.ones_like, theta0), fused, theta0))
