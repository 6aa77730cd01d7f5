"""jaxpapers.var: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import var

_GENERATOR = var.toy_generator(jax.random.key(0), scales=(1, 2), num_bits=4,
                               prompt_dim=4, patch=1)
_SOURCE = var.sample(_GENERATOR, jax.random.key(1), jnp.ones(4), cfg_scale=2.0)
_up = lambda c: jnp.broadcast_to(c, (2, 2, 1))

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
     "bisection_steps must be a positive int"),
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
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
