"""jaxpapers.moe: a table of misuse, each a named error, and out-of-range ids."""

from flax import nnx
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
_LAYER = moe.MoE(D, moe.MoEConfig(num_experts=E, k=K, d_hidden=F),
                 rngs=nnx.Rngs(0))
_GRAPHDEF = nnx.split(_LAYER)[0]

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
    # Shapes the dispatch paths used to read silently (k from a broadcast).
    (lambda: moe.dropless_experts(_x, _experts, _gates[..., :1], _weights()),
     ValueError, r"gates_BxLxK \(2, 4, 1\) must match experts_BxLxK"),
    (lambda: moe.capacity_experts(_x[..., :4], _experts, _gates, _weights(),
                                  capacity=2),
     ValueError, r"weights.gate must have shape \(E, D, F\) with D = 4"),
    (lambda: moe.capacity_experts(_x, _experts, _gates, _weights(), capacity=0),
     ValueError, "capacity must be an int >= 1"),
    (lambda: moe.dropless_experts(_x[0], _experts, _gates, _weights()),
     ValueError, r"x_BxLxD must have shape \(B, L, D\)"),
    (lambda: moe.swiglu(_x, _weights().gate[0], _weights().up[0],
                        _weights().gate[0]),
     ValueError, r"down_FxD must have shape \(16, 8\)"),
    (lambda: moe.swiglu(_x[..., :3], _weights().gate[0], _weights().up[0],
                        _weights().down[0]),
     ValueError, r"x_NxD must have shape \(..., D\) with D = 8"),
    (lambda: moe.expert_capacity(8, 0, 4, 1.0), ValueError, "k must be an int >= 1"),
    (lambda: moe.router_z_loss(_probs[0]), ValueError,
     r"logits_BxLxE must have shape \(B, L, E\)"),
    (lambda: moe.router_z_loss(_experts), TypeError,
     "real floating-point arrays"),
    (lambda: moe.training_loss(jnp.zeros((B, L, 5)), jnp.zeros((B, L), jnp.int32),
                               {"load_balance": 1.0}, num_layers=2),
     ValueError, r"aux must hold .*missing \['router_z'\]"),
    (lambda: moe.training_loss(jnp.zeros((B, L, 5)), jnp.zeros((B, L), jnp.int32),
                               {"load_balance": 1.0, "router_z": 1.0},
                               num_layers=0),
     ValueError, "num_layers must be an int >= 1"),
    (lambda: moe.training_loss(jnp.zeros((B, L, 5)), jnp.zeros((B, L), jnp.int32),
                               {"load_balance": 1.0, "router_z": 1.0},
                               num_layers=1, router_z_weight=-1.0),
     ValueError, "router_z_weight must be >= 0"),
    (lambda: moe.training_loss(jnp.zeros((B, L, 5)), jnp.zeros((B, 3), jnp.int32),
                               {"load_balance": 1.0, "router_z": 1.0},
                               num_layers=1),
     ValueError, r"targets_BxL must have shape \(B, L\) = \(2, 4\)"),
    (lambda: moe.draw_pool_sizes(jax.random.key(0), (2,), (5, 3)),
     ValueError, "1 <= low <= high"),
    (lambda: moe.draw_pool_sizes(jax.random.key(0), (2,), 4),
     ValueError, r"pool_range must be a pair \(low, high\)"),
    (lambda: moe.document_index(jnp.zeros((B, L, 1), jnp.int32)),
     ValueError, r"segment_ids must have shape \(B, L\)"),
    (lambda: moe.check_segment_ids(jnp.zeros((B, L))),
     TypeError, "segment_ids must hold integer ids"),
    (lambda: moe.domain_mutual_information(np.ones((1, 2, E))),
     ValueError, "at least 2 domains"),
    (lambda: moe.domain_mutual_information(-np.ones((2, 2, E))),
     ValueError, "finite fractions >= 0"),
    # NaN fails "<= 0": ceil(nan) used to fail inside math.ceil.
    (lambda: moe.expert_capacity(8, 2, 4, float("nan")), ValueError,
     "capacity_factor must be > 0 and finite"),
    (lambda: moe.expert_capacity(8.5, 2, 4, 1.0), ValueError,
     "length must be an int >= 1"),
    (lambda: moe.MoEConfig(num_experts=8, k=2, d_hidden=8,
                           capacity_factor=float("nan")), ValueError,
     "capacity_factor must be > 0 and finite"),
    (lambda: moe.MoEConfig(num_experts=8, k=2.0, d_hidden=8), ValueError,
     "k must be an int >= 1"),
    (lambda: moe.MoEConfig(num_experts=8, k=2, d_hidden=float("nan")),
     ValueError, "d_hidden must be an int >= 1"),
    (lambda: moe.training_loss(jnp.zeros((B, L, 5)), jnp.zeros((B, L), jnp.int32),
                               {"load_balance": 1.0, "router_z": 1.0},
                               num_layers=1, lm_z_weight=float("nan")),
     ValueError, "lm_z_weight must be >= 0 and finite"),
    (lambda: moe.topk_route(_probs, k=2.0), ValueError, "k must lie in"),
    (lambda: moe.capacity_experts(_x, _experts, _gates, _weights(),
                                  capacity=1.5),
     ValueError, "capacity must be an int >= 1"),
    (lambda: moe.dropless_experts(_x, _experts, _gates, _weights(),
                                  grouped_matmul="blocked", block_size=2.5),
     ValueError, "block_size must be an int >= 1"),
    (lambda: _LAYER(jnp.ones((B, L, D // 2))), ValueError,
     r"x_BxLxD must have shape \(B, L, D\) with D = 8"),
    (lambda: _LAYER(_x, jnp.zeros((B, L + 1), jnp.int32)), ValueError,
     r"segment_ids_BxL must have shape \(B, L\)"),
    (lambda: moe.select_experts(_LAYER, _x, num_experts=2.5), ValueError,
     "num_experts must be an int >= 1"),
    (lambda: moe.train_steps({}, None, jnp.arange(64), graphdef=_GRAPHDEF,
                             tx=None, first_step=0, num_steps=1,
                             data_key=None, pool_key=None, batch_size=2,
                             context=8),
     TypeError, r"state must be a \(params, opt_state\) pair"),
    (lambda: moe.train_steps((None, None), None, jnp.arange(64), graphdef=None,
                             tx=None, first_step=0, num_steps=1,
                             data_key=None, pool_key=None, batch_size=2,
                             context=8),
     TypeError, "graphdef must be an nnx.GraphDef"),
    (lambda: moe.train_steps((None, None), None, jnp.arange(64),
                             graphdef=_GRAPHDEF, tx=None, first_step=0,
                             num_steps=0, data_key=None, pool_key=None,
                             batch_size=2, context=8),
     ValueError, "num_steps must be an int >= 1"),
    (lambda: moe.subset_bits_per_byte(_LAYER, jnp.arange(8), None, [1]),
     ValueError, r"windows_NxL1 must be \(N, L \+ 1 >= 2\)"),
    (lambda: moe.subset_bits_per_byte(_LAYER, jnp.ones((2, 9), jnp.int32),
                                      None, [1], rng=0),
     TypeError, "rng must be a numpy.random.Generator or None"),
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
