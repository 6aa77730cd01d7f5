r"""An nnx mixture-of-experts FFN with a shared expert: standard top-k or EMO routing.

``MoE(d_model, config, layer_index=..., rngs=...)`` follows the FFN protocol
of :mod:`jaxpapers.models._transformer`: ``moe(x_BxLxD, segment_ids_BxL) ->
(y_BxLxD, aux)`` with ``aux = {"load_balance", "router_z"}`` (plus
``"dropped_fraction"`` on the capacity path), so
``Transformer(..., ffn_factory=moe_ffn_factory(config))`` is an MoE LM.

.. math::

   y_t = \mathrm{shared}(x_t) + \sum_{j \le k} g_{t,j}\,
   \mathrm{expert}_{e_{t,j}}(x_t)

with the router ``z_t = x_t W_r`` (float32, no bias) over the E routed
experts, routed by :func:`jaxpapers.moe.topk_route` or
:func:`jaxpapers.moe.emo_route`.

Modes. In training (``deterministic=False``) EMO draws each document's pool
size from ``config.pool_size`` with the layer's ``"pool"`` RNG stream (folded
with the layer index, so layers draw independently unless
``pool_shared_across_layers``); make the draws a pure function of the step
with ``nnx.reseed(model, pool=jax.random.fold_in(key, step))``. At evaluation
(``nnx.view(model, deterministic=True)``) EMO routes per token like the
authors' released model, or with a fixed pool of ``eval_pool_size``.

Parallelism. With ``data_axis`` and/or ``expert_axis`` set, the layer runs
inside ``jax.shard_map`` on the mesh of ``jax.set_mesh``: the batch is split
over ``data_axis`` (load-balancing counts are summed over it, so balancing
stays global) and the experts over ``expert_axis``; every expert shard sees
its data shard's tokens, runs only its own experts, and the contributions
are summed with one ``psum`` per layer (the all-gather form of expert
parallelism; an all-to-all form is not implemented).

Reconstruction: the module layout, initialisation and parallel layout are
ours; the routing and losses follow the authors' code (see
:mod:`jaxpapers.moe._routing`).
"""

import dataclasses
import functools
from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers.moe._dispatch import capacity_experts
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.moe._dispatch import dropless_experts
from jaxpapers.moe._dispatch import expert_capacity
from jaxpapers.moe._dispatch import ExpertWeights
from jaxpapers.moe._dispatch import swiglu
from jaxpapers.moe._losses import load_balance_loss
from jaxpapers.moe._losses import router_z_loss
from jaxpapers.moe._routing import check_pool_size
from jaxpapers.moe._routing import draw_pool_sizes
from jaxpapers.moe._routing import emo_route
from jaxpapers.moe._routing import topk_route

ROUTINGS = ("topk", "emo")
DISPATCHES = ("dropless", "capacity")
GROUPED_MATMULS = ("ragged_dot", "blocked")


@dataclasses.dataclass(frozen=True)
class MoEConfig:
  """Static settings of an MoE layer.

  Attributes:
    num_experts: routed experts E (the shared expert comes on top).
    k: routed experts per token.
    d_hidden: hidden width of every expert (routed and shared).
    routing: ``"topk"`` (standard MoE) or ``"emo"``.
    pool_size: EMO's training pool size: an int or an inclusive range
      ``(low, high)`` drawn per document; None means ``(k + 1, E)``, the
      authors' ``U[8, 128]`` for ``k = 7`` rescaled.
    eval_pool_size: EMO's pool at evaluation; None routes per token.
    pool_shared_across_layers: draw one pool size per document for all
      layers (the code draws per layer).
    shared_expert: add an always-on expert with gate 1.
    dispatch: ``"dropless"`` or ``"capacity"``.
    grouped_matmul: dropless backend, ``"ragged_dot"`` or ``"blocked"``.
    block_size: rows per block of the ``"blocked"`` backend.
    capacity_factor: capacity path: slots per expert and sequence are
      ``ceil(L * k * capacity_factor / E)``.
    data_axis: mesh axis the batch is sharded over (None: not sharded).
    expert_axis: mesh axis the experts are sharded over (None: not sharded).
  """

  num_experts: int = 31
  k: int = 3
  d_hidden: int = 64
  routing: str = "emo"
  pool_size: int | tuple[int, int] | None = None
  eval_pool_size: int | None = None
  pool_shared_across_layers: bool = False
  shared_expert: bool = True
  dispatch: str = "dropless"
  grouped_matmul: str = "ragged_dot"
  block_size: int = 64
  capacity_factor: float = 1.25
  data_axis: str | None = None
  expert_axis: str | None = None

  def __post_init__(self):
    for name, allowed in (("routing", ROUTINGS), ("dispatch", DISPATCHES),
                          ("grouped_matmul", GROUPED_MATMULS)):
      if getattr(self, name) not in allowed:
        raise ValueError(
            f"{name} must be one of {allowed}, got {getattr(self, name)!r}."
        )
    for name in ("num_experts", "d_hidden", "block_size", "k"):
      check_int(name, getattr(self, name), 1)
    if not 1 <= self.k <= self.num_experts:
      raise ValueError(
          f"k must lie in [1, num_experts = {self.num_experts}], got {self.k}."
      )
    if self.pool_size is not None:
      if not isinstance(self.pool_size, int):
        object.__setattr__(self, "pool_size", tuple(self.pool_size))
      check_pool_size(self.pool_size, self.k, self.num_experts)
    if self.eval_pool_size is not None:
      check_pool_size(self.eval_pool_size, self.k, self.num_experts)
    check_real("capacity_factor", self.capacity_factor, low=0.0, low_open=True)

  @property
  def pool_range(self) -> tuple[int, int]:
    """The training pool-size range ``(low, high)``."""
    if self.pool_size is None:
      return min(self.k + 1, self.num_experts), self.num_experts
    if isinstance(self.pool_size, int):
      return self.pool_size, self.pool_size
    return self.pool_size

  def keep(self, num_kept: int) -> "MoEConfig":
    """The config of this layer after keeping ``num_kept`` routed experts."""
    low, high = self.pool_range
    k = min(self.k, num_kept)
    return dataclasses.replace(
        self, num_experts=num_kept, k=k,
        pool_size=(max(k, min(low, num_kept)), min(high, num_kept)),
        eval_pool_size=(None if self.eval_pool_size is None
                        else max(k, min(self.eval_pool_size, num_kept))),
    )


class ExpertMask(nnx.Variable):
  """Which routed experts may be chosen (not trained)."""


class MoE(nnx.Module):
  """Routed experts plus a shared expert; see the module docstring.

  Args:
    d_model: model width D.
    config: :class:`MoEConfig`.
    layer_index: position of the layer in the model (separates the layers'
      pool draws; orders the layers for expert selection).
    rngs: ``nnx.Rngs``; ``params`` initialises the weights and ``pool``
      (falling back to ``default``) seeds the pool draws.

  Example:
    >>> from flax import nnx
    >>> import jax, jax.numpy as jnp
    >>> layer = MoE(16, MoEConfig(num_experts=8, k=2, d_hidden=16),
    ...             rngs=nnx.Rngs(0))
    >>> x = jnp.ones((2, 12, 16))
    >>> segment_ids = jnp.array([[0] * 5 + [1] * 7] * 2)  # two documents
    >>> nnx.reseed(layer, pool=jax.random.key(3))  # pools of this step
    >>> y, aux = nnx.jit(lambda m, x, s: m(x, s))(layer, x, segment_ids)
    >>> y.shape, sorted(aux)
    ((2, 12, 16), ['load_balance', 'router_z'])

  Example (flax nnx training step), a regression with the balancing loss:
    >>> import optax
    >>> from jaxpapers import optim
    >>> target = jax.random.normal(jax.random.key(1), (2, 12, 16))
    >>> def loss(layer):  # each call draws new pools from the "pool" stream
    ...   y, aux = layer(x, segment_ids)
    ...   return jnp.mean((y - target) ** 2) + 0.01 * aux["load_balance"]
    >>> optimizer = nnx.Optimizer(
    ...     layer, optim.ema_nesterov(optax.sgd(0.1, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(layer, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(layer)
    ...   optimizer.update(layer, grads)
    ...   return value
    >>> losses = [train_step(layer, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, d_model: int, config: MoEConfig, *, layer_index: int = 0,
               rngs: nnx.Rngs):
    self.config = config
    self.layer_index = layer_index
    self.deterministic = False
    self.record_statistics = False
    num_experts, d_hidden = config.num_experts, config.d_hidden
    self.router = nnx.Param(0.02 * jax.random.normal(
        rngs.params(), (d_model, num_experts), jnp.float32))
    # Normal(0, 1/fan_in) weights, for the routed and the shared experts.
    def init(*shape):
      return (jax.random.normal(rngs.params(), shape, jnp.float32)
              * shape[-2] ** -0.5)
    self.w_gate = nnx.Param(init(num_experts, d_model, d_hidden))
    self.w_up = nnx.Param(init(num_experts, d_model, d_hidden))
    self.w_down = nnx.Param(init(num_experts, d_hidden, d_model))
    if config.shared_expert:
      self.shared_gate = nnx.Param(init(d_model, d_hidden))
      self.shared_up = nnx.Param(init(d_model, d_hidden))
      self.shared_down = nnx.Param(init(d_hidden, d_model))
    self.expert_mask = ExpertMask(jnp.ones((num_experts,), jnp.bool_))
    self.pool_rngs = nnx.RngStream(rngs["pool"](), tag="pool")

  def set_view(self, deterministic: bool | None = None,
               record_statistics: bool | None = None):
    """Class method used by ``nnx.view``.

    Args:
      deterministic: if True, route as at evaluation (no random pools).
      record_statistics: if True, ``sow`` the mean router probabilities and
        the expert load as ``nnx.Intermediate`` (read them with
        ``nnx.capture``; see :func:`jaxpapers.moe.routing_statistics`).
    """
    if deterministic is not None:
      self.deterministic = deterministic
    if record_statistics is not None:
      self.record_statistics = record_statistics

  def __call__(self, x_BxLxD: jax.Array,
               segment_ids_BxL: jax.Array | None = None
               ) -> tuple[jax.Array, dict[str, jax.Array]]:
    config = self.config
    d_model = self.router.shape[0]
    if np.ndim(x_BxLxD) != 3 or np.shape(x_BxLxD)[-1] != d_model:
      raise ValueError(
          f"x_BxLxD must have shape (B, L, D) with D = {d_model} (the layer's"
          f" width); got {np.shape(x_BxLxD)}.")
    batch, length, _ = x_BxLxD.shape
    if segment_ids_BxL is not None and np.shape(segment_ids_BxL) != (
        batch, length):
      raise ValueError(
          f"segment_ids_BxL must have shape (B, L) = {(batch, length)}; got"
          f" {np.shape(segment_ids_BxL)}.")
    if segment_ids_BxL is None:
      segment_ids_BxL = jnp.zeros((batch, length), jnp.int32)
    forward = functools.partial(_forward, config=config)
    if config.data_axis is not None or config.expert_axis is not None:
      forward = _shard(forward, config, batch)
    inputs = {
        "x": x_BxLxD,
        "segment_ids": segment_ids_BxL,
        "router": self.router[...],
        "mask": self.expert_mask[...],
        "experts": ExpertWeights(self.w_gate[...], self.w_up[...],
                                 self.w_down[...]),
    }
    if config.shared_expert:
      inputs["shared"] = ExpertWeights(self.shared_gate[...],
                                       self.shared_up[...],
                                       self.shared_down[...])
    pool_BxL = self.pool_sizes(batch, length)
    if pool_BxL is not None:
      inputs["pool"] = pool_BxL
    y_BxLxD, aux, stats = forward(inputs)
    if self.record_statistics:
      self.sow(nnx.Intermediate, "router_probs", stats["router_probs"])
      self.sow(nnx.Intermediate, "expert_load", stats["expert_load"])
    return y_BxLxD, aux

  def pool_sizes(self, batch: int, length: int) -> jax.Array | None:
    """EMO's pool sizes for a ``(batch, length)`` call, or None (per-token routing).

    Entry ``[b, d]`` is the pool size of the d-th document of row b. In
    training with a range, each call draws new sizes from the ``pool`` stream.
    """
    config = self.config
    if config.routing == "topk":
      return None
    if self.deterministic:
      if config.eval_pool_size is None:
        return None
      return jnp.full((batch, length), config.eval_pool_size, jnp.int32)
    low, high = config.pool_range
    if low == high:
      return jnp.full((batch, length), low, jnp.int32)
    key = self.pool_rngs()
    if not config.pool_shared_across_layers:
      key = jax.random.fold_in(key, self.layer_index)
    return draw_pool_sizes(key, (batch, length), (low, high))

  def keep_experts(self, kept: Any) -> None:
    """Deletes every routed expert not in ``kept`` (and its router column), in place."""
    kept = _check_kept(kept, self.config.num_experts)
    self.router = nnx.Param(_take_experts(self.router[...], kept, axis=1))
    self.w_gate = nnx.Param(_take_experts(self.w_gate[...], kept))
    self.w_up = nnx.Param(_take_experts(self.w_up[...], kept))
    self.w_down = nnx.Param(_take_experts(self.w_down[...], kept))
    self.expert_mask = ExpertMask(_take_experts(self.expert_mask[...], kept))
    self.config = self.config.keep(len(kept))

  def mask_experts(self, kept: Any) -> None:
    """Lets the router choose only experts in ``kept`` (weights stay), in place."""
    kept = _check_kept(kept, self.config.num_experts)
    self.expert_mask[...] = jnp.zeros_like(self.expert_mask[...]).at[kept].set(
        True)


def moe_ffn_factory(config: MoEConfig):
  """An ``ffn_factory`` for :class:`jaxpapers.models.Transformer`.

  Example:
    >>> from flax import nnx
    >>> from jaxpapers import models
    >>> lm = models.Transformer(
    ...     models.TransformerConfig(max_len=16, d_model=16, num_heads=2,
    ...                              num_layers=2),
    ...     rngs=nnx.Rngs(0), ffn_factory=moe_ffn_factory(
    ...         MoEConfig(num_experts=8, k=2, d_hidden=16, routing="emo")))
    >>> [type(block.ffn).__name__ for block in lm.blocks]
    ['MoE', 'MoE']
  """
  def factory(model_config, layer_index, rngs):
    return MoE(model_config.d_model, config, layer_index=layer_index, rngs=rngs)
  return factory


def _forward(inputs, *, config):
  """The layer as a pure function of its inputs: ``(y, aux, stats)``."""
  x_BxLxD = inputs["x"]
  experts = inputs["experts"]
  logits = x_BxLxD.astype(jnp.float32) @ inputs["router"]
  logits = jnp.where(inputs["mask"].reshape(1, 1, -1), logits, -jnp.inf)
  if "pool" in inputs:
    routing = emo_route(logits, inputs["segment_ids"], pool_size=inputs["pool"],
                        k=config.k)
  else:
    routing = topk_route(logits, k=config.k)
  num_local = experts.gate.shape[0]
  offset = 0
  if config.expert_axis is not None:
    offset = jax.lax.axis_index(config.expert_axis) * num_local
  gates = routing.gates.astype(x_BxLxD.dtype)
  aux = {}
  if config.dispatch == "dropless":
    y_BxLxD = dropless_experts(
        x_BxLxD, routing.experts, gates, experts,
        grouped_matmul=config.grouped_matmul, block_size=config.block_size,
        expert_offset=offset)
  else:
    capacity = expert_capacity(x_BxLxD.shape[1], config.k, config.num_experts,
                               config.capacity_factor)
    y_BxLxD, num_dropped = capacity_experts(
        x_BxLxD, routing.experts, gates, experts, capacity=capacity,
        expert_offset=offset)
    if config.expert_axis is not None:
      num_dropped = jax.lax.psum(num_dropped, config.expert_axis)
    aux["dropped_fraction"] = num_dropped.astype(jnp.float32) / routing.experts.size
  if config.expert_axis is not None:
    y_BxLxD = jax.lax.psum(y_BxLxD, config.expert_axis)
  if "shared" in inputs:
    shared = inputs["shared"]
    y_BxLxD = y_BxLxD + swiglu(x_BxLxD, shared.gate, shared.up, shared.down)
  aux["load_balance"] = load_balance_loss(routing.probs, routing.experts,
                                          data_axis=config.data_axis)
  aux["router_z"] = router_z_loss(routing.logits)
  # A scatter of sharded ids has no sharding of its own on Explicit axes.
  replicated = (None if tree.explicit_spec(routing.experts) is None
                else jax.P(None))
  stats = {
      "router_probs": jnp.mean(routing.probs, axis=(0, 1)),
      "expert_load": jnp.zeros((config.num_experts,), jnp.float32).at[
          routing.experts.reshape(-1)].add(1.0 / routing.experts.size,
                                           out_sharding=replicated),
  }
  if config.data_axis is not None:
    aux, stats = jax.lax.pmean((aux, stats), config.data_axis)
  return y_BxLxD, aux, stats


def _shard(forward, config, batch):
  """``forward`` inside ``jax.shard_map`` over the context mesh."""
  mesh = jax.sharding.get_abstract_mesh()
  for name, axis in (("data_axis", config.data_axis),
                     ("expert_axis", config.expert_axis)):
    if axis is None:
      continue
    if mesh.empty or axis not in mesh.axis_names:
      raise ValueError(
          f"{name}={axis!r} is not an axis of the current mesh"
          f" ({None if mesh.empty else mesh.axis_names}); call the layer"
          " inside `with jax.set_mesh(mesh):`."
      )
  if config.expert_axis is not None:
    size = mesh.shape[config.expert_axis]
    if config.num_experts % size:
      raise ValueError(
          f"num_experts={config.num_experts} must be divisible by the size"
          f" {size} of expert_axis={config.expert_axis!r}."
      )
  if config.data_axis is not None and batch % mesh.shape[config.data_axis]:
    raise ValueError(
        f"the batch {batch} must be divisible by the size"
        f" {mesh.shape[config.data_axis]} of data_axis={config.data_axis!r}."
    )
  used = {config.data_axis, config.expert_axis} - {None}
  explicit = all(kind == jax.sharding.AxisType.Explicit
                 for name, kind in zip(mesh.axis_names, mesh.axis_types)
                 if name in used)
  data = jax.P(config.data_axis)
  replicated = jax.P()
  specs = {"x": data, "segment_ids": data, "pool": data, "router": replicated,
           "mask": replicated,
           "experts": ExpertWeights(*[jax.P(config.expert_axis)] * 3),
           "shared": ExpertWeights(replicated, replicated, replicated)}

  def sharded(inputs):
    in_specs = {name: specs[name] for name in inputs}
    aux_specs = {"load_balance": replicated, "router_z": replicated}
    if config.dispatch == "capacity":
      aux_specs["dropped_fraction"] = replicated
    out_specs = (data, aux_specs,
                 {"router_probs": replicated, "expert_load": replicated})
    # shard_map needs inputs laid out as in_specs: Explicit mesh axes (the
    # default of jax.make_mesh) do not reshard implicitly, while reshard
    # refuses Auto axes, which shard_map lays out itself.
    if explicit:
      inputs = jax.reshard(inputs, in_specs)
    return jax.shard_map(forward, in_specs=(in_specs,), out_specs=out_specs)(
        inputs)

  return sharded


def _take_experts(w, kept, axis=0):
  """``w``'s experts ``kept`` (host indices) along ``axis``, keeping ``w``'s sharding.

  Explicit mesh axes need the gather's output sharding spelled out: the
  other axes keep theirs, and the expert axis keeps its own where its
  devices divide the kept experts (else it is gathered).
  """
  index = (slice(None),) * axis + (kept,)
  spec = tree.explicit_spec(w)
  if spec is None:
    return w[index]
  mesh = jax.typeof(w).sharding.mesh
  shards = int(np.prod([mesh.shape[name]
                        for name in tree.spec_axes(spec[axis])]))
  entries = list(spec)
  if len(kept) % shards:
    entries[axis] = None
  return w.at[index].get(out_sharding=jax.P(*entries))


def _check_kept(kept, num_experts):
  kept = np.asarray(kept)
  if (kept.ndim != 1 or kept.size == 0
      or not np.issubdtype(kept.dtype, np.integer)):
    raise ValueError(
        f"kept must be a non-empty 1-D array of expert indices, got {kept!r}."
    )
  if np.any(np.diff(kept) <= 0) or kept[0] < 0 or kept[-1] >= num_experts:
    raise ValueError(
        "kept must be strictly increasing expert indices in"
        f" [0, {num_experts}), got {kept.tolist()}."
    )
  return kept
