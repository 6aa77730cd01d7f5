"""A small decoder-only transformer LM in flax nnx, with a swappable FFN.

Pre-norm blocks (RMSNorm), causal multi-head attention that can also stay
inside document boundaries (``segment_ids``), learned position embeddings,
and tied input/output embeddings. Every block's feed-forward layer comes from
``ffn_factory``, so a mixture-of-experts layer replaces the dense MLP without
touching the rest.

FFN protocol: ``ffn_factory(config, layer_index, rngs)`` returns an
``nnx.Module`` called as ``ffn(x_BxLxD, segment_ids_BxL) -> (y_BxLxD, aux)``
where ``aux`` is a dict of scalar auxiliary losses/statistics; the model sums
each key over layers.

Shapes follow nanodo's suffix convention: B batch, L length, D model width,
H heads, K head width, F FFN width, V vocabulary.
"""

import dataclasses
import functools
from typing import Any, Callable

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Sizes of the LM (all static)."""

  vocab_size: int = 257  # 256 bytes + EOS
  max_len: int = 256
  d_model: int = 128
  num_heads: int = 4
  num_layers: int = 4
  d_ff: int = 512

  def __post_init__(self):
    for name in ("vocab_size", "max_len", "d_model", "num_heads", "num_layers",
                 "d_ff"):
      check_int(name, getattr(self, name), 1)
    if self.d_model % self.num_heads:
      raise ValueError(
          f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}."
      )


FFNFactory = Callable[[TransformerConfig, int, nnx.Rngs], nnx.Module]


class MLP(nnx.Module):
  """The dense FFN: D -> F (GELU) -> D. Returns ``(y, {})``."""

  def __init__(self, d_model: int, d_ff: int, *, rngs: nnx.Rngs):
    self.up = nnx.Linear(d_model, d_ff, rngs=rngs)
    self.down = nnx.Linear(d_ff, d_model, rngs=rngs)

  def __call__(self, x_BxLxD, segment_ids_BxL=None):
    del segment_ids_BxL
    # A sharded hidden width (tensor parallelism) is summed over devices.
    hidden = self.up(x_BxLxD,
                     out_sharding=tree.projection_spec(x_BxLxD, self.up.kernel[...]))
    return self.down(jax.nn.gelu(hidden),
                     out_sharding=tree.contraction_spec(x_BxLxD)), {}


def dense_ffn(config: TransformerConfig, layer_index: int,
              rngs: nnx.Rngs) -> MLP:
  """The default ``ffn_factory``."""
  del layer_index
  return MLP(config.d_model, config.d_ff, rngs=rngs)


def attention_mask(segment_ids_BxL: jax.Array | None, length: int) -> jax.Array:
  """Causal mask, restricted to equal segment ids when given: ``(B|1, 1, L, L)``.

  Raises ``ValueError`` unless ``length >= 1`` and the ids are ``(B, length)``.
  """
  check_int("length", length, 1)
  if segment_ids_BxL is not None and (
      jnp.ndim(segment_ids_BxL) != 2
      or jnp.shape(segment_ids_BxL)[1] != length):
    raise ValueError(
        f"segment_ids_BxL must have shape (B, length={length}), got"
        f" {jnp.shape(segment_ids_BxL)}.")
  causal_LxL = jnp.tril(jnp.ones((length, length), jnp.bool_))
  if segment_ids_BxL is None:
    return causal_LxL[None, None]
  spec = tree.explicit_spec(segment_ids_BxL)
  if spec is not None:
    # An (L, L) comparison cannot shard both of its axes like the ids' one.
    segment_ids_BxL = jax.sharding.reshard(segment_ids_BxL, jax.P(spec[0], None))
  same_BxLxL = segment_ids_BxL[:, :, None] == segment_ids_BxL[:, None, :]
  return (same_BxLxL & causal_LxL[None])[:, None]


class Attention(nnx.Module):
  """Causal multi-head self-attention."""

  def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs):
    self.num_heads = config.num_heads
    self.head_dim = config.d_model // config.num_heads
    self.qkv = nnx.Linear(config.d_model, 3 * config.d_model, rngs=rngs)
    self.out = nnx.Linear(config.d_model, config.d_model, rngs=rngs)

  def __call__(self, x_BxLxD, mask_BxHxLxL):
    b, length, d = x_BxLxD.shape
    qkv_spec, heads_spec = self._explicit_specs(x_BxLxD)
    qkv = self.qkv(x_BxLxD, out_sharding=qkv_spec)
    qkv = jax.lax.reshape(qkv, (b, length, 3, self.num_heads, self.head_dim),
                          out_sharding=heads_spec)
    q_BxLxHxK, k_BxLxHxK, v_BxLxHxK = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    scale = jnp.asarray(self.head_dim ** -0.5, x_BxLxD.dtype)
    logits_BxHxLxL = jnp.einsum("bqhk,bshk->bhqs", q_BxLxHxK, k_BxLxHxK) * scale
    logits_BxHxLxL = jnp.where(mask_BxHxLxL, logits_BxHxLxL,
                               jnp.finfo(logits_BxHxLxL.dtype).min)
    weights = jax.nn.softmax(logits_BxHxLxL, axis=-1)
    y_BxLxHxK = jnp.einsum("bhqs,bshk->bqhk", weights, v_BxLxHxK)
    # The output is sharded like the residual stream it is added to.
    return self.out(y_BxLxHxK.reshape(b, length, d),
                    out_sharding=tree.explicit_spec(x_BxLxD))

  def _explicit_specs(self, x_BxLxD):
    """``out_sharding`` of the q/k/v projection and of its split into heads.

    Explicit mesh axes infer neither when the q/k/v kernel is sharded
    (tensor parallelism). The split puts the projection's column sharding on
    the heads axis where the heads divide over it, else gathers the head
    features. Both None without Explicit axes.
    """
    qkv_spec = tree.projection_spec(x_BxLxD, self.qkv.kernel[...])
    if qkv_spec is None:
      return None, None
    columns = qkv_spec[-1]
    mesh = jax.sharding.get_abstract_mesh()
    shards = int(np.prod([mesh.shape[name] for name in tree.spec_axes(columns)]))
    heads = columns if self.num_heads % shards == 0 else None
    return qkv_spec, jax.P(*qkv_spec[:-1], None, heads, None)


class Block(nnx.Module):
  """Pre-norm residual block: attention then FFN."""

  def __init__(self, config: TransformerConfig, layer_index: int,
               ffn_factory: FFNFactory, *, rngs: nnx.Rngs):
    self.attn_norm = nnx.RMSNorm(config.d_model, rngs=rngs)
    self.attn = Attention(config, rngs=rngs)
    self.ffn_norm = nnx.RMSNorm(config.d_model, rngs=rngs)
    self.ffn = ffn_factory(config, layer_index, rngs)

  def __call__(self, x_BxLxD, mask, segment_ids_BxL):
    x_BxLxD = x_BxLxD + self.attn(self.attn_norm(x_BxLxD), mask)
    y_BxLxD, aux = self.ffn(self.ffn_norm(x_BxLxD), segment_ids_BxL)
    return x_BxLxD + y_BxLxD, aux


class Transformer(nnx.Module):
  """Decoder-only LM: ``model(tokens_BxL, segment_ids_BxL=None) -> (logits_BxLxV, aux)``.

  Under Explicit mesh axes the batch may be sharded (data parallelism), the
  projections' widths too (tensor parallelism: the FFN width, the q/k/v
  columns), and every parameter along the batch's own axes (FSDP, see
  :func:`gather_fsdp_params`), alone or together.

  Args:
    config: sizes.
    rngs: ``nnx.Rngs`` for parameter initialisation.
    ffn_factory: builds each block's FFN (default: dense MLP).

  Example (flax nnx training step):
    >>> import numpy as np, optax
    >>> from flax import nnx
    >>> from jaxpapers import optim
    >>> model = Transformer(TransformerConfig(vocab_size=8, max_len=8,
    ...     d_model=8, num_heads=2, num_layers=1, d_ff=8), rngs=nnx.Rngs(0))
    >>> tokens = np.random.default_rng(0).integers(0, 8, (2, 8))  # a batch
    >>> def loss(model):  # predict each next token of the batch
    ...   return next_token_loss(model(tokens[:, :-1])[0], tokens[:, 1:])
    >>> optimizer = nnx.Optimizer(
    ...     model, optim.ema_nesterov(optax.sgd(0.1, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(model)
    ...   optimizer.update(model, grads)
    ...   return value
    >>> losses = [train_step(model, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs,
               ffn_factory: FFNFactory = dense_ffn):
    self.config = config
    self.embed = nnx.Embed(config.vocab_size, config.d_model, rngs=rngs)
    self.pos_embed = nnx.Param(
        0.02 * jax.random.normal(rngs.params(), (config.max_len, config.d_model))
    )
    self.blocks = nnx.List([
        Block(config, i, ffn_factory, rngs=rngs) for i in range(config.num_layers)
    ])
    self.final_norm = nnx.RMSNorm(config.d_model, rngs=rngs)

  def __call__(self, tokens_BxL: jax.Array,
               segment_ids_BxL: jax.Array | None = None
               ) -> tuple[jax.Array, dict[str, Any]]:
    if jnp.ndim(tokens_BxL) != 2:
      raise ValueError(
          f"tokens_BxL must have shape (B, L), got {jnp.shape(tokens_BxL)}.")
    dtype = jnp.result_type(tokens_BxL)
    if not jnp.issubdtype(dtype, jnp.integer):
      raise TypeError(f"tokens_BxL must hold integer token ids, got {dtype}.")
    if segment_ids_BxL is not None and (
        jnp.shape(segment_ids_BxL) != jnp.shape(tokens_BxL)):
      raise ValueError(
          f"segment_ids_BxL {jnp.shape(segment_ids_BxL)} must have the shape"
          f" of tokens_BxL {jnp.shape(tokens_BxL)}.")
    check_token_ids(tokens_BxL, self.config.vocab_size, "tokens_BxL")
    length = tokens_BxL.shape[-1]
    if length > self.config.max_len:
      raise ValueError(
          f"sequence length {length} exceeds max_len={self.config.max_len}."
      )
    # A lookup at sharded tokens, and the tied read-out's contraction over a
    # sharded width, keep the tokens' sharding on Explicit mesh axes.
    spec = tree.explicit_spec(tokens_BxL)
    rows = None if spec is None else jax.P(*spec, None)
    batch_axes = () if spec is None else tree.spec_axes(spec)
    embed = gather_fsdp_params(self.embed, batch_axes)
    pos_embed_LxD = tree.gather_mesh_axes(self.pos_embed[...], batch_axes)
    x_BxLxD = (embed(tokens_BxL, out_sharding=rows)
               + pos_embed_LxD[None, :length])
    mask = attention_mask(segment_ids_BxL, length)
    aux_total: dict[str, jax.Array] = {}
    for block in self.blocks:
      block = gather_fsdp_params(block, batch_axes)
      x_BxLxD, aux = block(x_BxLxD, mask, segment_ids_BxL)
      for key, value in aux.items():
        aux_total[key] = aux_total.get(key, 0.0) + value
    final_norm = gather_fsdp_params(self.final_norm, batch_axes)
    logits_BxLxV = embed.attend(final_norm(x_BxLxD), out_sharding=rows)
    return logits_BxLxV, aux_total


def gather_fsdp_params(module: nnx.Module,
                       batch_axes: tuple[str, ...]) -> nnx.Module:
  """``module`` with its parameters sharded along ``batch_axes`` gathered: FSDP.

  Fully sharded data parallelism shards the parameters along the batch's own
  mesh axes; on Explicit axes each block's parameters are gathered where the
  block runs (:func:`jaxpapers.tree.gather_mesh_axes`), and their gradients
  come back sharded like them. Other axes (tensor parallelism) stay. The
  copy holds new ``nnx.Param`` variables and ``module``'s own other variables
  (an RNG stream drawn in the forward pass advances in ``module``); with no
  batch axes, or no parameter sharded along them, ``module`` itself is
  returned.

  :class:`Transformer` calls it on its embedding, each block and the final
  norm, with the mesh axes of the tokens' sharding; a model of one's own
  calls it the same way, ``gather_fsdp_params(block, ("data",))(x)``.
  """
  if not batch_axes:
    return module
  graphdef, params, others = nnx.split(module, nnx.Param, ...)
  gathered_params = tree.gather_mesh_axes(params, batch_axes)
  if all(a is b for a, b in zip(jax.tree.leaves(params),
                                 jax.tree.leaves(gathered_params))):
    return module
  return nnx.merge(graphdef, gathered_params, others)


def check_token_ids(ids: jax.Array, vocab_size: int, name: str) -> None:
  """Raises ``ValueError`` for concrete ids outside ``[0, vocab_size)`` (traced ids pass)."""
  if isinstance(ids, jax.core.Tracer):
    return
  values = np.asarray(ids)
  if values.size and (values.min() < 0 or values.max() >= vocab_size):
    raise ValueError(
        f"{name} holds ids in [{values.min()}, {values.max()}]; they must lie"
        f" in [0, {vocab_size}) (the vocabulary).")


def next_token_loss(logits_BxLxV: jax.Array, targets_BxL: jax.Array,
                    mask_BxL: jax.Array | None = None) -> jax.Array:
  """Mean cross-entropy of ``targets`` under ``logits`` (in nats per token).

  With ``mask_BxL``, the mean over the masked tokens (0 when none is).

  Raises:
    ValueError: unless ``logits_BxLxV`` is ``(B, L, V)`` and ``targets_BxL``
      (and ``mask_BxL``) ``(B, L)``.
    TypeError: for non-integer targets.

  A target outside ``[0, V)`` is a ``ValueError`` when concrete; traced, it
  reads no log-probability and makes the loss NaN, never a wrong number.
  """
  if jnp.ndim(logits_BxLxV) != 3:
    raise ValueError(
        f"logits_BxLxV must have shape (B, L, V), got {jnp.shape(logits_BxLxV)}.")
  rows = jnp.shape(logits_BxLxV)[:2]
  if jnp.shape(targets_BxL) != rows:
    raise ValueError(f"targets_BxL must have shape (B, L) = {rows}, got"
                     f" {jnp.shape(targets_BxL)}.")
  dtype = jnp.result_type(targets_BxL)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"targets_BxL must hold integer token ids, got {dtype}.")
  if mask_BxL is not None and jnp.shape(mask_BxL) != rows:
    raise ValueError(f"mask_BxL must have shape (B, L) = {rows}, got"
                     f" {jnp.shape(mask_BxL)}.")
  check_token_ids(targets_BxL, jnp.shape(logits_BxLxV)[-1], "targets_BxL")
  log_probs = jax.nn.log_softmax(logits_BxLxV.astype(jnp.float32), axis=-1)
  rows = tree.contraction_spec(log_probs)
  if rows is not None:  # a gather along a sharded vocabulary has no sharding
    log_probs = jax.sharding.reshard(log_probs, rows)
  nll_BxL = -jnp.take_along_axis(log_probs, targets_BxL[..., None], axis=-1,
                                 wrap_negative_indices=False)[..., 0]
  if mask_BxL is None:
    return jnp.mean(nll_BxL)
  weights = mask_BxL.astype(nll_BxL.dtype)
  return jnp.sum(nll_BxL * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def gather_fsdp_params_like(module: nnx.Module, x: jax.Array) -> nnx.Module:
  """:func:`gather_fsdp_params` along every mesh axis that shards ``x``.

  For a module whose inputs are its batch (a block, a decoder layer): an
  activation and a parameter sharded along one Explicit mesh axis neither
  broadcast nor contract, so the call runs on the gathered copy. Without
  Explicit axes on ``x``, or no parameter sharded along them, ``module``
  itself.
  """
  spec = tree.explicit_spec(x)
  if spec is None:
    return module
  return gather_fsdp_params(module, tree.spec_axes(spec))


def fsdp_gathered(method: Callable[..., Any]) -> Callable[..., Any]:
  """Decorator: ``method(self, x, ...)`` runs on ``self``'s FSDP-gathered copy.

  The copy is :func:`gather_fsdp_params_like` of ``self`` and ``x`` (its
  first leaf when ``x`` is a sequence of arrays), so a module's parameters
  sharded along its input's mesh axes are whole while the method runs.
  Nested decorated modules find their parameters already gathered.
  """
  @functools.wraps(method)
  def run(self, x, *args, **kwargs):
    leaves = jax.tree.leaves(x)
    module = gather_fsdp_params_like(self, leaves[0]) if leaves else self
    return method(module, x, *args, **kwargs)
  return run
