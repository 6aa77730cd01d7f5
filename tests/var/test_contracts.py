"""jaxpapers.var: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import var
from jaxpapers.var import resedit
from jaxpapers.var import toy

_GENERATOR = var.toy_generator(jax.random.key(0), scales=(1, 2), num_bits=4,
                               prompt_dim=4, patch=1)
_SOURCE = var.sample(_GENERATOR, jax.random.key(1), jnp.ones(4), cfg_scale=2.0)
_up = lambda c: jnp.broadcast_to(c, (2, 2, 1))
_PROMPT = jnp.ones(4)
_NAN = float("nan")


def _edit(**overrides):
  kwargs = {"generator": _GENERATOR, "key": jax.random.key(2),
            "source": _SOURCE, "source_prompt": _PROMPT,
            "target_prompt": -_PROMPT, "config": var.bit_edit(),
            "cfg_scale": 2.0, **overrides}
  return var.edit(**kwargs)


def _source_bits(k, bits):
  source_bits = list(_SOURCE.bits)
  source_bits[k] = bits
  return _SOURCE._replace(bits=tuple(source_bits))

MISUSE = [
    (lambda: var.bit_edit(1.0, 0.0), ValueError, "epsilon .the per-bit KL budget"),
    (lambda: var.bit_edit(-1.0), ValueError, "strength .lambda. must be >= 0"),
    (lambda: var.bit_edit(trust="cubic"), ValueError, "trust must be one of"),
    # A negative budget used to give a NaN radius (sqrt of a negative).
    (lambda: var.trust_radius(jnp.zeros(2), jnp.ones(2), -0.1), ValueError,
     "epsilon .the per-bit KL budget. must be > 0"),
    (lambda: var.trust_radius(jnp.zeros(2), jnp.ones(2), jnp.ones(2)),
     ValueError, "epsilon must be a scalar budget"),
    (lambda: var.trust_radius(jnp.zeros(2), jnp.ones(2), 0.1, trust="exact",
                              bisection_steps=0), ValueError,
     "bisection_steps must be an int >= 1"),
    (lambda: var.project(jnp.zeros(2), jnp.ones(2), 0.1, trust="cubic"),
     ValueError, "trust must be one of"),
    (lambda: var.quadratic_radius_error(jnp.zeros(2), 0.0), ValueError,
     "epsilon .the per-bit KL budget. must be > 0"),
    (lambda: var.log_odds(jnp.zeros((2, 3))), ValueError,
     "logits must end in an axis of 2"),
    (lambda: var.guide(var.bit_edit(), jnp.zeros(2), jnp.zeros(3), jnp.zeros(2),
                       3.0), ValueError, "cond_source must have the shape"),
    (lambda: var.guide(var.bit_edit(), jnp.full(2, jnp.nan), jnp.zeros(2),
                       jnp.zeros(2), 3.0), ValueError, "contains NaN or inf"),
    (lambda: var.sample_bits(jnp.zeros(3), jnp.zeros(2)), ValueError,
     "uniform must have the shape of the log-odds"),
    # Float "bits" of 0.7 used to become codes (2 * 0.7 - 1) / sqrt(d).
    (lambda: var.codes_from_bits(jnp.full(4, 0.7)), TypeError,
     r"bits must be a bool \(or 0/1 int\) array"),
    (lambda: var.sum_of_scales([jnp.ones((1, 1, 1))], [_up, _up]), ValueError,
     "codes and upsample must list the same"),
    (lambda: var.compose([], [], None, []), ValueError,
     "source_codes must list at least one scale"),
    (lambda: var.compose([jnp.ones((1, 1, 1))], [jnp.ones((1, 1, 1))],
                         jnp.ones((2, 2)), [_up], gates=[1.0, 1.0]), ValueError,
     "gates must hold one gate per scale"),
    (lambda: var.compose_scale(jnp.zeros((2, 2)), jnp.ones((1, 1, 1)),
                               jnp.ones((1, 1, 1)), None, _up), ValueError,
     r"prefix must be the \(H, W, d\) running sum"),
    (lambda: var.compose_scale(jnp.zeros((2, 2, 1)), jnp.ones((1, 1, 1)),
                               jnp.ones((1, 1, 1)), jnp.ones((3, 3)), _up),
     ValueError, "mask must have the final latent grid's shape"),
    (lambda: var.edit(_GENERATOR, jax.random.key(2), _SOURCE, jnp.ones(4),
                      -jnp.ones(4), var.bit_edit(), cfg_scale=2.0,
                      mask=jnp.ones((2, 2), jnp.int32)), ValueError,
     "mask must be a float array"),
    (lambda: var.edit(_GENERATOR, jax.random.key(2),
                      _SOURCE._replace(bits=_SOURCE.bits[:1]), jnp.ones(4),
                      -jnp.ones(4), var.bit_edit(), cfg_scale=2.0), ValueError,
     "source must have the generator's 2 scales"),
    (lambda: var.toy_generator(jax.random.key(0), scales=(1.0, 2.0)),
     ValueError, "scales must be increasing positive ints"),
    (lambda: var.toy_generator(jax.random.key(0), num_bits=0), ValueError,
     "num_bits must be an int >= 1"),
    # NaN / inf hyperparameters and scales: named, not NaN bits read as False.
    (lambda: var.bit_edit(_NAN), ValueError, "strength .lambda. must be >= 0"),
    (lambda: var.bit_edit(jnp.inf), ValueError,
     "strength .lambda. must be finite"),
    (lambda: var.bit_edit(1.0, _NAN), ValueError,
     "epsilon .the per-bit KL budget. must be > 0"),
    (lambda: var.bit_edit(1.0, jnp.ones(2)), ValueError,
     "epsilon must be a scalar budget"),
    (lambda: var.bit_edit(bisection_steps=True), ValueError,
     "bisection_steps must be an int >= 1"),
    (lambda: var.bit_edit(contrast="pre_cfg"), ValueError,
     "contrast must be one of"),
    (lambda: var.cfg(jnp.ones(2), jnp.ones(2), _NAN), ValueError,
     "scale .the CFG scale. must be finite"),
    (lambda: var.cfg(jnp.ones(2), jnp.ones(3), 2.0), ValueError,
     r"uncond must have the shape of cond \(2,\)"),
    (lambda: var.guide(var.bit_edit(), jnp.zeros(2), jnp.zeros(2),
                       jnp.zeros(2), _NAN), ValueError,
     "cfg_scale .the CFG scale. must be finite"),
    (lambda: var.guide((1.0, 0.1), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2),
                       3.0), TypeError, "config must be a BitEdit"),
    (lambda: var.sample(_GENERATOR, jax.random.key(1), _PROMPT,
                        cfg_scale=_NAN), ValueError,
     "cfg_scale .the CFG scale. must be finite"),
    (lambda: var.sample(_GENERATOR, jax.random.key(1), _PROMPT,
                        cfg_scale=jnp.inf), ValueError,
     "cfg_scale .the CFG scale. must be finite"),
    (lambda: var.sample(_GENERATOR, jax.random.key(1), jnp.ones(5),
                        cfg_scale=2.0), ValueError,
     r"prompt must have the shape of the generator's prompt embedding \(4,\)"),
    (lambda: _edit(cfg_scale=_NAN), ValueError,
     "cfg_scale .the CFG scale. must be finite"),
    (lambda: _edit(target_prompt=jnp.ones(3)), ValueError,
     "target_prompt must have the shape"),
    (lambda: _edit(source_prompt=jnp.ones((1, 4))), ValueError,
     "source_prompt must have the shape"),
    (lambda: _edit(config="bit_edit"), TypeError, "config must be a BitEdit"),
    # A 0..255 mask (uint8, or float) instead of a [0, 1] or bool mask.
    (lambda: _edit(mask=jnp.full((2, 2), 255, jnp.uint8)), ValueError,
     r"mask must be a float array in \[0, 1\] or a bool array; got dtype"
     r" uint8 \(scale a 0..255 mask"),
    (lambda: _edit(mask=jnp.full((2, 2), 255.0)), ValueError,
     r"mask must lie in \[0, 1\]; got 4 values outside"),
    (lambda: _edit(mask=jnp.zeros((2, 2)).at[0, 1].set(jnp.nan)), ValueError,
     r"mask must lie in \[0, 1\]; got 1 values outside \(NaN included\)"),
    (lambda: _edit(mask=-jnp.ones((2, 2))), ValueError,
     r"mask must lie in \[0, 1\]"),
    (lambda: _edit(mask=jnp.ones((2, 2)), gates=[1.0, _NAN]), ValueError,
     "gates must be finite"),
    # Bits outside {0, 1}: they used to become codes (2b - 1) / sqrt(d).
    (lambda: _edit(source=_source_bits(1, jnp.full((2, 2, 4), 2, jnp.int32))),
     ValueError, r"source.bits\[1\] must hold bits 0 or 1; got values \[2\]"),
    (lambda: _edit(source=_source_bits(0, jnp.full((1, 1, 4), 0.5))),
     TypeError, r"source.bits\[0\] must be a bool \(or 0/1 int\) array"),
    (lambda: _edit(source=_source_bits(0, jnp.ones((2, 2, 4), jnp.bool_))),
     ValueError, r"source.bits\[0\] must have shape \(1, 1, 4\)"),
    (lambda: var.codes_from_bits(jnp.array([0, 2, 1, 1])), ValueError,
     r"bits must hold 0 or 1; got values \[0, 1, 2\]"),
    (lambda: var.codes_from_bits(jnp.array([0, 255], jnp.uint8)), ValueError,
     "bits must hold 0 or 1"),
    (lambda: var.codes_from_bits(jnp.array(True)), TypeError,
     r"bits must be a bool \(or 0/1 int\) array of shape \(..., d\)"),
    # The trust region and the sampler.
    (lambda: var.trust_radius(jnp.zeros(2, jnp.int32), jnp.ones(2), 0.1),
     TypeError, "clean_log_odds must be floating point"),
    (lambda: var.trust_radius(jnp.zeros(2), jnp.ones(3), 0.1, trust="exact"),
     ValueError, r"direction must broadcast to the shape of clean_log_odds"),
    (lambda: var.trust_radius(jnp.zeros(2), jnp.ones(2), _NAN), ValueError,
     "epsilon .the per-bit KL budget. must be > 0"),
    (lambda: var.project(jnp.zeros(2), jnp.ones((3, 2)), 0.1), ValueError,
     "direction must broadcast"),
    (lambda: var.quadratic_radius_error(jnp.zeros(2), _NAN), ValueError,
     "epsilon .the per-bit KL budget. must be > 0"),
    # inf / inf used to give a NaN gap.
    (lambda: var.quadratic_radius_error(jnp.zeros(2), jnp.inf), ValueError,
     "epsilon must be finite: with no trust region"),
    (lambda: var.sample_bits(jnp.full(2, 1.5), jnp.zeros(2)), ValueError,
     r"uniform must be noise in \[0, 1\]"),
    (lambda: var.sample_bits(jnp.full(2, _NAN), jnp.zeros(2)), ValueError,
     r"uniform must be noise in \[0, 1\]"),
    (lambda: var.sample_bits(jnp.full(2, 0.5), jnp.array([0.0, _NAN])),
     ValueError, "log_odds_ contains NaN"),
    # ResEdit's composition.
    (lambda: var.compose([jnp.ones((1, 1, 1))], [jnp.ones((1, 1, 1))],
                         jnp.ones((2, 2)), [_up], gates=[_NAN]), ValueError,
     "gates must be finite"),
    (lambda: var.compose([jnp.ones((1, 1, 1))], [jnp.ones((1, 1, 1))],
                         jnp.full((2, 2), 255.0), [_up]), ValueError,
     r"mask must lie in \[0, 1\]"),
    (lambda: var.compose_scale(jnp.zeros((2, 2, 1)), jnp.ones((1, 1, 1)),
                               jnp.ones((1, 1, 1)), jnp.ones((2, 2)), _up,
                               gate=jnp.inf), ValueError,
     "gate must be finite"),
    (lambda: var.compose_scale(jnp.zeros((2, 2, 1)), jnp.ones((1, 1, 1)),
                               jnp.ones((1, 1, 1)), None, _up,
                               gate=jnp.ones(2)), ValueError,
     "gate must be a scalar"),
    (lambda: resedit.check_mask(jnp.ones((2, 2), jnp.int32), (2, 2)),
     ValueError, "mask must be a float array"),
    (lambda: var.sum_of_scales([], []), ValueError,
     "codes and upsample must list the same, non-empty scales"),
    # The toy generator.
    (lambda: var.toy_generator(jax.random.key(0), prompt_gain=_NAN),
     ValueError, "prompt_gain must be a finite number"),
    (lambda: var.toy_generator(jax.random.key(0), feature_gain=jnp.inf),
     ValueError, "feature_gain must be a finite number"),
    (lambda: var.toy_generator(jax.random.key(0), num_bits=True), ValueError,
     "num_bits must be an int >= 1"),
    (lambda: var.toy_generator(jax.random.key(0), scales=()), ValueError,
     "scales must be increasing positive ints"),
    (lambda: _GENERATOR.bit_logits(jnp.ones(3), jnp.zeros((2, 2, 4)), 0),
     ValueError, r"prompt must be a \(4,\) embedding"),
    (lambda: _GENERATOR.bit_logits(_PROMPT, jnp.zeros((2, 2, 4)), 2),
     ValueError, r"scale must be an int index in \[0, 2\)"),
    (lambda: _GENERATOR.bit_logits(_PROMPT, jnp.zeros((2, 2)), 0),
     ValueError, r"prefix must be the \(H, W, d\) latent \(2, 2, 4\)"),
    (lambda: _GENERATOR.upsample(jnp.zeros((2, 2, 4)), 0), ValueError,
     r"code must be scale 0's \(1, 1, 4\) codes"),
    (lambda: _GENERATOR.decode(jnp.zeros((2, 2, 3))), ValueError,
     r"latent must be the \(H, W, d\) latent"),
    (lambda: toy.linear_resize_matrix(0, 2), ValueError,
     "size_out must be an int >= 1"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
