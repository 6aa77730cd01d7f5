"""Public functions of every area under Auto and Explicit meshes give the unsharded numbers.

``jax.make_mesh`` makes Explicit axes by default; each case runs jitted on
inputs sharded along a batch or a feature axis of a (2, 4) mesh, inside
``jax.set_mesh``, in both modes, and is compared with the unsharded call.
(curvature and optim have their own, deeper tests in their test_contracts.)
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import amr
from jaxpapers import graph
from jaxpapers import losses
from jaxpapers import moe
from jaxpapers import rl
from jaxpapers import routing
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

_LOGITS = _f32(4, 8, 8)
_SEGMENTS = jnp.asarray(np.repeat(np.arange(4), 2)[None].repeat(4, 0), jnp.int32)
_EXPERTS = jnp.asarray(_rng.integers(0, 8, (4, 8, 2)), jnp.int32)
_FIELDS = jnp.zeros((4, 32, 32)).at[:, 5, 9].set(1.0).at[1, 20, 3].set(2.0)
_TOURS = jnp.asarray(np.stack([_rng.permutation(10) for _ in range(8)]), jnp.int32)
_GRAPH = graph.make_graph(np.eye(8, dtype=np.float32), np.arange(7),
                          np.arange(1, 8))


def _predict(params, state_LxC):
  return jnp.tanh(state_LxC[-2:] * params["w"][None])


def _rollout_penalty(w, contexts_BxLxC, targets_BxPxC):
  penalty = functools.partial(losses.rollout_consistency, _predict, {"w": w})
  return jnp.mean(jax.vmap(penalty)(contexts_BxLxC, targets_BxPxC))


def _quadtree_tokens(fields_BxHxW):
  build = functools.partial(amr.build_quadtree, patch=2, tol_frac=0.1,
                            max_level=3, max_tokens=256)
  trees = jax.vmap(build)(fields_BxHxW)
  return jax.vmap(amr.tokenize)(fields_BxHxW, trees), trees.num_leaves


def _quadtree_tokens_per_shard(fields_BxHxW):
  """Each device tokenizes its own fields (data parallelism with shard_map)."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return _quadtree_tokens(fields_BxHxW)
  return jax.shard_map(_quadtree_tokens, in_specs=jax.P("data"),
                       out_specs=jax.P("data"))(fields_BxHxW)


# name -> (function, inputs, the PartitionSpec of each input)
CASES = {
    "moe.topk_route": (
        lambda x: moe.topk_route(x, k=2), (_LOGITS,), (jax.P("data"),)),
    # Experts sharded along the model axis, segment ids along the tokens.
    "moe.topk_route+moe.emo_route": (
        lambda x, s: (moe.topk_route(x, k=2),
                      moe.emo_route(x, s, pool_size=4, k=2)),
        (_LOGITS, _SEGMENTS), (jax.P("data", None, "model"),
                               jax.P("data", "model"))),
    "moe.emo_route": (
        lambda x, s: moe.emo_route(x, s, pool_size=4, k=2),
        (_LOGITS, _SEGMENTS), (jax.P("data"), jax.P("data"))),
    "moe.load_balance_loss": (
        moe.load_balance_loss, (jax.nn.softmax(_LOGITS), _EXPERTS),
        (jax.P("data", None, "model"), jax.P("data"))),
    "moe.router_z_loss": (moe.router_z_loss, (_LOGITS,),
                          (jax.P("data", None, "model"),)),
    "losses.horizon_errors": (losses.horizon_errors, (_f32(8, 4, 8), _f32(8, 4, 8)),
                              (jax.P("data", None, "model"),) * 2),
    "losses.rollout_consistency": (
        _rollout_penalty, (_f32(8), _f32(4, 6, 8), _f32(4, 2, 8)),
        (jax.P("model"), jax.P("data"), jax.P("data"))),
    "graph.gcn_propagate": (
        lambda x: graph.gcn_propagate(_GRAPH, x), (_f32(8, 8),),
        (jax.P(None, "model"),)),
    "amr.build_quadtree+amr.tokenize": (_quadtree_tokens_per_shard, (_FIELDS,),
                                    (jax.P("data"),)),
    "rl.grpo_advantages": (
        rl.grpo_advantages, (_f32(16), jnp.repeat(jnp.arange(4), 4)),
        (jax.P("data"), jax.P("data"))),
    "rl.ppo_clip_loss": (
        lambda lp, old, adv, mask: rl.ppo_clip_loss(lp, old, adv, mask)[0],
        (-jnp.abs(_f32(8, 8)), -jnp.abs(_f32(8, 8)), _f32(8),
         jnp.asarray(_rng.random((8, 8)) < 0.5, jnp.float32)),
        (jax.P("data", "model"), jax.P("data", "model"), jax.P("data"),
         jax.P("data", "model"))),
    # Tours sharded along their cities, coordinates along the batch.
    "routing.tour_length+rl.ppo_clip_loss": (
        lambda coords, tours, lp, old, adv: (
            routing.tour_length(coords, tours),
            rl.ppo_clip_loss(lp, old, adv, jnp.ones_like(lp))[0]),
        (jnp.abs(_f32(8, 10, 2)), _TOURS, -jnp.abs(_f32(8, 8)),
         -jnp.abs(_f32(8, 8)), _f32(8)),
        (jax.P("model", "data"), jax.P("model", "data"),
         jax.P("data", "model"), jax.P("data", "model"), jax.P("model"))),
    "routing.tour_length": (
        routing.tour_length, (jnp.abs(_f32(8, 10, 2)), _TOURS),
        (jax.P("data"), jax.P("data"))),
    # Head width sharded along the model axis.
    "amr.rope_3d+amr.build_quadtree": (
        lambda x, c: amr.rope_3d(x, c, dims=(2, 2, 2), scales=(8.0, 8.0, 1.0)),
        (_f32(4, 16, 2, 8), jnp.abs(_f32(4, 16, 3))),
        (jax.P("data", None, None, "model"), jax.P("data", "model"))),
    "amr.rope_3d": (
        lambda x, c: amr.rope_3d(x, c, dims=(2, 2, 2), scales=(8.0, 8.0, 1.0)),
        (_f32(4, 16, 2, 8), jnp.abs(_f32(4, 16, 3))),
        (jax.P("data", "model"), jax.P("data", "model"))),
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "amr.build_quadtree+amr.tokenize": ("Auto", "Explicit"),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
