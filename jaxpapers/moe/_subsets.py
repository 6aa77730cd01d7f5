r"""Expert subsets of a trained MoE model: greedy layerwise selection, pruning.

EMO's claim is that a domain can be served by a small subset of experts. The
authors pick the subset greedily, one layer at a time from the input: run a
few calibration documents of the domain through the model whose earlier
layers are already pruned, average the routed softmax probabilities of layer
l over the tokens, keep the ``num_experts`` routed experts with the largest
mean (plus the shared expert), prune layer l, go on to layer l + 1.

:func:`prune_experts` deletes the other experts and their router columns
(smaller weights; the softmax then runs over the kept experts only and top-k
becomes ``min(k, kept)``); :func:`mask_experts` keeps the weights and only
forbids routing to the others. Both give the same outputs.

Layers are the model's :class:`jaxpapers.moe.MoE` modules in forward order
(by ``layer_index``); the model is called as ``model(tokens, segment_ids)``.
"""

import functools
from typing import Any, Sequence

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_int
from jaxpapers.moe._layer import MoE


def moe_layers(model: nnx.Module) -> list[MoE]:
  """The :class:`MoE` layers of ``model`` in forward order (by ``layer_index``)."""
  found = [(module.layer_index, path, module)
           for path, module in nnx.iter_modules(model)
           if isinstance(module, MoE)]
  if not found:
    raise ValueError("model has no MoE layers.")
  return [module for _, _, module in sorted(
      found, key=lambda item: (item[0], tuple(map(str, item[1]))))]


def run_with_statistics(model: nnx.Module, tokens_BxL: jax.Array,
                        segment_ids_BxL: jax.Array | None = None
                        ) -> tuple[Any, list[dict[str, jax.Array]]]:
  """``model(tokens, segment_ids)``, jitted, and its routing statistics per MoE layer.

  The model runs as it is (call it on an ``nnx.view(...,
  deterministic=True)`` model for evaluation routing). Per MoE layer in
  forward order, ``router_probs`` is the mean over tokens of the routing
  probabilities and ``expert_load`` the fraction of (token, slot) pairs
  routed to each expert. Models with the same structure and shapes share
  one compilation.
  """
  model = nnx.view(model, record_statistics=True)
  graphdef, state = nnx.split(model)
  output, captured = _run_captured(graphdef, state, tokens_BxL,
                                   segment_ids_BxL)
  paths = {id(module): tuple(path) for path, module in nnx.iter_modules(model)}
  flat = {tuple(path): value.get_value()[0]
          for path, value in nnx.to_flat_state(captured)}
  return output, [{name: flat[paths[id(layer)] + (name,)]
                   for name in ("router_probs", "expert_load")}
                  for layer in moe_layers(model)]


def routing_statistics(model: nnx.Module, tokens_BxL: jax.Array,
                       segment_ids_BxL: jax.Array | None = None
                       ) -> list[dict[str, jax.Array]]:
  """The routing statistics of :func:`run_with_statistics` alone."""
  return run_with_statistics(model, tokens_BxL, segment_ids_BxL)[1]


@functools.partial(jax.jit, static_argnums=0)
def _run_captured(graphdef, state, tokens_BxL, segment_ids_BxL):
  model = nnx.merge(graphdef, state)
  return nnx.capture(model, nnx.Intermediate)(tokens_BxL, segment_ids_BxL)


def select_experts(model: nnx.Module, tokens_BxL: jax.Array,
                   segment_ids_BxL: jax.Array | None = None, *,
                   num_experts: int) -> tuple[np.ndarray, ...]:
  """Greedy layerwise subset: the ``num_experts`` routed experts to keep per layer.

  Args:
    model: a model with :class:`MoE` layers (routing as at evaluation is used).
    tokens_BxL: calibration tokens (a few documents of the target domain).
    segment_ids_BxL: their document ids.
    num_experts: routed experts to keep per layer (the shared expert stays;
      a budget of K experts in the paper's sense is ``num_experts = K - 1``).

  Returns:
    One sorted int array of kept expert indices per MoE layer.

  Example (a single MoE layer is a model of activations):

    >>> from flax import nnx
    >>> import jax.numpy as jnp
    >>> from jaxpapers import moe
    >>> layer = moe.MoE(8, moe.MoEConfig(num_experts=8, k=2, d_hidden=8),
    ...                 rngs=nnx.Rngs(0))
    >>> calibration = jnp.ones((2, 8, 8))
    >>> kept = moe.select_experts(layer, calibration, num_experts=3)
    >>> small = moe.prune_experts(layer, kept)
    >>> small.config.num_experts, small.w_gate.shape
    (3, (3, 8, 8))
  """
  layers = moe_layers(model)
  check_int("num_experts", num_experts, 1)
  for layer in layers:
    if not 1 <= num_experts <= layer.config.num_experts:
      raise ValueError(
          f"num_experts must lie in [1, {layer.config.num_experts}] (the"
          f" routed experts of layer {layer.layer_index}), got {num_experts}."
      )
  current = nnx.view(model, deterministic=True)
  kept: list[np.ndarray] = []
  for index in range(len(layers)):
    probs = routing_statistics(current, tokens_BxL,
                               segment_ids_BxL)[index]["router_probs"]
    order = np.argsort(-np.asarray(probs, np.float64), kind="stable")
    kept.append(np.sort(order[:num_experts]))
    only_this_layer = [None] * len(layers)
    only_this_layer[index] = kept[-1]
    current = prune_experts(current, only_this_layer)
  return tuple(kept)


def prune_experts(model: nnx.Module,
                  kept: Sequence[Any | None]) -> nnx.Module:
  """A copy of ``model`` whose MoE layers hold only the ``kept`` routed experts.

  Args:
    model: a model with :class:`MoE` layers.
    kept: per MoE layer (forward order), the sorted expert indices to keep,
      or None to leave the layer whole.

  Returns:
    The smaller model (``model`` is unchanged).
  """
  return _copy_with(model, kept, "keep_experts")


def mask_experts(model: nnx.Module,
                 kept: Sequence[Any | None]) -> nnx.Module:
  """A copy of ``model`` that routes only among the ``kept`` experts (weights kept)."""
  return _copy_with(model, kept, "mask_experts")


def _copy_with(model, kept, method):
  if len(kept) != len(moe_layers(model)):
    raise ValueError(
        f"kept must have one entry per MoE layer ({len(moe_layers(model))}),"
        f" got {len(kept)}."
    )
  copy = nnx.clone(model)
  for layer, indices in zip(moe_layers(copy), kept):
    if indices is not None:
      getattr(layer, method)(indices)
  return copy


def expert_usage(model: nnx.Module, tokens_BxL: jax.Array,
                 segment_ids_BxL: jax.Array | None = None) -> jax.Array:
  """Fraction of (token, slot) pairs per routed expert at evaluation: ``(layers, E)``."""
  stats = routing_statistics(nnx.view(model, deterministic=True), tokens_BxL,
                             segment_ids_BxL)
  return jnp.stack([s["expert_load"] for s in stats])
