"""jaxpapers.moe under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on inputs sharded along the batch ("data") and/or the
expert axis ("model") of a (2, 4) mesh (see tests/sharding_checks.py,
which traces every case). The layer cases are what a user runs: the same
parameters, placed on the mesh, with ``data_axis``/``expert_axis`` set only
inside the mesh (expert parallelism: each "model" shard holds two experts).
"""

import dataclasses

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import models
from jaxpapers import moe
from tests import nnx_sharding
from tests import sharding_checks

B, L, D, F, E, K = 4, 8, 8, 8, 8, 2
_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

_X = _f32(B, L, D)
_SEGMENTS = jnp.asarray(np.repeat([[0, 0, 0, 1, 1, 2, 2, 2]], B, 0), jnp.int32)
_EXPERTS = jnp.asarray(
    np.argsort(_rng.random((B, L, E)), axis=-1)[..., :K], jnp.int32)
_GATES = jnp.abs(_f32(B, L, K))
_WEIGHTS = moe.ExpertWeights(_f32(E, D, F) / 3, _f32(E, D, F) / 3,
                             _f32(E, F, D) / 3)
_EXPERT_SPECS = moe.ExpertWeights(*[jax.P("model")] * 3)
_TOKENS = jnp.asarray(_rng.integers(0, 32, (B, L)), jnp.int32)
_KEYS = jax.random.split(jax.random.key(0), 8)

_CONFIG = moe.MoEConfig(num_experts=E, k=K, d_hidden=F, pool_size=(3, 6),
                        grouped_matmul="blocked", block_size=4)
_LM = models.TransformerConfig(vocab_size=32, max_len=L, d_model=D,
                               num_heads=2, num_layers=1, d_ff=16)


def _param_specs(state):
  """Routed experts' weights sharded over "model" (axis 0), the rest replicated."""
  def spec(path, _):
    name = str(path[-2] if path[-1] == "value" else path[-1])
    return jax.P("model") if name in ("w_gate", "w_up", "w_down") else None
  # A Variable's leaf path ends in the attribute "value" (a GetAttrKey).
  return jax.tree_util.tree_map_with_path(
      lambda path, leaf: spec([getattr(p, "key", getattr(p, "name", p))
                               for p in path], leaf),
      state)


def _layer_case(config, fn, *, expert_parallel=True, fsdp=False):
  """An MoE layer (a model of activations), split: weights on the mesh, x over "data".

  The weights' experts are over "model", or with ``fsdp`` every float
  parameter's first even axis is over "data", the batch's own axis.
  """
  graphdef, state = nnx.split(moe.MoE(D, config, rngs=nnx.Rngs(0)))
  parallel = dataclasses.replace(config, data_axis="data", expert_axis="model")
  graphdef_parallel = nnx.graphdef(moe.MoE(D, parallel, rngs=nnx.Rngs(0)))

  def run(state, x, segments):
    on_mesh = not jax.sharding.get_abstract_mesh().empty
    layer = nnx.merge(graphdef_parallel if on_mesh and expert_parallel
                      else graphdef, state)
    nnx.reseed(layer, pool=jax.random.key(1))
    return fn(layer, x, segments)

  specs = nnx_sharding.fsdp_specs(state) if fsdp else _param_specs(state)
  return run, (state, _X, _SEGMENTS), (specs, jax.P("data"), jax.P("data"))


def _lm_loss_case():
  """A one-block MoE LM, split: parameters on the mesh, tokens over "data"."""
  def build(config):
    return models.Transformer(_LM, rngs=nnx.Rngs(0),
                              ffn_factory=moe.moe_ffn_factory(config))
  config = dataclasses.replace(_CONFIG, routing="topk", pool_size=None)
  graphdef, state = nnx.split(build(config))
  graphdef_parallel = nnx.graphdef(build(dataclasses.replace(
      config, data_axis="data", expert_axis="model")))

  def run(state, tokens, segments):
    on_mesh = not jax.sharding.get_abstract_mesh().empty
    model = nnx.merge(graphdef_parallel if on_mesh else graphdef, state)
    logits, aux = model(tokens[:, :-1], segments[:, :-1])
    return moe.training_loss(logits, tokens[:, 1:], aux, num_layers=1)

  return run, (state, _TOKENS, _SEGMENTS), (_param_specs(state), jax.P("data"),
                                            jax.P("data"))


def _statistics(layer, x, segments):
  layer = nnx.view(layer, deterministic=True)
  output, stats = moe.run_with_statistics(layer, x, segments)
  return (output, stats, moe.routing_statistics(layer, x, segments),
          moe.expert_usage(layer, x, segments))


def _pruned_outputs(layer, x, segments):
  layer = nnx.view(layer, deterministic=True)
  kept = [np.array([0, 2, 5, 6])]
  return (moe.prune_experts(layer, kept)(x, segments)[0],
          moe.mask_experts(layer, kept)(x, segments)[0])


_TOPK_CAPACITY = dataclasses.replace(_CONFIG, routing="topk", pool_size=None,
                                     dispatch="capacity", capacity_factor=1.0)
_TOPK = dataclasses.replace(_CONFIG, routing="topk", pool_size=None)
_call = lambda layer, x, segments: layer(x, segments)

CASES = {
    # Expert parallelism: data_axis="data", expert_axis="model" on the mesh.
    "moe.MoE+moe.ExpertMask": _layer_case(_CONFIG, _call),
    "moe.MoE": _layer_case(_TOPK_CAPACITY, _call),
    # No parallel axes: the compiler partitions the sharded inputs.
    "moe.MoE+moe.swiglu": _layer_case(_TOPK, _call, expert_parallel=False),
    "moe.moe_ffn_factory+moe.training_loss": _lm_loss_case(),
    "moe.run_with_statistics+moe.routing_statistics+moe.expert_usage": (
        _layer_case(_TOPK, _statistics)),
    "moe.prune_experts+moe.mask_experts": _layer_case(_TOPK, _pruned_outputs),
    # FSDP experts: the pruned experts are read from weights sharded along
    # the expert axis over "data".
    "moe.mask_experts+moe.prune_experts": _layer_case(_TOPK, _pruned_outputs,
                                                      fsdp=True),
    "moe.dropless_experts": (
        lambda x, e, g, w: [moe.dropless_experts(x, e, g, w, grouped_matmul=m,
                                                 block_size=4)
                            for m in ("blocked", "ragged_dot")],
        (_X, _EXPERTS, _GATES, _WEIGHTS),
        (jax.P("data"), jax.P("data"), jax.P("data"), _EXPERT_SPECS)),
    # FSDP experts (sharded along the batch's axis), routing along tokens.
    "moe.capacity_experts+moe.dropless_experts": (
        lambda x, e, g, w: moe.capacity_experts(x, e, g, w, capacity=3),
        (_X, _EXPERTS, _GATES, _WEIGHTS),
        (jax.P("data"), jax.P("data", "model"), jax.P("data", "model"),
         moe.ExpertWeights(*[jax.P("data")] * 3))),
    "moe.capacity_experts": (
        lambda x, e, g, w: moe.capacity_experts(x, e, g, w, capacity=3),
        (_X, _EXPERTS, _GATES, _WEIGHTS),
        (jax.P("data"), jax.P("data"), jax.P("data"), _EXPERT_SPECS)),
    "moe.swiglu": (
        moe.swiglu, (_X.reshape(B * L, D), _WEIGHTS.gate[0], _WEIGHTS.up[0],
                     _WEIGHTS.down[0]),
        (jax.P("data"), jax.P(None, "model"), jax.P(None, "model"),
         jax.P("model"))),
    "moe.check_segment_ids+moe.document_index": (
        lambda s: (moe.check_segment_ids(s), moe.document_index(s)),
        (_SEGMENTS,), (jax.P("data", "model"),)),
    "moe.draw_pool_sizes": (
        jax.vmap(lambda key: moe.draw_pool_sizes(key, (L,), (3, 6))),
        (_KEYS,), (jax.P("data"),)),
}

NOT_SHARDED = {
    "moe.MoEConfig": "a frozen dataclass of static layer settings",
    "moe.expert_capacity": "Python-int arithmetic on static sizes, no arrays",
    "moe.moe_layers": "returns the model's MoE submodules, a Python list; no"
                      " array math",
    "moe.select_experts":
        "host-side greedy loop (numpy argsort of concrete statistics), not"
        " jittable; checked on sharded models by"
        " tests/moe/test_sharding.py::test_host_functions_take_sharded_arrays",
    "moe.train_steps":
        "a jitted scan of optimizer steps whose loss is moe.training_loss of"
        " the moe_ffn_factory Transformer, sharded in its CASES row; the"
        " steps draw their windows and pools inside",
    "moe.subset_bits_per_byte":
        "host-side evaluation loop around moe.select_experts (host-side,"
        " checked on sharded models by"
        " tests/moe/test_sharding.py::test_host_functions_take_sharded_arrays)"
        " and jitted forward passes of pruned models",
    "moe.domain_mutual_information":
        "host-side numpy score of concrete usage; checked on sharded usage by"
        " tests/moe/test_sharding.py::test_host_functions_take_sharded_arrays",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "moe.MoE": ("Auto", "Explicit"),
    "moe.MoE+moe.ExpertMask": ("Auto", "Explicit"),
    "moe.MoE+moe.swiglu": ("Explicit",),
    "moe.mask_experts+moe.prune_experts": ("Auto", "Explicit"),
    "moe.moe_ffn_factory+moe.training_loss": ("Auto", "Explicit"),
    "moe.prune_experts+moe.mask_experts": ("Auto", "Explicit"),
    "moe.run_with_statistics+moe.routing_statistics+moe.expert_usage":
        ("Auto", "Explicit"),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "moe.moe_ffn_factory+moe.training_loss",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_functions_take_sharded_arrays(mode, contract_mesh):
  layer = moe.MoE(D, dataclasses.replace(_CONFIG, routing="topk",
                                         pool_size=None), rngs=nnx.Rngs(0))
  usage = jnp.abs(_f32(4, 2, E))
  kept = moe.select_experts(layer, _X, num_experts=3)
  score = moe.domain_mutual_information(usage)
  with jax.set_mesh(contract_mesh(mode)):
    state = nnx.state(layer)
    nnx.update(layer, jax.tree.map(
        lambda leaf, spec: jax.device_put(leaf, spec or jax.P()), state,
        _param_specs(state), is_leaf=lambda x: x is None))
    kept_sharded = moe.select_experts(layer, jax.device_put(_X, jax.P("data")),
                                      num_experts=3)
    score_sharded = moe.domain_mutual_information(
        jax.device_put(usage, jax.P("data", None, "model")))
  np.testing.assert_array_equal(kept_sharded[0], kept[0])
  np.testing.assert_allclose(score_sharded, score, rtol=1e-12)
