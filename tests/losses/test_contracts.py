"""jaxpapers.losses: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import losses

MISUSE = [
    # Integer predictions would cast float targets to int (an MSE of 0).
    (lambda: losses.horizon_errors(jnp.ones((2, 3), jnp.int32),
                                   jnp.full((2, 3), 0.4)),
     TypeError, r"predictions must hold real floating.*int32"),
    (lambda: losses.horizon_errors(jnp.ones((2, 3)), jnp.ones((2, 3), jnp.int32)),
     TypeError, "targets must hold real floating"),
    (lambda: losses.horizon_errors(jnp.ones((2, 3)), jnp.ones((2, 4))),
     ValueError, "targets must have the shape of predictions"),
    (lambda: losses.horizon_errors(jnp.ones((3,)), jnp.ones((3,))),
     ValueError, r"predictions must be \(B, H, ...\)"),
    (lambda: losses.valid_prediction_time(jnp.ones((2, 3), jnp.int32),
                                          jnp.ones((2, 3)), threshold=0.5),
     TypeError, "predictions must hold real floating"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_float_inputs_of_two_widths_are_compared_in_the_wider_one():
  # bfloat16 cannot hold 1.001 (it rounds to 1.0): the error must not either.
  # (Under strict promotion, which the suite sets, mixing widths is JAX's
  # TypePromotionError; users get standard promotion.)
  with jax.numpy_dtype_promotion("standard"):
    errors = losses.horizon_errors(jnp.zeros((1, 2), jnp.bfloat16),
                                   jnp.array([[0.0, 1.001]], jnp.float32))
  assert errors.mse.dtype == jnp.float32
  assert abs(float(errors.mse[1]) - 1.001 ** 2) < 1e-6
