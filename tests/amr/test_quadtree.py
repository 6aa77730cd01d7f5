"""The jit-compiled quadtree against the Python reference, and its properties."""

import functools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr
from jaxpapers.amr import _reference as reference


def _discs(shape, centres, radius, channels=1):
  y, x = np.mgrid[:shape[0], :shape[1]].astype(np.float64)
  field = np.zeros(shape)
  for cy, cx in centres:
    field += np.tanh((radius - np.hypot(y - cy, x - cx)) / 1.5)
  if channels == 1:
    return field.astype(np.float32)
  # A second channel with its features elsewhere: the trees' union refines both.
  return np.stack([field, np.roll(field, 9, axis=1)], -1).astype(np.float32)


def _fields():
  rng = np.random.default_rng(0)
  step = np.zeros((48, 32), np.float32)
  step[:, 13:] = 1.0
  spike = np.zeros((32, 32), np.float32)
  spike[17, 9] = 1.0
  return {
      "random": (rng.normal(size=(32, 32)).astype(np.float32), 2, 3, 0.8),
      "discs": (_discs((64, 64), [(20, 22), (44, 50)], 9.0), 4, 2, 0.02),
      "discs_two_channels": (_discs((64, 64), [(30, 12)], 6.0, channels=2),
                             4, 2, 0.05),
      "step_3x2_roots": (step, 4, 2, 0.1),
      "spike_deep": (spike, 1, 4, 0.5),
      "rectangular_patch": (rng.normal(size=(24, 40)).astype(np.float32)
                            * (np.arange(40) > 27), (3, 5), 2, 0.3),
  }


FIELDS = _fields()


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_leaves_equal_the_python_reference(name):
  field, patch, max_level, tol = FIELDS[name]
  geometry = amr.make_geometry(field.shape, patch, max_level)
  budget = geometry.num_finest_cells
  tree = amr.build_quadtree(field, patch=patch, tol_frac=tol,
                            max_level=max_level, max_tokens=budget)
  expected = reference.build_quadtree_reference(
      field, patch=patch, tol_frac=tol, max_level=max_level)
  assert reference.tree_leaves(tree) == expected
  assert int(tree.num_leaves) == len(expected) and not bool(tree.overflow)
  # Not every tree is trivial: each case has more than one level of leaves.
  assert len({leaf[0] for leaf in expected}) > 1
  assert reference.is_valid_balanced_tree(expected, geometry)


_GEOMETRY = amr.make_geometry((32, 32), 2, 3)


@jax.jit
def _tree_of(field, tol):
  return amr.build_quadtree(field, patch=2, tol_frac=tol, max_level=3,
                            max_tokens=_GEOMETRY.num_finest_cells)


@settings(max_examples=40, deadline=None)
@given(
    spikes=st.lists(st.tuples(st.integers(0, 31), st.integers(0, 31),
                              st.floats(0.1, 1.0)), min_size=1, max_size=4),
    boxes=st.lists(st.tuples(st.integers(0, 31), st.integers(0, 31),
                             st.integers(1, 12)), max_size=2),
    tol=st.floats(0.0, 0.9),
)
def test_every_tree_is_balanced_and_equals_the_reference(spikes, boxes, tol):
  field = np.zeros((32, 32), np.float32)
  for y, x, amplitude in spikes:
    field[y, x] += amplitude
  for y, x, size in boxes:
    field[y:y + size, x:x + size] += 0.5
  tree = _tree_of(field, tol)
  leaves = reference.tree_leaves(tree)
  assert reference.is_valid_balanced_tree(leaves, _GEOMETRY)
  assert leaves == reference.build_quadtree_reference(
      field, patch=2, tol_frac=tol, max_level=3)


@functools.partial(jax.jit, static_argnames="adapt_nearby")
def _tree_with_rings(field, tol, adapt_nearby):
  return amr.build_quadtree(field, patch=2, tol_frac=tol, max_level=3,
                            max_tokens=_GEOMETRY.num_finest_cells,
                            adapt_nearby=adapt_nearby)


@settings(max_examples=25, deadline=None)
@given(
    spikes=st.lists(st.tuples(st.integers(0, 31), st.integers(0, 31),
                              st.floats(0.1, 1.0)), min_size=1, max_size=3),
    tol=st.floats(0.05, 0.9),
    adapt_nearby=st.integers(1, 2),
)
def test_adapt_nearby_rings_equal_the_reference(spikes, tol, adapt_nearby):
  field = np.zeros((32, 32), np.float32)
  for y, x, amplitude in spikes:
    field[y, x] += amplitude
  leaves = reference.tree_leaves(_tree_with_rings(field, tol, adapt_nearby))
  assert reference.is_valid_balanced_tree(leaves, _GEOMETRY)
  assert leaves == reference.build_quadtree_reference(
      field, patch=2, tol_frac=tol, max_level=3, adapt_nearby=adapt_nearby)
  # A ring never removes refinement.
  assert len(leaves) >= int(_tree_of(field, tol).num_leaves)


def test_a_ring_refines_the_face_neighbours_of_a_refined_cell():
  field = np.zeros((16, 16), np.float32)
  field[5, 5] = 1.0  # inside level-1 cell (1, 1) of a 4x4 grid (patch 2, L=2)
  plain = amr.build_quadtree(field, patch=2, tol_frac=0.5, max_level=2,
                             max_tokens=64)
  ringed = amr.build_quadtree(field, patch=2, tol_frac=0.5, max_level=2,
                              max_tokens=64, adapt_nearby=1)
  level2 = lambda tree: {(i // 2, j // 2) for level, i, j in
                         reference.tree_leaves(tree) if level == 2}
  assert level2(plain) == {(1, 1)}
  assert level2(ringed) == {(1, 1), (0, 1), (2, 1), (1, 0), (1, 2)}


def test_a_nonfinite_field_is_an_error_eagerly_and_a_flag_under_jit():
  field = np.zeros((32, 32), np.float32)
  field[3, 7] = 1.0
  field[20, 20] = np.nan
  with pytest.raises(ValueError, match="NaN or infinite"):
    amr.build_quadtree(field, patch=2, tol_frac=0.1, max_level=3, max_tokens=256)
  assert bool(_tree_of(field, 0.1).nonfinite)
  field[20, 20] = 0.0
  assert not bool(_tree_of(field, 0.1).nonfinite)
  batch = np.stack([field, np.where(np.arange(32) == 4, np.inf, field)])
  flags = jax.vmap(lambda f: _tree_of(f, 0.1).nonfinite)(batch)
  assert flags.tolist() == [False, True]


def test_negative_tol_frac_as_a_jax_scalar_and_bad_rings_are_named_errors():
  field = np.zeros((16, 16), np.float32)
  with pytest.raises(ValueError, match="tol_frac must be >= 0"):
    amr.build_quadtree(field, patch=2, tol_frac=jnp.float32(-0.1), max_level=2,
                       max_tokens=64)
  with pytest.raises(ValueError, match="adapt_nearby must be an int >= 0"):
    amr.build_quadtree(field, patch=2, tol_frac=0.1, max_level=2, max_tokens=64,
                       adapt_nearby=-1)


def test_balance_forces_the_coarser_side():
  # One finest spike at the corner of a root tile: without balance its
  # level-4 leaves would touch level-1 leaves of the neighbouring tile.
  geometry = amr.make_geometry((32, 32), 1, 4)
  refined = [jnp.zeros(geometry.grid_shape(level), jnp.bool_)
             for level in range(4)]
  refined[0] = refined[0].at[0, 0].set(True)
  refined[1] = refined[1].at[1, 1].set(True)
  refined[2] = refined[2].at[3, 3].set(True)
  refined[3] = refined[3].at[7, 7].set(True)
  closed = amr.balance(refined)
  # The level-3 cell (7, 7) forces the level-2 cells over its face
  # neighbours (3, 4) and (4, 3); those force the roots next to them.
  assert bool(closed[2][3, 4]) and bool(closed[2][4, 3])
  assert bool(closed[1][1, 2]) and bool(closed[1][2, 1])
  np.testing.assert_array_equal(closed[0], np.ones((2, 2), bool))
  assert int(sum(np.sum(c) for c in closed)) == sum(
      int(np.sum(c)) for c in amr.balance(closed))  # idempotent


def test_zero_tolerance_refines_everything_and_round_trips_exactly():
  field = jax.random.normal(jax.random.key(0), (32, 48, 2))
  geometry = amr.make_geometry(field.shape, 4, 2)
  tree = amr.build_quadtree(field, patch=4, tol_frac=0.0, max_level=2,
                            max_tokens=geometry.num_finest_cells)
  assert int(tree.num_leaves) == geometry.num_finest_cells
  assert np.all(np.asarray(tree.level) == 2)
  tokens = amr.tokenize(field, tree)
  assert tokens.shape == (geometry.num_finest_cells, 4, 4, 2)
  np.testing.assert_array_equal(amr.detokenize(tokens, tree), field)


@pytest.mark.parametrize("channels", [1, 3])
def test_constant_field_gives_one_leaf_per_root_tile(channels):
  field = jnp.full((48, 32, channels), 2.5)
  tree = amr.build_quadtree(field, patch=4, tol_frac=0.0, max_level=2,
                            max_tokens=10)
  assert int(tree.num_leaves) == 6  # 3 x 2 roots of 16 x 16 pixels
  np.testing.assert_array_equal(tree.level, np.zeros(10))
  np.testing.assert_array_equal(tree.mask, np.arange(10) < 6)
  # Root tiles in Morton order of (row, col): (0,0) (0,1) (1,0) (1,1) (2,0) (2,1).
  np.testing.assert_array_equal(tree.i[:6], [0, 0, 1, 1, 2, 2])
  np.testing.assert_array_equal(tree.j[:6], [0, 1, 0, 1, 0, 1])
  np.testing.assert_allclose(amr.detokenize(amr.tokenize(field, tree), tree),
                             field)


def test_batched_vmap_equals_per_field_calls():
  fields = jnp.stack([jnp.asarray(FIELDS["discs"][0]),
                      jnp.zeros((64, 64)),
                      jax.random.normal(jax.random.key(1), (64, 64))])
  build = functools.partial(amr.build_quadtree, patch=4, tol_frac=0.02,
                            max_level=2, max_tokens=256)
  batched = jax.jit(jax.vmap(build))(fields)
  tokens = jax.vmap(amr.tokenize)(fields, batched)
  for b in range(fields.shape[0]):
    single = build(fields[b])
    for name in ("level", "i", "j", "mask", "num_leaves", "overflow"):
      np.testing.assert_array_equal(getattr(batched, name)[b],
                                    getattr(single, name))
    np.testing.assert_array_equal(tokens[b], amr.tokenize(fields[b], single))


def test_tokens_and_decoding_equal_the_reference():
  field, patch, max_level, tol = FIELDS["discs_two_channels"]
  geometry = amr.make_geometry(field.shape, patch, max_level)
  tree = amr.build_quadtree(field, patch=patch, tol_frac=tol,
                            max_level=max_level, max_tokens=200)
  leaves = reference.tree_leaves(tree)
  count = len(leaves)
  uniform = np.asarray(amr.tokenize(field, tree))
  expected = reference.tokenize_reference(field, leaves, geometry)
  np.testing.assert_allclose(uniform[:count], np.stack(expected), atol=1e-6)
  assert not uniform[count:].any()
  np.testing.assert_allclose(
      amr.detokenize(uniform, tree),
      reference.detokenize_reference(expected, leaves, geometry), atol=1e-6)

  native = amr.tokenize(field, tree, mode="native")
  for t, leaf in enumerate(leaves):
    np.testing.assert_array_equal(
        native[leaf[0]][t], reference.tokenize_reference(
            field, [leaf], geometry, mode="native")[0])
  # Native storage is lossless whatever the tree.
  np.testing.assert_array_equal(amr.detokenize(native, tree), field)


def test_bilinear_decoding_upsamples_inside_each_leaf():
  field = jnp.zeros((8, 8)).at[:4, :4].set(jnp.arange(16.0).reshape(4, 4))
  tree = amr.build_quadtree(jnp.zeros((8, 8)), patch=2, tol_frac=0.1,
                            max_level=1, max_tokens=4)
  tokens = amr.tokenize(field, tree)  # root (0, 0): 2x2 means 2.5 4.5 10.5 12.5
  decoded = np.asarray(amr.detokenize(tokens, tree, upsample="bilinear"))[..., 0]
  # Half-pixel bilinear x2 of [a, b]: [a, 3a/4 + b/4, a/4 + 3b/4, b].
  ramp = np.array([[1, 0], [0.75, 0.25], [0.25, 0.75], [0, 1]])
  patch = np.array([[2.5, 4.5], [10.5, 12.5]])
  np.testing.assert_allclose(decoded[:4, :4], ramp @ patch @ ramp.T, atol=1e-6)
  np.testing.assert_array_equal(decoded[4:], 0.0)


def test_budget_overflow_is_flagged_and_keeps_the_morton_prefix():
  field, patch, max_level, tol = FIELDS["discs"]
  full = reference.build_quadtree_reference(field, patch=patch, tol_frac=tol,
                                            max_level=max_level)
  tree = amr.build_quadtree(field, patch=patch, tol_frac=tol,
                            max_level=max_level, max_tokens=20)
  assert bool(tree.overflow) and int(tree.num_leaves) == len(full)
  assert reference.tree_leaves(tree) == full[:20]
  with pytest.raises(ValueError, match="needs .* leaves but max_tokens=20"):
    amr.check_budget(tree)


def test_leaf_coordinates_closed_form():
  tree = amr.build_quadtree(FIELDS["spike_deep"][0], patch=1, tol_frac=0.5,
                            max_level=4, max_tokens=128)
  count = int(tree.num_leaves)
  level, i, j = (np.asarray(a)[:count] for a in (tree.level, tree.i, tree.j))
  size = 2.0 ** (4 - level)
  depth = 4 - level
  expected = {"level_idx": level, "area": 4.0 ** depth,
              "sqrt_area": 2.0 ** depth, "log_area": 2.0 * depth}
  for axis, scale in expected.items():
    coords = np.asarray(amr.leaf_coordinates(tree, axis))
    np.testing.assert_allclose(coords[:count, 0], (j + 0.5) * size / 32)
    np.testing.assert_allclose(coords[:count, 1], (i + 0.5) * size / 32)
    np.testing.assert_allclose(coords[:count, 2], scale)
    assert not coords[count:].any()
  assert len(set(level.tolist())) > 2


@pytest.mark.parametrize("shape,patch,max_level,match", [
    ((60, 64), 4, 2, "height 60 is not a multiple of the root tile size"),
    ((64, 64), 4, 5, "max_level=5 is too deep"),
    ((64, 64, 1, 1), 4, 1, r"shape \(H, W\) or \(H, W, C\)"),
    ((64, 64), 0, 1, "patch must be a positive"),
    ((64, 64), 4, -1, "max_level must be an int >= 0"),
])
def test_bad_shapes_are_named_errors(shape, patch, max_level, match):
  with pytest.raises(ValueError, match=match):
    amr.build_quadtree(jnp.zeros(shape), patch=patch, tol_frac=0.1,
                       max_level=max_level, max_tokens=256)


def test_bad_arguments_are_named_errors():
  field = jnp.zeros((64, 64))
  with pytest.raises(ValueError, match="max_tokens must be an int >= the number"
                                       " of root tiles 4x4 = 16"):
    amr.build_quadtree(field, patch=4, tol_frac=0.1, max_level=2, max_tokens=8)
  with pytest.raises(ValueError, match="tol_frac must be >= 0"):
    amr.build_quadtree(field, patch=4, tol_frac=-0.1, max_level=2,
                       max_tokens=64)
  with pytest.raises(ValueError, match="floating point"):
    amr.build_quadtree(jnp.zeros((64, 64), jnp.int32), patch=4, tol_frac=0.1,
                       max_level=2, max_tokens=64)
  tree = amr.build_quadtree(field, patch=4, tol_frac=0.1, max_level=2,
                            max_tokens=64)
  with pytest.raises(ValueError, match="does not match the tree's 64x64 grid"):
    amr.tokenize(jnp.zeros((32, 64)), tree)
  with pytest.raises(ValueError, match="mode must be one of"):
    amr.tokenize(field, tree, mode="wavelet")
  with pytest.raises(ValueError, match="scale_axis must be one of"):
    amr.leaf_coordinates(tree, "volume")


def test_nan_input_is_visible_in_the_tree_flag_and_the_tokens():
  field = jnp.zeros((64, 64)).at[3, 5].set(jnp.nan)
  tree = jax.jit(functools.partial(amr.build_quadtree, patch=4, tol_frac=0.1,
                                   max_level=2, max_tokens=256))(field)
  assert bool(tree.nonfinite)
  assert np.isnan(np.asarray(amr.tokenize(field, tree))).any()


def test_truncate_keeps_the_leaves_and_flags_a_short_budget():
  field, patch, max_level, tol = FIELDS["discs"]
  tree = amr.build_quadtree(field, patch=patch, tol_frac=tol,
                            max_level=max_level, max_tokens=256)
  count = int(tree.num_leaves)
  short = amr.truncate(tree, count)
  assert reference.tree_leaves(short) == reference.tree_leaves(tree)
  assert not bool(short.overflow) and short.max_tokens == count
  assert bool(amr.truncate(tree, count - 1).overflow)
  with pytest.raises(ValueError, match="truncate only shrinks"):
    amr.truncate(tree, 300)
