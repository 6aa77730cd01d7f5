"""jaxpapers.losses: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import losses

def _predict(params, state_LxC):
  del params
  return jnp.tanh(state_LxC[-2:])


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
    (lambda: losses.valid_prediction_time(jnp.ones((2, 3)), jnp.ones((2, 3)),
                                          threshold=-0.1),
     ValueError, "threshold must be >= 0"),
    (lambda: losses.teacher_forcing_loss(_predict, {}, jnp.ones((4, 6, 2)),
                                         jnp.ones((3, 2, 2)), 0.1),
     ValueError, r"contexts and targets must share their leading \(batch\)"),
    (lambda: losses.teacher_forcing_loss(_predict, {}, jnp.ones((4, 6, 2)),
                                         jnp.ones((4, 3, 2)), 0.1),
     ValueError, r"targets must be \(B, \*prediction.shape\) = \(B, \(2, 2\)\)"),
    (lambda: losses.teacher_forcing_loss(_predict, {}, jnp.ones((4, 6, 2)),
                                         jnp.ones((4, 2, 2)), -1.0),
     ValueError, "lam must be >= 0"),
    (lambda: losses.unrolled_loss(_predict, {}, jnp.ones((4, 6, 2)),
                                  jnp.ones((2, 3, 2))),
     ValueError, "contexts and targets must share their leading"),
    (lambda: losses.free_running_errors(_predict, {}, jnp.ones((4, 6, 2)),
                                        jnp.ones((4,))),
     ValueError, r"targets must be \(B, H, ...\)"),
    (lambda: losses.free_running_rollout(_predict, {}, jnp.ones((6, 2)), 0),
     ValueError, "horizon must be an int >= 1"),
    (lambda: losses.rollout_consistency_exact(_predict, {}, jnp.ones((6, 2)),
                                              jnp.ones((1, 3))),
     ValueError, "target must hold the true next rows"),
    (lambda: losses.shift_feedback(jnp.ones((2, 3)), jnp.ones((3, 3))),
     ValueError, r"P <= 2"),
    # inf * a zero penalty is NaN.
    (lambda: losses.teacher_forcing_loss(_predict, {}, jnp.ones((4, 6, 2)),
                                         jnp.ones((4, 2, 2)), float("inf")),
     ValueError, "lam must be >= 0 and finite"),
    (lambda: losses.teacher_forcing_loss(_predict, {}, jnp.ones((4, 6, 2)),
                                         jnp.ones((4, 2, 2)), jnp.ones(2)),
     ValueError, r"lam must be a scalar; got shape \(2,\)"),
    (lambda: losses.valid_prediction_time(jnp.ones((2, 3)), jnp.ones((2, 3)),
                                          threshold=jnp.ones(3)),
     ValueError, "threshold must be a scalar"),
    # A mean over an empty batch is NaN.
    (lambda: losses.horizon_errors(jnp.ones((0, 3)), jnp.ones((0, 3))),
     ValueError, "predictions is empty"),
    (lambda: losses.unrolled_loss(_predict, {}, jnp.ones((0, 6, 2)),
                                  jnp.ones((0, 3, 2))),
     ValueError, "contexts is empty"),
    (lambda: losses.free_running_rollout(_predict, {},
                                         jnp.ones((6, 2), jnp.int32), 2),
     TypeError, "context must be a floating-point state"),
    (lambda: losses.free_running_rollout(_predict, {}, jnp.ones((6, 2)), 2.0),
     ValueError, "horizon must be an int >= 1"),
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


def test_a_diverged_rollout_is_not_valid():
  # NaN > threshold is False: a NaN error used to count as valid.
  predictions = jnp.array([[0.0, jnp.nan, 0.0]])
  steps = losses.valid_prediction_time(predictions, jnp.zeros((1, 3)),
                                       threshold=0.5)
  assert steps.tolist() == [1]
