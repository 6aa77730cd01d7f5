"""The domain / expert mutual information against a brute-force entropy count."""

import itertools
import math

import numpy as np
import pytest

from jaxpapers import moe


def _brute_force_nmi(usage_DxLxE):
  """H(D) + H(E) - H(D, E), over H(D), from a loop over (domain, expert) cells."""
  num_domains, num_layers, num_experts = np.shape(usage_DxLxE)
  entropy = lambda probs: -sum(p * math.log(p) for p in probs if p > 0)
  values = []
  for layer in range(num_layers):
    joint = {(d, e): usage_DxLxE[d][layer][e] / num_domains
             for d, e in itertools.product(range(num_domains),
                                           range(num_experts))}
    p_domain = [sum(joint[d, e] for e in range(num_experts))
                for d in range(num_domains)]
    p_expert = [sum(joint[d, e] for d in range(num_domains))
                for e in range(num_experts)]
    mi = entropy(p_domain) + entropy(p_expert) - entropy(joint.values())
    values.append(mi / entropy(p_domain))
  return sum(values) / num_layers


def test_uniform_usage_carries_no_information():
  uniform = np.full((3, 2, 4), 0.25)
  assert moe.domain_mutual_information(uniform) == pytest.approx(0.0, abs=1e-12)


def test_disjoint_experts_carry_all_of_the_domain():
  disjoint = np.array([[[0.5, 0.5, 0.0, 0.0]], [[0.0, 0.0, 0.5, 0.5]]])
  assert moe.domain_mutual_information(disjoint) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force_entropies(seed):
  rng = np.random.default_rng(seed)
  # D x L x E; each (domain, layer) row sums to 1.
  usage = rng.dirichlet(np.full(6, 0.5), size=(4, 3))
  usage[0, 1, :3] = 0  # some experts unused by a domain: 0 log 0 = 0
  usage[0, 1] /= usage[0, 1].sum()
  expected = _brute_force_nmi(usage.tolist())
  assert 0 < expected < 1
  assert moe.domain_mutual_information(usage) == pytest.approx(expected,
                                                               rel=1e-10)
