r"""Batched shell rollouts of a byte GPT: cached decoding in ``lax.scan``.

The policy is :class:`jaxpapers.models.Transformer`; :func:`decode` runs its
layers on a chunk of new tokens against a key/value cache (the model's own
call recomputes the whole prefix for every sampled token). :func:`sample`
plays a batch of :class:`~jaxpapers.rl.Tasks` in a ``lax.scan``
over turns: the prompt goes in as one chunk; per turn, ``CMD``, then the
command sampled token by token at ``temperature`` (it ends at its first
``EOT``; the rest of the slot is ``PAD``), executed
(:func:`jaxpapers.rl.shell_step`), and its observation fed back as one
chunk. The transcript has the fixed layout of
:class:`~jaxpapers.rl.ShellLayout`, so training takes it as it is.

Example::

  model = models.Transformer(config, rngs=nnx.Rngs(0))
  out = sample(model, tasks, jax.random.key(1), layout, temperature=0.8)
  out.tokens.shape == (batch, layout.length)
"""

from typing import NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp

from jaxpapers import models
from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.rl import _checks as checks
from jaxpapers.models._transformer import check_token_ids
from jaxpapers.rl import _shell as shell


class Cache(NamedTuple):
  """Keys and values per layer, ``[layers, B, L, H, K]`` each."""

  keys: jax.Array
  values: jax.Array


def init_cache(model: models.Transformer, batch: int, length: int) -> Cache:
  """An all-zero :class:`Cache` of ``length`` positions for ``batch`` rows of ``model``.

  Raises unless ``batch`` and ``length`` are ints >= 1.
  """
  _checks.check_int("batch", batch, 1)
  _checks.check_int("length", length, 1)
  config = model.config
  head_dim = config.d_model // config.num_heads
  shape = (config.num_layers, batch, length, config.num_heads, head_dim)
  return Cache(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32))


def decode(model: models.Transformer, cache: Cache, tokens_BxN: jax.Array,
           start: jax.Array | int) -> tuple[jax.Array, Cache]:
  """Logits after ``tokens_BxN`` placed at ``start ..``, ``[B, N, V]``, and the cache.

  Equal (up to float rounding) to ``model(tokens)[0][:, start:start + N]``
  when the cache holds the tokens before ``start``: one call prefills a
  chunk of known tokens, ``N = 1`` decodes one. The model's FFNs must ignore
  ``segment_ids`` (the dense default does).

  Raises ``TypeError`` for non-integer tokens and ``ValueError`` for tokens
  not ``[B, N]`` with the cache's ``B``, concrete ids outside the
  vocabulary, or a concrete ``start`` outside ``[0, L - N]`` (a slice there
  would be clamped, writing the wrong positions). A traced ``start`` out of
  range is clamped (``lax.dynamic_slice``): callers keep it in range.
  """
  checks.check_integer_tokens("tokens_BxN", tokens_BxN)
  if tokens_BxN.ndim != 2 or tokens_BxN.shape[0] != cache.keys.shape[1]:
    raise ValueError(f"tokens_BxN must be [B={cache.keys.shape[1]}, N] (the"
                     f" cache's batch); got shape {tokens_BxN.shape}.")
  check_token_ids(tokens_BxN, model.config.vocab_size, "tokens_BxN")
  batch, num_new = tokens_BxN.shape
  length = cache.keys.shape[2]
  if _checks.is_concrete(start) and not 0 <= int(start) <= length - num_new:
    raise ValueError(f"start must lie in [0, {length - num_new}] (cache length"
                     f" {length}, {num_new} new tokens); got {int(start)}.")
  positions_N = start + jnp.arange(num_new)
  # A lookup at sharded tokens, and the tied read-out's contraction over a
  # sharded width, keep the tokens' sharding on Explicit mesh axes; as in
  # the model's own call, parameters sharded along the tokens' mesh axes
  # (FSDP) are gathered block by block.
  spec = tree.explicit_spec(tokens_BxN)
  rows = None if spec is None else jax.P(*spec, None)
  batch_axes = () if spec is None else tree.spec_axes(spec)
  embed = models.gather_fsdp_params(model.embed, batch_axes)
  pos_embed_NxD = jax.lax.dynamic_slice_in_dim(
      tree.gather_mesh_axes(model.pos_embed[...], batch_axes), start, num_new)
  x_BxNxD = embed(tokens_BxN, out_sharding=rows) + pos_embed_NxD[None]
  visible_NxL = jnp.arange(length)[None, :] <= positions_N[:, None]
  keys, values = cache.keys, cache.values
  for i, block in enumerate(model.blocks):
    block = models.gather_fsdp_params(block, batch_axes)
    attn = block.attn
    qkv = attn.qkv(block.attn_norm(x_BxNxD)).reshape(
        batch, num_new, 3, attn.num_heads, attn.head_dim)
    at = (i, 0, start, 0, 0)
    new_keys, new_values = _whole_length(qkv[None, :, :, 1:])
    # Explicit mesh axes update a slice only of an alike-sharded cache: an
    # empty cache takes the batch sharding of the tokens' keys and values.
    keys = jax.lax.dynamic_update_slice(
        tree.reshard_like(keys, new_keys), new_keys, at)
    values = jax.lax.dynamic_update_slice(
        tree.reshard_like(values, new_values), new_values, at)
    scale = jnp.asarray(attn.head_dim ** -0.5, x_BxNxD.dtype)
    logits_BxHxNxL = jnp.einsum("bnhk,blhk->bhnl", qkv[:, :, 0],
                                keys[i]) * scale
    logits_BxHxNxL = jnp.where(visible_NxL[None, None], logits_BxHxNxL,
                               jnp.finfo(logits_BxHxNxL.dtype).min)
    weights = jax.nn.softmax(logits_BxHxNxL, axis=-1)
    y_BxNxHxK = jnp.einsum("bhnl,blhk->bnhk", weights, values[i])
    x_BxNxD = x_BxNxD + attn.out(y_BxNxHxK.reshape(batch, num_new, -1))
    y_BxNxD, _ = block.ffn(block.ffn_norm(x_BxNxD), None)
    x_BxNxD = x_BxNxD + y_BxNxD
  final_norm = models.gather_fsdp_params(model.final_norm, batch_axes)
  return (embed.attend(final_norm(x_BxNxD), out_sharding=rows),
          Cache(keys, values))


def _whole_length(kv_1xBxNx2xHxK):
  """The new keys and values ``[1, B, N, H, K]``, their chunk axis whole.

  Every query attends to every cached position, so on Explicit mesh axes the
  cache keeps its length axis whole (a sequence-sharded chunk's keys are
  gathered; a cache sharded along its length is gathered by the update).
  """
  spec = tree.explicit_spec(kv_1xBxNx2xHxK)
  if spec is not None:
    kv_1xBxNx2xHxK = jax.sharding.reshard(
        kv_1xBxNx2xHxK, jax.P(spec[0], spec[1], None, *spec[3:]))
  return kv_1xBxNx2xHxK[:, :, :, 0], kv_1xBxNx2xHxK[:, :, :, 1]


def sample(model: models.Transformer, tasks: shell.Tasks, key: jax.Array,
           layout: shell.ShellLayout, *, temperature: float | jax.Array
           ) -> shell.Transcripts:
  """Plays every task once with the policy sampling at ``temperature``.

  Args:
    model: the policy (its ``max_len`` must cover ``layout.length``).
    tasks: ``B`` tasks.
    key: PRNG key.
    layout: the transcript layout.
    temperature: softmax temperature (finite, > 0; may be traced: a traced
      0 or NaN samples from non-finite logits, so the commands are garbage).

  Returns:
    the :class:`~jaxpapers.rl.Transcripts` (tokens ``[B, L]``, spans,
    final stores, verifier reward and success).

  Raises:
    ValueError: for a concrete ``temperature`` that is not finite and > 0,
      a model shorter than the transcript, or prompts of the wrong width.
  """
  _checks.check_real("temperature", temperature,
                     low=0.0, low_open=True, allow_traced=True)
  if model.config.max_len < layout.length:
    raise ValueError(
        f"model max_len={model.config.max_len} is shorter than the"
        f" transcript length {layout.length}.")
  if tasks.prompt.shape[1] != layout.prompt_len:
    raise ValueError(f"tasks.prompt must be [B, {layout.prompt_len}]; got"
                     f" {tasks.prompt.shape}.")
  batch = tasks.prompt.shape[0]
  _, cache = decode(model, init_cache(model, batch, layout.length),
                    tasks.prompt, 0)
  # The turns' scaffolding tokens and flags are made like this [B, 1] column:
  # sharded as the prompt's batch, which Explicit mesh axes keep throughout.
  column = jnp.zeros_like(tasks.prompt[:, :1])
  play = lambda carry, turn: _turn(model, carry, turn, key, layout,
                                   temperature, column)
  (_, final), per_turn = jax.lax.scan(play, (cache, tasks.initial),
                                      jnp.arange(layout.num_turns))
  return shell.transcripts_of(tasks, final, *per_turn, layout)


def _turn(model, carry, turn, key, layout, temperature, column_Bx1):
  """``CMD``, one sampled command, its execution and its fed-back observation."""
  cache, store = carry
  start = layout.command_start(turn)
  logits, cache = decode(model, cache, jnp.full_like(column_Bx1, shell.CMD),
                         start - 1)

  def sample_token(carry, inputs):
    logits, cache, ended = carry
    step_key, position = inputs
    drawn = jax.random.categorical(step_key, logits / temperature)
    token = jnp.where(ended, shell.PAD, drawn).astype(jnp.int32)
    logits, cache = decode(model, cache, token[:, None], position)
    return (logits[:, 0], cache, ended | (token == shell.EOT)), token

  keys = jax.random.split(jax.random.fold_in(key, turn), layout.command_len)
  positions = start + jnp.arange(layout.command_len)
  (_, cache, _), command_CxB = jax.lax.scan(
      sample_token, (logits[:, 0], cache,
                     jnp.zeros_like(column_Bx1[:, 0], jnp.bool_)),
      (keys, positions))
  store, command, obs, spans = shell.step(store, command_CxB.T, layout)
  observed = jnp.concatenate([jnp.full_like(column_Bx1, shell.OBS), obs],
                             axis=1)
  _, cache = decode(model, cache, observed, start + layout.command_len)
  return (cache, store), (command, obs, spans)


def sample_split(graphdef: nnx.GraphDef, state: nnx.State, *args, **kwargs
                 ) -> shell.Transcripts:
  """:func:`sample` for a split model (``nnx.split``), e.g. under ``jit``/``vmap``."""
  return sample(nnx.merge(graphdef, state), *args, **kwargs)
