"""amr's public functions under Auto and Explicit meshes: the unsharded numbers.

Batches of fields, trees and tokens are sharded along ``data``; parameters of
the nnx models are split off, replicated, and merged inside the jitted call.
Per-tree functions map over a batch with :func:`jaxpapers.tree.vmap_sharded`
(plain ``vmap`` cannot place their table lookups under Explicit axes). The
rollouts are host loops with static token buckets, so they run eagerly on
sharded fields (:func:`test_rollouts_on_sharded_fields_give_the_unsharded_numbers`).
"""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr
from jaxpapers import tree as tree_lib
from tests import nnx_sharding
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

MESH = amr.MeshConfig(patch=2, max_level=1, tol_frac=0.1, max_passes=2,
                      token_bucket=4)
_FIELDS = jnp.zeros((4, 8, 8, 1)).at[:, 1, 5].set(1.0).at[1, 6, 2].set(2.0)
_TREES = amr.build_meshes(_FIELDS, MESH)
_TOKENS = jax.vmap(amr.tokenize)(_FIELDS, _TREES)
_NATIVE = amr._training.native_tokens(_FIELDS, _TREES)
_CONFIG = amr.wamrvit_config((2, 2), 1, 1, (4, 4), d_model=16, num_heads=1,
                             num_layers=1, mlp_ratio=1)
_DATA = jax.P("data")


def _forward(module, call):
  """``call(merged module, *batch)`` with the module's params as an input."""
  graphdef, params = nnx.split(module)
  return (lambda params, *batch: call(nnx.merge(graphdef, params), *batch),
          params)


def _module_case(module, call, batch, specs, tolerances=None,
                 param_specs=None):
  fn, params = _forward(module, call)
  case = (fn, (params, *batch), (param_specs, *specs))
  return case + (tolerances,) if tolerances else case


_WAMRVIT = amr.WAMRViT(_CONFIG, rngs=nnx.Rngs(0))
_NATIVE_MODEL = amr.NativeWAMRViT(_CONFIG, (2, 2), 1, 1, rngs=nnx.Rngs(1))
_UNIFORM = amr.UniformViT(amr.uniform_vit_config(2, 1, (8, 8), d_model=8,
                                                 num_heads=1, num_layers=1,
                                                 mlp_ratio=1),
                          2, rngs=nnx.Rngs(2))
_BACKBONE = amr.TokenBackbone(_CONFIG, rngs=nnx.Rngs(3))
# Nonzero decoders, so the residuals (and their sharding) are not all zero.
for _decoder in (_WAMRVIT.backbone.decode, _UNIFORM.backbone.decode,
                 _NATIVE_MODEL.backbone.decode, _NATIVE_MODEL.expand[0][-1].conv,
                 _BACKBONE.decode):
  _decoder.kernel[...] = 0.1 * _f32(*_decoder.kernel.shape)


_BLOCK = amr.ParallelBlock(_CONFIG, rngs=nnx.Rngs(4))
_SHRINK = amr.ShrinkBlock(2, rngs=nnx.Rngs(5))
_EXPAND = amr.ExpandBlock(4, 2, gated=True, rngs=nnx.Rngs(6))
_SHRINK_EXPAND = nnx.List([_SHRINK, _EXPAND])
_COORDS = amr.leaf_coordinates(_TREES)
_MODEL_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _targets(fields_BxHxWxC):
  return jnp.stack([fields_BxHxWxC, 0.5 * fields_BxHxWxC], axis=1)


def _batch(trees):
  return amr.TrainingBatch(_FIELDS, _targets(_FIELDS), trees, jax.random.key(0))


def _per_tree(fn):
  return tree_lib.vmap_sharded(fn)


def _trees_and_tokens(fields):
  trees = _per_tree(functools.partial(
      amr.build_quadtree, patch=2, tol_frac=0.1, max_level=1,
      max_tokens=16))(fields)
  return trees, _per_tree(amr.tokenize)(fields, trees)


CASES = {
    "amr.build_quadtree+amr.tokenize+amr.detokenize": (
        lambda fields: _per_tree(amr.detokenize)(
            *_trees_and_tokens(fields)[::-1]),
        (_FIELDS,), (_DATA,)),
    # Two trees: rows over "data"; rows over "data" and columns over
    # "model" (the face neighbours shift both sharded axes).
    "amr.balance": (
        lambda coarse, fine, coarse_2d, fine_2d: (
            amr.balance((coarse, fine)), amr.balance((coarse_2d, fine_2d))),
        (jnp.zeros((2, 2), jnp.bool_),
         jnp.zeros((4, 4), jnp.bool_).at[1, 2].set(True),
         jnp.zeros((4, 4), jnp.bool_).at[0, 3].set(True),
         jnp.zeros((8, 8), jnp.bool_).at[2, 4].set(True).at[7, 0].set(True)),
        (_DATA, _DATA, jax.P("data", "model"), jax.P("data", "model"))),
    "amr.leaf_coordinates+amr.truncate": (
        lambda trees: amr.leaf_coordinates(amr.truncate(trees, 8),
                                           scale_axis="log_area"),
        (_TREES,), (_DATA,)),
    "amr.regrid": (
        lambda tokens, trees: _per_tree(functools.partial(
            amr.regrid, tol_frac=0.1))(1.5 * tokens.at[:, 0].set(3.0), trees),
        (_TOKENS, _TREES), (_DATA, _DATA)),
    "amr.finest_pixels": (_per_tree(amr.finest_pixels), (_TREES,), (_DATA,)),
    "amr.build_meshes+amr.regrid_native": (
        lambda fields: amr.regrid_native(
            jnp.roll(fields, 2, axis=2), amr.build_meshes(fields, MESH), MESH),
        (_FIELDS,), (_DATA,)),
    "amr.trajectory_meshes": (
        lambda fields: amr.trajectory_meshes(_targets(fields), MESH),
        (_FIELDS,), (_DATA,)),
    "amr.patchify+amr.unpatchify": (
        lambda fields: amr.unpatchify(2.0 * amr.patchify(fields, 2)),
        (_FIELDS,), (_DATA,)),
    "amr.pixel_shuffle": (amr.pixel_shuffle, (_f32(4, 2, 3, 8),), (_DATA,)),
    "amr.swiglu": (amr.swiglu, (_f32(4, 8, 8),), (jax.P("data", "model"),)),
    "amr.relative_l2+amr.pushforward_loss": (
        lambda w, x, targets: amr.pushforward_loss(
            lambda u: jnp.tanh(w * u), x, targets, 2,
            noise_key=jax.random.key(1), input_noise=0.1),
        (_f32(1, 1, 8), _f32(4, 6, 8), _f32(4, 2, 6, 8)),
        (jax.P(None, None, "model"), jax.P("data", None, "model"), _DATA)),
    "amr.ShrinkBlock": _module_case(_SHRINK, lambda m, x: m(x),
                                    (_f32(4, 4, 6, 2),), (_DATA,)),
    "amr.ExpandBlock": _module_case(_EXPAND, lambda m, x: m(x),
                                    (_f32(4, 2, 3, 4),), (_DATA,), _MODEL_TOL),
    "amr.ExpandBlock+amr.ShrinkBlock": _module_case(
        _SHRINK_EXPAND, lambda m, x: m[1](m[0](x)), (_f32(4, 4, 6, 2),),
        (_DATA,), _MODEL_TOL, nnx_sharding.fsdp_specs(nnx.split(_SHRINK_EXPAND)[1])),
    # FSDP parameters, tokens sharded along both mesh axes (sequence
    # parallelism).
    "amr.TokenBackbone+amr.ParallelBlock": _module_case(
        _BACKBONE, lambda m, x, c, mask: m(x, c, mask),
        (_f32(4, 16, 4), _COORDS, _TREES.mask), (jax.P("data", "model"),) * 3,
        _MODEL_TOL, nnx_sharding.fsdp_specs(nnx.split(_BACKBONE)[1])),
    "amr.ParallelBlock": _module_case(
        _BLOCK, lambda m, x, c, mask: m(x, c, mask),
        (_f32(4, 16, 16), _COORDS, _TREES.mask), (_DATA,) * 3, _MODEL_TOL),
    "amr.TokenBackbone": _module_case(
        _BACKBONE, lambda m, x, c, mask: m(x, c, mask),
        (_f32(4, 16, 4), _COORDS, _TREES.mask), (_DATA,) * 3, _MODEL_TOL),
    "amr.WAMRViT+amr.residual_step": _module_case(
        _WAMRVIT, lambda m, x, trees: amr.residual_step(m, x, trees),
        (_TOKENS, _TREES), (_DATA, _DATA), _MODEL_TOL),
    "amr.NativeWAMRViT": _module_case(
        _NATIVE_MODEL, lambda m, x, trees: m(x, trees),
        (_NATIVE, _TREES), (_DATA, _DATA), _MODEL_TOL),
    "amr.UniformViT": _module_case(
        _UNIFORM, lambda m, x: m(x), (_FIELDS,), (_DATA,), _MODEL_TOL),
    "amr.batch_loss": _module_case(
        _WAMRVIT, lambda m, batch: amr.batch_loss(m, batch, 2, 0.1),
        (_batch(amr.truncate(_TREES, 12)),),
        (amr.TrainingBatch(_DATA, _DATA, _DATA, None),), _MODEL_TOL),
}

_HOST_TEST = ("tests/amr/test_sharding.py::"
              "test_host_side_helpers_read_sharded_trees")
_ROLLOUT_TEST = ("tests/amr/test_sharding.py::"
                 "test_rollouts_on_sharded_fields_give_the_unsharded_numbers")
NOT_SHARDED = {
    "amr.BackboneConfig": "a frozen dataclass of Python sizes, no arrays",
    "amr.Geometry": "a frozen dataclass of Python sizes, no arrays",
    "amr.MeshConfig": "a frozen dataclass of Python settings, no arrays",
    "amr.Quadtree": (
        "a pytree container of a tree's arrays; every quadtree case here"
        " builds, shards and returns it"),
    "amr.make_geometry": "checks a shape tuple and Python sizes, no arrays",
    "amr.wamrvit_config": "builds a BackboneConfig from Python sizes",
    "amr.uniform_vit_config": "builds a BackboneConfig from Python sizes",
    "amr.bucket_size": (
        "a host-side integer (a static shape) from concrete leaf counts, read"
        " with NumPy"),
    "amr.check_budget": (
        f"host-side check of concrete overflow flags; run on sharded trees in"
        f" {_HOST_TEST}"),
    "amr.sample_batch": (
        f"host-side NumPy draw from NumPy trajectories; it indexes sharded"
        f" meshes in {_HOST_TEST}"),
    "amr.train_steps": (
        "a host loop over NumPy batches (sample_batch) around a jitted step"
        " whose loss is amr.batch_loss, sharded in its CASES row"),
    "amr.vrmse": "host-side NumPy scoring of NumPy fields in float64",
    "amr.summarize_rollout": "reduces Python records (dicts of floats)",
    "amr.StageTimer": (
        f"a host-side timing hook; it runs every stage in {_ROLLOUT_TEST}"),
    "amr.evaluate_rollout": (
        f"a host loop scoring in NumPy; run on sharded fields in"
        f" {_ROLLOUT_TEST}"),
    "amr.region_of_interest": (
        f"host-side over NumPy truth; run inside both meshes in"
        f" {_ROLLOUT_TEST}"),
}
for _name in ("quadtree_rollout", "native_rollout", "uniform_rollout",
              "model_rollout"):
  NOT_SHARDED[f"amr.{_name}"] = (
      "a host loop with static token buckets (not jittable); run on sharded"
      f" fields in {_ROLLOUT_TEST}")


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "amr.NativeWAMRViT": ("Explicit",),
    "amr.batch_loss": ("Explicit",),
    "amr.build_meshes+amr.regrid_native": ("Explicit",),
    "amr.build_quadtree+amr.tokenize+amr.detokenize": ("Explicit",),
    "amr.finest_pixels": ("Explicit",),
    "amr.patchify+amr.unpatchify": ("Auto",),
    "amr.regrid": ("Explicit",),
    "amr.trajectory_meshes": ("Explicit",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_side_helpers_read_sharded_trees(mode, contract_mesh):
  trajectories = np.asarray(_targets(_FIELDS))
  meshes = amr.trajectory_meshes(trajectories, MESH)
  expected = amr.sample_batch(trajectories, seed=0, step=3, batch_size=4,
                              num_steps=1, meshes=meshes, token_bucket=4)
  with jax.set_mesh(contract_mesh(mode)):
    sharded = jax.device_put(meshes, _DATA)
    batch = amr.sample_batch(trajectories, seed=0, step=3, batch_size=4,
                             num_steps=1, meshes=sharded, token_bucket=4)
    amr.check_budget(jax.device_put(_TREES, _DATA))
    with pytest.raises(ValueError, match="max_tokens=4"):
      amr.check_budget(amr.truncate(jax.device_put(_TREES, _DATA), 4))
  jax.tree.map(np.testing.assert_array_equal, batch.trees, expected.trees)


def _rollouts(place):
  """Each model's rollout from ``place``d fields, scored by evaluate_rollout."""
  truth = np.asarray(jnp.stack([_FIELDS, jnp.roll(_FIELDS, 1, axis=2)],
                               axis=1))
  fields = place(jnp.asarray(truth[:, 0]))
  roi = amr.region_of_interest(truth, MESH)
  out = {"roi": roi}
  for name, model in (("wamrvit", _WAMRVIT), ("native", _NATIVE_MODEL),
                      ("uniform", _UNIFORM)):
    rollout = functools.partial(amr.model_rollout, model, fields, 1, MESH)
    records, steps = amr.evaluate_rollout(rollout, truth, roi)
    out[name] = ([r["vrmse"] for r in records], [s.fields for s in steps],
                 [s.num_tokens for s in steps])
  return out


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_rollouts_on_sharded_fields_give_the_unsharded_numbers(mode,
                                                               contract_mesh):
  expected = _rollouts(lambda fields: fields)
  with jax.set_mesh(contract_mesh(mode)):
    got = _rollouts(lambda fields: jax.device_put(fields, _DATA))
  np.testing.assert_array_equal(got["roi"], expected["roi"])
  for name in ("wamrvit", "native", "uniform"):
    np.testing.assert_allclose(got[name][0], expected[name][0], rtol=1e-5)
    for a, b in zip(got[name][1] + got[name][2],
                    expected[name][1] + expected[name][2]):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4,
                                 atol=1e-5)
