"""ResEdit: codes, the masked composition and the sum of scales."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.var import _resedit as resedit
from jaxpapers.var import _toy as toy

GENERATOR = toy.toy_generator(jax.random.key(0))
UPSAMPLE = [lambda c, k=k: GENERATOR.upsample(c, k)
            for k in range(len(GENERATOR.scales))]


def _codes(seed):
  rng = np.random.default_rng(seed)
  return [resedit.codes_from_bits(jnp.asarray(rng.random((h, w, 8)) < 0.5))
          for h, w in GENERATOR.scales]


_compose = jax.jit(lambda src, edit, mask, gates: resedit.compose(
    src, edit, mask, UPSAMPLE, gates))
_sum = jax.jit(lambda codes: resedit.sum_of_scales(codes, UPSAMPLE))


def test_codes_are_plus_minus_one_over_root_d():
  bits = jnp.array([[True, False] * 4])
  codes = resedit.codes_from_bits(bits)
  np.testing.assert_allclose(codes, np.where(bits, 1, -1) / np.sqrt(8),
                             rtol=1e-6)
  np.testing.assert_allclose(jnp.linalg.norm(codes, axis=-1), 1.0, rtol=1e-6)


@jax.jit
def _each_scale(codes):
  """Every scale's upsampled codes, and the decode of each."""
  ups = [up(c) for up, c in zip(UPSAMPLE, codes)]
  return ups, [GENERATOR.decode(u) for u in ups]


def test_sum_of_scales_is_the_direct_sum_of_upsampled_codes():
  codes = _codes(0)
  ups, decodes = _each_scale(codes)
  np.testing.assert_allclose(_sum(codes), np.sum(ups, 0), rtol=1e-6,
                             atol=1e-6)
  # The finest scale is on the latent grid already; a 1x1 scale is constant.
  np.testing.assert_array_equal(ups[-1], codes[-1])
  np.testing.assert_allclose(ups[0], np.broadcast_to(codes[0], (8, 8, 8)),
                             rtol=1e-6)
  # The decoder is linear: decoding the sum is the sum of decodings.
  np.testing.assert_allclose(jax.jit(GENERATOR.decode)(_sum(codes)),
                             np.sum(decodes, 0), rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), density=st.floats(0.0, 1.0))
def test_binary_mask_leaves_the_source_bit_identical_outside(seed, density):
  src, edit = _codes(seed), _codes(seed + 1)
  rng = np.random.default_rng(seed + 2)
  mask = jnp.asarray(rng.random((8, 8)) < density, jnp.float32)
  gates = jnp.asarray(rng.uniform(0.0, 2.0, 4), jnp.float32)
  composed = np.asarray(_compose(src, edit, mask, gates))
  source = np.asarray(_sum(src))
  outside = np.asarray(mask) == 0
  np.testing.assert_array_equal(composed[outside], source[outside])


def test_full_mask_with_unit_gates_gives_the_edited_latent():
  src, edit = _codes(3), _codes(4)
  np.testing.assert_allclose(_compose(src, edit, jnp.ones((8, 8)), None),
                             _sum(edit), rtol=1e-5, atol=1e-6)


def test_soft_mask_interpolates_and_gates_weight_each_scale():
  src, edit = _codes(5), _codes(6)
  mask = jnp.asarray(np.random.default_rng(7).random((8, 8)), jnp.float32)
  source, edited = _sum(src), _sum(edit)
  np.testing.assert_allclose(
      _compose(src, edit, mask, None),
      source + mask[..., None] * (edited - source), rtol=1e-5, atol=1e-6)
  # Only the second scale's gate open: the source plus that scale's residual.
  gates = jnp.array([0.0, 1.0, 0.0, 0.0])
  expected = source + mask[..., None] * UPSAMPLE[1](edit[1] - src[1])
  np.testing.assert_allclose(_compose(src, edit, mask, gates), expected,
                             rtol=1e-5, atol=1e-6)


def test_composition_vmaps_over_images_and_differentiates_in_the_mask():
  src = [jnp.stack(c) for c in zip(_codes(8), _codes(9))]
  edit = [jnp.stack(c) for c in zip(_codes(10), _codes(11))]
  mask = jnp.ones((8, 8))
  batched = jax.jit(jax.vmap(
      lambda s, e: resedit.compose(s, e, mask, UPSAMPLE)))(src, edit)
  for i in range(2):
    np.testing.assert_allclose(
        batched[i], _compose([c[i] for c in src], [c[i] for c in edit], mask,
                             None), rtol=1e-6, atol=1e-6)
  # F is affine in M: dF/dM summed over d is the summed residual.
  grad = jax.jit(jax.grad(lambda m: jnp.sum(resedit.compose(
      [c[0] for c in src], [c[0] for c in edit], m, UPSAMPLE))))(mask)
  residual = _sum([c[0] for c in edit]) - _sum([c[0] for c in src])
  np.testing.assert_allclose(grad, residual.sum(-1), rtol=1e-4, atol=1e-5)


def test_bad_inputs_are_named():
  src, edit = _codes(12), _codes(13)
  with pytest.raises(ValueError, match=r"mask must have .*\(8, 8\)"):
    resedit.compose(src, edit, jnp.ones((4, 4)), UPSAMPLE)
  with pytest.raises(ValueError, match="mask must be a float"):
    resedit.compose(src, edit, jnp.ones((8, 8), jnp.int32), UPSAMPLE)
  with pytest.raises(ValueError, match="gates"):
    resedit.compose(src, edit, jnp.ones((8, 8)), UPSAMPLE, gates=[1.0, 1.0])
  with pytest.raises(ValueError, match="same scales"):
    resedit.compose(src, edit[:3], jnp.ones((8, 8)), UPSAMPLE)
  with pytest.raises(ValueError, match="edited_code"):
    resedit.compose_scale(jnp.zeros((8, 8, 8)), src[1], src[2],
                          jnp.ones((8, 8)), UPSAMPLE[1])


def test_traced_mask_outside_unit_interval_is_nan_there_and_exact_elsewhere():
  # Traced, a 0..255 or NaN mask cannot be refused: the latent is NaN where
  # it lies outside [0, 1] (it would extrapolate the edit), unchanged
  # elsewhere.
  src, edit = _codes(20), _codes(21)
  mask = jnp.zeros((8, 8)).at[2:4, 2:4].set(1.0)
  bad = mask.at[0, 0].set(255.0).at[7, 7].set(jnp.nan).at[5, 5].set(-0.5)
  good = np.asarray(_compose(src, edit, mask, None))
  got = np.asarray(_compose(src, edit, bad, None))
  outside = np.zeros((8, 8), bool)
  outside[0, 0] = outside[7, 7] = outside[5, 5] = True
  assert np.isnan(got[outside]).all()
  np.testing.assert_array_equal(got[~outside], good[~outside])


def test_traced_int_bits_outside_zero_one_give_nan_codes():
  codes = jax.jit(resedit.codes_from_bits)(jnp.array([[0, 1, 2, 255]]))
  np.testing.assert_array_equal(np.asarray(codes)[0, :2], [-0.5, 0.5])
  assert np.isnan(np.asarray(codes)[0, 2:]).all()
