"""jaxpapers.rl under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on a batch of transcripts (or tasks, or stores)
sharded along the batch ("data") and, for the logits and the stores' keys,
the vocabulary or key axis ("model") of a (2, 4) mesh (see
tests/sharding_checks.py, which traces every case). Policies are split nnx
models: their FFN width lies on "model" (Megatron style), their byte
vocabulary (261 tokens) divides no mesh axis and stays whole.
"""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import models
from jaxpapers import rl
from jaxpapers.rl import _echo as echo
from jaxpapers.rl import _grpo as grpo
from jaxpapers.rl import _rollout as rollout
from jaxpapers.rl import _shell as shell
from jaxpapers.rl import _training as training
from tests import nnx_sharding
from tests import sharding_checks

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

# The shell: two turns with warnings for the scripted policy; one turn
# without for the policies (61 tokens: the shell's goal, command table and
# observations have fixed widths).
_SCRIPT_LAYOUT = shell.ShellLayout(num_turns=2)
_LAYOUT = shell.ShellLayout(num_turns=1, format_warnings=False)
_TASKS = shell.make_tasks(0, B, _SCRIPT_LAYOUT, 1, 2)[0]
_POOL = shell.make_tasks(1, B, _LAYOUT, 1, 1)[0]
_TASK_SPECS = shell.Tasks(shell.Store(jax.P("data", "model"),
                                      jax.P("data", "model")),
                          shell.Store(jax.P("data", "model"),
                                      jax.P("data", "model")),
                          jax.P("data"))
# The prompts' rows over "model", the stores' rows over "data".
_PROMPT_ROWS_SPECS = _TASK_SPECS._replace(prompt=jax.P("model"))
_table = shell.command_table(_SCRIPT_LAYOUT)[0]
_COMMANDS = jnp.asarray(_table[_rng.integers(0, len(_table), (B, 2))])
# Fixed probe transcripts for evaluate: random tokens and spans (made here
# rather than by the jitted shell, whose compilation would slow the import).
_probe_starts = _rng.integers(0, _LAYOUT.length - 8, (4, B, 1))
_PROBE = shell.Transcripts(
    jnp.asarray(_rng.integers(0, shell.VOCAB_SIZE, (B, _LAYOUT.length)),
                jnp.int32),
    shell.Spans(*[jnp.asarray(a[i], jnp.int32) for i in range(4)
                  for a in (_probe_starts, _probe_starts + 8)]),
    _POOL.goal, jnp.zeros(B, jnp.float32), jnp.zeros(B, jnp.bool_))
_TRANSCRIPT_SPECS = shell.Transcripts(
    jax.P("data"), _SPAN_SPECS, shell.Store(jax.P("data"), jax.P("data")),
    jax.P("data"), jax.P("data"))
_RL = training.RLConfig(tasks_per_step=2, group_size=4)


def _split(config):
  """``(graphdef, params, specs)`` of a model; its FFN width on "model"."""
  return nnx_sharding.split(
      models.Transformer(config, rngs=nnx.Rngs(0)),
      {"up": {"kernel": jax.P(None, "model"), "bias": jax.P("model")},
       "down": {"kernel": jax.P("model"), "bias": None}})


_TINY = _split(models.TransformerConfig(
    vocab_size=V, max_len=L, d_model=8, num_heads=2, num_layers=1, d_ff=16))
# FSDP: every parameter's first even axis along the batch's own "data" axis.
_TINY_FSDP_SPECS = nnx_sharding.fsdp_specs(_TINY[1])
_POLICY = _split(models.TransformerConfig(
    vocab_size=shell.VOCAB_SIZE, max_len=_LAYOUT.length, d_model=8,
    num_heads=2, num_layers=1, d_ff=16))
_POLICY_FSDP_SPECS = nnx_sharding.fsdp_specs(_POLICY[1])


def _echo(logits, targets, advantages, spans, rows):
  log_probs = rl.token_log_probs(logits, targets, temperature=0.8)
  masks = rl.world_model_only(rl.echo_masks(spans, length=L), rows)
  loss, aux = rl.echo_loss(log_probs, jax.lax.stop_gradient(log_probs) + 0.1,
                           advantages, masks, lam=0.05)
  return loss, aux, rl.env_loss(log_probs, masks), masks


def _spans(spans):
  shifted = echo.shift_for_next_token(echo.echo_masks(spans, length=L))
  return echo.span_mask(spans.env_start, spans.env_end, L), shifted


def _decode(params, tokens):
  """A prefill of 8 tokens, then one decoded token, from an empty cache."""
  model = nnx.merge(_TINY[0], params)
  cache = rollout.init_cache(model, B, L)
  prefill, cache = rollout.decode(model, cache, tokens[:, :8], 0)
  step, cache = rollout.decode(model, cache, tokens[:, 8:9], 8)
  return prefill, step, cache


def _decode_into(params, cache, prompt, token):
  """A prefill of ``prompt``, then ``token`` decoded, into a given cache."""
  model = nnx.merge(_TINY[0], params)
  prefill, cache = rollout.decode(model, cache, prompt, 0)
  step, cache = rollout.decode(model, cache, token, prompt.shape[1])
  return prefill, step, cache


# A KV cache of L positions, its length axis over "model" (sequence
# parallelism) and its batch over "data".
_CACHE = rollout.init_cache(nnx.merge(*_TINY[:2]), B, L)
_CACHE_SPECS = rollout.Cache(jax.P(None, "data", "model"),
                             jax.P(None, "data", "model"))


def _adam(fn):
  """``fn`` traced under standard dtype promotion.

  optax's Adam mixes its int32 count into float math (see the
  standard_dtype_promotion fixture of tests/conftest.py).
  """
  @functools.wraps(fn)
  def call(*args):
    with jax.numpy_dtype_promotion("standard"):
      return fn(*args)
  return call


@_adam
def _warm_start(params, pool, key):
  tx = training.optimizer(1e-3, warmup_steps=1)
  return training.warm_start_step(_POLICY[0], params, tx.init(params), key,
                                  pool, tx, _LAYOUT, B)


@_adam
def _rl_step(params, pool, key):
  tx = training.optimizer(1e-3, warmup_steps=1)
  return training.rl_step(_POLICY[0], params, tx.init(params), key, pool,
                          jnp.float32(0.05), jnp.bool_(False), tx, _LAYOUT,
                          _RL)


@_adam
def _warm_start_chunk(params, pool, key):
  tx = training.optimizer(1e-3, warmup_steps=1)
  chunk = training.warm_start_chunk(_POLICY[0], pool, tx, _LAYOUT, B, key)
  # One step, as the warm_start_step case: Adam's update of near-zero
  # gradients after the warm-up amplifies reassociation noise.
  return chunk((params, tx.init(params)), jnp.int32(0), 1)


@_adam
def _multi_run(params, pool, probe):
  """Two runs (GRPO, world model only) stacked: one vmapped step, then evaluated."""
  tx = training.optimizer(1e-3, warmup_steps=1)
  runs = training.multi_run(
      _POLICY[0], (pool, pool, probe), tx, _LAYOUT, _RL, lam=[0.0, 0.05],
      world_model_only=[False, True], seeds=[0, 1], eval_temperature=0.8,
      eval_samples=1)
  stacked = jax.tree.map(lambda x: jnp.stack([x, x]), params)
  state, metrics = runs.chunk((stacked, jax.vmap(tx.init)(stacked)),
                              jnp.int32(0), 1)
  return state, metrics, runs.evaluate(state[0], jnp.int32(1))


def _sample(params, tasks, key):
  return rollout.sample_split(_POLICY[0], params, tasks, key, _LAYOUT,
                              temperature=0.8)


def _evaluate(params, key, held_out, probe):
  return training.evaluate(_POLICY[0], params, key, held_out, probe, _LAYOUT,
                           temperature=0.8, samples=1)


CASES = {
    "rl.token_log_probs+rl.echo_masks+rl.world_model_only+rl.echo_loss"
    "+rl.env_loss": (
        _echo, (_LOGITS, _TARGETS, _ADVANTAGES, _SPANS, _ROWS),
        (jax.P("data", None, "model"), jax.P("data"), jax.P("data"),
         _SPAN_SPECS, jax.P("data"))),
    # The targets' sequence axis over "model", the per-row inputs' rows too.
    "rl.env_loss+rl.token_log_probs+rl.echo_masks+rl.world_model_only"
    "+rl.echo_loss": (
        _echo, (_LOGITS, _TARGETS, _ADVANTAGES, _SPANS, _ROWS),
        (jax.P("data", None, "model"), jax.P("data", "model"),
         jax.P("model"), shell.Spans(*[jax.P("model")] * 8),
         jax.P("model"))),
    "rl.lambda_schedule": (
        _SCHEDULE, (jnp.arange(8, dtype=jnp.int32),), (jax.P("data"),)),
    "rl.span_mask+rl.shift_for_next_token": (
        _spans, (_SPANS,), (_SPAN_SPECS,)),
    "rl.sequence_mean+rl.check_same_shape": (
        grpo.sequence_mean, (_LOGITS[..., 0], _ROWS[:, None] | (_TARGETS > 7)),
        (jax.P("data", "model"), jax.P("data", "model"))),
    "rl.init_cache+rl.rollout_decode": (
        _decode, (_TINY[1], _TARGETS), (_TINY[2], jax.P("data"))),
    "rl.rollout_decode+rl.init_cache": (
        _decode, (_TINY[1], _TARGETS), (_TINY_FSDP_SPECS, jax.P("data"))),
    "rl.rollout_decode": (
        _decode_into, (_TINY[1], _CACHE, _TARGETS[:, :8], _TARGETS[:, 8:9]),
        (_TINY[2], _CACHE_SPECS, jax.P("data", "model"), jax.P("data"))),
    "rl.shell_scripted+rl.shell_step+rl.shell_execute+rl.shell_observation"
    "+rl.transcripts_of+rl.shell_assemble+rl.spans_of"
    "+rl.shell_verify": (
        lambda tasks, commands: shell.scripted(tasks, commands,
                                               _SCRIPT_LAYOUT),
        (_TASKS, _COMMANDS), (_TASK_SPECS, jax.P("data"))),
    # The command slots' width over "model", the prompts' rows too.
    "rl.shell_step+rl.shell_scripted+rl.shell_execute+rl.shell_observation"
    "+rl.transcripts_of+rl.shell_assemble+rl.spans_of"
    "+rl.shell_verify": (
        lambda tasks, commands: shell.scripted(tasks, commands,
                                               _SCRIPT_LAYOUT),
        (_TASKS, _COMMANDS),
        (_PROMPT_ROWS_SPECS, jax.P("data", None, "model"))),
    "rl.warm_start_step+rl.random_transcripts"
    "+rl.pretraining_mask+rl.rl_optimizer": (
        _warm_start, (_POLICY[1], _POOL, jax.random.key(2)),
        (_POLICY[2], _TASK_SPECS, None)),
    "rl.rollout_sample_split+rl.rollout_sample": (
        _sample, (_POLICY[1], _POOL, jax.random.key(5)),
        (_POLICY[2], _TASK_SPECS, None)),
    "rl.rollout_sample+rl.rollout_sample_split": (
        _sample, (_POLICY[1], _POOL, jax.random.key(5)),
        (_POLICY[2], _PROMPT_ROWS_SPECS, None)),
    "rl.rl_step+rl.rl_loss"
    "+rl.transcript_log_probs": (
        _rl_step, (_POLICY[1], _POOL, jax.random.key(3)),
        (_POLICY[2], _TASK_SPECS, None)),
    "rl.warm_start_chunk": (
        _warm_start_chunk, (_POLICY[1], _POOL, jax.random.key(2)),
        (_POLICY[2], _TASK_SPECS, None)),
    "rl.multi_run": (
        _multi_run, (_POLICY[1], _POOL, _PROBE),
        (_POLICY[2], _TASK_SPECS, _TRANSCRIPT_SPECS)),
    "rl.rl_evaluate": (
        _evaluate, (_POLICY[1], jax.random.key(4), _POOL, _PROBE),
        (_POLICY[2], None, _TASK_SPECS, _TRANSCRIPT_SPECS)),
    # FSDP: the policy's parameters along the tasks' own "data" axis.
    "rl.transcript_log_probs+rl.rl_evaluate": (
        _evaluate, (_POLICY[1], jax.random.key(4), _POOL, _PROBE),
        (_POLICY_FSDP_SPECS, None, _TASK_SPECS, _TRANSCRIPT_SPECS)),
    "rl.rl_step+rl.transcript_log_probs"
    "+rl.rl_loss": (
        _rl_step, (_POLICY[1], _POOL, jax.random.key(3)),
        (_POLICY_FSDP_SPECS, _TASK_SPECS, None)),
}

_HOST_TEST = ("tests/rl/test_sharding.py::"
              "test_host_side_readers_take_sharded_arrays")
NOT_SHARDED = {
    "rl.ShellLayout": "a frozen dataclass of Python sizes, no arrays",
    "rl.RLConfig": "a frozen dataclass of Python settings, no arrays",
    "rl.shell_encode": "ASCII bytes of a Python string, as NumPy",
    "rl.encode_command": (
        "a command slot from a Python string and a Layout, as NumPy"),
    "rl.command_table": "NumPy command slots from a Layout, no arrays",
    "rl.make_tasks": (
        "a host NumPy generator from a seed and Python sizes, no arrays in"),
    "rl.shell_decode": (
        "host-side text of tokens read with NumPy (not jittable); run on"
        f" sharded tokens in {_HOST_TEST}"),
    "rl.render_goal": (
        "host-side prompt of a goal store read with Python ints (not"
        f" jittable); run on a sharded store in {_HOST_TEST}"),
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "rl.lambda_schedule": ("Auto",),
    "rl.rollout_sample+rl.rollout_sample_split": ("Explicit",),
    "rl.rollout_sample_split+rl.rollout_sample": ("Explicit",),
    "rl.shell_scripted+rl.shell_step+rl.shell_execute+rl.shell_observation+"
    "rl.transcripts_of+rl.shell_assemble+rl.spans_of+"
    "rl.shell_verify": ("Explicit",),
    "rl.shell_step+rl.shell_scripted+rl.shell_execute+rl.shell_observation+"
    "rl.transcripts_of+rl.shell_assemble+rl.spans_of+"
    "rl.shell_verify": ("Explicit",),
    "rl.rl_evaluate": ("Explicit",),
    "rl.rl_step+rl.rl_loss+rl.transcript_log_probs":
        ("Explicit",),
    "rl.rl_step+rl.transcript_log_probs+rl.rl_loss":
        ("Explicit",),
    "rl.transcript_log_probs+rl.rl_evaluate": ("Explicit",),
    "rl.warm_start_step+rl.random_transcripts+"
    "rl.pretraining_mask+rl.rl_optimizer": ("Explicit",),
    "rl.warm_start_chunk": ("Explicit",),
    "rl.multi_run": ("Explicit",),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "rl.warm_start_chunk",
    "rl.multi_run",
    "rl.rollout_sample+rl.rollout_sample_split",
    "rl.rollout_sample_split+rl.rollout_sample",
    "rl.shell_scripted+rl.shell_step+rl.shell_execute+rl.shell_observation+"
    "rl.transcripts_of+rl.shell_assemble+rl.spans_of+"
    "rl.shell_verify",
    "rl.shell_step+rl.shell_scripted+rl.shell_execute+rl.shell_observation+"
    "rl.transcripts_of+rl.shell_assemble+rl.spans_of+"
    "rl.shell_verify",
    "rl.rl_evaluate",
    "rl.rl_step+rl.rl_loss+rl.transcript_log_probs",
    "rl.rl_step+rl.transcript_log_probs+rl.rl_loss",
    "rl.transcript_log_probs+rl.rl_evaluate",
    "rl.warm_start_step+rl.random_transcripts+"
    "rl.pretraining_mask+rl.rl_optimizer",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_side_readers_take_sharded_arrays(mode, contract_mesh):
  goal = shell.Store(_TASKS.goal.present[0], _TASKS.goal.value[0])
  expected = ([shell.decode(row) for row in _PROBE.tokens],
              shell.render_goal(goal, _SCRIPT_LAYOUT))
  with jax.set_mesh(contract_mesh(mode)):
    tokens = jax.device_put(_PROBE.tokens, jax.P("data"))
    texts = [shell.decode(row) for row in tokens]
    prompt = shell.render_goal(jax.device_put(goal, jax.P("model")),
                               _SCRIPT_LAYOUT)
  assert texts == expected[0]
  np.testing.assert_array_equal(prompt, expected[1])
