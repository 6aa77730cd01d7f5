"""jaxpapers.var under Auto and Explicit meshes gives the unsharded numbers.

Per-bit guidance is elementwise over log-odds sharded along a batch (data)
and the bit axis (model); the sampler and the editor vmap over a batch of
prompts and keys sharded along data.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers import var
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)
_LOGITS = _f32(8, 2, 4, 2) * 3  # (B, tokens, bits, 2)
_UNIFORM = jnp.asarray(_rng.uniform(size=(8, 2, 4)), jnp.float32)
_GENERATOR = var.toy_generator(jax.random.key(0), scales=(1, 2), num_bits=4,
                               prompt_dim=4, patch=1)
_BIT_SPEC = jax.P("data", None, "model")


def _guided_bits(cond_logits, source_logits, uncond_logits, uniform):
  def one(trust, contrast):
    config = var.bit_edit(2.0, 0.05, trust=trust, contrast=contrast,
                          bisection_steps=8)
    guided = var.guide(config, var.log_odds(cond_logits),
                       var.log_odds(source_logits), var.log_odds(uncond_logits),
                       3.0)
    return guided, var.sample_bits(uniform, guided.log_odds)
  return one("quadratic", "cond"), one("exact", "post_cfg")


def _trust_region(clean, shift):
  return (var.trust_radius(clean, shift, 0.1),
          var.trust_radius(clean, shift, 0.1, trust="exact", bisection_steps=8),
          var.project(clean, shift, 0.1), var.bernoulli_kl(clean, shift))


def _composed(bits_coarse, bits_fine, edited_coarse, edited_fine, mask):
  """ResEdit composition per example, upsampling by repetition."""
  def up(factor):
    return lambda c: jnp.repeat(jnp.repeat(c, factor, 0), factor, 1)
  upsample = [up(2), up(1)]

  def one(*args):
    source = [var.codes_from_bits(args[0]), var.codes_from_bits(args[1])]
    edited = [var.codes_from_bits(args[2]), var.codes_from_bits(args[3])]
    return (var.compose(source, edited, args[4], upsample, gates=[1.0, 0.5]),
            var.compose_scale(upsample[0](source[0]), source[1], edited[1],
                              args[4], upsample[1]),
            var.sum_of_scales(source, upsample))
  return jax.vmap(one)(bits_coarse, bits_fine, edited_coarse, edited_fine, mask)


def _sampled_and_edited(keys, source_prompts, target_prompts, masks):
  def one(key, source_prompt, target_prompt, mask):
    source = var.sample(_GENERATOR, key, source_prompt, cfg_scale=2.0)
    edited = var.edit(_GENERATOR, key, source, source_prompt, target_prompt,
                      var.bit_edit(1.0, 0.1), cfg_scale=2.0, mask=mask)
    return source, edited
  # The finiteness check's host callback: mapped per device (see sample).
  return tree.vmap_sharded(one)(keys, source_prompts, target_prompts, masks)


def _scores(images, sources, references, masks):
  return jax.vmap(var.edit_scores)(images, sources, references, masks)


def _bits(*shape):
  return jnp.asarray(_rng.random(shape) < 0.5)


CASES = {
    "var.bit_edit+var.guide+var.log_odds+var.cfg+var.sample_bits": (
        _guided_bits, (_LOGITS, _f32(8, 2, 4, 2), _f32(8, 2, 4, 2), _UNIFORM),
        (jax.P("data", None, "model"),) * 3 + (_BIT_SPEC,),
        {"rtol": 1e-5, "atol": 1e-5}),
    "var.trust_radius+var.project+var.bernoulli_kl": (
        _trust_region, (_f32(8, 2, 4) * 3, _f32(8, 2, 4)), (_BIT_SPEC,) * 2,
        {"rtol": 1e-5, "atol": 1e-5}),
    "var.quadratic_radius_error": (
        functools.partial(var.quadratic_radius_error, epsilon=1e-3),
        (_f32(8, 4),), (jax.P("data", "model"),)),
    "var.codes_from_bits+var.compose+var.compose_scale+var.sum_of_scales": (
        _composed, (_bits(8, 1, 1, 4), _bits(8, 2, 2, 4), _bits(8, 1, 1, 4),
                    _bits(8, 2, 2, 4),
                    jnp.asarray(_rng.uniform(size=(8, 2, 2)), jnp.float32)),
        (jax.P("data", None, None, "model"),) * 4 + (jax.P("data"),)),
    "var.sample+var.edit": (
        _sampled_and_edited,
        (jax.random.split(jax.random.key(1), 8), _f32(8, 4), _f32(8, 4),
         jnp.asarray(_rng.random((8, 2, 2)) < 0.5, jnp.float32)),
        (jax.P("data"),) * 4),
    "var.edit_scores": (
        _scores, (_f32(8, 4, 4, 3), _f32(8, 4, 4, 3), _f32(8, 4, 4, 3),
                  jnp.asarray(_rng.random((8, 2, 2)) < 0.5, jnp.float32)),
        (jax.P("data"),) * 4, {"rtol": 1e-5, "atol": 1e-5}),
}

NOT_SHARDED = {
    "var.toy_generator": "host-side: draws fixed weights eagerly into numpy"
                         " from a key; its generator's methods run sharded in"
                         " var.sample+var.edit",
    "var.edit_batch": "host-side: draws the masks with numpy and compiles"
                      " its own sampling calls; it returns a fresh batch of"
                      " inputs (the sampling it runs is var.sample's case)",
    "var.score_edits": "vmaps var.edit, whose finiteness host callback"
                       " refuses a batch sharded along an Explicit axis;"
                       " shard its per-task edit with tree.vmap_sharded"
                       " (var.sample+var.edit's case)",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "var.sample+var.edit": ("Explicit",),
    "var.trust_radius+var.project+var.bernoulli_kl": ("Auto",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
