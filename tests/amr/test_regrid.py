"""Cell-space regridding: balance, interpolated children, conservative merges."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr
from jaxpapers.amr import _reference as reference

GEOMETRY = amr.make_geometry((32, 32), 2, 3)
BUDGET = GEOMETRY.num_finest_cells


def _disc(centre, radius=5.0):
  y, x = np.mgrid[:32, :32]
  return np.tanh((radius - np.hypot(y - centre[0], x - centre[1])) / 1.0
                 ).astype(np.float32)


@jax.jit
def _build(field):
  return amr.build_quadtree(field, patch=2, tol_frac=0.05, max_level=3,
                            max_tokens=BUDGET)


_regrid = jax.jit(functools.partial(amr.regrid, tol_frac=0.05))


def test_moving_feature_moves_the_mesh_and_keeps_balance():
  tree = _build(_disc((9, 9)))
  moved = amr.tokenize(_disc((22, 21)), tree)  # the feature left its leaves
  new_tokens, new_tree = _regrid(moved, tree)
  leaves = reference.tree_leaves(new_tree)
  assert reference.is_valid_balanced_tree(leaves, GEOMETRY)
  level_map = np.zeros((16, 16), int)
  for level, i, j in leaves:
    size = 1 << (3 - level)
    level_map[i * size:(i + 1) * size, j * size:(j + 1) * size] = level
  # Finest leaves now sit on the new front (pixels (22, 16) and (27, 21));
  # the old front (pixel (9, 4)) coarsened.
  assert level_map[11, 8] == 3 and level_map[13, 10] == 3
  assert level_map[4, 2] < 3
  decoded = amr.detokenize(new_tokens, new_tree)
  assert np.isfinite(np.asarray(decoded)).all()


def test_refined_children_are_the_bilinear_upsampled_parent():
  tree = amr.build_quadtree(jnp.zeros((8, 8)), patch=4, tol_frac=0.1,
                            max_level=1, max_tokens=4)
  patch = np.arange(16, dtype=np.float32).reshape(4, 4)
  tokens = jnp.zeros((4, 4, 4, 1)).at[0, :, :, 0].set(patch)
  new_tokens, new_tree = amr.regrid(tokens, tree, tol_frac=0.1,
                                    allow_coarsening=False)
  assert reference.tree_leaves(new_tree) == [(1, 0, 0), (1, 0, 1), (1, 1, 0),
                                             (1, 1, 1)]
  # Half-pixel bilinear x2 along one axis of length 4, edges clamped.
  up = np.zeros((8, 4))
  for k in range(4):
    up[2 * k, k] += 0.75
    up[2 * k, max(k - 1, 0)] += 0.25
    up[2 * k + 1, k] += 0.75
    up[2 * k + 1, min(k + 1, 3)] += 0.25
  expected = up @ patch @ up.T
  children = np.asarray(new_tokens)[:4, :, :, 0]
  np.testing.assert_allclose(children[0], expected[:4, :4], atol=1e-5)
  np.testing.assert_allclose(children[1], expected[:4, 4:], atol=1e-5)
  np.testing.assert_allclose(children[2], expected[4:, :4], atol=1e-5)
  np.testing.assert_allclose(children[3], expected[4:, 4:], atol=1e-5)


def test_flat_siblings_merge_one_level_and_conserve_the_mean():
  tree = _build(_disc((16, 16), radius=7.0))
  ramp = np.linspace(0.0, 1.0, 32, dtype=np.float32)[None, :] * np.ones((32, 1),
                                                                        np.float32)
  field = jnp.asarray(np.where(np.arange(32)[None, :] < 16, 0.0, ramp))
  tokens = amr.tokenize(field, tree)
  new_tokens, new_tree = amr.regrid(tokens, tree, tol_frac=0.05,
                                    max_passes=0)
  old, new = reference.tree_leaves(tree), reference.tree_leaves(new_tree)
  assert reference.is_valid_balanced_tree(new, GEOMETRY)
  assert len(new) < len(old)
  # Coarsening only ever merges whole sibling groups, one level at a time.
  for level, i, j in new:
    if (level, i, j) not in old:
      children = {(level + 1, 2 * i + a, 2 * j + b) for a in (0, 1)
                  for b in (0, 1)}
      assert children <= set(old)
  # The left half is constant: it coarsens; the ramp's leaves do not.
  for level, i, j in set(old) - set(new):
    assert (j + 1) * (1 << (3 - level)) <= 8
  np.testing.assert_allclose(np.mean(amr.detokenize(new_tokens, new_tree)),
                             np.mean(amr.detokenize(tokens, tree)), rtol=1e-6)


def test_nothing_to_do_leaves_tree_and_tokens_unchanged():
  field = jnp.asarray(_disc((12, 20)))
  tree = _build(field)
  tokens = amr.tokenize(field, tree)
  new_tokens, new_tree = amr.regrid(tokens, tree, tol_frac=10.0,
                                    allow_coarsening=False)
  assert reference.tree_leaves(new_tree) == reference.tree_leaves(tree)
  np.testing.assert_allclose(new_tokens, tokens, atol=1e-6)


def test_batched_regrid_equals_single_calls():
  fields = jnp.stack([jnp.asarray(_disc((9, 9))), jnp.asarray(_disc((20, 12)))])
  trees = jax.vmap(_build)(fields)
  moved = jax.vmap(amr.tokenize)(jnp.roll(fields, 3, axis=2), trees)
  batched_tokens, batched_trees = jax.vmap(_regrid)(moved, trees)
  for b in range(2):
    tree = jax.tree.map(lambda x, b=b: x[b], trees)
    tokens, single = _regrid(moved[b], tree)
    np.testing.assert_array_equal(batched_trees.level[b], single.level)
    np.testing.assert_array_equal(batched_trees.i[b], single.i)
    np.testing.assert_array_equal(batched_trees.j[b], single.j)
    np.testing.assert_allclose(batched_tokens[b], tokens, atol=1e-6)


def test_bad_arguments_are_named_errors():
  tree = _build(jnp.asarray(_disc((9, 9))))
  with pytest.raises(ValueError, match="tokens must be"):
    amr.regrid(jnp.zeros((BUDGET, 2, 2)), tree, tol_frac=0.1)
  with pytest.raises(ValueError, match="patches of"):
    amr.regrid(jnp.zeros((BUDGET, 4, 4, 1)), tree, tol_frac=0.1)
  with pytest.raises(ValueError, match="must be >= 0"):
    amr.regrid(jnp.zeros((BUDGET, 2, 2, 1)), tree, tol_frac=-1.0)


def test_nonfinite_leaf_values_set_the_new_trees_flag():
  field = jnp.zeros((16, 16))
  tree = amr.build_quadtree(field, patch=4, tol_frac=0.1, max_level=2,
                            max_tokens=16)
  tokens = amr.tokenize(field, tree)
  _, clean = amr.regrid(tokens.at[0, 0, 0].set(1.0), tree, tol_frac=0.1)
  _, poisoned = amr.regrid(tokens.at[0, 0, 0].set(jnp.nan), tree, tol_frac=0.1)
  assert not bool(clean.nonfinite) and bool(poisoned.nonfinite)
  # Padding slots hold no values: garbage there does not raise the flag.
  padded = tokens.at[tree.max_tokens - 1].set(jnp.nan)
  assert not bool(amr.regrid(padded, tree, tol_frac=0.1)[1].nonfinite)
