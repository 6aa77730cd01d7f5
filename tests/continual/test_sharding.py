"""jaxpapers.continual under Auto and Explicit meshes gives the unsharded numbers.

Features are sharded along the batch (data) axis and the parameters along
the mesh's model axis: the adapter's and head's weights, and the pytrees
that DAF fuses.
"""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import continual
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)
D, R, C, N = 8, 4, 4, 8
_GRAPHS, _PARAMS = continual.init_learner(jax.random.key(0), D, R, C)
_PARAMS = jax.tree.map(lambda p: p + 0.1 * _f32(*p.shape), _PARAMS)
_X, _LABELS = _f32(N, D), jnp.asarray(_rng.integers(0, 3, N), jnp.int32)
_WEIGHTS = jnp.asarray(_rng.random(N) < 0.75, jnp.float32)
_DATA, _MODEL = jax.P("data"), jax.P("model")
_PARAM_SPECS = {"adapter": {"down_DxR": jax.P(None, "model"),
                            "up_RxD": jax.P("model")},
                "head": {"prototypes_CxD": jax.P("model")}}
# FSDP: every weight sharded along the batch's own mesh axis.
_FSDP_SPECS = {"adapter": {"down_DxR": _DATA, "up_RxD": _DATA},
               "head": {"prototypes_CxD": _DATA}}
_TRAINING = continual.TaskTraining(epochs=1, batch_size=4)


def _modules(params, x_BxD):
  """The nnx modules' forward on sharded weights, merged inside jit."""
  adapter = nnx.merge(nnx.split(continual.LowRankAdapter(
      D, R, rngs=nnx.Rngs(0)))[0], params["adapter"])
  head = nnx.merge(nnx.split(continual.CosineClassifier(
      D, C, rngs=nnx.Rngs(0)))[0], params["head"])
  return head(adapter(x_BxD))


def _learner(params, x, labels, weights, key):
  trained = continual.train_task(_GRAPHS, params, x, labels, weights, key,
                                 num_seen=3, num_frozen=1, training=_TRAINING)
  return (trained, continual.logits(_GRAPHS, trained, x, 3),
          continual.predict(_GRAPHS, trained, x, 3),
          continual.adapter_fisher(_GRAPHS, trained, x, labels, weights, 3))


def _fisher(params, x, labels, weights):
  return continual.adapter_fisher(_GRAPHS, params, x, labels, weights, 3)


def _initial_learner(key):
  return continual.init_learner(key, D, R, C)[1]


_ADAPTERS = [jax.tree.map(lambda p: p + _f32(*p.shape), _PARAMS["adapter"])
             for _ in range(2)]
_CURVATURES = [jax.tree.map(lambda p: jnp.abs(_f32(*p.shape)), _PARAMS["adapter"])
               for _ in range(2)]
_ADAPTER_SPECS = _PARAM_SPECS["adapter"]


def _daf(theta0, tasks, curvatures):
  config = continual.FusionConfig(per_layer=True)
  state = continual.init(theta0)
  infos = []
  for task, curvature in zip(tasks, curvatures):
    state, info = continual.update(state, task, curvature, config)
    infos.append(info)
  fused, info = continual.fuse(theta0, tasks[0], tasks[1], curvatures[0],
                               curvatures[1], 2)
  return state, infos, fused, info, continual.objective(
      info.alpha, info.beta, theta0, tasks[0], tasks[1], curvatures[0],
      curvatures[1], info.lam)


CASES = {
    "continual.LowRankAdapter+continual.CosineClassifier": (
        _modules, (_PARAMS, _X), (_PARAM_SPECS, _DATA)),
    "continual.CosineClassifier+continual.LowRankAdapter": (
        _modules, (_PARAMS, _X), (_FSDP_SPECS, jax.P("data", "model"))),
    "continual.train_task+continual.logits+continual.predict"
    "+continual.adapter_fisher": (
        _learner, (_PARAMS, _X, _LABELS, _WEIGHTS, jax.random.key(1)),
        (_PARAM_SPECS, _DATA, _DATA, _DATA, None), {"rtol": 1e-4, "atol": 1e-5}),
    # The Fisher's per-example vmap on parameters sharded along the examples'
    # axis (FSDP), and along other axes than the examples.
    "continual.adapter_fisher": (
        _fisher, (_PARAMS, _X, _LABELS, _WEIGHTS),
        (_FSDP_SPECS, _DATA, _DATA, _DATA), {"rtol": 1e-4, "atol": 1e-5}),
    "continual.adapter_fisher+continual.CosineClassifier": (
        _fisher, (_PARAMS, _X, _LABELS, _WEIGHTS),
        (_PARAM_SPECS, _DATA, _DATA, _DATA), {"rtol": 1e-4, "atol": 1e-5}),
    "continual.adapter_fisher+continual.LowRankAdapter": (
        _fisher, (_PARAMS, _X, _LABELS, _WEIGHTS),
        (_FSDP_SPECS, _MODEL, _MODEL, _MODEL), {"rtol": 1e-4, "atol": 1e-5}),
    "continual.init_learner": (_initial_learner, (jax.random.key(2),), (None,)),
    "continual.init+continual.update+continual.fuse+continual.objective": (
        _daf, (_PARAMS["adapter"], _ADAPTERS, _CURVATURES),
        (_ADAPTER_SPECS, [_ADAPTER_SPECS] * 2, [_ADAPTER_SPECS] * 2)),
}

NOT_SHARDED = {
    "continual.FusionConfig": "a static config dataclass, validated at"
                              " construction",
    "continual.TaskTraining": "a static config dataclass, validated at"
                              " construction",
    "continual.class_incremental_metrics": "host-side numpy over a small"
                                           " accuracy matrix",
    "continual.class_order": "host-side numpy permutation of class ids",
    "continual.sequence_metrics": "host-side numpy over a run's per-task"
                                  " records (Python floats)",
    "continual.TaskRows": "host-side numpy split of the training rows into"
                          " padded tasks (a data stream, no computation)",
    "continual.learn_sequence": "a host loop over tasks of calls each"
                                " covered here (train_task, adapter_fisher,"
                                " update, predict); its accuracies are host"
                                " numpy",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "continual.CosineClassifier+continual.LowRankAdapter": ("Explicit",),
    "continual.adapter_fisher+continual.CosineClassifier": ("Auto",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
