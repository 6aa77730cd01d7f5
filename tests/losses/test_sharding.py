"""jaxpapers.losses under Auto and Explicit meshes gives the unsharded numbers.

Batches of windows sharded along the batch axis, forecaster parameters along
their feature axis (as the model would be); horizon_errors and
rollout_consistency have their cases in tests/test_sharding_contract.py.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import losses
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

_W = _f32(8)  # one weight per channel
_CONTEXTS = _f32(4, 6, 8)  # B windows of L rows and C channels
_TARGETS = _f32(4, 2, 8)  # the next P_out = 2 rows
_LONG_TARGETS = _f32(4, 5, 8)  # 5 rows ahead: 3 free-running steps
_SPECS = (jax.P("model"), jax.P("data"), jax.P("data"))


def _predict(params, state_LxC):
  return jnp.tanh(state_LxC[-2:] * params["w"][None])


def _exact_penalties(w, contexts, targets):
  penalty = functools.partial(losses.rollout_consistency_exact, _predict,
                              {"w": w})
  return (jax.vmap(penalty)(contexts, targets),
          jax.vmap(functools.partial(penalty, linearize_at="free",
                                     normalize="unit"))(contexts, targets))


def _losses(w, contexts, targets):
  return (losses.teacher_forcing_loss(_predict, {"w": w}, contexts, targets,
                                      0.5),
          jax.grad(lambda w: losses.unrolled_loss(_predict, {"w": w}, contexts,
                                                  targets))(w))


def _free_running(w, contexts, targets):
  rollouts = jax.vmap(lambda c: losses.free_running_rollout(
      _predict, {"w": w}, c, 5, feedback_len=1))(contexts)
  errors = losses.free_running_errors(_predict, {"w": w}, contexts, targets,
                                      vpt_threshold=0.5)
  return (rollouts, errors,
          losses.valid_prediction_time(rollouts, targets, threshold=1.0))


CASES = {
    "losses.rollout_consistency_exact": (
        _exact_penalties, (_W, _CONTEXTS, _TARGETS), _SPECS),
    "losses.teacher_forcing_loss+losses.unrolled_loss": (
        _losses, (_W, _CONTEXTS, _TARGETS), _SPECS),
    "losses.free_running_rollout+losses.free_running_errors"
    "+losses.valid_prediction_time": (
        _free_running, (_W, _CONTEXTS, _LONG_TARGETS), _SPECS),
    "losses.shift_feedback": (
        jax.vmap(losses.shift_feedback), (_CONTEXTS, _TARGETS),
        (jax.P("data", None, "model"), jax.P("data", None, "model"))),
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "losses.shift_feedback": ("Auto",),
    "losses.teacher_forcing_loss+losses.unrolled_loss": ("Explicit",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
