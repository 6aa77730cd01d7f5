"""The clean sampler, the BitResEdit loop and the toy generator."""

import functools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.var import bitedit
from jaxpapers.var import editing
from jaxpapers.var import toy

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
