r"""A deterministic key-value "shell" on byte tokens: commands, observations, tasks.

The CPU stand-in for ECHO's terminal (Shrivastava et al., 2026): a store of
``NUM_KEYS`` single-letter keys (``a`` .. ``d``) holding integers, and six
commands with fixed outputs and error messages::

  ls             -> the present keys, e.g. "a c"
  cat k          -> the value of k            | "cat: k: no such key"
  set k v        -> k := v (v: 1-2 digits)    | "set: bad value"
  mv a b         -> b := a, a removed         | "mv: a: no such key"
  rm k           -> k removed                 | "rm: k: no such key"
  sum a b > c    -> c := (a + b) mod 1000     | "sum: a: no such key"

Anything else is ``"bad syntax"``, an empty command ``"no command"``. The
environment text of one command is ``"<exit code>:<output>"`` (codes: 0 ok,
1 runtime error, 2 syntax), e.g. ``"1:cat: b: no such key"``.

**Transcripts** have a fixed layout (:class:`ShellLayout`), so that a rollout is
a ``lax.scan`` with static shapes::

  [TASK] goal bytes, PAD.. [EOT]                       prompt
  [CMD] command bytes [EOT] PAD..  [OBS] body [EOT] PAD..  per turn

The policy writes the command bytes and the ``EOT`` that ends them (the
action tokens); the environment writes the observation *body*: an optional
warning prefix ``"WARNINGS: cut"`` + ``"\n"`` (a command that filled its
slot without ``EOT``; only with ``format_warnings``) followed by the
environment text. ``TASK``/``CMD``/``OBS``/``EOT``/``PAD`` are the chat
scaffolding: never a loss target (:mod:`jaxpapers.rl._echo`).

**Tasks** (:func:`make_tasks`): a random initial store and 2-4 random valid
commands applied to it give the goal store; the prompt shows the goal
(``"a=3 c=12"``), not the initial store, so the agent must look (``ls``,
``cat``) or act blindly. The verifier (:func:`verify`) scores the final
store: the fraction of keys whose presence and value match the goal
(``reward``), ``solved`` when all do.

**Reconstruction**: the paper runs real terminals (Docker); this environment,
its messages, layout and task generator are ours (``docs/echo.md``).

References:
  Shrivastava, Kauffmann, Awadallah, Papailiopoulos, *ECHO: Environment
  Cross-entropy Hybrid Objective* (2026), https://arxiv.org/abs/2605.24517.
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.rl import _checks as checks
from jaxpapers.data import _text as text

KEYS = "abcd"
NUM_KEYS = len(KEYS)
VALUE_MODULUS = 1000  # values are 0..999; sum wraps
# Byte tokens 0..255; end of turn is the byte corpora's end-of-document token.
EOT = text.EOS
PAD, TASK, CMD, OBS = EOT + 1, EOT + 2, EOT + 3, EOT + 4
VOCAB_SIZE = OBS + 1
SCAFFOLDING = (EOT, PAD, TASK, CMD, OBS)

WARNING = "WARNINGS: cut"
WARNING_SEPARATOR = "\n"
_TEXT_WIDTH = 21  # the longest environment text: "1:sum: a: no such key"
_COMMAND_NAMES = ("cat", "rm", "mv", "sum")  # commands that can miss a key


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class ShellLayout:
  """Static sizes of a transcript; positions are derived from them.

  Attributes:
    num_turns: commands per episode (``T``).
    command_len: slots per command, its ``EOT`` included (``C``); ``11 + 1``
      fits the longest command ``"sum a b > c"``.
    format_warnings: prefix ``"WARNINGS: cut\\n"`` to the body of a command
      that did not end within its slot.
  """

  num_turns: int = 4
  command_len: int = 12
  format_warnings: bool = True

  def __post_init__(self):
    _checks.check_int("num_turns", self.num_turns, 1)
    _checks.check_int("command_len", self.command_len, 3)
    if not isinstance(self.format_warnings, bool):
      raise TypeError(f"format_warnings must be a bool; got"
                      f" {self.format_warnings!r}.")

  @property
  def goal_len(self) -> int:
    return 6 * NUM_KEYS - 1  # "a=999 b=999 c=999 d=999"

  @property
  def prompt_len(self) -> int:
    return self.goal_len + 2  # TASK ... EOT

  @property
  def body_len(self) -> int:
    warning = len(WARNING) + len(WARNING_SEPARATOR) if self.format_warnings else 0
    return warning + _TEXT_WIDTH

  @property
  def obs_len(self) -> int:
    return self.body_len + 1  # + EOT

  @property
  def turn_len(self) -> int:
    return 1 + self.command_len + 1 + self.obs_len

  @property
  def length(self) -> int:
    return self.prompt_len + self.num_turns * self.turn_len

  def command_start(self, turn: int) -> int:
    """Position of the first command slot of ``turn`` (after its ``CMD``)."""
    return self.prompt_len + turn * self.turn_len + 1

  def obs_start(self, turn: int) -> int:
    """Position of the first observation slot of ``turn`` (after its ``OBS``)."""
    return self.command_start(turn) + self.command_len + 1


class Store(NamedTuple):
  """The key-value store: ``present`` bool and ``value`` int32, ``[..., NUM_KEYS]``."""

  present: jax.Array
  value: jax.Array


class Tasks(NamedTuple):
  """A batch of tasks: initial and goal stores ``[B, NUM_KEYS]``, prompts ``[B, P]``."""

  initial: Store
  goal: Store
  prompt: jax.Array


class Spans(NamedTuple):
  """Token spans ``[start, end)`` per turn, ``[B, T]`` int32 each.

  ``action``: the command bytes and their ``EOT`` (what the policy wrote);
  ``warning`` / ``env``: the warning prefix and the environment text;
  ``body``: the whole observation body (warning, separator, text).
  """

  action_start: jax.Array
  action_end: jax.Array
  warning_start: jax.Array
  warning_end: jax.Array
  env_start: jax.Array
  env_end: jax.Array
  body_start: jax.Array
  body_end: jax.Array


class Transcripts(NamedTuple):
  """Episodes: ``tokens [B, L]``, their :class:`Spans`, final stores, verifier output."""

  tokens: jax.Array
  spans: Spans
  final: Store
  reward: jax.Array
  solved: jax.Array


# ------------------------------------------------------------ byte helpers --


def encode(s: str, width: int | None = None) -> np.ndarray:
  """ASCII bytes of ``s`` as int32, right-padded with ``PAD`` to ``width``."""
  data = np.frombuffer(s.encode("ascii"), np.uint8).astype(np.int32)
  width = data.size if width is None else width
  if data.size > width:
    raise ValueError(f"{s!r} has {data.size} bytes, more than width={width}.")
  return np.concatenate([data, np.full(width - data.size, PAD, np.int32)])


def decode(tokens) -> str:
  """The bytes of ``tokens`` as text; scaffolding tokens are dropped."""
  return bytes(int(t) for t in np.asarray(tokens) if t < 256).decode(
      "ascii", errors="replace")


def encode_command(command: str, layout: ShellLayout) -> np.ndarray:
  """A command's slot: its bytes, ``EOT``, then ``PAD`` (``[C]``).

  A command of exactly ``command_len`` bytes fills the slot with no ``EOT``:
  an unterminated command, as a policy that never stops writes it. A
  longer one is a ``ValueError``.
  """
  if len(command) > layout.command_len:
    raise ValueError(f"command {command!r} has {len(command)} bytes, more than"
                     f" the slot's command_len={layout.command_len}.")
  if len(command) == layout.command_len:
    return encode(command)
  return np.concatenate([encode(command), [EOT],
                         np.full(layout.command_len - len(command) - 1, PAD,
                                 np.int32)]).astype(np.int32)


def _concat(pieces, width):
  """Variable-length pieces ``(array, length)`` laid end to end in ``[width]`` (PAD after)."""
  out = jnp.full((width,), PAD, jnp.int32)
  position = jnp.arange(width)
  start = jnp.int32(0)
  for array, length in pieces:
    array = jnp.asarray(array, jnp.int32)
    inside = (position >= start) & (position < start + length)
    index = jnp.clip(position - start, 0, array.shape[0] - 1)
    out = jnp.where(inside, array[index], out)
    start = start + length
  return out, start


def _literal(s):
  return jnp.asarray(encode(s)), jnp.int32(len(s))


def _decimal(value):
  """The decimal digits of ``value`` in [0, 999]: ``([3], length)``."""
  digits = jnp.stack([value // 100, (value // 10) % 10, value % 10]) + ord("0")
  length = 1 + (value >= 10).astype(jnp.int32) + (value >= 100).astype(jnp.int32)
  return jnp.roll(digits, length - 3), length


def _listing(present):
  """``"a c d"`` for the present keys: ``([2K - 1], length)``."""
  rank = jnp.cumsum(present.astype(jnp.int32)) - 1
  count = jnp.sum(present.astype(jnp.int32))
  out = jnp.full((2 * NUM_KEYS - 1,), ord(" "), jnp.int32)
  slot = jnp.where(present, 2 * rank, 2 * NUM_KEYS)  # absent keys: dropped
  out = out.at[slot].set(jnp.arange(NUM_KEYS) + ord("a"), mode="drop")
  return out, jnp.maximum(2 * count - 1, 0)


# ------------------------------------------------------------- execution --


def execute(store: Store, command_C: jax.Array
            ) -> tuple[Store, jax.Array, jax.Array, jax.Array]:
  """Runs one command (its slot of tokens, ``[C]``) on one store.

  Returns:
    ``(store, text, length, terminated)``: the new store, the environment
    text ``[21]`` (``"<code>:<output>"``, PAD after) and its length, and
    whether the command ended with ``EOT`` inside its slot.

  Raises:
    TypeError: for a non-integer ``command_C``.
    ValueError: unless ``command_C`` is ``[C]`` and the store ``[NUM_KEYS]``.
  """
  checks.check_integer_tokens("command_C", command_C)
  if np.ndim(command_C) != 1:
    raise ValueError(f"command_C must be one slot [C]; got shape"
                     f" {np.shape(command_C)}.")
  _check_store(store, "store", ())
  c = jnp.asarray(command_C, jnp.int32)
  width = c.shape[0]
  is_end = c == EOT
  terminated = jnp.any(is_end)
  n = jnp.where(terminated, jnp.argmax(is_end), width)
  padded = jnp.concatenate([jnp.where(jnp.arange(width) < n, c, PAD),
                            jnp.full((12,), PAD, jnp.int32)])

  def at(s, offset=0):
    return jnp.all(padded[offset:offset + len(s)] == jnp.asarray(encode(s)))

  def key(offset):
    k = padded[offset] - ord("a")
    return (k >= 0) & (k < NUM_KEYS), jnp.clip(k, 0, NUM_KEYS - 1)

  (k4_ok, k4), (k3_ok, k3) = key(4), key(3)
  (k5_ok, k5), (k6_ok, k6), (k10_ok, k10) = key(5), key(6), key(10)
  is_ls = (n == 2) & at("ls")
  is_cat = (n == 5) & at("cat ") & k4_ok
  is_rm = (n == 4) & at("rm ") & k3_ok
  is_mv = (n == 6) & at("mv ") & k3_ok & at(" ", 4) & k5_ok
  is_set = (n >= 6) & at("set ") & k4_ok & at(" ", 5)
  is_sum = ((n == 11) & at("sum ") & k4_ok & at(" ", 5) & k6_ok & at(" > ", 7)
            & k10_ok)
  # set's value: 1-2 decimal digits after "set k ".
  d0, d1 = padded[6] - ord("0"), padded[7] - ord("0")
  digit0, digit1 = (d0 >= 0) & (d0 <= 9), (d1 >= 0) & (d1 <= 9)
  set_value = jnp.where(n == 8, 10 * d0 + d1, d0)
  set_ok = is_set & (((n == 7) & digit0) | ((n == 8) & digit0 & digit1))

  present, value = store.present, store.value
  # The key whose absence is an error, per command (first argument first).
  missing_key = jnp.select(
      [is_cat, is_rm, is_mv, is_sum & ~present[k4], is_sum],
      [k4, k3, k3, k4, k6], 0)
  missing = jnp.select([is_cat | is_rm | is_mv | is_sum],
                       [~present[missing_key]], False)
  ok = ~missing
  new_present, new_value = present, value
  # rm / mv remove their (first) key; mv then sets the second (a no-op for mv a a).
  new_present = jnp.where((is_rm | is_mv) & ok,
                          new_present.at[k3].set(False), new_present)
  new_present = jnp.where(is_mv & ok, new_present.at[k5].set(True), new_present)
  new_value = jnp.where(is_mv & ok, new_value.at[k5].set(value[k3]), new_value)
  new_present = jnp.where(set_ok, new_present.at[k4].set(True), new_present)
  new_value = jnp.where(set_ok, new_value.at[k4].set(set_value), new_value)
  total = (value[k4] + value[k6]) % VALUE_MODULUS
  new_present = jnp.where(is_sum & ok, new_present.at[k10].set(True),
                          new_present)
  new_value = jnp.where(is_sum & ok, new_value.at[k10].set(total), new_value)

  command_name = jnp.select([is_cat, is_rm, is_mv], [0, 1, 2], 3)
  name_array = jnp.stack([jnp.asarray(encode(s, 3)) for s in _COMMAND_NAMES])
  name_length = jnp.asarray([len(s) for s in _COMMAND_NAMES], jnp.int32)
  no_such_key = [_literal("1:"),
                 (name_array[command_name], name_length[command_name]),
                 _literal(": "),
                 (ord("a") + missing_key[None], jnp.int32(1)),
                 _literal(": no such key")]
  candidates = {
      "ok": [_literal("0:")],
      "ls": [_literal("0:"), _listing(present)],
      "cat": [_literal("0:"), _decimal(value[k4])],
      "missing": no_such_key,
      "bad_value": [_literal("1:set: bad value")],
      "syntax": [_literal("2:bad syntax")],
      "empty": [_literal("2:no command")],
  }
  rendered = {name: _concat(pieces, _TEXT_WIDTH)
              for name, pieces in candidates.items()}
  case = jnp.select(
      [n == 0, missing, is_ls, is_cat, set_ok, is_set, is_rm | is_mv | is_sum],
      [6, 3, 1, 2, 0, 4, 0], 5)
  texts = jnp.stack([rendered[k][0] for k in candidates])
  lengths = jnp.stack([rendered[k][1] for k in candidates])
  return Store(new_present, new_value), texts[case], lengths[case], terminated


def observation(text_W, text_length, terminated, layout: ShellLayout):
  """One observation slot ``[obs_len]`` and its relative spans.

  Returns:
    ``(tokens, warning_end, env_start, env_end)``: the slot (body, ``EOT``,
    PAD) and, relative to its start, where the warning ends (0 without one)
    and where the environment text starts and ends.
  """
  warn = jnp.logical_and(layout.format_warnings, ~terminated)
  warning_length = jnp.where(warn, len(WARNING), 0)
  separator_length = jnp.where(warn, len(WARNING_SEPARATOR), 0)
  tokens, body_end = _concat(
      [(jnp.asarray(encode(WARNING)), warning_length),
       (jnp.asarray(encode(WARNING_SEPARATOR)), separator_length),
       (text_W, text_length), (jnp.asarray([EOT]), jnp.int32(1))],
      layout.obs_len)
  env_start = warning_length + separator_length
  return tokens, warning_length, env_start, body_end - 1


def step(store: Store, command_BxC: jax.Array, layout: ShellLayout):
  """One turn for a batch: the command slots ``[B, C]`` as written by the policy.

  Everything after a command's first ``EOT`` is replaced by ``PAD`` (the
  slot as it enters the transcript). Returns ``(store, command_BxC,
  obs_BxO, (warning_end, env_start, env_end))`` with spans relative to the
  observation slot. Raises ``TypeError`` for non-integer commands and
  ``ValueError`` unless they are ``[B, layout.command_len]`` and the store
  ``[B, NUM_KEYS]``.
  """
  checks.check_integer_tokens("command_BxC", command_BxC)
  if np.ndim(command_BxC) != 2 or np.shape(command_BxC)[1] != (
      layout.command_len):
    raise ValueError(f"command_BxC must be [B, {layout.command_len}]; got"
                     f" shape {np.shape(command_BxC)}.")
  _check_store(store, "store", np.shape(command_BxC)[:1])
  spec = tree.explicit_spec(command_BxC)
  if spec is not None:
    # Explicit axes run a cumulative sum only along an unsharded axis: each
    # slot is read whole, and enters the transcript sharded like its row.
    command_BxC = jax.sharding.reshard(command_BxC, jax.P(spec[0], None))
  is_end = (command_BxC == EOT).astype(jnp.int32)
  ended = jnp.cumsum(is_end, axis=-1) - is_end
  command_BxC = jnp.where(ended > 0, PAD, command_BxC).astype(jnp.int32)
  # Both read constant tables at per-row indices, which a batch sharded along
  # Explicit mesh axes maps per device (see tree.vmap_sharded): along the
  # commands' rows, so that the observations are sharded like the commands
  # they follow; the new store keeps the old one's sharding (a scan over
  # turns carries it).
  new_store, text_BxW, length_B, terminated_B = tree.vmap_sharded(
      lambda command_C, one: execute(one, command_C))(command_BxC, store)
  store = jax.tree.map(tree.reshard_like, new_store, store)
  obs = tree.vmap_sharded(lambda t, n, e: observation(t, n, e, layout))(
      text_BxW, length_B, terminated_B)
  return store, command_BxC, obs[0], obs[1:]


def assemble(prompt_BxP, commands, observations, layout: ShellLayout):
  """Concatenates the prompt and per-turn ``[CMD] command [OBS] obs`` blocks: ``[B, L]``."""
  # Scaffolding columns like the prompt's, and the turns' blocks on the
  # prompt's rows: Explicit mesh axes concatenate only alike-sharded blocks.
  column = lambda token: jnp.full_like(prompt_BxP[:, :1], token, jnp.int32)
  spec = tree.explicit_spec(prompt_BxP)
  rows = lambda block: (block if spec is None else
                        jax.sharding.reshard(block, jax.P(spec[0], None)))
  blocks = [prompt_BxP]
  for command_BxC, obs_BxO in zip(commands, observations):
    blocks += [column(CMD), rows(command_BxC), column(OBS), rows(obs_BxO)]
  return jnp.concatenate(blocks, axis=1)


def spans_of(commands, relative_spans, layout: ShellLayout) -> Spans:
  """Absolute :class:`Spans` from the turns' commands and relative observation spans."""
  rows = []
  for turn, (command_BxC, (warning_end, env_start, env_end)) in enumerate(
      zip(commands, relative_spans)):
    a0, o0 = layout.command_start(turn), layout.obs_start(turn)
    is_end = command_BxC == EOT
    action_length = jnp.where(jnp.any(is_end, -1), jnp.argmax(is_end, -1) + 1,
                              layout.command_len)
    zero = jnp.zeros_like(warning_end)
    rows.append((a0 + zero, a0 + action_length, o0 + zero, o0 + warning_end,
                 o0 + env_start, o0 + env_end, o0 + zero, o0 + env_end))
  return Spans(*[jnp.stack(field, axis=1).astype(jnp.int32)
                 for field in zip(*rows)])


def _check_store(store: Store, name: str, batch: tuple[int, ...]) -> None:
  """Raises ``ValueError`` unless both fields of ``store`` are ``[*batch, NUM_KEYS]``."""
  for field in ("present", "value"):
    shape = np.shape(getattr(store, field))
    if shape != (*batch, NUM_KEYS):
      raise ValueError(f"{name}.{field} must have shape"
                       f" {[*batch, NUM_KEYS]}; got {list(shape)}.")


def verify(final: Store, goal: Store) -> tuple[jax.Array, jax.Array]:
  """``(reward, solved)``: fraction of keys matching the goal, and all matching.

  Raises ``ValueError`` unless both stores are ``[..., NUM_KEYS]`` alike.
  """
  _check_store(goal, "goal", np.shape(goal.present)[:-1])
  _check_store(final, "final", np.shape(goal.present)[:-1])
  same = (final.present == goal.present) & (
      ~goal.present | (final.value == goal.value))
  reward = jnp.mean(same.astype(jnp.float32), axis=-1)
  return reward, jnp.all(same, axis=-1)


@functools.partial(jax.jit, static_argnames="layout")
def scripted(tasks: Tasks, commands_BxTxC: jax.Array,
             layout: ShellLayout) -> Transcripts:
  """The transcripts of given command slots ``[B, T, C]`` (a scripted policy; jitted).

  Raises ``TypeError`` for non-integer commands and ``ValueError`` for other
  shapes.
  """
  checks.check_integer_tokens("commands_BxTxC", commands_BxTxC)
  if commands_BxTxC.ndim != 3 or commands_BxTxC.shape[1:] != (
      layout.num_turns, layout.command_len):
    raise ValueError(
        f"commands_BxTxC must be [B, {layout.num_turns}, {layout.command_len}];"
        f" got {commands_BxTxC.shape}.")
  def turn(store, command_BxC):
    store, command, obs, spans = step(store, command_BxC, layout)
    return store, (command, obs, spans)

  store, (commands, observations, relative) = jax.lax.scan(
      turn, tasks.initial, jnp.swapaxes(commands_BxTxC, 0, 1))
  return transcripts_of(tasks, store, commands, observations, relative,
                        layout)


def transcripts_of(tasks: Tasks, final: Store, commands_TxBxC,
                   observations_TxBxO, relative, layout: ShellLayout
                   ) -> Transcripts:
  """Assembles per-turn outputs of :func:`step` (stacked on a leading ``T``)."""
  turns = range(layout.num_turns)
  commands = [commands_TxBxC[t] for t in turns]
  reward, solved = verify(final, tasks.goal)
  return Transcripts(
      assemble(tasks.prompt, commands, [observations_TxBxO[t] for t in turns],
               layout),
      spans_of(commands, [tuple(r[t] for r in relative) for t in turns],
               layout), final, reward, solved)


# ------------------------------------------------------------------ tasks --


def render_goal(goal: Store, layout: ShellLayout) -> np.ndarray:
  """Prompt tokens ``[P]``: ``TASK``, ``"a=3 c=12"`` (the goal's present keys), ``EOT``.

  Raises ``ValueError`` unless ``goal`` is one store ``[NUM_KEYS]`` whose
  present keys hold values in ``[0, VALUE_MODULUS)`` (the shell's values).
  """
  _check_store(goal, "goal", ())
  # Read on the host: indexing a device array sharded along Explicit mesh
  # axes at a key would be a gather with no inferable sharding.
  present, value = np.asarray(goal.present), np.asarray(goal.value)
  shown = value[present]
  if np.any((shown < 0) | (shown >= VALUE_MODULUS)):
    raise ValueError(f"goal values must lie in [0, {VALUE_MODULUS}); got"
                     f" {shown.tolist()}.")
  text_ = " ".join(f"{KEYS[k]}={int(value[k])}" for k in range(NUM_KEYS)
                   if present[k])
  return np.concatenate([[TASK], encode(text_, layout.goal_len), [EOT]]
                        ).astype(np.int32)


def _random_valid_command(rng, present, value):
  """One effectful command that succeeds on the store (numpy), applied in place."""
  keys = np.flatnonzero(present)
  kinds = ["set"] + (["rm", "mv", "sum"] if keys.size else [])
  kind = kinds[rng.integers(len(kinds))]
  if kind == "set":
    k, v = rng.integers(NUM_KEYS), int(rng.integers(100))
    present[k], value[k] = True, v
    return f"set {KEYS[k]} {v}"
  if kind == "rm":
    k = rng.choice(keys)
    present[k] = False
    return f"rm {KEYS[k]}"
  if kind == "mv":
    a, b = rng.choice(keys), rng.integers(NUM_KEYS)
    v = value[a]
    present[a] = False
    present[b], value[b] = True, v
    return f"mv {KEYS[a]} {KEYS[b]}"
  a, b, c = rng.choice(keys), rng.choice(keys), rng.integers(NUM_KEYS)
  present[c], value[c] = True, (value[a] + value[b]) % VALUE_MODULUS
  return f"sum {KEYS[a]} {KEYS[b]} > {KEYS[c]}"


def make_tasks(seed: int, num_tasks: int, layout: ShellLayout,
               min_commands: int = 2, max_commands: int = 4
               ) -> tuple[Tasks, list[list[str]]]:
  """``num_tasks`` distinct tasks and their reference solutions (numpy, then arrays).

  Each task: 1-3 random keys with values 0-9, then ``min_commands`` ..
  ``max_commands`` random commands that succeed (``set`` / ``rm`` / ``mv`` /
  ``sum``); the resulting store is the goal. Tasks whose goal equals their
  initial store are redrawn, and so are repeats, so every task is unique.

  Raises ``TypeError`` for non-integer counts or seed, ``ValueError`` for a
  negative seed, ``num_tasks < 1`` or command counts outside
  ``1 <= min_commands <= max_commands <= layout.num_turns``.
  """
  _checks.check_int("seed", seed, 0)
  _checks.check_int("num_tasks", num_tasks, 1)
  _checks.check_int("min_commands", min_commands, 1)
  _checks.check_int("max_commands", max_commands, 1)
  if not 1 <= min_commands <= max_commands <= layout.num_turns:
    raise ValueError(
        f"need 1 <= min_commands <= max_commands <= num_turns; got"
        f" {min_commands}, {max_commands}, {layout.num_turns}.")
  rng = np.random.default_rng(seed)
  seen, rows, solutions = set(), [], []
  while len(rows) < num_tasks:
    present = np.zeros(NUM_KEYS, bool)
    present[rng.choice(NUM_KEYS, rng.integers(1, 4), replace=False)] = True
    value = np.where(present, rng.integers(0, 10, NUM_KEYS), 0)
    initial = (present.copy(), value.copy())
    solution = [_random_valid_command(rng, present, value)
                for _ in range(rng.integers(min_commands, max_commands + 1))]
    value = np.where(present, value, 0)
    signature = (initial[0].tobytes(), initial[1].tobytes(), present.tobytes(),
                 value.tobytes())
    if signature in seen or (np.array_equal(present, initial[0]) and
                             np.array_equal(value, initial[1])):
      continue
    seen.add(signature)
    rows.append((initial, (present, value)))
    solutions.append(solution)
  stack = lambda i, j: jnp.asarray(np.stack([r[i][j] for r in rows]))
  initial = Store(stack(0, 0), stack(0, 1).astype(jnp.int32))
  goal = Store(stack(1, 0), stack(1, 1).astype(jnp.int32))
  prompt = np.stack([render_goal(Store(*r[1]), layout) for r in rows])
  return Tasks(initial, goal, jnp.asarray(prompt)), solutions


def command_table(layout: ShellLayout) -> tuple[np.ndarray, np.ndarray]:
  """Every well-formed command and a few malformed ones, for a random policy.

  Returns ``(slots [N, C], kind [N])``: kind 0..5 for ``ls``, ``cat``,
  ``set``, ``mv``, ``rm``, ``sum`` and 6 for malformed commands (empty,
  unknown, a bad value, one that fills its slot without ``EOT``).
  """
  k = KEYS
  commands = {
      0: ["ls"], 1: [f"cat {a}" for a in k],
      2: [f"set {a} {v}" for a in k for v in range(100)],
      3: [f"mv {a} {b}" for a in k for b in k], 4: [f"rm {a}" for a in k],
      5: [f"sum {a} {b} > {c}" for a in k for b in k for c in k],
      6: ["", "ls a", "cat", "cat e", "set a", "set a x", "set b 123",
          "mv a", "sum a b c", "rm", "echo",
          "x" * layout.command_len, "ls " * (layout.command_len // 3)],
  }
  slots = [encode_command(c, layout) for kind in sorted(commands)
           for c in commands[kind]]
  kinds = [kind for kind in sorted(commands) for _ in commands[kind]]
  return np.stack(slots), np.asarray(kinds, np.int32)
