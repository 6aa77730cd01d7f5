"""jaxpapers.rl under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on a batch of transcripts sharded along the batch
("data") and, for the logits, the vocabulary ("model") of a (2, 4) mesh (see
``check_sharded_call`` in tests/conftest.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import rl
from jaxpapers.rl import shell

B, L, V, T = 8, 12, 16, 2
_rng = np.random.default_rng(0)
_starts = np.sort(_rng.integers(0, L, (4, B, T)), axis=-1)
_ends = _starts + _rng.integers(0, 4, _starts.shape)
# (start, end) pairs of the action, warning, env and body spans.
_SPANS = shell.Spans(*[jnp.asarray(a[i], jnp.int32) for i in range(4)
                       for a in (_starts, _ends)])
_SPAN_SPECS = shell.Spans(*[jax.P("data")] * 8)
_LOGITS = jnp.asarray(_rng.normal(size=(B, L, V)), jnp.float32)
_TARGETS = jnp.asarray(_rng.integers(0, V, (B, L)), jnp.int32)
_ADVANTAGES = jnp.asarray(_rng.normal(size=B), jnp.float32)
_ROWS = jnp.asarray(_rng.random(B) < 0.5)
_SCHEDULE = rl.lambda_schedule("step_decay", 0.05, decay_steps=3)


def _echo(logits, targets, advantages, spans, rows):
  log_probs = rl.token_log_probs(logits, targets, temperature=0.8)
  masks = rl.world_model_only(rl.echo_masks(spans, length=L), rows)
  loss, aux = rl.echo_loss(log_probs, jax.lax.stop_gradient(log_probs) + 0.1,
                           advantages, masks, lam=0.05)
  return loss, aux, rl.env_loss(log_probs, masks), masks


CASES = {
    "rl.token_log_probs+rl.echo_masks+rl.world_model_only+rl.echo_loss"
    "+rl.env_loss": (
        _echo, (_LOGITS, _TARGETS, _ADVANTAGES, _SPANS, _ROWS),
        (jax.P("data", None, "model"), jax.P("data"), jax.P("data"),
         _SPAN_SPECS, jax.P("data"))),
    "rl.lambda_schedule": (
        _SCHEDULE, (jnp.arange(8, dtype=jnp.int32),), (jax.P("data"),)),
}


# The cases that took 2.5 s or more for both modes on 2 idle cores (nearly all
# of it compilation) run in the slow suite, `pytest -m slow`, which CI runs.
SLOW_CASES = {
    "rl.token_log_probs+rl.echo_masks+rl.world_model_only+rl.echo_loss+rl.env_loss",
}


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sharded_inputs_give_the_unsharded_numbers(name, mode,
                                                   check_sharded_call):
  check_sharded_call(CASES[name], mode)
