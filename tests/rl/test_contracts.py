"""jaxpapers.rl: a table of misuse, each a named error, and documented values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import rl

_LOGITS = jnp.zeros((2, 3, 5))
_TARGETS = jnp.zeros((2, 3), jnp.int32)
_MASKS = rl.EchoMasks(*[jnp.ones((2, 3), jnp.bool_)] * 3)
_SPANS = rl.shell.Spans(*[jnp.zeros((2, 1), jnp.int32)] * 8)

MISUSE = [
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS, temperature=0.0),
     ValueError, "temperature must be > 0"),
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS.astype(jnp.float32)),
     TypeError, "targets_BxL must hold integer token ids"),
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS.at[0, 0].set(5)),
     ValueError, r"targets_BxL holds ids in \[0, 5\]; .* \[0, 5\)"),
    (lambda: rl.token_log_probs(_LOGITS[0], _TARGETS[0]), ValueError,
     r"need \[B, L, V\] and \[B, L\]"),
    (lambda: rl.world_model_only(_MASKS, jnp.array([1, 0])), TypeError,
     "rows_B must be boolean"),
    (lambda: rl.echo_masks(_SPANS, length=0), ValueError,
     "length must be >= 1"),
    (lambda: rl.env_loss(jnp.zeros((2,)), rl.EchoMasks(
        *[jnp.ones((2,), jnp.bool_)] * 3)), ValueError,
     r"log_probs_BxL must be \[B, L\]"),
    (lambda: rl.env_loss(jnp.zeros((2, 4)), _MASKS), ValueError,
     "env_target has shape"),
    (lambda: rl.echo_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros(2),
                          _MASKS, lam=-1.0), ValueError, "lam must be >= 0"),
    (lambda: rl.lambda_schedule("step_decay", decay_steps=2, decay_rate=0.0),
     ValueError, r"decay_rate must lie in \(0, 1\]"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_traced_out_of_range_targets_give_nan_log_probs():
  log_probs = jax.jit(rl.token_log_probs)(_LOGITS, _TARGETS.at[0, 1].set(-1))
  assert np.isnan(log_probs[0, 1])
  assert np.isfinite(np.delete(np.asarray(log_probs).ravel(), 1)).all()
