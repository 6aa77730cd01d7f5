"""The shell against scripted transcripts: every command, every message."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.rl import _shell as shell

LAYOUT = shell.ShellLayout(num_turns=2)
# Store: a = 3, c = 7 (b, d absent).
INITIAL = ({"a": 3, "c": 7})
CASES = [  # command, environment text, store afterwards
    ("ls", "0:a c", {"a": 3, "c": 7}),
    ("cat a", "0:3", {"a": 3, "c": 7}),
    ("cat b", "1:cat: b: no such key", {"a": 3, "c": 7}),
    ("set b 42", "0:", {"a": 3, "b": 42, "c": 7}),
    ("set a 5", "0:", {"a": 5, "c": 7}),
    ("set a 123", "1:set: bad value", {"a": 3, "c": 7}),
    ("set a x", "1:set: bad value", {"a": 3, "c": 7}),
    ("mv a d", "0:", {"c": 7, "d": 3}),
    ("mv a a", "0:", {"a": 3, "c": 7}),
    ("mv b a", "1:mv: b: no such key", {"a": 3, "c": 7}),
    ("rm c", "0:", {"a": 3}),
    ("rm d", "1:rm: d: no such key", {"a": 3, "c": 7}),
    ("sum a c > b", "0:", {"a": 3, "b": 10, "c": 7}),
    ("sum a a > a", "0:", {"a": 6, "c": 7}),
    ("sum b c > d", "1:sum: b: no such key", {"a": 3, "c": 7}),
    ("sum a d > b", "1:sum: d: no such key", {"a": 3, "c": 7}),
    ("", "2:no command", {"a": 3, "c": 7}),
    ("echo hi", "2:bad syntax", {"a": 3, "c": 7}),
    ("cat e", "2:bad syntax", {"a": 3, "c": 7}),
    ("ls a", "2:bad syntax", {"a": 3, "c": 7}),
    ("sum a c b", "2:bad syntax", {"a": 3, "c": 7}),
    ("rm", "2:bad syntax", {"a": 3, "c": 7}),
    ("x" * LAYOUT.command_len, "2:bad syntax", {"a": 3, "c": 7}),  # no EOT
]
UNTERMINATED = len(CASES) - 1


def _store(contents, batch):
  present = np.zeros((batch, shell.NUM_KEYS), bool)
  value = np.zeros((batch, shell.NUM_KEYS), np.int32)
  for key, v in contents.items():
    present[:, shell.KEYS.index(key)] = True
    value[:, shell.KEYS.index(key)] = v
  return shell.Store(jnp.asarray(present), jnp.asarray(value))


def _as_dict(store, row):
  return {k: int(store.value[row, i]) for i, k in enumerate(shell.KEYS)
          if store.present[row, i]}


def _tasks(initial, goal, batch):
  goal_store = _store(goal, 1)
  prompt = shell.render_goal(jax.tree.map(lambda x: x[0], goal_store), LAYOUT)
  return shell.Tasks(_store(initial, batch), _store(goal, batch),
                     jnp.asarray(np.tile(prompt, (batch, 1))))


@pytest.fixture(scope="module")
def transcripts():
  """Each case as turn 1 of a transcript, then ``ls``."""
  commands = np.stack([np.stack([shell.encode_command(c, LAYOUT),
                                 shell.encode_command("ls", LAYOUT)])
                       for c, _, _ in CASES])
  tasks = _tasks({"a": 3, "c": 7}, {"a": 3}, len(CASES))
  return shell.scripted(tasks, jnp.asarray(commands), LAYOUT)


def test_every_command_and_message(transcripts):
  o0 = LAYOUT.obs_start(0)
  for row, (command, text, after) in enumerate(CASES):
    tokens = np.asarray(transcripts.tokens[row])
    start, end = (int(x[row, 0]) for x in (transcripts.spans.env_start,
                                           transcripts.spans.env_end))
    assert shell.decode(tokens[start:end]) == text, command
    assert tokens[end] == shell.EOT, command
    if row != UNTERMINATED:
      assert start == o0 and transcripts.spans.warning_end[row, 0] == o0
    # Turn 2 lists the store that turn 1 left.
    listing = shell.decode(tokens[transcripts.spans.env_start[row, 1]:
                                  transcripts.spans.env_end[row, 1]])
    assert listing == "0:" + " ".join(sorted(after)), command
    assert _as_dict(transcripts.final, row) == after, command
    # The command slot: its bytes, EOT, PAD.
    a0, a1 = (int(x[row, 0]) for x in (transcripts.spans.action_start,
                                       transcripts.spans.action_end))
    if row == UNTERMINATED:  # no EOT: the whole slot is the action
      assert a1 - a0 == LAYOUT.command_len
      continue
    assert shell.decode(tokens[a0:a1 - 1]) == command
    assert tokens[a1 - 1] == shell.EOT
    assert np.all(tokens[a1:LAYOUT.command_start(0) + LAYOUT.command_len]
                  == shell.PAD)


def test_layout_scaffolding(transcripts):
  tokens = np.asarray(transcripts.tokens)
  assert tokens.shape == (len(CASES), LAYOUT.length)
  assert np.all(tokens[:, 0] == shell.TASK)
  assert np.all(tokens[:, LAYOUT.prompt_len - 1] == shell.EOT)
  for turn in range(LAYOUT.num_turns):
    assert np.all(tokens[:, LAYOUT.command_start(turn) - 1] == shell.CMD)
    assert np.all(tokens[:, LAYOUT.obs_start(turn) - 1] == shell.OBS)
  assert shell.decode(tokens[0, :LAYOUT.prompt_len]) == "a=3"


def test_verifier_scores_keys():
  reward, solved = transcripts_reward = shell.verify(
      _store({"a": 3, "c": 7}, 3)._replace(
          present=jnp.asarray([[1, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]],
                              jnp.bool_)),
      _store({"a": 3}, 3))
  del transcripts_reward
  np.testing.assert_allclose(reward, [0.75, 1.0, 0.5])
  assert solved.tolist() == [False, True, False]


def test_unterminated_command_gets_the_warning_prefix(transcripts):
  spans = jax.tree.map(lambda x: int(x[UNTERMINATED, 0]), transcripts.spans)
  tokens = np.asarray(transcripts.tokens[UNTERMINATED])
  assert (shell.decode(tokens[spans.body_start:spans.body_end])
          == "WARNINGS: cut\n2:bad syntax")
  assert (spans.warning_start, spans.warning_end) == (
      LAYOUT.obs_start(0), LAYOUT.obs_start(0) + len(shell.WARNING))
  assert spans.env_start == spans.warning_end + 1  # after the separator
  # Without format warnings the body is the environment text alone.
  text, length = jnp.asarray(shell.encode("2:bad syntax", 21)), jnp.int32(12)
  quiet = shell.ShellLayout(num_turns=1, format_warnings=False)
  slot, warning_end, env_start, env_end = shell.observation(
      text, length, jnp.bool_(False), quiet)
  assert (int(warning_end), int(env_start), int(env_end)) == (0, 0, 12)
  assert shell.decode(slot) == "2:bad syntax" and int(slot[12]) == shell.EOT


def test_tasks_are_unique_and_their_solutions_solve_them():
  # As many tasks as CASES, on LAYOUT: the fixture's compilation is reused.
  num_tasks = len(CASES)
  tasks, solutions = shell.make_tasks(3, num_tasks, LAYOUT, 1, 2)
  assert all(1 <= len(s) <= 2 for s in solutions)
  commands = np.stack([np.stack([shell.encode_command(c, LAYOUT) for c in s]
                                + [shell.encode_command("ls", LAYOUT)]
                                * (LAYOUT.num_turns - len(s)))
                       for s in solutions])
  out = shell.scripted(tasks, jnp.asarray(commands), LAYOUT)
  assert bool(jnp.all(out.solved)) and np.allclose(out.reward, 1.0)
  keys = {(tuple(np.asarray(tasks.initial.present[i])),
           tuple(np.asarray(tasks.initial.value[i])),
           tuple(np.asarray(tasks.goal.present[i])),
           tuple(np.asarray(tasks.goal.value[i]))) for i in range(num_tasks)}
  assert len(keys) == num_tasks
  unchanged = jnp.all((tasks.initial.present == tasks.goal.present)
                      & (tasks.initial.value == tasks.goal.value), axis=-1)
  assert not bool(jnp.any(unchanged))
  # The experiment's tasks take 2-4 commands.
  _, solutions = shell.make_tasks(4, 50, shell.ShellLayout())
  assert {len(s) for s in solutions} == {2, 3, 4}


def test_bad_inputs_are_named():
  with pytest.raises(ValueError, match="commands_BxTxC"):
    shell.scripted(_tasks({"a": 1}, {"a": 1}, 1),
                   jnp.zeros((1, 3, LAYOUT.command_len), jnp.int32), LAYOUT)
  with pytest.raises(ValueError, match="num_turns"):
    shell.ShellLayout(num_turns=0)
  with pytest.raises(ValueError, match="min_commands"):
    shell.make_tasks(0, 1, LAYOUT, 2, 5)
