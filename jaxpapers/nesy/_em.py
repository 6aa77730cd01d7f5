r"""EM-NeSy: neurosymbolic learning as expectation-maximisation.

A network gives per-symbol distributions :math:`p_\theta(z|x) = \prod_k
\mathrm{softmax}(f_\theta(x)_k)[z_k]`; a symbolic program :math:`\phi` maps
the symbols to the label :math:`y`. EM-NeSy alternates

* **E-step** (no gradient): the posterior :math:`q(z) \propto
  p_\theta(z|x)\, 1[\phi(z) = y]`, of which only the marginals
  :math:`q_k(v)` are needed, by any inference (:func:`estep`): ``"exact"``,
  ``"rejection"`` (the empirical marginals of the accepted prior samples),
  ``"hard"`` (the MAP world, one-hot) or ``"stochastic"`` (one exact
  posterior sample, one-hot);
* **M-step**: gradient steps on the cross-entropy to the fixed posterior
  (:func:`em_loss`)

  .. math::
    L_M(\theta) = -\frac{1}{B} \sum_b \sum_k \sum_v \mathrm{sg}(q_{bk}(v))
    \log p_\theta(z_{bk} = v | x_b).

By Fisher's identity :math:`\nabla_\theta \log Z = \mathbb{E}_q[\nabla_\theta
\log p_\theta(z|x)] = -\nabla_\theta L_M` at the same :math:`\theta`, so one
M-step per exact E-step is gradient descent on the semantic loss
:math:`-\log p_\theta(y|x)` (:func:`semantic_loss`), while the symbolic part
never needs to be differentiable. :func:`reinforce_loss` is the
sampling-gradient baseline (REINFORCE with a leave-one-out baseline).

A *program* is any object with the per-example methods of
:class:`jaxpapers.nesy.DigitAddition` (the carry chain) or
:class:`jaxpapers.nesy.EnumeratedProgram` (any small program):
``num_symbols``, ``num_values``, ``label_shape``, ``placeholder_label()``,
``in_range``, ``feasible``, ``log_z``, ``marginals``, ``map_assignment``,
``sample`` and ``satisfied``. Every function here takes batched logits
``(B, K, V)``.

One verdict for every function: an example is *dropped* iff its
:math:`\log p_\theta(y|x) = -\infty`, i.e. its label is infeasible (no
world produces it) or its evidence gives every world that does probability
0 (a -inf logit on each). A dropped example has ``log_z = -inf`` (the flag,
from :func:`log_z` and in :class:`Posterior`), weight 0 and zero marginals,
and adds 0 to :func:`semantic_loss`, :func:`em_loss` and
:func:`reinforce_loss` alike; infeasible labels run through the program as
its placeholder label, so no NaN reaches a gradient. (``"rejection"`` also
drops an example none of whose samples was accepted.)

NaN is never read as "infeasible": a NaN logit (or a +inf one, or a row of
-inf, which ``log_softmax`` makes NaN) makes its example's ``log_z``,
marginals and weight NaN and so every loss over the batch NaN. Labels must
be in range for the program (``in_range``, which refuses a concrete label
out of range with a ``ValueError``; for
:class:`~jaxpapers.nesy.DigitAddition`, digits in 0..9): every
function here refuses concrete labels out of range, and traced ones give
NaN in the same way.

Source status: the E-step / M-step split, the approximate engines and the
gradient identity follow the EM-NeSy abstract (Seibt, De Raedt and Marra,
2026) and standard EM algebra; **reconstruction** (ours, ``docs/em_nesy.md``):
the weighting of infeasible and unaccepted examples and this API.

References:
  Seibt, De Raedt and Marra, `EM-NeSy: Expectation-Maximization for
  neurosymbolic learning <https://arxiv.org/abs/2606.14463>`_, 2026.
  Xu et al., `A semantic loss function for deep learning with symbolic
  knowledge <https://arxiv.org/abs/1711.11157>`_, ICML 2018.
  Kool, van Hoof and Welling, `Buy 4 REINFORCE samples, get a baseline for
  free! <https://openreview.net/forum?id=r1lgTGL5DE>`_, 2019.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int

INFERENCES = ("exact", "rejection", "hard", "stochastic")
DEFAULT_REJECTION_SAMPLES = 256
DEFAULT_REINFORCE_SAMPLES = 16


class Posterior(NamedTuple):
  """What an E-step returns for a batch of B examples.

  Attributes:
    marginals: ``(B, K, V)`` :math:`q_{bk}(v)`, each row a distribution
      normalised on its own; zero rows where ``weight`` is 0.
    log_z: ``(B,)`` the E-step's value of :math:`\\log p_\\theta(y|x)`:
      exact for ``"exact"`` and ``"stochastic"``; the log of the acceptance
      fraction (a Monte-Carlo estimate) for ``"rejection"``; the MAP world's
      log-probability (a lower bound) for ``"hard"``; ``-inf`` where the
      example is dropped (infeasible label, zero-probability evidence, or
      nothing accepted).
    weight: ``(B,)`` 1.0 where ``marginals`` is a distribution, 0.0 where
      the example is dropped.

  All three are NaN for an example whose logits hold a NaN (or whose
  traced label is out of range): never a zero weight.
  """

  marginals: jax.Array
  log_z: jax.Array
  weight: jax.Array


EStep = Callable[[jax.Array, jax.Array, jax.Array], Posterior]


def estep(program: Any, inference: str = "exact", *,
          num_samples: int = DEFAULT_REJECTION_SAMPLES) -> EStep:
  """The E-step ``(key, logits_BxKxV, labels) -> Posterior`` of ``program``.

  Gradients are stopped at the logits. ``key`` is used by ``"rejection"``
  and ``"stochastic"`` only (one key per call; examples get split keys) and
  may be None for the others.

  Args:
    program: a program (see the module docstring).
    inference: one of :data:`INFERENCES`.
    num_samples: S, prior samples per example for ``"rejection"``.

  Returns:
    A function that works under ``jit``.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers import nesy
    >>> step = estep(nesy.DigitAddition(1))
    >>> logits = jnp.zeros((1, 2, 10))
    >>> post = step(jax.random.key(0), logits, jnp.array([[8, 1]]))  # 18
    >>> post.marginals[0, :, 9].tolist(), post.weight.tolist()
    ([1.0, 1.0], [1.0])
  """
  _check_program(program)
  if inference not in INFERENCES:
    raise ValueError(f"inference must be one of {INFERENCES}; got {inference!r}.")
  check_int("num_samples", num_samples, 1)
  num_values = program.num_values

  def one(key, logp, label, poisoned):
    feasible = program.feasible(label)
    label = jnp.where(feasible, label, program.placeholder_label())
    if inference == "exact":
      q, log_z = program.marginals(logp, label)
    elif inference == "hard":
      z, log_z = program.map_assignment(logp, label)
      q = jax.nn.one_hot(z, num_values, dtype=logp.dtype)
    elif inference == "stochastic":
      z = program.sample(key, logp, label)
      log_z = program.log_z(logp, label)
      q = jax.nn.one_hot(z, num_values, dtype=logp.dtype)
    else:
      z_SxK = sample_symbols(key, logp, num_samples)
      accepted_S = jax.vmap(program.satisfied, (0, None))(z_SxK, label)
      accepted_S = accepted_S & feasible
      count = jnp.sum(accepted_S)
      one_hot_SxKxV = jax.nn.one_hot(z_SxK, num_values, dtype=logp.dtype)
      q = (jnp.einsum("s,skv->kv", accepted_S.astype(logp.dtype),
                      one_hot_SxKxV)
           / jnp.maximum(count, 1).astype(logp.dtype))
      log_z = jnp.log(count.astype(logp.dtype) / num_samples)  # -inf iff 0
    # The module's one verdict: dropped iff infeasible or log Z = -inf. A
    # NaN log Z is not -inf, and poisoned examples are NaN throughout.
    found = feasible & ~jnp.isneginf(log_z)
    nan = jnp.asarray(jnp.nan, logp.dtype)
    return (jnp.where(poisoned, nan, jnp.where(found, q, 0.0)),
            jnp.where(poisoned, nan, jnp.where(found, log_z, -jnp.inf)),
            jnp.where(poisoned, nan, found.astype(logp.dtype)))

  def run(key: jax.Array | None, logits: jax.Array, labels: jax.Array
          ) -> Posterior:
    if key is None:
      if inference in ("rejection", "stochastic"):
        raise ValueError(f"inference={inference!r} samples: pass a PRNG key.")
      key = jax.random.key(0)  # unused by the deterministic E-steps
    logp = jax.nn.log_softmax(jax.lax.stop_gradient(_check(program, logits,
                                                           labels)), -1)
    keys = jax.random.split(key, logits.shape[0])
    return Posterior(*tree.vmap_sharded(one)(
        keys, logp, labels, _poisoned(program, logp, labels)))

  return run


def em_loss(logits: jax.Array, posterior: Posterior) -> jax.Array:
  """The M-step loss :math:`-\\frac1B \\sum_{b,k,v} \\mathrm{sg}(q)\\, \\log p_\\theta`.

  Zero-weight examples (zero marginals) add 0; the mean is over all B.
  A term with :math:`q = 0` and :math:`\\log p_\\theta = -\\infty` (a -inf
  logit) is 0, the limit of :math:`q \\log p`, not ``0 * -inf = NaN``; a
  NaN in ``logits`` or in the marginals still makes the loss NaN.
  """
  if not isinstance(posterior, Posterior):
    raise TypeError("posterior must be a Posterior (from estep); got"
                    f" {type(posterior).__name__}.")
  q = jax.lax.stop_gradient(posterior.marginals)
  if q.shape != logits.shape:
    raise ValueError(f"logits {logits.shape} and posterior marginals"
                     f" {q.shape} must have the same (B, K, V) shape.")
  _check_logits_dtype(logits)
  _check_nonempty(logits)
  logp = jax.nn.log_softmax(logits, -1)
  terms = jnp.where((q == 0) & jnp.isneginf(logp), 0.0, q * logp)
  return -jnp.sum(terms) / logits.shape[0]


def em_step(step: EStep, key: jax.Array | None, logits: jax.Array, labels: jax.Array
            ) -> tuple[jax.Array, Posterior]:
  """One E-step on the current logits and the M-step loss on it: ``(loss, posterior)``.

  Differentiate the loss in the network's parameters; for ``m_steps > 1``
  keep the posterior and call :func:`em_loss` on new logits.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers import nesy
    >>> program = nesy.DigitAddition(3)
    >>> logits = jax.random.normal(jax.random.key(0), (2, 6, 10))
    >>> labels = jnp.array([[1, 2, 3, 0], [9, 9, 9, 1]])  # 321, 1999
    >>> grad_em = jax.grad(lambda l: em_step(estep(program), None, l, labels)[0])
    >>> grad_sl = jax.grad(lambda l: semantic_loss(program, l, labels))
    >>> bool(jnp.allclose(grad_em(logits), grad_sl(logits), atol=1e-6))
    True
  """
  posterior = step(key, logits, labels)
  return em_loss(logits, posterior), posterior


def log_z(program: Any, logits: jax.Array, labels: jax.Array) -> jax.Array:
  """``(B,)`` exact :math:`\\log p_\\theta(y|x)`, differentiable.

  -inf flags a dropped example (infeasible label or zero-probability
  evidence); NaN logits or a traced out-of-range label give NaN.
  """
  _check_program(program)
  logp = jax.nn.log_softmax(_check(program, logits, labels), -1)
  feasible = jax.vmap(program.feasible)(labels)
  safe = jnp.where(_expand(feasible, labels), labels,
                   program.placeholder_label()[None])
  values = jnp.where(feasible, tree.vmap_sharded(program.log_z)(logp, safe),
                     -jnp.inf)
  return jnp.where(_poisoned(program, logp, labels), jnp.nan, values)


def semantic_loss(program: Any, logits: jax.Array, labels: jax.Array
                  ) -> jax.Array:
  """The exact semantic loss :math:`-\\frac1B \\sum_b \\log p_\\theta(y_b|x_b)` (autodiff of log Z).

  Dropped examples (``log_z = -inf``: infeasible label or zero-probability
  evidence, the verdict :func:`estep` gives) add 0 and no NaN to the
  gradient; the mean is over all B. A NaN ``log_z`` makes the loss NaN.
  """
  _check_nonempty(logits)
  values = log_z(program, logits, labels)
  # Only -inf is "dropped": a NaN must stay NaN, never read as infeasible.
  return -jnp.sum(jnp.where(jnp.isneginf(values), 0.0, values)) / logits.shape[0]


def reinforce_loss(program: Any, key: jax.Array, logits: jax.Array,
                   labels: jax.Array, *,
                   num_samples: int = DEFAULT_REINFORCE_SAMPLES
                   ) -> tuple[jax.Array, jax.Array]:
  r"""REINFORCE surrogate with a leave-one-out baseline: ``(loss, mean reward)``.

  With S samples :math:`z_s \sim p_\theta(z|x)`, reward
  :math:`r_s = 1[\phi(z_s) = y]` and baseline :math:`b_s = \frac{1}{S-1}
  \sum_{t \ne s} r_t`, the surrogate is :math:`-\frac1B \sum_b \frac1S
  \sum_s (r_s - b_s) \log p_\theta(z_s|x)`; its gradient is an unbiased
  estimate of :math:`-\nabla_\theta\, p_\theta(y|x)` (the probability, not
  its log).

  A dropped example (see the module docstring) is never rewarded and adds
  0. An example with NaN logits or a traced out-of-range label gets NaN
  rewards, so the loss and the mean reward are NaN.
  """
  _check_program(program)
  check_int("num_samples", num_samples, 2, why=" (leave-one-out needs two)")
  if key is None:
    raise ValueError("reinforce_loss samples: pass a PRNG key.")
  _check_nonempty(_check(program, logits, labels))
  logp_BxKxV = jax.nn.log_softmax(logits, -1)
  batch = logits.shape[0]
  keys = jax.random.split(key, batch)

  def sample_and_reward(key, logp_KxV, label):
    z_SxK = sample_symbols(key, logp_KxV, num_samples)
    return z_SxK, jax.vmap(program.satisfied, (0, None))(z_SxK, label)

  z_BxSxK, reward_BxS = tree.vmap_sharded(sample_and_reward)(
      keys, jax.lax.stop_gradient(logp_BxKxV), labels)
  reward_BxS = jnp.where(_poisoned(program, logp_BxKxV, labels)[:, None],
                         jnp.nan, reward_BxS.astype(logits.dtype))
  baseline_BxS = ((jnp.sum(reward_BxS, 1, keepdims=True) - reward_BxS)
                  / (num_samples - 1))
  log_p_BxS = jnp.sum(jnp.take_along_axis(
      jnp.swapaxes(logp_BxKxV, 1, 2), z_BxSxK, axis=1), -1)
  advantage_BxS = jax.lax.stop_gradient(reward_BxS - baseline_BxS)
  loss = -jnp.sum(advantage_BxS * log_p_BxS) / (batch * num_samples)
  return loss, jnp.mean(reward_BxS)


def sample_symbols(key: jax.Array, logp_KxV: jax.Array, num_samples: int
                   ) -> jax.Array:
  """``(S, K)`` int32 draws of independent symbols from ``(K, V)`` log-probabilities.

  Inverse-CDF sampling: one uniform per symbol, where
  ``jax.random.categorical``'s Gumbel trick draws V of them. The draw is
  held below the total mass, so a value of probability 0 is never drawn
  (``u * total`` can round up to the total). A NaN row draws 0: the
  callers flag such examples.
  """
  cdf_KxV = jnp.cumsum(jnp.exp(logp_KxV), -1)
  total_K = cdf_KxV[:, -1]
  u_SxK = jnp.minimum(
      jax.random.uniform(key, (num_samples, logp_KxV.shape[0]),
                         logp_KxV.dtype) * total_K[None],
      jnp.nextafter(total_K, jnp.zeros_like(total_K))[None])
  return jnp.sum(u_SxK[..., None] >= cdf_KxV[None], -1).astype(jnp.int32)


def _expand(mask_B: jax.Array, labels: jax.Array) -> jax.Array:
  return mask_B.reshape(mask_B.shape + (1,) * (labels.ndim - 1))


_PROGRAM_INTERFACE = ("num_symbols", "num_values", "label_shape",
                      "placeholder_label", "in_range", "feasible", "log_z",
                      "marginals", "map_assignment", "sample", "satisfied")


def _check_program(program: Any) -> None:
  missing = [name for name in _PROGRAM_INTERFACE
             if not hasattr(program, name)]
  if missing:
    raise TypeError(
        "program must be a NeSy program (DigitAddition, EnumeratedProgram or"
        f" one with their methods); {type(program).__name__} lacks"
        f" {', '.join(missing)}.")


def _check_logits_dtype(logits: jax.Array) -> None:
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise TypeError(f"logits must be floating point; got {logits.dtype}.")


def _check_nonempty(logits: jax.Array) -> None:
  if logits.ndim and logits.shape[0] == 0:
    raise ValueError("logits must hold B >= 1 examples: a loss is a mean over"
                     " the batch; got B = 0.")


def _poisoned(program: Any, logp_BxKxV: jax.Array, labels: jax.Array
              ) -> jax.Array:
  """``(B,)`` True where the logits hold a NaN or the (traced) label is out of range."""
  return (jnp.any(jnp.isnan(logp_BxKxV), axis=(1, 2))
          | ~jax.vmap(program.in_range)(labels))


def _check(program: Any, logits: jax.Array, labels: jax.Array) -> jax.Array:
  expected = (program.num_symbols, program.num_values)
  if logits.ndim != 3 or logits.shape[1:] != expected:
    raise ValueError(f"logits must be (B, {expected[0]}, {expected[1]})"
                     f" per-symbol logits; got {logits.shape}.")
  _check_logits_dtype(logits)
  if labels.shape != (logits.shape[0],) + tuple(program.label_shape):
    raise ValueError(
        f"labels must be (B,) + {tuple(program.label_shape)} = "
        f"{(logits.shape[0],) + tuple(program.label_shape)}; got"
        f" {labels.shape}.")
  if not jnp.issubdtype(labels.dtype, jnp.integer):
    raise TypeError(f"labels must be integers; got {labels.dtype}.")
  if not isinstance(labels, jax.core.Tracer):
    # Traced labels out of range give NaN (_poisoned); concrete ones are
    # refused here, on the host, with the program's own message.
    for b, label in enumerate(np.asarray(labels)):
      try:
        ok = bool(program.in_range(label))
        why = "the program's in_range is False for it"
      except ValueError as error:
        ok, why = False, str(error)
      if not ok:
        raise ValueError(f"labels[{b}] = {label.tolist()} is out of range:"
                         f" {why}")
  return logits
