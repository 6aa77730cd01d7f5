"""ECHO's loss: a hand-computed example, where its gradient goes, masks, schedules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.rl import _echo as echo
from jaxpapers.rl import _shell as shell

LAYOUT = shell.ShellLayout(num_turns=2, format_warnings=True)


def test_loss_matches_a_hand_computed_example():
  # Two trajectories of 4 tokens. Row 0: actions at 0-1, body at 2-3 (env
  # target 3 only, a warning at 2); row 1: actions at 0, no observation.
  log_probs = jnp.log(jnp.array([[0.5, 0.25, 0.1, 0.2],
                                 [0.8, 0.5, 0.5, 0.5]]))
  masks = echo.EchoMasks(
      action=jnp.array([[1, 1, 0, 0], [1, 0, 0, 0]], jnp.bool_),
      env_target=jnp.array([[0, 0, 0, 1], [0, 0, 0, 0]], jnp.bool_),
      body=jnp.array([[0, 0, 1, 1], [0, 0, 0, 0]], jnp.bool_))
  advantages = jnp.array([1.0, -0.5])
  loss, aux = echo.echo_loss(log_probs, log_probs, advantages, masks, lam=0.1)
  # At ratio 1 the policy term is -mean_i A_i = -(1 - 0.5) / 2.
  policy = -(1.0 - 0.5) / 2
  # Row 0: -log 0.2 / (2 + 1e-3); row 1: 0 / (0 + 1e-3) = 0.
  env = (-np.log(0.2) / 2.001 + 0.0) / 2
  np.testing.assert_allclose(aux["policy"], policy, rtol=1e-6)
  np.testing.assert_allclose(aux["env"], env, rtol=1e-6)
  np.testing.assert_allclose(loss, policy + 0.1 * env, rtol=1e-6)
  # world_model_only on row 0: its policy term drops out.
  only = echo.world_model_only(masks, jnp.array([True, False]))
  _, aux = echo.echo_loss(log_probs, log_probs, advantages, only, lam=0.1)
  np.testing.assert_allclose(aux["policy"], 0.5 / 2, rtol=1e-6)


def _scripted(commands):
  tasks, _ = shell.make_tasks(0, len(commands), LAYOUT, 1, 2)
  slots = np.stack([np.stack([shell.encode_command(c, LAYOUT) for c in row])
                    for row in commands])
  return shell.scripted(tasks, jnp.asarray(slots), LAYOUT)


@pytest.fixture(scope="module")
def transcripts():
  return _scripted([["ls", "cat q"], ["x" * LAYOUT.command_len, "set a 1"],
                    ["", "sum a b > c"]])


@pytest.mark.parametrize("mode", echo.MASK_MODES)
def test_scaffolding_is_never_a_target(transcripts, mode):
  masks = echo.echo_masks(transcripts.spans, length=LAYOUT.length, mode=mode)
  tokens = np.asarray(transcripts.tokens)
  scaffolding = np.isin(tokens, shell.SCAFFOLDING)
  for mask in masks[1:]:
    assert not np.any(np.asarray(mask) & scaffolding)
  # Actions are what the policy wrote: bytes and the EOT that ends them.
  action = np.asarray(masks.action)
  assert not np.any(action & np.isin(tokens, (shell.PAD, shell.TASK, shell.CMD,
                                              shell.OBS)))
  assert not np.any(action & np.asarray(masks.body))
  # N_obs counts the whole body, warnings included.
  assert np.asarray(masks.body).sum(1)[1] == (
      len(shell.WARNING) + 1 + len("2:bad syntax") + len("0:"))


def test_mask_modes_select_their_spans(transcripts):
  get = lambda mode: np.asarray(echo.echo_masks(
      transcripts.spans, length=LAYOUT.length, mode=mode).env_target)
  tokens = np.asarray(transcripts.tokens)
  warning, env, full = get("warning_only"), get("env_only"), get(
      "full_observation")
  assert shell.decode(tokens[1][warning[1]]) == shell.WARNING
  assert not warning[0].any() and not warning[2].any()
  assert shell.decode(tokens[1][env[1]]) == "2:bad syntax0:"
  np.testing.assert_array_equal(get("warning_plus_env"), warning | env)
  # full_observation also has the separator between warning and text.
  assert shell.decode(tokens[1][full[1] & ~(warning[1] | env[1])]) == "\n"


def test_env_gradient_reaches_only_observation_positions(transcripts):
  masks = echo.shift_for_next_token(echo.echo_masks(
      transcripts.spans, length=LAYOUT.length))
  logits = jax.random.normal(jax.random.key(0),
                             (3, LAYOUT.length - 1, shell.VOCAB_SIZE))
  targets = transcripts.tokens[:, 1:]

  def env_term(logits):
    return echo.env_loss(echo.token_log_probs(logits, targets,
                                              temperature=0.8), masks)

  touched = np.asarray(jnp.any(jax.grad(env_term)(logits) != 0, axis=-1))
  np.testing.assert_array_equal(touched, np.asarray(masks.env_target))
  assert touched.any()


def test_empty_observations_give_zero_not_nan():
  masks = echo.EchoMasks(*(jnp.zeros((2, 3), jnp.bool_),) * 3)
  value = echo.env_loss(jnp.full((2, 3), -2.0), masks)
  assert float(value) == 0.0
  loss, _ = jax.jit(lambda lp: echo.echo_loss(
      lp, lp, jnp.zeros(2), masks, lam=0.05))(jnp.full((2, 3), -2.0))
  assert np.isfinite(float(loss))


def test_bad_inputs_are_named():
  masks = echo.EchoMasks(*(jnp.zeros((2, 3), jnp.bool_),) * 3)
  with pytest.raises(ValueError, match="env_target"):
    echo.echo_loss(jnp.zeros((2, 4)), jnp.zeros((2, 4)), jnp.zeros(2),
                   masks._replace(action=jnp.zeros((2, 4), jnp.bool_)),
                   lam=0.1)
  with pytest.raises(ValueError, match="lam"):
    echo.echo_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros(2), masks,
                   lam=-1.0)
  with pytest.raises(ValueError, match="mode"):
    echo.echo_masks(None, length=3, mode="everything")
  with pytest.raises(ValueError, match="targets_BxL"):
    echo.token_log_probs(jnp.zeros((2, 3, 5)), jnp.zeros((2, 4), jnp.int32))
  with pytest.raises(ValueError, match="rows_B"):
    echo.world_model_only(masks, jnp.zeros(3, jnp.bool_))
  with pytest.raises(ValueError, match="ends_BxT"):
    echo.span_mask(jnp.zeros((2, 2), jnp.int32), jnp.zeros((2, 3), jnp.int32),
                   5)


def test_lambda_schedules():
  constant = echo.lambda_schedule("constant", 0.05)
  linear = echo.lambda_schedule("linear_decay", 0.05, decay_steps=10)
  step = echo.lambda_schedule("step_decay", 0.04, decay_steps=5,
                              decay_rate=0.5)
  steps = jnp.array([0, 5, 10, 20])
  np.testing.assert_allclose(jax.vmap(constant)(steps), [0.05] * 4)
  np.testing.assert_allclose(jax.vmap(linear)(steps), [0.05, 0.025, 0, 0],
                             atol=1e-8)
  np.testing.assert_allclose(jax.vmap(step)(steps), [0.04, 0.02, 0.01, 0.0025])
  for kwargs, field in (({"kind": "cosine"}, "kind"),
                        ({"value": -1.0}, "value"),
                        ({"kind": "linear_decay"}, "decay_steps"),
                        ({"kind": "step_decay", "decay_steps": 2,
                          "decay_rate": 0.0}, "decay_rate")):
    with pytest.raises(ValueError, match=field):
      echo.lambda_schedule(**kwargs)
