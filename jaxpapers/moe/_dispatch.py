r"""Running routed tokens through their experts: dropless and capacity paths.

Every expert is a SwiGLU MLP, ``(silu(x W_gate) * (x W_up)) W_down``, and a
token's output is ``sum_slots gate * expert(x)``. Two ways to compute it
(MaxText's two, for our experts):

* **dropless** (:func:`dropless_experts`): the ``T*k`` (token, slot) pairs are
  sorted by expert, group sizes counted, and each expert runs on exactly its
  rows with a grouped matmul. ``grouped_matmul="ragged_dot"`` uses
  ``jax.lax.ragged_dot`` (what accelerators want; on CPU it lowers to dense
  work over every group, as slow as running every expert on every row);
  ``"blocked"`` pads each group to a multiple of ``block_size`` rows and runs
  one batched einsum over blocks with each block's expert weights gathered
  (same numbers, ``T*k + E*(block_size-1)`` rows of work, fast on CPU).
* **capacity** (:func:`capacity_experts`): each expert takes at most
  ``capacity`` pairs per sequence (first slots first, then by position),
  built as dispatch / combine masks contracted with einsums; pairs over
  capacity are dropped (their gate counts as zero).

Both accept ``expert_offset``: under expert parallelism a shard holds experts
``offset .. offset + E_local - 1`` and computes only their contribution;
summing the shards' outputs gives the full result.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real


class ExpertWeights(NamedTuple):
  """SwiGLU weights of E experts: ``gate, up: (E, D, F)``, ``down: (E, F, D)``."""

  gate: jax.Array
  up: jax.Array
  down: jax.Array


def swiglu(x_NxD: jax.Array, gate_DxF: jax.Array, up_DxF: jax.Array,
           down_FxD: jax.Array) -> jax.Array:
  """One SwiGLU expert: ``(silu(x W_gate) * (x W_up)) W_down``.

  ``x`` may have leading axes (``(..., D)``, e.g. ``(B, L, D)``). The rows
  keep ``x``'s sharding; on Explicit mesh axes a sharded width (``D`` of
  ``x``, ``F`` of the weights: tensor parallelism) is summed over.

  Raises:
    ValueError: unless the shapes are ``x (..., D)``, ``gate, up (D, F)``
      and ``down (F, D)``.
  """
  if np.ndim(gate_DxF) != 2:
    raise ValueError(f"gate_DxF must have shape (D, F), got {np.shape(gate_DxF)}.")
  d_model, d_hidden = np.shape(gate_DxF)
  if np.ndim(x_NxD) < 1 or np.shape(x_NxD)[-1] != d_model:
    raise ValueError(f"x_NxD must have shape (..., D) with D = {d_model} (from"
                     f" gate_DxF), got {np.shape(x_NxD)}.")
  for name, array, expected in (("up_DxF", up_DxF, (d_model, d_hidden)),
                                ("down_FxD", down_FxD, (d_hidden, d_model))):
    if np.shape(array) != expected:
      raise ValueError(f"{name} must have shape {expected} to match gate_DxF,"
                       f" got {np.shape(array)}.")
  rows = tree.contraction_spec(x_NxD)
  matmul = lambda a, b: jnp.matmul(a, b, out_sharding=rows)
  return matmul(jax.nn.silu(matmul(x_NxD, gate_DxF)) * matmul(x_NxD, up_DxF),
                down_FxD)


def expert_capacity(length: int, k: int, num_experts: int,
                    capacity_factor: float) -> int:
  """Slots per expert and sequence: ``ceil(L * k * capacity_factor / E)``.

  ``ValueError`` unless the counts are ints >= 1 and ``capacity_factor`` is
  finite and > 0.
  """
  for name, value in (("length", length), ("k", k),
                      ("num_experts", num_experts)):
    check_int(name, value, 1)
  check_real("capacity_factor", capacity_factor, low=0.0, low_open=True)
  return max(1, math.ceil(length * k * capacity_factor / num_experts))


def check_expert_ids(experts: jax.Array, num_experts: int, name: str) -> None:
  """Raises ``ValueError`` for non-integer ids and, when concrete, ids outside [0, E).

  Traced ids cannot be checked at trace time; callers document what an
  out-of-range traced id does.
  """
  dtype = jnp.result_type(experts)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"{name} must hold integer expert ids, got dtype {dtype}.")
  if isinstance(experts, jax.core.Tracer):
    return
  values = np.asarray(experts)
  if values.size and (values.min() < 0 or values.max() >= num_experts):
    raise ValueError(
        f"{name} holds expert ids in [{values.min()}, {values.max()}]; they"
        f" must lie in [0, {num_experts}) (E = {num_experts} experts).")


def check_dispatch_inputs(x_BxLxD: jax.Array, experts_BxLxK: jax.Array,
                          gates_BxLxK: jax.Array,
                          weights: ExpertWeights) -> None:
  """Raises ``ValueError`` unless the shapes are ``(B, L, D)``, ``(B, L, k)`` twice and SwiGLU weights of width D."""
  x_shape = np.shape(x_BxLxD)
  if len(x_shape) != 3:
    raise ValueError(f"x_BxLxD must have shape (B, L, D), got {x_shape}.")
  for name, ids in (("experts_BxLxK", experts_BxLxK),
                    ("gates_BxLxK", gates_BxLxK)):
    if np.ndim(ids) != 3 or np.shape(ids)[:2] != x_shape[:2]:
      raise ValueError(
          f"{name} must have shape (B, L, k) with (B, L) = {x_shape[:2]},"
          f" got {np.shape(ids)}.")
  if np.shape(gates_BxLxK) != np.shape(experts_BxLxK):
    raise ValueError(
        f"gates_BxLxK {np.shape(gates_BxLxK)} must match experts_BxLxK"
        f" {np.shape(experts_BxLxK)}.")
  gate = np.shape(weights.gate)
  if len(gate) != 3 or gate[1] != x_shape[2]:
    raise ValueError(
        f"weights.gate must have shape (E, D, F) with D = {x_shape[2]}, got"
        f" {gate}.")
  if (np.shape(weights.up) != gate
      or np.shape(weights.down) != (gate[0], gate[2], gate[1])):
    raise ValueError(
        f"weights.up must have weights.gate's shape {gate} and weights.down"
        f" {(gate[0], gate[2], gate[1])}; got {np.shape(weights.up)} and"
        f" {np.shape(weights.down)}.")


def dropless_experts(x_BxLxD: jax.Array, experts_BxLxK: jax.Array,
                     gates_BxLxK: jax.Array, weights: ExpertWeights, *,
                     grouped_matmul: str = "ragged_dot", block_size: int = 64,
                     expert_offset: jax.Array | int = 0) -> jax.Array:
  """``sum_slots gate * expert(x)`` with no token dropped (sort + grouped matmul).

  Args:
    x_BxLxD: token activations.
    experts_BxLxK: chosen (global) expert indices.
    gates_BxLxK: their gates.
    weights: this shard's experts ``offset .. offset + E_local - 1``.
    grouped_matmul: ``"ragged_dot"`` or ``"blocked"`` (see the module doc).
    block_size: rows per block of the ``"blocked"`` matmul.
    expert_offset: global index of ``weights``' first expert.

  Returns:
    ``(B, L, D)``: the contribution of this shard's experts. Ids outside
    ``offset .. offset + E_local - 1`` belong to other shards and contribute
    nothing here; an eager call with ``expert_offset=0`` holds every expert,
    so an id outside ``[0, E_local)`` is a ``ValueError``.
  """
  check_dispatch_inputs(x_BxLxD, experts_BxLxK, gates_BxLxK, weights)
  # Named before any work is done.
  if grouped_matmul not in ("ragged_dot", "blocked"):
    raise ValueError(
        "grouped_matmul must be 'ragged_dot' or 'blocked', got"
        f" {grouped_matmul!r}."
    )
  check_int("block_size", block_size, 1)
  batch, length, d_model = x_BxLxD.shape
  k = experts_BxLxK.shape[-1]
  num_local = weights.gate.shape[0]
  if isinstance(expert_offset, int) and expert_offset == 0:
    check_expert_ids(experts_BxLxK, num_local, "experts_BxLxK")
  # The sort over every (token, slot) pair and the gathers of expert weights
  # have no sharding of their own on Explicit mesh axes: run on replicated
  # copies and give the output the tokens' sharding back (expert parallelism
  # runs this inside shard_map, where nothing is gathered; see MoE).
  inputs = (x_BxLxD, experts_BxLxK, gates_BxLxK, weights)
  (x_BxLxD, experts_BxLxK, gates_BxLxK, weights), restore = (
      tree.gather_explicit(inputs))
  local = experts_BxLxK.reshape(-1) - expert_offset
  is_local = (local >= 0) & (local < num_local)
  # Pairs of other shards' experts sort last, into a group that is not run.
  group_of_pair = jnp.where(is_local, local, num_local)
  order = jnp.argsort(group_of_pair, stable=True)
  group_sizes = jnp.bincount(group_of_pair, length=num_local + 1)[:num_local]
  x_sorted = x_BxLxD.reshape(batch * length, d_model)[order // k]
  if grouped_matmul == "ragged_dot":
    y_sorted = _swiglu_ragged_dot(x_sorted, group_sizes, weights)
  else:
    y_sorted = _swiglu_blocked(x_sorted, group_sizes, weights, block_size)
  gates_sorted = jnp.where(is_local, gates_BxLxK.reshape(-1), 0)[order]
  weighted = y_sorted * gates_sorted[:, None].astype(y_sorted.dtype)
  inverse = jnp.zeros_like(order).at[order].set(
      jnp.arange(order.shape[0], dtype=order.dtype))
  y_BxLxD = weighted[inverse].reshape(batch, length, k, d_model).sum(axis=2)
  return restore((y_BxLxD, *inputs[1:]))[0]


def capacity_experts(x_BxLxD: jax.Array, experts_BxLxK: jax.Array,
                     gates_BxLxK: jax.Array, weights: ExpertWeights, *,
                     capacity: int, expert_offset: jax.Array | int = 0
                     ) -> tuple[jax.Array, jax.Array]:
  """``sum_slots gate * expert(x)`` with at most ``capacity`` pairs per expert and row.

  Priority within a row: all first-choice pairs (by position), then all
  second choices, and so on (GShard / MaxText order).

  Args:
    x_BxLxD: token activations.
    experts_BxLxK: chosen (global) expert indices.
    gates_BxLxK: their gates.
    weights: this shard's experts ``offset .. offset + E_local - 1``.
    capacity: slots per expert and row (see :func:`expert_capacity`).
    expert_offset: global index of ``weights``' first expert.

  Returns:
    ``(y_BxLxD, num_dropped)``: this shard's contribution and the number of
    its (token, slot) pairs that were over capacity. Ids of other shards'
    experts contribute nothing; as in :func:`dropless_experts`, an eager call
    with ``expert_offset=0`` refuses ids outside ``[0, E_local)``.
  """
  check_dispatch_inputs(x_BxLxD, experts_BxLxK, gates_BxLxK, weights)
  check_int("capacity", capacity, 1)
  batch, length, _ = x_BxLxD.shape
  k = experts_BxLxK.shape[-1]
  num_local = weights.gate.shape[0]
  if isinstance(expert_offset, int) and expert_offset == 0:
    check_expert_ids(experts_BxLxK, num_local, "experts_BxLxK")
  routing_spec = tree.explicit_spec(experts_BxLxK)
  if routing_spec is not None:
    # Each row ranks all its (token, slot) pairs in one flat priority order,
    # which Explicit axes reshape only with the row's own axes gathered; the
    # gates follow their pairs.
    rows = jax.P(routing_spec[0], None, None)
    experts_BxLxK = jax.sharding.reshard(experts_BxLxK, rows)
    gates_BxLxK = jax.sharding.reshard(gates_BxLxK, rows)
  local_BxLxK = experts_BxLxK - expert_offset
  # Indices outside 0..E_local-1 (other shards' experts) give all-zero rows.
  chosen_BxLxKxE = jax.nn.one_hot(local_BxLxK, num_local, dtype=jnp.int32)
  by_priority = chosen_BxLxKxE.transpose(0, 2, 1, 3).reshape(
      batch, k * length, num_local)
  position = (jnp.cumsum(by_priority, axis=1) - 1).reshape(
      batch, k, length, num_local).transpose(0, 2, 1, 3)
  position_BxLxK = jnp.sum(position * chosen_BxLxKxE, axis=-1)
  is_local = jnp.sum(chosen_BxLxKxE, axis=-1) > 0
  kept_BxLxK = is_local & (position_BxLxK < capacity)
  slot_BxLxKxC = jax.nn.one_hot(jnp.where(kept_BxLxK, position_BxLxK, capacity),
                                capacity, dtype=x_BxLxD.dtype)
  expert_BxLxKxE = chosen_BxLxKxE.astype(x_BxLxD.dtype)
  dispatch_BxLxExC = jnp.einsum("blke,blkc->blec", expert_BxLxKxE, slot_BxLxKxC)
  combine_BxLxExC = jnp.einsum(
      "blke,blkc->blec", expert_BxLxKxE * gates_BxLxK[..., None].astype(
          x_BxLxD.dtype), slot_BxLxKxC)
  x_BxExCxD = jnp.einsum("blec,bld->becd", dispatch_BxLxExC, x_BxLxD)
  x_spec = tree.explicit_spec(x_BxExCxD)
  if x_spec is not None:
    # Experts sharded along the batch's mesh axes (FSDP) are gathered.
    weights = tree.gather_mesh_axes(weights, tree.spec_axes(x_spec[0]))
  gate_spec = tree.explicit_spec(weights.gate)
  if gate_spec is not None and x_spec is not None and x_spec[1] != gate_spec[0]:
    # The expert axis is a batch axis of the products below, which Explicit
    # axes need sharded alike on both sides.
    x_BxExCxD = jax.sharding.reshard(
        x_BxExCxD, jax.P(x_spec[0], gate_spec[0], None, None))
  h = (jax.nn.silu(jnp.einsum("becd,edf->becf", x_BxExCxD, weights.gate))
       * jnp.einsum("becd,edf->becf", x_BxExCxD, weights.up))
  y_BxExCxD = jnp.einsum("becf,efd->becd", h, weights.down)
  y_BxLxD = jnp.einsum("blec,becd->bld", combine_BxLxExC, y_BxExCxD)
  num_dropped = jnp.sum(is_local & ~kept_BxLxK)
  return y_BxLxD, num_dropped


def _swiglu_ragged_dot(x_MxD, group_sizes, weights):
  # Rows past sum(group_sizes) come out as zeros. Explicit mesh axes cannot
  # infer a ragged_dot's sharding: the (gathered) rows stay replicated.
  replicated = None if tree.explicit_spec(x_MxD) is None else jax.P()
  ragged_dot = lambda a, b: jax.lax.ragged_dot(a, b, group_sizes,
                                               out_sharding=replicated)
  h = (jax.nn.silu(ragged_dot(x_MxD, weights.gate))
       * ragged_dot(x_MxD, weights.up))
  return ragged_dot(h, weights.down)


def _swiglu_blocked(x_MxD, group_sizes, weights, block_size):
  """Grouped SwiGLU on groups padded to whole blocks; rows past the groups give 0."""
  num_rows, d_model = x_MxD.shape
  num_groups = group_sizes.shape[0]
  # Padding adds at most block_size - 1 rows per group: a static bound.
  num_blocks = -(-(num_rows + num_groups * (block_size - 1)) // block_size)
  padded_sizes = -(-group_sizes // block_size) * block_size
  padded_end = jnp.cumsum(padded_sizes)
  group_end = jnp.cumsum(group_sizes)
  rows = jnp.arange(num_rows, dtype=group_end.dtype)
  group = jnp.searchsorted(group_end, rows, side="right")
  in_group = group < num_groups
  group = jnp.minimum(group, num_groups - 1)
  destination = jnp.where(
      in_group,
      padded_end[group] - padded_sizes[group] + rows - (group_end[group]
                                                        - group_sizes[group]),
      num_blocks * block_size,
  )
  x_padded = jnp.zeros((num_blocks * block_size, d_model), x_MxD.dtype).at[
      destination].set(x_MxD, mode="drop", unique_indices=True)
  block_starts = jnp.arange(num_blocks, dtype=padded_end.dtype) * block_size
  block_group = jnp.minimum(
      jnp.searchsorted(padded_end, block_starts, side="right"), num_groups - 1)
  x_NxBxD = x_padded.reshape(num_blocks, block_size, d_model)
  h = (jax.nn.silu(jnp.einsum("nbd,ndf->nbf", x_NxBxD, weights.gate[block_group]))
       * jnp.einsum("nbd,ndf->nbf", x_NxBxD, weights.up[block_group]))
  y_NxBxD = jnp.einsum("nbf,nfd->nbd", h, weights.down[block_group])
  return y_NxBxD.reshape(-1, d_model).at[destination].get(
      mode="fill", fill_value=0)
