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
:class:`jaxpapers.nesy.addition.DigitAddition` (the carry chain) or
:class:`jaxpapers.nesy.enumerated.EnumeratedProgram` (any small program):
``num_symbols``, ``num_values``, ``label_shape``, ``placeholder_label()``,
``feasible``, ``log_z``, ``marginals``, ``map_assignment``, ``sample`` and
``satisfied``. Every function here takes batched logits ``(B, K, V)``.

Labels no world produces get weight 0 (zero marginals, ``log_z = -inf``)
and add 0 to every loss; they are run through the program as its
placeholder label, so no NaN reaches a gradient.

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

from jaxpapers import tree

INFERENCES = ("exact", "rejection", "hard", "stochastic")
DEFAULT_REJECTION_SAMPLES = 256
DEFAULT_REINFORCE_SAMPLES = 16


class Posterior(NamedTuple):
  """What an E-step returns for a batch of B examples.

  Attributes:
    marginals: ``(B, K, V)`` :math:`q_{bk}(v)`; zero rows where ``weight``
      is 0.
    log_z: ``(B,)`` the E-step's value of :math:`\\log p_\\theta(y|x)`:
      exact for ``"exact"`` and ``"stochastic"``; the log of the acceptance
      fraction (a Monte-Carlo estimate) for ``"rejection"``; the MAP world's
      log-probability (a lower bound) for ``"hard"``; ``-inf`` where the
      label is infeasible or nothing was accepted.
    weight: ``(B,)`` 1.0 where ``marginals`` is a distribution, 0.0 where
      the label is infeasible or (rejection) no sample was accepted.
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
    >>> from jaxpapers.nesy import addition
    >>> step = estep(addition.DigitAddition(1))
    >>> logits = jnp.zeros((1, 2, 10))
    >>> post = step(jax.random.key(0), logits, jnp.array([[8, 1]]))  # 18
    >>> post.marginals[0, :, 9].tolist(), post.weight.tolist()
    ([1.0, 1.0], [1.0])
  """
  if inference not in INFERENCES:
    raise ValueError(f"inference must be one of {INFERENCES}; got {inference!r}.")
  if not isinstance(num_samples, int) or num_samples < 1:
    raise ValueError(f"num_samples must be an int >= 1; got {num_samples!r}.")
  num_values = program.num_values

  def one(key, logp, label):
    feasible = program.feasible(label)
    label = jnp.where(feasible, label, program.placeholder_label())
    if inference == "exact":
      q, log_z = program.marginals(logp, label)
      found = feasible
    elif inference == "hard":
      z, log_z = program.map_assignment(logp, label)
      q, found = jax.nn.one_hot(z, num_values, dtype=logp.dtype), feasible
    elif inference == "stochastic":
      z = program.sample(key, logp, label)
      log_z = program.log_z(logp, label)
      q, found = jax.nn.one_hot(z, num_values, dtype=logp.dtype), feasible
    else:
      z_SxK = sample_symbols(key, logp, num_samples)
      accepted_S = jax.vmap(program.satisfied, (0, None))(z_SxK, label)
      accepted_S = accepted_S & feasible
      count = jnp.sum(accepted_S)
      one_hot_SxKxV = jax.nn.one_hot(z_SxK, num_values, dtype=logp.dtype)
      q = (jnp.einsum("s,skv->kv", accepted_S.astype(logp.dtype),
                      one_hot_SxKxV)
           / jnp.maximum(count, 1).astype(logp.dtype))
      log_z = jnp.log(count.astype(logp.dtype) / num_samples)
      found = count > 0
    return (jnp.where(found, q, 0.0), jnp.where(found, log_z, -jnp.inf),
            found.astype(logp.dtype))

  def run(key: jax.Array | None, logits: jax.Array, labels: jax.Array
          ) -> Posterior:
    if key is None:
      if inference in ("rejection", "stochastic"):
        raise ValueError(f"inference={inference!r} samples: pass a PRNG key.")
      key = jax.random.key(0)  # unused by the deterministic E-steps
    logp = jax.nn.log_softmax(jax.lax.stop_gradient(_check(program, logits,
                                                           labels)), -1)
    keys = jax.random.split(key, logits.shape[0])
    return Posterior(*tree.vmap_sharded(one)(keys, logp, labels))

  return run


def em_loss(logits: jax.Array, posterior: Posterior) -> jax.Array:
  """The M-step loss :math:`-\\frac1B \\sum_{b,k,v} \\mathrm{sg}(q)\\, \\log p_\\theta`.

  Zero-weight examples (zero marginals) add 0; the mean is over all B.
  """
  q = jax.lax.stop_gradient(posterior.marginals)
  if q.shape != logits.shape:
    raise ValueError(f"logits {logits.shape} and posterior marginals"
                     f" {q.shape} must have the same (B, K, V) shape.")
  return -jnp.sum(q * jax.nn.log_softmax(logits, -1)) / logits.shape[0]


def em_step(step: EStep, key: jax.Array | None, logits: jax.Array, labels: jax.Array
            ) -> tuple[jax.Array, Posterior]:
  """One E-step on the current logits and the M-step loss on it: ``(loss, posterior)``.

  Differentiate the loss in the network's parameters; for ``m_steps > 1``
  keep the posterior and call :func:`em_loss` on new logits.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers.nesy import addition
    >>> program = addition.DigitAddition(3)
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
  """``(B,)`` exact :math:`\\log p_\\theta(y|x)`, differentiable; -inf for infeasible labels."""
  logp = jax.nn.log_softmax(_check(program, logits, labels), -1)
  feasible = jax.vmap(program.feasible)(labels)
  safe = jnp.where(_expand(feasible, labels), labels,
                   program.placeholder_label()[None])
  return jnp.where(feasible, tree.vmap_sharded(program.log_z)(logp, safe),
                   -jnp.inf)


def semantic_loss(program: Any, logits: jax.Array, labels: jax.Array
                  ) -> jax.Array:
  """The exact semantic loss :math:`-\\frac1B \\sum_b \\log p_\\theta(y_b|x_b)` (autodiff of log Z).

  Infeasible labels add 0 (and no NaN to the gradient).
  """
  values = log_z(program, logits, labels)
  return -jnp.sum(jnp.where(jnp.isfinite(values), values, 0.0)) / logits.shape[0]


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
  """
  if not isinstance(num_samples, int) or num_samples < 2:
    raise ValueError("num_samples must be an int >= 2 (leave-one-out needs"
                     f" two); got {num_samples!r}.")
  logp_BxKxV = jax.nn.log_softmax(_check(program, logits, labels), -1)
  batch = logits.shape[0]
  keys = jax.random.split(key, batch)

  def sample_and_reward(key, logp_KxV, label):
    z_SxK = sample_symbols(key, logp_KxV, num_samples)
    return z_SxK, jax.vmap(program.satisfied, (0, None))(z_SxK, label)

  z_BxSxK, reward_BxS = tree.vmap_sharded(sample_and_reward)(
      keys, jax.lax.stop_gradient(logp_BxKxV), labels)
  reward_BxS = reward_BxS.astype(logits.dtype)
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
  ``jax.random.categorical``'s Gumbel trick draws V of them.
  """
  cdf_KxV = jnp.cumsum(jnp.exp(logp_KxV), -1)
  u_SxK = jax.random.uniform(key, (num_samples, logp_KxV.shape[0]),
                             logp_KxV.dtype) * cdf_KxV[None, :, -1]
  z_SxK = jnp.sum(u_SxK[..., None] >= cdf_KxV[None], -1)
  return jnp.minimum(z_SxK, logp_KxV.shape[1] - 1).astype(jnp.int32)


def _expand(mask_B: jax.Array, labels: jax.Array) -> jax.Array:
  return mask_B.reshape(mask_B.shape + (1,) * (labels.ndim - 1))


def _check(program: Any, logits: jax.Array, labels: jax.Array) -> jax.Array:
  expected = (program.num_symbols, program.num_values)
  if logits.ndim != 3 or logits.shape[1:] != expected:
    raise ValueError(f"logits must be (B, {expected[0]}, {expected[1]})"
                     f" per-symbol logits; got {logits.shape}.")
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise TypeError(f"logits must be floating point; got {logits.dtype}.")
  if labels.shape != (logits.shape[0],) + tuple(program.label_shape):
    raise ValueError(
        f"labels must be (B,) + {tuple(program.label_shape)} = "
        f"{(logits.shape[0],) + tuple(program.label_shape)}; got"
        f" {labels.shape}.")
  if not jnp.issubdtype(labels.dtype, jnp.integer):
    raise TypeError(f"labels must be integers; got {labels.dtype}.")
  return logits
