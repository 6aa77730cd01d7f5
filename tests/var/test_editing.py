"""The clean sampler, the BitResEdit loop and the toy generator."""

import functools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.var import _bitedit as bitedit
from jaxpapers.var import _editing as editing
from jaxpapers.var import _toy as toy

GENERATOR = toy.toy_generator(jax.random.key(0))
CFG = 3.0
SOURCE_PROMPT = jax.random.normal(jax.random.key(1), (16,))
TARGET_PROMPT = SOURCE_PROMPT + 2 * jax.random.normal(jax.random.key(2), (16,))


@jax.jit
def _sample(key, prompt, generator=GENERATOR):
  return editing.sample(generator, key, prompt, cfg_scale=CFG)


@functools.partial(jax.jit, static_argnames=("trust", "with_mask"))
def _edit(key, source, strength, epsilon, mask, *, trust="quadratic",
          with_mask=True):
  config = bitedit.bit_edit(strength, epsilon, trust=trust)
  return editing.edit(GENERATOR, key, source, SOURCE_PROMPT, TARGET_PROMPT,
                      config, cfg_scale=CFG, mask=mask if with_mask else None)


SOURCE = _sample(jax.random.key(3), SOURCE_PROMPT)
BOX = jnp.zeros((8, 8)).at[2:6, 1:5].set(1.0)


def test_zero_strength_without_mask_is_the_clean_target_sampler_bit_for_bit():
  keys = jax.random.split(jax.random.key(4), 4)
  for key in keys:
    clean = _sample(key, TARGET_PROMPT)
    edited = _edit(key, SOURCE, 0.0, 0.1, BOX, with_mask=False)
    for a, b in zip(clean.bits, edited.bits):
      np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(clean.latent, edited.latent)
  # A non-zero tilt does change bits (the identity above is not vacuous).
  tilted = _edit(keys[0], SOURCE, 4.0, 1.0, BOX, with_mask=False)
  clean = _sample(keys[0], TARGET_PROMPT)
  assert any(np.any(a != b) for a, b in zip(clean.bits, tilted.bits))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), density=st.floats(0.05, 0.95),
       strength=st.sampled_from([0.0, 1.0, 4.0]))
def test_decode_outside_a_binary_mask_equals_the_source_exactly(seed, density,
                                                                strength):
  mask = jax.random.bernoulli(jax.random.key(seed), density,
                              (8, 8)).astype(jnp.float32)
  edited = _edit(jax.random.key(seed + 1), SOURCE, strength, 0.1, mask)
  image, source = (np.asarray(GENERATOR.decode(x))
                   for x in (edited.latent, SOURCE.latent))
  outside = np.kron(np.asarray(mask), np.ones((4, 4))) == 0
  np.testing.assert_array_equal(image[outside], source[outside])
  assert np.any(image[~outside] != source[~outside])


def test_exact_trust_region_bounds_every_realized_kl():
  for epsilon in (0.01, 0.1, 1.0):
    edited = _edit(jax.random.key(5), SOURCE, 4.0, epsilon, BOX,
                   trust="exact")
    assert max(float(kl.max()) for kl in edited.kl) <= np.float32(epsilon)
    assert any(bool(c.any()) for c in edited.clipped)


def test_full_mask_gives_the_sum_of_the_edited_codes():
  edited = _edit(jax.random.key(6), SOURCE, 1.0, 0.1, jnp.ones((8, 8)))
  direct = sum(GENERATOR.upsample(GENERATOR.codes(b), k)
               for k, b in enumerate(edited.bits))
  np.testing.assert_allclose(edited.latent, direct, rtol=1e-5, atol=1e-5)


def test_editor_vmaps_over_keys():
  keys = jax.random.split(jax.random.key(7), 3)
  batched = jax.vmap(lambda k: _edit(k, SOURCE, 1.0, 0.1, BOX))(keys)
  for i, key in enumerate(keys):
    np.testing.assert_array_equal(batched.bits[-1][i],
                                  _edit(key, SOURCE, 1.0, 0.1, BOX).bits[-1])


def test_nan_logits_are_named_eagerly_and_under_jit():
  positions = list(GENERATOR.positions)
  positions[0] = positions[0].at[0, 0, 0, 1].set(jnp.nan)
  broken = GENERATOR._replace(positions=tuple(positions))
  with pytest.raises(ValueError, match="cond_target.*NaN"):
    editing.edit(broken, jax.random.key(0), SOURCE, SOURCE_PROMPT,
                 TARGET_PROMPT, bitedit.bit_edit(), cfg_scale=CFG)
  # Under jit the check runs with the compiled call (the same program).
  with pytest.raises(jax.errors.JaxRuntimeError, match="NaN or inf"):
    jax.block_until_ready(_sample(jax.random.key(0), TARGET_PROMPT, broken))


def test_bad_inputs_are_named():
  config = bitedit.bit_edit()
  run = functools.partial(editing.edit, GENERATOR, jax.random.key(0), SOURCE,
                          SOURCE_PROMPT, TARGET_PROMPT, config, cfg_scale=CFG)
  with pytest.raises(ValueError, match="mask must have"):
    run(mask=jnp.ones((32, 32)))
  with pytest.raises(ValueError, match="gates"):
    run(mask=BOX, gates=jnp.ones(3))
  with pytest.raises(ValueError, match="source must have"):
    editing.edit(GENERATOR, jax.random.key(0),
                 editing.Sample(SOURCE.bits[:2], SOURCE.latent),
                 SOURCE_PROMPT, TARGET_PROMPT, config, cfg_scale=CFG)
  with pytest.raises(ValueError, match="scales"):
    toy.toy_generator(jax.random.key(0), scales=(1, 4, 2))
  with pytest.raises(ValueError, match="num_bits"):
    toy.toy_generator(jax.random.key(0), num_bits=0)


def test_traced_nan_hyperparameters_are_named_when_the_edit_runs():
  # A traced NaN strength or budget made every guided bit False, silently;
  # the loop now checks the guided log-odds too (the compiled _edit reused).
  for strength, epsilon in ((jnp.nan, 0.1), (1.0, jnp.nan)):
    with pytest.raises(jax.errors.JaxRuntimeError, match="NaN or inf"):
      jax.block_until_ready(_edit(jax.random.key(8), SOURCE, strength,
                                  epsilon, BOX))


def test_edit_scores_match_numpy_on_a_masked_image():
  rng = np.random.default_rng(0)
  image, source, reference = (rng.normal(size=(4, 6, 3)).astype(np.float32)
                              for _ in range(3))
  mask = np.zeros((2, 3), np.float32)
  mask[0, 1:] = 1.0
  weight = np.repeat(np.repeat(mask, 2, 0), 2, 1)[..., None]
  scores = editing.edit_scores(jnp.asarray(image), jnp.asarray(source),
                               jnp.asarray(reference), jnp.asarray(mask))
  cosine = np.sum(weight * image * reference) / np.sqrt(
      np.sum(weight * image**2) * np.sum(weight * reference**2))
  error = np.abs(image - source) * (1 - weight)
  np.testing.assert_allclose(scores.alignment, cosine, rtol=1e-5)
  np.testing.assert_allclose(scores.outside_max_error, error.max(), rtol=1e-6)
  np.testing.assert_allclose(scores.outside_rms_error, np.sqrt(
      np.sum(error**2) / (3 * np.sum(1 - weight[..., 0]))), rtol=1e-5)
  # An edit confined to the mask leaves exactly zero error outside it.
  inside = jnp.asarray(weight > 0)
  kept = editing.edit_scores(jnp.where(inside, image, source),
                             jnp.asarray(source), jnp.asarray(reference),
                             jnp.asarray(mask, bool))
  assert float(kept.outside_max_error) == 0.0


def test_edit_batch_draws_rectangles_and_expected_target_decodes():
  gen = toy.toy_generator(jax.random.key(0), scales=(1, 2, 4), num_bits=4,
                          prompt_dim=4, patch=2)
  batch = toy.edit_batch(gen, jax.random.key(1), 3, cfg_scale=CFG,
                         mask_seed=0, mask_sides=(2, 3), reference_samples=4)
  assert batch.source_prompts.shape == batch.target_prompts.shape == (3, 4)
  for mask in np.asarray(batch.masks):  # one filled rectangle, sides in [2, 3]
    rows, cols = np.nonzero(mask)
    h, w = np.ptp(rows) + 1, np.ptp(cols) + 1
    assert 2 <= h <= 3 and 2 <= w <= 3 and mask.sum() == h * w
  # The sources are the clean sampler's, the reference the decoded mean latent.
  keys = jax.random.split(jax.random.key(1), 5)
  source = editing.sample(gen, jax.random.split(keys[2], 3)[1],
                          batch.source_prompts[1], cfg_scale=CFG)
  np.testing.assert_allclose(batch.source_images[1],
                             gen.decode(source.latent), rtol=1e-5, atol=1e-6)
  latents = [editing.sample(gen, k, batch.target_prompts[2],
                            cfg_scale=CFG).latent
             for k in jax.random.split(keys[3], (3, 4))[2]]
  np.testing.assert_allclose(batch.reference_images[2],
                             gen.decode(jnp.mean(jnp.stack(latents), 0)),
                             rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # a training loop: compile-bound
def test_score_edits_keeps_the_background_and_reduces_to_the_clean_sampler():
  gen = toy.toy_generator(jax.random.key(0), scales=(1, 2, 4), num_bits=4,
                          prompt_dim=4, patch=2)
  batch = toy.edit_batch(gen, jax.random.key(1), 3, cfg_scale=CFG,
                         mask_seed=1, mask_sides=(1, 3), reference_samples=2)
  masked = toy.score_edits(gen, batch, bitedit.bit_edit(2.0, 0.1),
                           cfg_scale=CFG)
  np.testing.assert_array_equal(masked.outside_max_error, 0.0)
  assert masked.images.shape == (3, 8, 8, 3) and masked.alignment.shape == (3,)
  # Task 1 is var.edit of its source, scored by var.edit_scores.
  one = editing.edit(gen, batch.edit_keys[1],
                     jax.tree.map(lambda x: x[1], batch.sources),
                     batch.source_prompts[1], batch.target_prompts[1],
                     bitedit.bit_edit(2.0, 0.1), cfg_scale=CFG,
                     mask=batch.masks[1])
  scores = editing.edit_scores(gen.decode(one.latent), batch.source_images[1],
                               batch.reference_images[1], batch.masks[1])
  np.testing.assert_allclose(masked.alignment[1], scores.alignment, rtol=1e-5)
  # Strength 0 without the mask: the clean target sampler, bit for bit.
  plain = toy.score_edits(gen, batch, bitedit.bit_edit(0.0, 0.1),
                          cfg_scale=CFG, masked=False)
  clean = jax.vmap(lambda k, p: editing.sample(gen, k, p, cfg_scale=CFG))(
      batch.edit_keys, batch.target_prompts)
  for a, b in zip(plain.bits, clean.bits):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(plain.kl_max, 0.0)
