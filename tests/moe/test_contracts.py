"""jaxpapers.moe: a table of misuse, each a named error, and out-of-range ids."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import moe

B, L, E, K, D, F = 2, 4, 4, 2, 8, 16


def _weights():
  rng = np.random.default_rng(0)
  shape = lambda *s: jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32)
  return moe.ExpertWeights(gate=shape(E, D, F), up=shape(E, D, F),
                           down=shape(E, F, D))


_probs = jnp.full((B, L, E), 1.0 / E)
_experts = jnp.array(np.random.default_rng(1).integers(0, E, (B, L, K)),
                     jnp.int32)
_x = jnp.ones((B, L, D))
_gates = jnp.full((B, L, K), 0.5)

MISUSE = [
    # Without the k axis the (B, L) ids used to be read with k = L.
    (lambda: moe.load_balance_loss(_probs, _experts[..., 0]),
     ValueError, r"experts_BxLxK must have shape \(B, L, k\)"),
    (lambda: moe.load_balance_loss(_probs[0], _experts),
     ValueError, r"probs_BxLxE must have shape \(B, L, E\)"),
    (lambda: moe.load_balance_loss(_probs, _experts.at[0, 0, 0].set(E)),
     ValueError, r"must lie in \[0, 4\)"),
    (lambda: moe.load_balance_loss(_probs, _experts.astype(jnp.float32)),
     TypeError, "integer expert ids"),
    (lambda: moe.dropless_experts(_x, _experts.at[1, 2, 1].set(E + 3), _gates,
                                  _weights(), grouped_matmul="blocked"),
     ValueError, r"expert ids in \[0, 7\]"),
    (lambda: moe.capacity_experts(_x, _experts.at[0, 0, 0].set(-1), _gates,
                                  _weights(), capacity=4),
     ValueError, r"must lie in \[0, 4\)"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_traced_out_of_range_ids_make_the_loss_nan_not_smaller():
  loss = jax.jit(moe.load_balance_loss)
  assert np.isfinite(loss(_probs, _experts))
  assert np.isnan(loss(_probs, _experts.at[0, 0, 0].set(E)))


def test_other_shards_experts_still_contribute_nothing():
  # Under expert parallelism ids outside the shard's range are legitimate.
  y = moe.dropless_experts(_x, _experts + E, _gates, _weights(),
                           grouped_matmul="blocked", expert_offset=jnp.int32(0))
  np.testing.assert_array_equal(y, 0.0)
