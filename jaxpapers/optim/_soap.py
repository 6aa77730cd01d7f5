r"""SOAP: Adam in the eigenbasis of Shampoo's preconditioner.

optax has no SOAP, and EMA-Nesterov (Yau et al., 2026) uses it as a base
optimizer, so it lives here. Written from Vyas et al. (2024) and the authors'
PyTorch code (``nikhilvyas/SOAP``): the same first-step set-up, eigenbasis
refresh (one power iteration and a QR, columns sorted by estimated
eigenvalue with the second moment permuted alike) and bias correction.
Not carried over: ``merge_dims``, ``normalize_grads`` and the
``channels_last`` layout. Weight decay in :func:`soap` is optax's decoupled
``add_decayed_weights`` on the pre-update params, on every step; the
reference decays the post-update params (a difference of order
:math:`\eta^2\lambda`) and skips the first step entirely.
"""

import math
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import tree as tree_lib


# The authors' default; a None default keeps it out of
# optax.inject_hyperparams' traced hyperparameters.
DEFAULT_MAX_PRECOND_DIM = 10000


class ScaleBySoapState(NamedTuple):
  """State of :func:`scale_by_soap`.

  Attributes:
    count: number of updates so far (int32); the first one only builds the
      eigenbases, so Adam's step count is ``count - 1``.
    mu: first moment of the gradients, in the params' own coordinates.
    nu: second moment of the gradients rotated into the eigenbases.
    preconditioners: per param, one entry per axis: Shampoo's EMA of
      :math:`G G^\\top` along that axis (``(d, d)``), or None where the axis
      is not preconditioned.
    eigenbases: like ``preconditioners``: the eigenvectors :math:`Q` in use,
      columns in descending order of eigenvalue.
  """

  count: jax.Array
  mu: optax.Updates
  nu: optax.Updates
  preconditioners: Any
  eigenbases: Any


def scale_by_soap(
    b1: float | jax.Array = 0.95,
    b2: float | jax.Array = 0.95,
    shampoo_beta: float | jax.Array | None = None,
    eps: float | jax.Array = 1e-8,
    precondition_frequency: int | jax.Array = 10,
    max_precond_dim: int | None = None,
    precondition_1d: bool = False,
) -> optax.GradientTransformationExtraArgs:
  r"""Rescales updates with Adam run in the eigenbasis of Shampoo's preconditioner.

  For a matrix parameter with gradient :math:`G_t` (every axis of a tensor
  is handled alike, one factor per axis):

  .. math::
    L_t &= \beta_s L_{t-1} + (1-\beta_s) G_t G_t^\top,\qquad
    R_t = \beta_s R_{t-1} + (1-\beta_s) G_t^\top G_t\\
    M_t &= \beta_1 M_{t-1} + (1-\beta_1) G_t,\qquad
    V_t = \beta_2 V_{t-1} + (1-\beta_2) (Q_L^\top G_t Q_R)^{\odot 2}\\
    \text{update}_t &= \frac{\sqrt{1-\beta_2^{s}}}{1-\beta_1^{s}}\;
    Q_L \Big[\frac{Q_L^\top M_t Q_R}{\sqrt{V_t} + \epsilon}\Big] Q_R^\top,

  with :math:`s` Adam's step count. The first update returns zeros and only
  sets :math:`L, R` and their eigenvectors :math:`Q_L, Q_R` (``eigh``), so
  that the current gradient never enters its own projection. :math:`L, R`
  are updated after each step; every ``precondition_frequency`` Adam steps
  :math:`Q \leftarrow \mathrm{QR}(L Q)` (columns first sorted by
  :math:`\mathrm{diag}(Q^\top L Q)`, with :math:`V` permuted alike). Axes
  longer than ``max_precond_dim`` and, unless ``precondition_1d``, vectors
  keep the identity basis (plain Adam there). Preconditioner math runs in
  float32 or wider; updates come back in the gradients' dtype. Under an
  explicit mesh the rotations of a preconditioned param run on a gathered
  copy; its moments keep the param's sharding, factors and bases are
  replicated.

  Args:
    b1: Adam's first-moment decay.
    b2: Adam's second-moment decay.
    shampoo_beta: decay of :math:`L, R`; None uses ``b2``.
    eps: added to :math:`\sqrt{V}`.
    precondition_frequency: Adam steps between eigenbasis refreshes.
    max_precond_dim: longest axis that gets a preconditioner; None is the
      authors' 10000. Read by ``init`` only, which must see a concrete value:
      under ``optax.inject_hyperparams`` with an abstract or jitted init, list
      it in ``static_args``.
    precondition_1d: whether vectors get a preconditioner too.

  Returns:
    An ``optax.GradientTransformationExtraArgs`` with state
    :class:`ScaleBySoapState`.

  References:
    Vyas, Morwani, Zhao, Kwun, Shapira, Brandfonbrener, Janson & Kakade,
    `SOAP: Improving and Stabilizing Shampoo using Adam
    <https://arxiv.org/abs/2409.11321>`_, 2024.
  """
  # Under optax.inject_hyperparams every numeric argument arrives as an
  # array: concrete when init runs, traced inside a jitted update. Only init
  # reads max_precond_dim and precondition_1d (they fix the state's
  # shapes); update reads which axes are preconditioned off the state.
  concrete = lambda x: not isinstance(x, jax.core.Tracer)
  if max_precond_dim is None:
    max_precond_dim = DEFAULT_MAX_PRECOND_DIM
  # int() would truncate 2.5 to 2 (and fail on NaN): whole numbers only.
  for name, value in (("max_precond_dim", max_precond_dim),
                      ("precondition_frequency", precondition_frequency)):
    if concrete(value) and not _is_whole(value, low=1):
      raise ValueError(f"{name} must be >= 1 (a whole number), got {value}.")
  _check_soap_ranges(b1=b1, b2=b2, shampoo_beta=shampoo_beta, eps=eps)

  def preconditioned(shape):
    if not (concrete(max_precond_dim) and concrete(precondition_1d)):
      raise ValueError(
          "max_precond_dim and precondition_1d set the state's shapes and must"
          " be concrete when init runs (not traced inside jit); under"
          " optax.inject_hyperparams list them in static_args.")
    return tuple((len(shape) >= 2 or bool(precondition_1d))
                 and d <= int(max_precond_dim) for d in shape)

  def init_fn(params):
    tree_lib.check_real_floating(params, "params")

    def matrices(p):
      dtype = _compute_dtype(p.dtype)
      return tuple(jnp.eye(d, dtype=dtype) if on else None
                   for d, on in zip(p.shape, preconditioned(p.shape)))

    moments = lambda: jax.tree.map(
        lambda p: jnp.zeros_like(p, _compute_dtype(p.dtype)), params)
    eye = jax.tree.map(matrices, params)
    return ScaleBySoapState(
        count=jnp.zeros([], jnp.int32),
        mu=moments(),
        nu=moments(),
        preconditioners=jax.tree.map(jnp.zeros_like, eye),
        eigenbases=eye,
    )

  def update_fn(updates, state, params=None, **extra_args):
    del params, extra_args
    tree_lib.check_like(updates, state.mu, "updates",
                        reference_name="the params soap was initialised with")
    state = state._replace(
        preconditioners=_per_axis_tuples(updates, state.preconditioners),
        eigenbases=_per_axis_tuples(updates, state.eigenbases))
    count = state.count
    is_first = count == 0
    # On the first call the Adam branch is discarded; a step of 1 keeps its
    # bias correction finite.
    step = jnp.maximum(count, 1)
    beta_s = b2 if shampoo_beta is None else shampoo_beta

    def per_param(g, mu, nu, ls, qs):
      """Adam in the eigenbasis and the factor update, for one param."""
      dtype = mu.dtype
      # The rotations contract every axis: under an explicit mesh they run on
      # gathered copies, and the moments go back to the params' shardings.
      (g, mu, nu), restore = _gathered((g.astype(dtype), mu, nu), qs)
      c1, c2 = (jnp.asarray(b).astype(dtype) for b in (b1, b2))
      new_mu = c1 * mu + (1 - c1) * g
      new_nu = c2 * nu + (1 - c2) * jnp.square(_rotate(g, qs, back=False))
      direction = _rotate(_rotate(new_mu, qs, back=False)
                          / (jnp.sqrt(new_nu) + jnp.asarray(eps).astype(dtype)),
                          qs, back=True)
      s = step.astype(dtype)
      scale = jnp.sqrt(1 - c2 ** s) / (1 - c1 ** s)
      keep = lambda new, old: jnp.where(is_first, old, new)
      out = jnp.where(is_first, jnp.zeros_like(direction), scale * direction)
      new_ls = tuple(
          None if l is None else _lerp(l, _axis_gram(g.astype(l.dtype), axis),
                                       beta_s)
          for axis, l in enumerate(ls))
      return (*restore((out, keep(new_mu, mu), keep(new_nu, nu))), new_ls)

    per_leaf = jax.tree.map(per_param, updates, state.mu, state.nu,
                            state.preconditioners, state.eigenbases)
    treedef = jax.tree.structure(updates)
    new_updates, mu, nu, preconditioners = (
        treedef.unflatten(x) for x in zip(*treedef.flatten_up_to(per_leaf)))
    refresh = jnp.logical_and(~is_first, count % precondition_frequency == 0)
    branch = jnp.where(is_first, 1, jnp.where(refresh, 2, 0))
    eigenbases, nu = jax.lax.switch(
        branch, [_keep_bases, _eigh_bases, _power_qr_bases],
        preconditioners, state.eigenbases, nu)
    new_updates = jax.tree.map(lambda u, g: u.astype(g.dtype), new_updates,
                               updates)
    return new_updates, ScaleBySoapState(
        count=optax.safe_increment(count), mu=mu, nu=nu,
        preconditioners=preconditioners, eigenbases=eigenbases)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def soap(
    learning_rate: optax.ScalarOrSchedule = 3e-3,
    b1: float | jax.Array = 0.95,
    b2: float | jax.Array = 0.95,
    shampoo_beta: float | jax.Array | None = None,
    eps: float | jax.Array = 1e-8,
    weight_decay: float | jax.Array = 0.01,
    weight_decay_mask: Any = None,
    precondition_frequency: int | jax.Array = 10,
    max_precond_dim: int | None = None,
    precondition_1d: bool = False,
) -> optax.GradientTransformationExtraArgs:
  r"""SOAP with decoupled weight decay and a learning rate (the authors' defaults).

  ``chain(scale_by_soap(...), add_decayed_weights(weight_decay, mask),
  scale_by_learning_rate(learning_rate))``; see :func:`scale_by_soap`.

  Args:
    learning_rate: a scalar or an optax schedule.
    b1: Adam's first-moment decay.
    b2: Adam's second-moment decay.
    shampoo_beta: decay of Shampoo's factors; None uses ``b2``.
    eps: added to the root of the second moment.
    weight_decay: decoupled weight decay, multiplied by the learning rate.
    weight_decay_mask: optax mask (tree or callable) of leaves to decay.
    precondition_frequency: Adam steps between eigenbasis refreshes.
    max_precond_dim: longest axis that gets a preconditioner (None: 10000).
    precondition_1d: whether vectors get a preconditioner too.

  Returns:
    An ``optax.GradientTransformationExtraArgs``.

  Example:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers import optim
    >>> target = jnp.array([[1.0, -2.0], [0.5, 3.0]])
    >>> f = lambda w: jnp.sum((w - target) ** 2)
    >>> tx = optim.soap(0.1, weight_decay=0.0)
    >>> w = jnp.zeros((2, 2))
    >>> state = tx.init(w)
    >>> for _ in range(300):
    ...   updates, state = tx.update(jax.grad(f)(w), state, w)
    ...   w = optax.apply_updates(w, updates)
    >>> bool(f(w) < 1e-2)
    True

  Example (flax nnx):
    >>> from flax import nnx
    >>> model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    >>> x = jnp.array([[1.0, 2.0], [3.0, -1.0]])
    >>> loss = lambda m: jnp.mean((m(x) - jnp.array([[1.0], [0.0]])) ** 2)
    >>> optimizer = nnx.Optimizer(model, optim.soap(0.05), wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   optimizer.update(model, nnx.grad(loss)(model))
    >>> before = loss(model)
    >>> for _ in range(20):  # two eigenbasis refreshes
    ...   train_step(model, optimizer)
    >>> bool(loss(model) < before / 4)
    True

  References:
    Vyas et al., `SOAP: Improving and Stabilizing Shampoo using Adam
    <https://arxiv.org/abs/2409.11321>`_, 2024.
  """
  _check_soap_ranges(weight_decay=weight_decay, learning_rate=learning_rate)
  return optax.chain(
      scale_by_soap(b1=b1, b2=b2, shampoo_beta=shampoo_beta, eps=eps,
                    precondition_frequency=precondition_frequency,
                    max_precond_dim=max_precond_dim,
                    precondition_1d=precondition_1d),
      optax.add_decayed_weights(weight_decay, weight_decay_mask),
      optax.scale_by_learning_rate(learning_rate),
  )


def _check_soap_ranges(**hyperparams) -> None:
  """Named errors for out-of-range hyperparameters (Python or concrete).

  Betas must lie in [0, 1), eps and weight decay be finite and >= 0, a
  learning rate (not a schedule) be finite. An infinite ``eps`` would zero
  every update, an infinite weight decay or learning rate turn the
  parameters to NaN or inf.
  """
  for name, value in hyperparams.items():
    if (value is None or callable(value)
        or isinstance(value, jax.core.Tracer)):
      continue  # schedules; traced values (inject_hyperparams)
    value = float(value)
    if name == "learning_rate":
      if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}.")
    elif name in ("eps", "weight_decay"):
      if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be >= 0 and finite, got {value}.")
    elif not 0 <= value < 1:
      raise ValueError(f"{name} must lie in [0, 1), got {value}.")


def _is_whole(value: Any, *, low: int) -> bool:
  """Whether a concrete scalar is a whole number >= ``low`` (ints or integral floats)."""
  if isinstance(value, bool) or np.ndim(value) != 0:
    return False
  number = float(value)
  return math.isfinite(number) and number == int(number) and number >= low


def _compute_dtype(dtype) -> jnp.dtype:
  """float32, or the param's dtype when wider (float64 under x64)."""
  dtype = jnp.dtype(dtype)
  return dtype if dtype.itemsize > 4 else jnp.dtype(jnp.float32)


def _per_axis_tuples(updates, factors):
  """Each param's per-axis factors as a tuple, whatever container holds them.

  ``nnx.Optimizer`` writes the state back into ``nnx.State`` after every
  update, and a tuple inside a param's slot comes back as a mapping from
  position to factor; read back as a tuple, every step traces the same
  structure (``lax.switch`` below needs its branches to agree).
  """
  def as_tuple(_, per_axis):
    if isinstance(per_axis, Mapping):
      return tuple(per_axis[axis] for axis in range(len(per_axis)))
    return tuple(per_axis)
  return jax.tree.map(as_tuple, updates, factors)


def _gathered(arrays, qs):
  """Gathers explicitly sharded ``arrays`` when some axis has a basis to rotate by."""
  if all(q is None for q in qs):
    return arrays, lambda xs: xs
  return tree_lib.gather_explicit(arrays)


def _rotate(x: jax.Array, qs: tuple[jax.Array | None, ...], *,
            back: bool) -> jax.Array:
  """Applies ``Q^T`` (or ``Q`` when ``back``) along every preconditioned axis."""
  for axis, q in enumerate(qs):
    if q is not None:
      x = jnp.moveaxis(jnp.tensordot(x, q, axes=([axis], [1 if back else 0])),
                       -1, axis)
  return x


def _axis_gram(g: jax.Array, axis: int) -> jax.Array:
  """``G G^T`` along ``axis``: contracts every other axis."""
  others = [a for a in range(g.ndim) if a != axis]
  return jnp.tensordot(g, g, axes=(others, others))


def _lerp(old, new, beta):
  beta = jnp.asarray(beta).astype(old.dtype)
  return beta * old + (1 - beta) * new


def _keep_bases(preconditioners, eigenbases, nu):
  del preconditioners
  return eigenbases, nu


def _eigh_bases(preconditioners, eigenbases, nu):
  """Exact eigenvectors, in descending order of eigenvalue (first call)."""
  del eigenbases
  bases = jax.tree.map(lambda l: jnp.linalg.eigh(l)[1][:, ::-1],
                       preconditioners)
  return bases, nu


def _power_qr_bases(preconditioners, eigenbases, nu):
  """One power iteration and a QR per factor; permutes ``nu`` to the new order."""

  def per_param(v, ls, qs):
    (v,), restore = _gathered((v,), qs)
    new_qs = []
    for axis, (l, q) in enumerate(zip(ls, qs)):
      if l is None:
        new_qs.append(None)
        continue
      # One product serves both: (L Q)[:, order] = L (Q[:, order]).
      lq = l @ q
      order = jnp.argsort(jnp.einsum("ij,ij->j", q, lq), descending=True)
      v = jnp.take(v, order, axis=axis)
      new_qs.append(jnp.linalg.qr(jnp.take(lq, order, axis=1))[0])
    return tuple(new_qs), restore((v,))[0]

  per_leaf = jax.tree.map(per_param, nu, preconditioners, eigenbases)
  treedef = jax.tree.structure(nu)
  bases, new_nu = zip(*treedef.flatten_up_to(per_leaf))
  return treedef.unflatten(bases), treedef.unflatten(new_nu)
