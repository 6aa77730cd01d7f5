r"""Routing diagnostics of a trained MoE: how domain-specific are its experts?

EMO's claim includes that its experts specialise by semantic domain (code,
math, ...), while a standard MoE's specialise by low-level syntax (Wang et
al., "EMO: Pretraining Mixture of Experts for Emergent Modularity",
arXiv:2605.06663, abstract). :func:`domain_mutual_information` puts one
number on it: the normalised mutual information between a token's domain and
the expert it is routed to,

.. math::

   \mathrm{NMI} = \frac{I(D; E)}{H(D)}, \qquad
   I(D; E) = \sum_{d, e} p(d, e) \log \frac{p(d, e)}{p(d)\, p(e)},

0 when every domain uses the experts alike, 1 when each expert serves one
domain only. The paper reports the specialisation (abstract); this score of it
is our reconstruction (see docs/emo.md).
"""

import math

import numpy as np


def domain_mutual_information(usage_DxLxE) -> float:
  """I(domain; expert) / H(domain), averaged over layers (equal tokens per domain).

  Args:
    usage_DxLxE: per domain and MoE layer, the fraction of the domain's
      (token, slot) pairs routed to each expert (e.g.
      :func:`jaxpapers.moe.expert_usage` of the domain's tokens). Every
      domain weighs the same, so ``p(domain) = 1 / D`` and ``H(domain) =
      log D``.

  Returns:
    The normalised mutual information of each layer, averaged over layers:
    in [0, 1].

  Raises:
    ValueError: for a shape other than ``(D, L, E)`` with ``D >= 2``, negative
      or non-finite entries, or a domain and layer with no usage at all.
  """
  usage = np.asarray(usage_DxLxE, np.float64)
  if usage.ndim != 3 or usage.shape[0] < 2 or usage.shape[1] < 1:
    raise ValueError(
        "usage_DxLxE must have shape (domains, layers, experts) with at least"
        f" 2 domains (H(domain) = log D) and 1 layer, got {usage.shape}.")
  if not np.all(np.isfinite(usage)) or np.any(usage < 0):
    raise ValueError("usage_DxLxE must hold finite fractions >= 0.")
  if np.any(usage.sum(axis=2) <= 0):
    raise ValueError(
        "every (domain, layer) of usage_DxLxE needs some usage (a positive"
        " sum over experts).")
  values = []
  for layer in range(usage.shape[1]):
    joint = usage[:, layer] / usage.shape[0]
    joint = joint / joint.sum()
    p_domain = joint.sum(1, keepdims=True)
    p_expert = joint.sum(0, keepdims=True)
    nonzero = joint > 0
    mi = np.sum(joint[nonzero] * np.log(joint[nonzero]
                                        / (p_domain @ p_expert)[nonzero]))
    values.append(mi / math.log(usage.shape[0]))
  return float(np.mean(values))
