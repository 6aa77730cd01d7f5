"""jaxpapers.optim under Auto and Explicit meshes gives the unsharded numbers.

soap and ema_nesterov have their own deeper test (sharded params with and
without ``jax.set_mesh``) in tests/optim/test_contracts.py; the cases here
run the pieces it does not call directly on params sharded along both axes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import optim
from tests import sharding_checks

_rng = np.random.default_rng(0)
_PARAMS = {"w": jnp.asarray(_rng.normal(size=(8, 8)), jnp.float32),
           "b": jnp.asarray(_rng.normal(size=(8,)), jnp.float32)}
_SPECS = {"w": jax.P("data", "model"), "b": jax.P("model")}


def _updates(tx, params, num_steps=3):
  """``tx``'s state and updates after ``num_steps`` steps on fixed gradients."""
  state = tx.init(params)
  for step in range(num_steps):
    grads = jax.tree.map(lambda x, s=step: (s + 1.0) * x + 0.3 * x ** 2, params)
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
  return params, state


def _eval_params(params):
  params, state = _updates(optim.ema_nesterov(optax.sgd(0.1), gamma=0.5),
                           params)
  return params, optim.ema_nesterov_eval_params(params, state)


def _soap_params(params):
  params, state = _updates(optim.scale_by_soap(precondition_frequency=2),
                           params)
  # The eigenbases (and the moments kept in them) are unique only up to the
  # signs of their columns; the updated params are not.
  return params, state.mu, state.preconditioners


CASES = {
    "optim.scale_by_soap": (
        _soap_params,
        # float32 rounding through eigh and QR on sharded vs whole factors.
        (_PARAMS,), (_SPECS,), {"rtol": 1e-4, "atol": 1e-4}),
    "optim.ema_nesterov_eval_params": (_eval_params, (_PARAMS,), (_SPECS,)),
}

NOT_SHARDED = {
    "optim.soap": "sharded params under both mesh kinds in"
                  " tests/optim/test_contracts.py::"
                  "test_sharded_params_give_the_unsharded_updates",
    "optim.ema_nesterov": "sharded params under both mesh kinds in"
                          " tests/optim/test_contracts.py::"
                          "test_sharded_params_give_the_unsharded_updates",
    "optim.track_batch_sharpness": (
        "its update on sharded params under both mesh kinds in"
        " tests/curvature/test_contracts.py::"
        "test_params_sharded_along_any_axis_give_the_unsharded_numbers"),
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "optim.ema_nesterov_eval_params": ("Auto",),
    "optim.scale_by_soap": ("Explicit",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
