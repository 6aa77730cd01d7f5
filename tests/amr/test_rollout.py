"""Inference rollouts: a hand-written loop, frozen vs moving meshes, native limit, errors."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr

SIZE, PATCH, LEVELS = 32, 4, 2
SIZES = dict(d_model=32, num_heads=1, num_layers=1, mlp_ratio=2)
MESH = amr.MeshConfig(PATCH, LEVELS, tol_frac=0.05, token_bucket=16)
TREE_FIELDS = ("level", "i", "j", "mask", "num_leaves")


def _discs(centres, size=SIZE, radius=6.0):
  y, x = np.mgrid[:size, :size].astype(np.float32)
  fields = [np.tanh((radius - np.hypot(y - cy, x - cx)) / 1.5)
            for cy, cx in centres]
  return jnp.asarray(np.stack(fields)[..., None])


def _config():
  return amr.wamrvit_config((PATCH, PATCH), 1, LEVELS, (8, 8), **SIZES)


def _wamrvit(seed=0):
  model = amr.WAMRViT(_config(), rngs=nnx.Rngs(seed))
  kernel = model.backbone.decode.kernel  # starts at zero: give it weights
  kernel[...] = 0.05 * jax.random.normal(jax.random.key(7), kernel.shape)
  return model


def _advance_of(model):
  graphdef, params = nnx.split(model)

  @jax.jit
  def advance(state, trees):
    return amr.residual_step(nnx.merge(graphdef, params), state, trees)
  return advance


@pytest.fixture(scope="module")
def uniform_model():
  """A WAMRViT and its jitted residual step (shared: one compile per bucket)."""
  model = _wamrvit()
  return model, _advance_of(model)


def _same_trees(a, b):
  return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in TREE_FIELDS)


def _shift_tokens(tokens, trees, shift=(4, 4)):
  """An exact-transport 'model' on leaf tokens: decode, roll, re-tokenize."""
  fields = jax.vmap(amr.detokenize)(tokens, trees)
  return jax.vmap(amr.tokenize)(jnp.roll(fields, shift, axis=(1, 2)), trees)


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_quadtree_rollout_equals_a_hand_written_step_loop(uniform_model):
  fields = _discs([(10, 9), (20, 22)])
  _, advance = uniform_model
  steps = list(amr.quadtree_rollout(advance, fields, 3, MESH))
  build = jax.jit(jax.vmap(functools.partial(
      amr.build_quadtree, patch=PATCH, tol_frac=0.05, max_level=LEVELS,
      max_tokens=64)))
  adapt = jax.jit(jax.vmap(functools.partial(amr.regrid, tol_frac=0.05)))
  trees = build(fields)
  tokens = jax.vmap(amr.tokenize)(fields, trees)
  for step in steps:
    size = min(64, -(-int(np.max(trees.num_leaves)) // 16) * 16)
    np.testing.assert_array_equal(step.num_tokens, trees.num_leaves)
    new = advance(tokens[:, :size], amr.truncate(trees, size))
    tokens, trees = adapt(tokens.at[:, :size].set(new), trees)
    assert _same_trees(step.trees, trees)
    np.testing.assert_allclose(
        step.fields, jax.vmap(amr.detokenize)(tokens, trees), atol=1e-6)
  # The model did something: the field moved away from the initial one.
  assert np.abs(np.asarray(steps[-1].fields - fields)).max() > 1e-2


def test_frozen_mesh_never_changes_and_regridding_follows_a_moving_front():
  centre, shift, num_steps = (10, 10), (4, 4), 3
  fields = _discs([centre])
  initial = amr.build_meshes(fields, MESH)
  frozen = list(amr.quadtree_rollout(_shift_tokens, fields, num_steps, MESH,
                                     frozen=True))
  moving = list(amr.quadtree_rollout(_shift_tokens, fields, num_steps, MESH))
  for step in frozen:
    assert _same_trees(step.trees, initial)
  assert not _same_trees(moving[-1].trees, initial)
  # Where the disc's edge now is, the regridded mesh is finest; the frozen one
  # left it behind.
  moved = (centre[0] + num_steps * shift[0], centre[1] + num_steps * shift[1])
  target = jax.vmap(amr.finest_pixels)(
      amr.build_meshes(_discs([moved]), MESH))
  def covered(step):
    finest = jax.vmap(amr.finest_pixels)(step.trees)
    return float(jnp.sum(finest & target) / jnp.sum(target))
  assert covered(moving[-1]) > 0.9 > 0.6 > covered(frozen[-1])


def test_token_counts_are_the_leaf_counts_of_the_mesh_the_model_read():
  fields = _discs([(10, 9), (22, 24)])
  steps = list(amr.quadtree_rollout(_shift_tokens, fields, 3, MESH))
  read = [amr.build_meshes(fields, MESH)] + [s.trees for s in steps[:-1]]
  for step, trees in zip(steps, read):
    np.testing.assert_array_equal(step.num_tokens, trees.num_leaves)
  assert len({tuple(np.asarray(s.num_tokens)) for s in steps}) > 1


def test_native_rollout_regrids_from_the_field_it_predicts():
  fields = _discs([(10, 10)])
  steps = list(amr.native_rollout(
      lambda u, trees: jnp.roll(u, (4, 4), axis=(1, 2)), fields, 3, MESH))
  np.testing.assert_array_equal(steps[-1].fields,
                                jnp.roll(fields, (12, 12), axis=(1, 2)))
  trees = amr.build_meshes(fields, MESH)
  for step in steps:
    trees = amr.regrid_native(step.fields, trees, MESH)
    assert _same_trees(step.trees, trees)
  assert not _same_trees(steps[-1].trees, amr.build_meshes(fields, MESH))


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_native_rollout_with_every_leaf_finest_equals_the_uniform_models(
    uniform_model):
  fields = jax.random.normal(jax.random.key(3), (2, SIZE, SIZE, 1))
  mesh = amr.MeshConfig(PATCH, LEVELS, tol_frac=0.0)  # noise: all refined
  native = amr.NativeWAMRViT(_config(), (PATCH, PATCH), 1, LEVELS,
                             rngs=nnx.Rngs(1))
  uniform, uniform_advance = uniform_model
  nnx.update(native.backbone, nnx.state(uniform.backbone))
  got = list(amr.native_rollout(_advance_of(native), fields, 2, mesh))
  expected = list(amr.quadtree_rollout(uniform_advance, fields, 2, mesh))
  for a, b in zip(got, expected):
    assert np.all(np.asarray(a.trees.level) == LEVELS)
    assert _same_trees(a.trees, b.trees)
    np.testing.assert_allclose(a.fields, b.fields, atol=1e-5)
  assert np.abs(np.asarray(got[-1].fields - fields)).max() > 1e-3


def test_the_stage_hook_sees_every_jitted_stage_and_changes_nothing():
  fields = _discs([(10, 9)])
  seen = []

  def call(stage, fn, *args):
    seen.append(stage)
    return fn(*args)

  hooked = list(amr.quadtree_rollout(_shift_tokens, fields, 2, MESH,
                                     call=call))
  assert seen == ["model", "regrid"] * 2
  plain = list(amr.quadtree_rollout(_shift_tokens, fields, 2, MESH))
  np.testing.assert_array_equal(hooked[-1].fields, plain[-1].fields)
  seen.clear()
  list(amr.quadtree_rollout(_shift_tokens, fields, 2, MESH, frozen=True,
                            call=call))
  assert seen == ["model"] * 2


def test_bucket_size_rounds_up_and_caps():
  assert amr.bucket_size(np.array([97, 12]), 32, 256) == 128
  assert amr.bucket_size(np.array([96]), 32, 256) == 96
  assert amr.bucket_size(np.array([250]), 32, 256) == 256


def test_build_meshes_is_build_quadtree_at_the_full_budget():
  fields = _discs([(10, 9), (20, 22)])
  trees = amr.build_meshes(fields, MESH)
  assert trees.max_tokens == 64 and not np.asarray(trees.overflow).any()
  one = amr.build_quadtree(fields[1], patch=PATCH, tol_frac=0.05,
                           max_level=LEVELS, max_tokens=64)
  assert _same_trees(jax.tree.map(lambda x: x[1], trees), one)


def test_finest_pixels_are_the_footprints_of_finest_leaves():
  tree = amr.build_quadtree(jnp.zeros((32, 32)).at[0, 0].set(1.0), patch=4,
                            tol_frac=0.1, max_level=2, max_tokens=64)
  expected = np.zeros((32, 32), bool)
  expected[:8, :8] = True  # the four level-2 leaves at the spike
  np.testing.assert_array_equal(amr.finest_pixels(tree), expected)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"num_steps": 0}, ValueError, "num_steps"),
    ({"num_steps": True}, ValueError, "num_steps"),
    ({"fields": jnp.zeros((SIZE, SIZE, 1))}, ValueError, r"\(B, H, W, C\)"),
    ({"fields": jnp.zeros((1, SIZE, SIZE, 1), jnp.int32)}, ValueError,
     "floating"),
    ({"fields": jnp.zeros((1, 24, 24, 1))}, ValueError, "multiple"),
    ({"advance": "model"}, TypeError, "advance"),
    ({"mesh": {"patch": 4}}, TypeError, "MeshConfig"),
    ({"call": 3}, TypeError, "call"),
])
def test_bad_inputs_are_named_errors_at_call_time(kwargs, error, match):
  args = {"advance": _shift_tokens, "fields": _discs([(10, 9)]),
          "num_steps": 2, "mesh": MESH, "call": None, **kwargs}
  for rollout in (amr.quadtree_rollout, amr.native_rollout):
    with pytest.raises(error, match=match):  # before the first step is asked
      rollout(args["advance"], args["fields"], args["num_steps"], args["mesh"],
              call=args["call"])


@pytest.mark.parametrize("kwargs,match", [
    ({"tol_frac": -0.1}, "tol_frac"), ({"coarsen_ratio": -1.0}, "tol_frac"),
    ({"max_passes": -1}, "max_passes"), ({"token_bucket": 0}, "token_bucket"),
])
def test_bad_mesh_settings_are_named_errors(kwargs, match):
  with pytest.raises(ValueError, match=match):
    amr.MeshConfig(**{"patch": 4, "max_level": 2, "tol_frac": 0.05, **kwargs})
