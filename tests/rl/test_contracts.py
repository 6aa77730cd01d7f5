"""jaxpapers.rl: a table of misuse, each a named error, and documented values."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import models
from jaxpapers import rl
from jaxpapers.rl import _rollout as rollout
from jaxpapers.rl import _shell as shell
from jaxpapers.rl import _training as training

_LOGITS = jnp.zeros((2, 3, 5))
_TARGETS = jnp.zeros((2, 3), jnp.int32)
_MASKS = rl.EchoMasks(*[jnp.ones((2, 3), jnp.bool_)] * 3)
_SPANS = rl.Spans(*[jnp.zeros((2, 1), jnp.int32)] * 8)
_LAYOUT = shell.ShellLayout(num_turns=2)
_STORE = shell.Store(jnp.zeros((2, shell.NUM_KEYS), jnp.bool_),
                     jnp.zeros((2, shell.NUM_KEYS), jnp.int32))
_COMMANDS = jnp.zeros((2, _LAYOUT.command_len), jnp.int32)
_TASKS = shell.Tasks(_STORE, _STORE,
                     jnp.full((2, _LAYOUT.prompt_len), shell.PAD, jnp.int32))
_NO_TASKS = jax.tree.map(lambda x: x[:0], _TASKS)
# The checks run before the model is used: its config is all they read.
_MODEL = types.SimpleNamespace(config=models.TransformerConfig(
    vocab_size=shell.VOCAB_SIZE, max_len=_LAYOUT.length, d_model=8,
    num_heads=2, num_layers=1, d_ff=8))
_CACHE = rollout.Cache(*[jax.ShapeDtypeStruct((1, 2, 8, 2, 4),
                                              jnp.float32)] * 2)


def _rl_step(pool):
  return training.rl_step(None, None, None, jax.random.key(0), pool,
                          jnp.float32(0.05), jnp.bool_(False), None, _LAYOUT,
                          training.RLConfig())


def _multi_run(**overrides):
  kwargs = dict(tasks=(_TASKS, _TASKS, None), lam=[0.05], world_model_only=[False],
                seeds=[0], eval_temperature=1.0, eval_samples=1)
  kwargs.update(overrides)
  return training.multi_run(None, kwargs.pop("tasks"), None, _LAYOUT,
                            training.RLConfig(), **kwargs)

MISUSE = [
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS, temperature=0.0),
     ValueError, "temperature must be > 0 and finite"),
    # inf flattened every distribution to uniform.
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS, temperature=float("inf")),
     ValueError, "temperature must be > 0 and finite"),
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS,
                                temperature=jnp.float32(np.nan)),
     ValueError, "temperature must be > 0 and finite"),
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS.astype(jnp.float32)),
     TypeError, "targets_BxL must hold integer token ids"),
    (lambda: rl.token_log_probs(_LOGITS, _TARGETS.at[0, 0].set(5)),
     ValueError, r"targets_BxL holds ids in \[0, 5\]; .* \[0, 5\)"),
    (lambda: rl.token_log_probs(_LOGITS[0], _TARGETS[0]), ValueError,
     r"need \[B, L, V\] and \[B, L\]"),
    (lambda: rl.world_model_only(_MASKS, jnp.array([1, 0])), TypeError,
     "rows_B must be boolean"),
    (lambda: rl.echo_masks(_SPANS, length=0), ValueError,
     "length must be an int >= 1"),
    (lambda: rl.echo_masks(_SPANS, length=2.5), TypeError,
     "length must be an int"),
    (lambda: rl.env_loss(jnp.zeros((2,)), rl.EchoMasks(
        *[jnp.ones((2,), jnp.bool_)] * 3)), ValueError,
     r"log_probs_BxL must be \[B, L\]"),
    (lambda: rl.env_loss(jnp.zeros((2, 4)), _MASKS), ValueError,
     "env_target has shape"),
    (lambda: rl.echo_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros(2),
                          _MASKS, lam=-1.0), ValueError,
     "lam must be >= 0 and finite"),
    # A NaN lam was accepted: the loss was NaN with no error.
    (lambda: rl.echo_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros(2),
                          _MASKS, lam=float("nan")), ValueError,
     "lam must be >= 0 and finite"),
    (lambda: rl.echo_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros(2),
                          _MASKS, lam=jnp.float32(np.inf)), ValueError,
     "lam must be >= 0 and finite"),
    (lambda: rl.echo_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros(2),
                          _MASKS, lam="0.05"), TypeError,
     "lam must be a real number"),
    (lambda: rl.lambda_schedule("step_decay", decay_steps=2, decay_rate=0.0),
     ValueError, r"decay_rate must lie in \(0, 1\]"),
    (lambda: rl.lambda_schedule("step_decay", decay_steps=2,
                                decay_rate=np.nan),
     ValueError, "decay_rate must be >= 0 and finite"),
    (lambda: rl.lambda_schedule("constant", np.nan), ValueError,
     "value must be >= 0 and finite"),
    (lambda: rl.lambda_schedule("linear_decay", float("inf"), decay_steps=2),
     ValueError, "value must be >= 0 and finite"),
    (lambda: rl.lambda_schedule("linear_decay", decay_steps=2.5), TypeError,
     "decay_steps must be an int"),
    (lambda: rl.ppo_clip_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)),
                              jnp.zeros(2), _MASKS.action, clip_low=np.nan),
     ValueError, r"clip_low must be > 0 \(inf allowed, NaN not\)"),
    (lambda: shell.ShellLayout(num_turns=2.5), TypeError,
     "num_turns must be an int"),
    (lambda: shell.ShellLayout(command_len=2), ValueError,
     "command_len must be an int >= 3"),
    (lambda: shell.ShellLayout(format_warnings=1), TypeError,
     "format_warnings must be a bool"),
    # num_tasks=0 ended in numpy's stack of an empty list.
    (lambda: shell.make_tasks(0, 0, _LAYOUT), ValueError,
     "num_tasks must be an int >= 1"),
    (lambda: shell.make_tasks(0, 2.5, _LAYOUT), TypeError,
     "num_tasks must be an int"),
    (lambda: shell.make_tasks(-1, 2, _LAYOUT), ValueError, "seed must be an int >= 0"),
    (lambda: shell.make_tasks(0, 2, _LAYOUT, 1.0, 2), TypeError,
     "min_commands must be an int"),
    # A command longer than its slot ended in numpy's negative dimensions.
    (lambda: shell.encode_command("x" * 13, shell.ShellLayout()), ValueError,
     "more than the slot's command_len=12"),
    # Float tokens were truncated to ids.
    (lambda: shell.execute(shell.Store(_STORE.present[0], _STORE.value[0]),
                           jnp.zeros(12)), TypeError,
     "command_C must hold integer tokens"),
    (lambda: shell.execute(_STORE, _COMMANDS[0]), ValueError,
     r"store.present must have shape \[4\]"),
    (lambda: shell.step(_STORE, _COMMANDS[:, :5], _LAYOUT), ValueError,
     r"command_BxC must be \[B, 12\]"),
    (lambda: shell.step(_STORE, _COMMANDS[:1], _LAYOUT), ValueError,
     r"store.present must have shape \[1, 4\]"),
    (lambda: shell.scripted(_TASKS, jnp.zeros((2, 2, 12)), _LAYOUT),
     TypeError, "commands_BxTxC must hold integer tokens"),
    (lambda: shell.verify(_STORE, jax.tree.map(lambda x: x[:, :3], _STORE)),
     ValueError, r"goal.present must have shape \[2, 4\]"),
    # A value the shell cannot hold rendered as a goal no command reaches.
    (lambda: shell.render_goal(shell.Store(jnp.ones(4, jnp.bool_),
                                           jnp.array([1, 2, 1000, 3])),
                               _LAYOUT), ValueError,
     r"goal values must lie in \[0, 1000\)"),
    (lambda: rollout.init_cache(_MODEL, 0, 8), ValueError,
     "batch must be an int >= 1"),
    (lambda: rollout.decode(_MODEL, _CACHE, jnp.zeros((2, 1)), 0), TypeError,
     "tokens_BxN must hold integer tokens"),
    (lambda: rollout.decode(_MODEL, _CACHE, jnp.zeros((3, 1), jnp.int32), 0),
     ValueError, r"tokens_BxN must be \[B=2, N\]"),
    (lambda: rollout.decode(_MODEL, _CACHE, jnp.full((2, 1), 999), 0),
     ValueError, "tokens_BxN holds ids in"),
    # A start past the cache was clamped by dynamic_slice: wrong positions.
    (lambda: rollout.decode(_MODEL, _CACHE, jnp.zeros((2, 2), jnp.int32), 7),
     ValueError, r"start must lie in \[0, 6\]"),
    (lambda: rollout.sample(_MODEL, _TASKS, jax.random.key(0), _LAYOUT,
                            temperature=float("inf")), ValueError,
     "temperature must be > 0 and finite"),
    (lambda: training.RLConfig(temperature=np.nan), ValueError,
     "temperature must be > 0 and finite"),
    (lambda: training.RLConfig(clip_high=np.nan), ValueError,
     r"clip_high must be > 0 \(inf allowed"),
    (lambda: training.RLConfig(tasks_per_step=2.0), TypeError,
     "tasks_per_step must be an int"),
    (lambda: training.RLConfig(group_size=1), ValueError,
     "group_size must be >= 2"),
    (lambda: training.RLConfig(std_normalize=1), TypeError,
     "std_normalize must be a bool"),
    (lambda: training.optimizer(learning_rate=-3e-4), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: training.optimizer(warmup_steps=-1), ValueError,
     "warmup_steps must be an int >= 0"),
    (lambda: training.optimizer(clip_norm=float("inf")), ValueError,
     "clip_norm must be > 0 and finite"),
    (lambda: training.optimizer(weight_decay=np.nan), ValueError,
     "weight_decay must be >= 0 and finite"),
    (lambda: _rl_step(_NO_TASKS), ValueError,
     "pool must hold at least one task"),
    (lambda: training.random_transcripts(jax.random.key(0), _TASKS, 0,
                                         _LAYOUT), ValueError,
     "batch must be an int >= 1"),
    (lambda: training.evaluate(None, None, jax.random.key(0), _TASKS, None,
                               _LAYOUT, temperature=1.0, samples=0),
     ValueError, "samples must be an int >= 1"),
    (lambda: training.warm_start_chunk(None, _TASKS, None, _LAYOUT, 0,
                                       jax.random.key(0)),
     ValueError, "batch must be an int >= 1"),
    (lambda: training.warm_start_chunk(None, _NO_TASKS, None, _LAYOUT, 2,
                                       jax.random.key(0)),
     ValueError, "pool must hold at least one task"),
    (lambda: _multi_run(world_model_only=[False, True]), ValueError,
     "one entry per run"),
    (lambda: _multi_run(lam=[-0.05]), ValueError, "lam must be >= 0"),
    (lambda: _multi_run(lambda_scale=1.0), TypeError,
     "lambda_scale must be callable"),
    (lambda: _multi_run(eval_samples=0), ValueError,
     "eval_samples must be an int >= 1"),
    (lambda: _multi_run(tasks=(_NO_TASKS, _TASKS, None)), ValueError,
     "train must hold at least one task"),
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


def test_no_warm_up_trains_from_the_first_step(standard_dtype_promotion):
  del standard_dtype_promotion  # optax's Adam mixes int32 counts into floats
  # optax's warm-up over 0 steps stays at learning rate 0 for ever.
  tx = training.optimizer(learning_rate=0.1, warmup_steps=0, clip_norm=1e9,
                          weight_decay=0.0)
  params = jnp.ones(2)
  updates, _ = tx.update(jnp.ones(2), tx.init(params), params)
  np.testing.assert_allclose(updates, [-0.1, -0.1], rtol=1e-4)

